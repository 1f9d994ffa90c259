"""`kconform fuzz`: coverage-guided, structure-aware fuzzing of a target with
libFuzzer or AFL++ (harness/fuzz), the oracle as the crash condition.

Layout under reports/fuzz/<target>/ (untracked; <target> is host or el2-<page size>):
  corpus/     the persistent corpus: a run resumes from it and leaves it merged and minimised
  seeds/      the directed suite and the Z3 cases of the target's ABI, in binary form (rebuilt each run)
  artifacts/  the engine's raw crash/timeout files (emptied into findings/)
  afl/        AFL++'s output folder (resumed with AFL_AUTORESUME)
  findings/   one <kind>-<rule>-<sha1[:12]>.{kcsb,kcs,log} per distinct finding, never overwritten;
              the .kcs names what `run` reports on it and a command that reproduces it
  replays/    run's verdicts (and crash reports) for each stored input
  known.log   baselined findings met (recorded, not stored)

What is known: one notion, `run`'s. A fuzz finding is stored unless `kconform run`
on that input would baseline it: same baseline file and module (engine/baseline.py),
same patterns, same target naming (host: the kernel release; el2: the build's name,
debian-7.3.4-4k, as `run --target el2 --page-size 4K` calls it). Two places apply it:

- The fuzz runner gets, in KCONFORM_FUZZ_BASELINE, the entries whose target and
  release pattern match this build, with their scenario patterns
  (baseline.fuzz_entries), and goes on past an op only when every rule the op
  violated (one finding each in run, not just the blamed ones that name a fuzz
  finding) has an entry whose pattern matches the scenario's name: the test run
  applies. Mutated inputs are all named "fuzz", so in practice this covers seeds
  from the corpora (named as there) and entries whose pattern is "*" (or matches
  "fuzz"); it keeps seeds with reviewed findings in the corpus instead of crashing
  on them. Patterns the runner cannot match exactly ([...] classes) are not
  passed: such findings stop the fuzz runner and are decided below.
- Every input that stopped the fuzz runner is replayed through the runner `run`
  uses for this build (el2 with --asan when the fuzz runner saw a sanitizer
  report), the baseline is applied to run's findings, and the input is stored
  unless every finding is baselined (engine/fuzz_findings.py).

Rules are never "known" for a target regardless of release or scenario, as the
driver once had them (KCONFORM_FUZZ_KNOWN_RULES; the mutant bench still uses it for
its background and `fuzz` sets it empty). --known RULE is an entry for this build
with scenario "*", applied in both places.
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
from kconform.core.files import atomic_write
from kconform.core.paths import CORPORA, DEFAULT_BASELINE, REPO, open_report_dir, runner_binary
from kconform.commands.run import el2_flags, el2_release, kconform_command
from kconform.engine import baseline
from kconform.engine.build import build_preset
from kconform.engine.fuzz_findings import RunReplay, collect, rerun_hint
from kconform.engine.fuzzers import RUNNERS, build_harness, merge_corpus
from kconform.engine.runner import Engine
from kconform.sources.trees import DEFAULT_TREE
from kconform.targets import el2

TARGETS = {"host": "gmem", "el2": "ffa"}


def parse_duration(text: str) -> int:
    m = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not m:
        raise ToolError(f"flag --time: '{text}' is not a duration (e.g. 30s, 10m, 8h)")
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def target_label(target: str, page_size: int) -> str:
    return "host" if target == "host" else f"el2-{page_size // 1024}k"


def known_entries(path: Path, rules: set[str], target: str, release: str, extra: list[str]) -> list[dict]:
    """The baseline as `run` loads it, plus one entry per --known rule for this build
    (any scenario)."""
    entries = baseline.load(path, rules)
    for rule in extra:
        if rule not in rules and not rule.startswith(baseline.CRASH_PREFIXES):
            raise ToolError(f"flag --known: '{rule}' is not a rule of this kconform")
        entries.append({"rule": rule, "target": target, "release": release, "scenario": "*",
                        "reason": "given with kconform fuzz --known", "date": "1970-01-01"})
    return entries


def run_replay(target: str, page_size: int, entries: list[dict], log) -> RunReplay:
    """`run`'s view of the fuzz target's build: its engine, release name and command line."""
    kc = kconform_command()
    if target == "host":
        engine = Engine(runner_binary("default"))
        ident, why = engine.probe("host")
        if not ident:
            raise ToolError(f"target host cannot run: {why}")
        return RunReplay("host", lambda sanitized: engine, ident.get("release", "?"), entries,
                         lambda sanitized: [kc, "run", "--target", "host"])
    # The fuzz presets build against the default tree, as `run --target el2` does.
    tree, tree_id = el2.resolve_tree(DEFAULT_TREE, None, log)
    engines: dict = {}

    def engine(sanitized: bool) -> Engine:
        if sanitized not in engines:
            engines[sanitized] = Engine(el2.build(tree, tree_id, [page_size], sanitize=sanitized,
                                                  log=log)[page_size])
        return engines[sanitized]
    return RunReplay("el2", engine, el2_release(tree_id, page_size), entries,
                     lambda sanitized: [kc, "run", *el2_flags(DEFAULT_TREE, None, page_size, sanitized)],
                     sanitizable=True)


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
    open_report_dir(root)  # INCOMPLETE until this run ends; "interrupted" after a signal
    binary = build_harness(args.engine, label, log)
    n_seeds = make_seeds(abi, root / "seeds", page_size)
    rule_ids = {r["id"] for r in Engine(runner_binary()).rules()}
    replay = run_replay(args.target, page_size, [], log)
    replay.entries = known_entries(Path(args.baseline or DEFAULT_BASELINE), rule_ids, replay.target,
                                   replay.release, args.known or [])
    known = baseline.fuzz_entries(replay.entries, replay.target, replay.release)
    env = dict(os.environ, KCONFORM_FUZZ_BASELINE="\n".join(f"{r}\t{p}" for r, p in known),
               KCONFORM_FUZZ_KNOWN_RULES="", KCONFORM_FUZZ_KNOWN_LOG=str(root / "known.log"))
    resumed = sum(1 for _ in (root / "corpus").iterdir())
    log(f"kconform fuzz: {args.engine} on {label} ({replay.target} {replay.release}) for {seconds} s with "
        f"{args.jobs} job(s); corpus {resumed} input(s){' (resumed)' if resumed else ''}, {n_seeds} seeds; "
        f"baseline entries for this build: "
        f"{', '.join(sorted({f'{r} ({p})' for r, p in known})) or 'none'}")
    progress = Progress(console, args.quiet)
    start = time.monotonic()
    RUNNERS[args.engine](binary, root, abi, seconds, args.jobs, args.max_len, env, progress)
    elapsed = time.monotonic() - start
    progress.show(force=True)
    if console.is_terminal and not args.quiet:
        print()
    collected = collect(binary, root, env, replay)
    stored = [(p, is_new) for p, is_new in collected if p is not None]
    baselined = len(collected) - len(stored)
    before, after = (0, 0)
    if not args.no_merge:
        before, after = merge_corpus(args.engine, binary, root, env, log)
    new = [p for p, is_new in stored if is_new]
    s = progress.stats
    if s["execs"] and elapsed > 0:  # the whole run's rate (fork mode reports per job)
        s["execs_per_sec"] = s["execs"] / elapsed
    log(f"kconform fuzz: {elapsed:.0f} s, {s['execs']} execs, {s['execs_per_sec']:.0f} execs/s, "
        f"coverage {s['coverage']}; corpus {before} -> {after} after merging; "
        f"{len(stored)} finding input(s), {len(new)} new, {baselined} baselined by run's replay; "
        f"known findings in {root / 'known.log'}")
    for p in new:
        log(f"  new finding: {os.path.relpath(str(p)[:-1], Path.cwd())}")
        hint = rerun_hint(p)
        if hint:
            log(f"    re-run: {hint}")
    summary = {"engine": args.engine, "target": label, "release": replay.release,
               "seconds": round(elapsed, 1), "execs": s["execs"],
               "execs_per_sec": s["execs_per_sec"], "coverage": s["coverage"], "corpus": after,
               "findings": [str(p) for p, _ in stored], "new_findings": [str(p) for p in new],
               "baselined_on_replay": baselined}
    atomic_write(root / "last-run.json", json.dumps(summary, indent=2) + "\n")
    return EXIT_VIOLATIONS if new else EXIT_CLEAN
