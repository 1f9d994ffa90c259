"""`kconform fuzz`: coverage-guided, structure-aware fuzzing of a target with
libFuzzer or AFL++ (harness/fuzz), the oracle judging every op.

Findings never stop the fuzzer: the fuzz runner records each violation under its
signature (rule IDs + op kind + target build) in findings/ and goes on
(KCONFORM_FUZZ_FINDINGS; harness/fuzz/fuzz_runner.h FindingStore): stored once
per signature, counted every time, a baselined one counted and not stored. Only
a crash of the process (or a timeout) goes through the engine's crash path
(libFuzzer's crash-*, AFL++'s crashes/); the driver stores those inputs the same
way, under a signature naming the frames inside the code under test
(engine/fuzz_findings.py). At the end, and on SIGINT/SIGTERM, a summary:
executions, restarts, findings per signature (new, stored before, known) and
where they are (also last-run.json).

Layout under reports/fuzz/<target>/ (untracked; <target> is host or el2-<page size>):
  corpus/     the persistent corpus: a run resumes from it and leaves it merged and minimised
  seeds/      the directed suite and the Z3 cases of the target's ABI, in binary form (rebuilt each run)
  artifacts/  the engine's raw crash/timeout files (emptied into findings/)
  afl/        AFL++'s output folder (resumed with AFL_AUTORESUME)
  findings/   one <stem>.{kcsb,kcs,jsonl,log} per distinct signature, never overwritten:
              violation-<rules>-<op>-<hash> (the fuzz runner's) and <kind>-<rule>-<hash>
              (the crash path's); the .kcs names the signature, what `run` reports on it
              and a command that reproduces it; .counts/ holds this run's counts per
              fuzz process, .inputs/ the crash-path inputs already replayed
  replays/    run's verdicts (and crash reports) for each input judged by run
  known.log   baselined findings met (recorded, not stored)
  last-run.json  the summary of the last run

What is known: one notion, `run`'s. A finding is stored unless `kconform run`
on that input would baseline it: same baseline file and module (engine/baseline.py),
same patterns, same target naming (host: the kernel release; el2: the build's name,
debian-7.3.4-4k, as `run --target el2 --page-size 4K` calls it). Three places apply it:

- The fuzz runner gets, in KCONFORM_FUZZ_BASELINE, the entries whose target and
  release pattern match this build, with their scenario patterns
  (baseline.fuzz_entries), and counts an op as known (not stored) when every
  rule the op violated (one finding each in run, not just the blamed ones that
  name a fuzz finding) has an entry whose pattern matches the scenario's name.
  Mutated inputs are all named "fuzz", so in practice this covers seeds from
  the corpora (named as there) and entries whose pattern is "*" (or matches
  "fuzz"). Patterns the runner cannot match exactly ([...] classes) are not
  passed: such findings are stored by the runner and decided below.
- Each violation the fuzz runners stored this run (one input per signature) is
  judged by run (judge_new_records): if run baselines it, its files are removed
  and it is known.
- Every input of the crash path is replayed through the runner `run` uses for
  this build (el2 with --asan when the fuzz runner saw a sanitizer report), the
  baseline is applied to run's findings, and the input is stored unless every
  finding is baselined (engine/fuzz_findings.py).

Rules are never "known" for a target regardless of release or scenario, as the
driver once had them (KCONFORM_FUZZ_KNOWN_RULES; the mutant bench still uses it for
its background and `fuzz` sets it empty). --known RULE is an entry for this build
with scenario "*", applied in every place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console

from kconform.core.errors import EXIT_CLEAN, EXIT_VIOLATIONS, Interrupted, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import CORPORA, DEFAULT_BASELINE, REPO, open_report_dir, runner_binary
from kconform.commands.run import el2_flags, el2_release, kconform_command
from kconform.engine import baseline
from kconform.engine.build import build_preset
from kconform.engine.fuzz_findings import RunReplay, collect, read_counts, rerun_hint
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
    # Absolute: the fuzzers run in root (a relative --out would name a folder inside it).
    root = Path(args.out).resolve() / label if args.out else REPO / "reports" / "fuzz" / label
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
    findings = root / "findings"
    shutil.rmtree(findings / ".counts", ignore_errors=True)  # this run's counts only
    env["KCONFORM_FUZZ_FINDINGS"] = str(findings)
    stored_before = {p.name for p in findings.glob("*.kcsb")}
    progress = Progress(console, args.quiet)
    start, started = time.monotonic(), time.time()
    try:
        RUNNERS[args.engine](binary, root, abi, seconds, args.jobs, args.max_len, env, progress)
    except Interrupted:
        # The fuzzer is ended (procs); what its runners recorded is summarised, the
        # crash path's inputs are stored by the next run.
        if console.is_terminal and not args.quiet:
            print()
        summarize(log, root, stored_before, [], time.monotonic() - start, progress.stats, args, label,
                  replay.release, None, interrupted=True)
        raise
    elapsed = time.monotonic() - start
    progress.show(force=True)
    if console.is_terminal and not args.quiet:
        print()
    crashes = collect(binary, root, env, replay, since=started)
    judge_new_records(root, stored_before, replay, log)
    before, after = (0, 0)
    if not args.no_merge:
        scratch = root / ".merge-findings"  # merging re-runs inputs: their findings are not this run's
        before, after = merge_corpus(args.engine, binary, root, dict(env, KCONFORM_FUZZ_FINDINGS=str(scratch)), log)
        shutil.rmtree(scratch, ignore_errors=True)
    new = summarize(log, root, stored_before, crashes, elapsed, progress.stats, args, label, replay.release,
                    (before, after))
    return EXIT_VIOLATIONS if new else EXIT_CLEAN


def judge_new_records(root: Path, stored_before: set[str], replay: RunReplay, log) -> None:
    """The violations the fuzz runners stored this run, judged by `run` (one input per
    signature, all in one run): a baseline entry the runner could not match
    (fuzz_entries) makes one known (recorded in known.log, its files removed);
    otherwise run's view and a re-run command join the .kcs header, as for the
    crash path."""
    findings = root / "findings"
    new = [p for p in sorted(findings.glob("violation-*.kcsb")) if p.name not in stored_before]
    if not new:
        return
    work = root / "replays" / "runner-findings"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        run = replay.engine(False).run(replay.target, [str(p) for p in new], work / "verdicts.jsonl",
                                       release=replay.release)
    except ToolError as e:
        log(f"kconform fuzz: run could not judge the new findings: {str(e).splitlines()[0] if str(e) else e}")
        return
    baseline.apply(replay.entries, [run])
    by_file: dict[str, list] = {}
    for x in run.findings:
        by_file.setdefault(x.file, []).append(x)
    command = replay.command(False)
    for kcsb in new:
        stem = kcsb.name[:-len(".kcsb")]
        found = by_file.get(str(kcsb), [])
        if found and all(x.baselined_by for x in found):
            for ext in (".kcsb", ".kcs", ".jsonl", ".log"):
                (findings / (stem + ext)).unlink(missing_ok=True)
            with open(root / "known.log", "a") as f:
                for x in found:
                    f.write(f"KNOWN-ON-REPLAY {x.rule} {x.scenario} op {x.op} ({x.call}) input {stem}: "
                            f"baselined by {x.baselined_by['rule']} {x.baselined_by['release']} "
                            f"{x.baselined_by.get('scenario', '*')}\n")
            atomic_write(findings / ".known-on-replay" / stem, "")
            continue
        kcs = findings / (stem + ".kcs")
        try:
            text = kcs.read_text()
        except OSError:
            continue
        head = [f"# run: {'baselined' if x.baselined_by else 'NEW'} {x.kind} {x.rule} at op {x.op} ({x.call}) "
                f"on {x.target} {x.release}" for x in found] or ["# run: reproduces nothing on this input"]
        if found:
            head.append("# re-run: " + shlex.join(command + [str(kcs)]))
        atomic_write(kcs, "\n".join(" ".join(h.splitlines()) for h in head) + "\n" + text)


def summarize(log, root: Path, stored_before: set[str], crashes: list, elapsed: float, stats: dict, args,
              label: str, release: str, merged: tuple[int, int] | None, interrupted: bool = False) -> list[Path]:
    """Prints and writes (last-run.json) the run's summary: executions, restarts, and per
    signature how often it was met, whether it is new (stored this run), stored before
    or known (baselined: counted, not stored), and where it is. Returns the new ones."""
    findings = root / "findings"
    runner_execs, sigs = read_counts(findings)
    rows: dict[tuple[str, bool], dict] = {}
    replay_known = findings / ".known-on-replay"
    for (sig, is_known), c in sigs.items():
        stem = c["stem"]
        path = findings / (stem + ".kcs") if stem else None
        if is_known or (stem and (replay_known / stem).exists()):
            status, path = "known", None
        elif stem and stem + ".kcsb" in stored_before:
            status = "stored before"
        elif path and path.exists():
            status = "new"
        else:
            status, path = "not stored", None
        row = rows.setdefault((sig, status == "known"), {"signature": sig, "count": 0, "status": status,
                                                         "path": path})
        row["count"] += c["count"]
    for path, is_new, sig in crashes:
        row = rows.setdefault((sig, path is None), {"signature": sig, "count": 0, "status": "known", "path": None})
        row["count"] += 1
        if path is not None:
            row["path"] = path.with_suffix(".kcs")
            if is_new or path.name not in stored_before:
                row["status"] = "new"
            elif row["status"] != "new":
                row["status"] = "stored before"
    execs = stats.get("execs") or runner_execs
    rate = execs / elapsed if elapsed > 0 else 0.0
    new = [r["path"] for r in rows.values() if r["status"] == "new"]
    known = sum(1 for r in rows.values() if r["status"] == "known")
    restarts = stats.get("restarts", 0)
    log(f"kconform fuzz: {'INTERRUPTED after ' if interrupted else ''}{elapsed:.0f} s, {execs} executions, "
        f"{rate:.0f} execs/s, coverage {stats.get('coverage', '?')}, {restarts} restart(s) after a crash; "
        + (f"corpus {merged[0]} -> {merged[1]} after merging; " if merged else "")
        + f"findings: {len(new)} new, {len(rows) - len(new) - known} stored before, {known} known "
        f"(signatures); stored in {os.path.relpath(findings, Path.cwd())}")
    order = {"new": 0, "not stored": 1, "stored before": 2, "known": 3}
    for r in sorted(rows.values(), key=lambda r: (order[r["status"]], -r["count"], r["signature"])):
        where = f" -> {os.path.relpath(r['path'], Path.cwd())}" if r["path"] else ""
        log(f"  {r['status']:<13} {r['count']:>8}x  {r['signature']}{where}")
        if r["status"] == "new" and r["path"]:
            hint = rerun_hint(r["path"].with_suffix(".kcsb"))
            if hint:
                log(f"    re-run: {hint}")
    if interrupted:
        log("kconform fuzz: the crash path's inputs (artifacts/, afl/*/crashes) are stored by the next run")
    summary = {"engine": args.engine, "target": label, "release": release, "seconds": round(elapsed, 1),
               "interrupted": interrupted, "execs": execs, "execs_per_sec": rate,
               "runner_execs": runner_execs, "restarts": restarts, "coverage": stats.get("coverage"),
               "corpus": merged[1] if merged else None,
               "findings": [{**r, "path": str(r["path"]) if r["path"] else None} for r in rows.values()],
               "new_findings": [str(p) for p in new], "known_findings": known}
    atomic_write(root / "last-run.json", json.dumps(summary, indent=2) + "\n")
    return new
