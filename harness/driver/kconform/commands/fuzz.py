"""`kconform fuzz`: coverage-guided, structure-aware fuzzing of a target with
libFuzzer or AFL++ (harness/fuzz), the oracle as the crash condition.

Layout under reports/fuzz/<target>/ (untracked; <target> is host or el2-<page size>):
  corpus/     the persistent corpus: a run resumes from it and leaves it merged and minimised
  seeds/      the directed suite and the Z3 cases of the target's ABI, in binary form (rebuilt each run)
  artifacts/  the engine's raw crash/timeout files (emptied into findings/)
  afl/        AFL++'s output folder (resumed with AFL_AUTORESUME)
  findings/   one <kind>-<rule>-<sha1[:12]>.{kcsb,kcs,log} per distinct finding, never overwritten
  known.log   baselined findings met (recorded, not crashes)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console

from kconform.core.errors import EXIT_CLEAN, EXIT_VIOLATIONS, ToolError
from kconform.core.paths import CORPORA, DEFAULT_BASELINE, REPO, runner_binary
from kconform.engine.build import build_preset
from kconform.engine.fuzz_findings import collect
from kconform.engine.fuzzers import RUNNERS, build_harness, merge_corpus
from kconform.engine.runner import Engine

TARGETS = {"host": "gmem", "el2": "ffa"}


def parse_duration(text: str) -> int:
    m = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not m:
        raise ToolError(f"flag --time: '{text}' is not a duration (e.g. 30s, 10m, 8h)")
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def target_label(target: str, page_size: int) -> str:
    return "host" if target == "host" else f"el2-{page_size // 1024}k"


def known_rules(target: str, baseline: Path, extra: list[str]) -> list[str]:
    """Rule IDs the baseline accepts for this target (any release), plus --known ones."""
    rules = list(extra)
    if baseline.exists():
        for e in json.loads(baseline.read_text()).get("findings", []):
            if e.get("target") == target and e.get("rule") not in rules:
                rules.append(e["rule"])
    return rules


def make_seeds(abi: str, seeds: Path, page_size: int) -> int:
    """The directed suite and the Z3 cases of the ABI, converted to binary."""
    build_preset("default", log=lambda m: None)
    if seeds.exists():
        shutil.rmtree(seeds)
    seeds.mkdir(parents=True)
    files = []
    for d in (CORPORA / abi, CORPORA / "z3" / abi):
        if d.exists():
            files += sorted(str(f) for f in d.rglob("*.kcs"))
    if abi == "ffa":  # only the cases of this PAGE_SIZE (and those for any)
        want = f"page_{page_size // 1024}k"
        files = [f for f in files if want in Path(f).read_text() or "page_" not in Path(f).read_text()]
    if not files:
        return 0
    tmp = seeds.with_name("seeds.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        Engine(runner_binary()).to_binary(files, tmp)
    except ToolError as e:
        raise ToolError(f"converting the seeds failed: {e}") from None
    for f in tmp.iterdir():
        data = f.read_bytes()
        (seeds / hashlib.sha1(data).hexdigest()).write_bytes(data)
    shutil.rmtree(tmp)
    return sum(1 for _ in seeds.iterdir())


class Progress:
    """The live statistics line the fuzzer runners update (engine/fuzzers.py)."""

    def __init__(self, console: Console, quiet: bool):
        self.console, self.quiet, self.last = console, quiet, 0.0
        self.stats = {"execs_per_sec": 0.0, "coverage": "0", "findings": 0, "execs": 0}

    def show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.quiet or (not force and now - self.last < (0.5 if self.console.is_terminal else 10)):
            return
        self.last = now
        s = self.stats
        line = (f"kconform fuzz: {s['execs']} execs, {s['execs_per_sec']:.0f} execs/s, "
                f"coverage {s['coverage']}, findings {s['findings']}")
        if self.console.is_terminal:
            sys.stdout.write("\r" + line[:self.console.width - 1].ljust(self.console.width - 1))
            sys.stdout.flush()
        else:
            print(line, flush=True)


def cmd_fuzz(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    seconds = parse_duration(args.time)
    if args.jobs < 1:
        raise ToolError("flag --jobs: at least 1")
    page_size = {"4K": 4096, "16K": 16384, "64K": 65536}.get(args.page_size.upper())
    if not page_size:
        raise ToolError(f"flag --page-size: '{args.page_size}' is not 4K, 16K or 64K")
    abi = TARGETS[args.target]
    label = target_label(args.target, page_size)
    root = Path(args.out) / label if args.out else REPO / "reports" / "fuzz" / label
    for d in ("corpus", "artifacts", "findings"):
        (root / d).mkdir(parents=True, exist_ok=True)
    binary = build_harness(args.engine, label, log)
    n_seeds = make_seeds(abi, root / "seeds", page_size)
    known = known_rules(args.target, Path(args.baseline or DEFAULT_BASELINE), args.known or [])
    env = dict(os.environ, KCONFORM_FUZZ_KNOWN_RULES=",".join(known),
               KCONFORM_FUZZ_KNOWN_LOG=str(root / "known.log"))
    resumed = sum(1 for _ in (root / "corpus").iterdir())
    log(f"kconform fuzz: {args.engine} on {label} for {seconds} s with {args.jobs} job(s); "
        f"corpus {resumed} input(s){' (resumed)' if resumed else ''}, {n_seeds} seeds; "
        f"baselined rules: {', '.join(known) or 'none'}")
    progress = Progress(console, args.quiet)
    start = time.monotonic()
    RUNNERS[args.engine](binary, root, abi, seconds, args.jobs, args.max_len, env, progress)
    elapsed = time.monotonic() - start
    progress.show(force=True)
    if console.is_terminal and not args.quiet:
        print()
    stored = collect(binary, root, env)
    before, after = (0, 0)
    if not args.no_merge:
        before, after = merge_corpus(args.engine, binary, root, env, log)
    new = [p for p, is_new in stored if is_new]
    s = progress.stats
    if s["execs"] and elapsed > 0:  # the whole run's rate (fork mode reports per job)
        s["execs_per_sec"] = s["execs"] / elapsed
    log(f"kconform fuzz: {elapsed:.0f} s, {s['execs']} execs, {s['execs_per_sec']:.0f} execs/s, "
        f"coverage {s['coverage']}; corpus {before} -> {after} after merging; "
        f"{len(stored)} finding input(s), {len(new)} new; known findings in {root / 'known.log'}")
    for p in new:
        log(f"  new finding: {os.path.relpath(str(p)[:-1], Path.cwd())}")
    summary = {"engine": args.engine, "target": label, "seconds": round(elapsed, 1), "execs": s["execs"],
               "execs_per_sec": s["execs_per_sec"], "coverage": s["coverage"], "corpus": after,
               "findings": [str(p) for p, _ in stored], "new_findings": [str(p) for p in new]}
    (root / "last-run.json").write_text(json.dumps(summary, indent=2) + "\n")
    return EXIT_VIOLATIONS if new else EXIT_CLEAN
