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
  status.json    the running campaign's statistics, rewritten every few seconds (`fuzz status`)
  .stored-before.json  the findings stored before this run (what `fuzz status` calls new)

An unattended campaign (harness/fuzz/README.md): --rss-limit per process; the run in
segments of --minimize-every (or until the corpus passes --max-corpus), the corpus
minimised between two and swapped in only after success; `fuzz status DIR`.

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
from kconform.core.locks import pid_alive
from kconform.core.paths import CORPORA, DEFAULT_BASELINE, REPO, open_report_dir, runner_binary
from kconform.commands.run import el2_flags, el2_release, kconform_command
from kconform.engine import baseline
from kconform.engine.build import build_preset
from kconform.engine.fuzz_findings import (RunReplay, abi_rules, collect, read_counts, rerun_hint,
                                           sides_reached)
from kconform.engine.fuzzers import RUNNERS, build_harness, merge_corpus, recover_corpus
from kconform.engine.runner import Engine
from kconform.sources.trees import DEFAULT_TREE
from kconform.sources import source_trees
from kconform.targets import el2

TARGETS = {"host": "gmem", "el2": "ffa", "spmc": "ffa"}


def parse_duration(text: str) -> int:
    m = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not m:
        raise ToolError(f"flag --time: '{text}' is not a duration (e.g. 30s, 10m, 8h)")
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def target_label(target: str, page_size: int, el3: str = "model") -> str:
    if target == "host":
        return "host"
    return f"{target}{'-tfa' if el3 == 'tf-a' else ''}-{page_size // 1024}k"


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


def run_replay(target: str, page_size: int, entries: list[dict], log, el3: str = "model") -> RunReplay:
    """`run`'s view of the fuzz target's build: its engine, release name and command line
    (el3: el2's --el3)."""
    kc = kconform_command()
    if target == "host":
        engine = Engine(runner_binary("default"))
        ident, why = engine.probe("host")
        if not ident:
            raise ToolError(f"target host cannot run: {why}")
        return RunReplay("host", lambda sanitized: engine, ident.get("release", "?"), entries,
                         lambda sanitized: [kc, "run", "--target", "host"])
    if target == "spmc":
        # TF-A's EL3 SPMC of the default build (run --target spmc); no sanitized runner.
        binary = runner_binary("default").with_name("kconform-runner-spmc")
        spmc_engine = Engine(binary)
        ident, why = spmc_engine.probe(f"spmc-{page_size // 1024}k") if binary.exists() else (
            None, f"{binary} was not built (the default build has no TF-A tree)")
        if not ident:
            raise ToolError(f"target spmc cannot run: {why}")
        return RunReplay("spmc", lambda sanitized: spmc_engine, ident["release"], entries,
                         lambda sanitized: [kc, "run", "--target", "spmc", "--spmc", "tf-a", "--page-size",
                                            f"{page_size // 1024}K"], runner_target=f"spmc-{page_size // 1024}k")
    # The fuzz presets build against the default tree, as `run --target el2` does.
    tree, tree_id = el2.resolve_tree(DEFAULT_TREE, None, log)
    engines: dict = {}
    spmc_tree = source_trees.DEFAULT_SPMC_TREE if el3 == "tf-a" else None

    def engine(sanitized: bool) -> Engine:
        if sanitized not in engines:
            engines[sanitized] = Engine(el2.build(tree, tree_id, [page_size], sanitize=sanitized,
                                                  log=log, spmc_tree=spmc_tree)[page_size])
        return engines[sanitized]
    release = el2_release(tree_id, page_size)
    runner_target = None
    if el3 == "tf-a":  # as run names it: debian-7.3.4-4k+tf-a-2.12.1
        runner_target = "el2-tfa"
        ident, why = engine(False).probe(runner_target)
        if not ident:
            raise ToolError(f"target el2 --el3 tf-a cannot run: {why}")
        release += "+" + ident["release"].split("+", 1)[-1]
    return RunReplay("el2", engine, release, entries,
                     lambda sanitized: [kc, "run", *el2_flags(DEFAULT_TREE, None, page_size, sanitized, el3)],
                     sanitizable=True, runner_target=runner_target)


def make_seeds(abi: str, seeds: Path, page_size: int, build_targets: list[str] | None = None) -> int:
    """The directed suite and the Z3 cases of the ABI, converted to binary (build_targets:
    what to build of the default preset first, all by default; the mutant bench builds
    only kconform-runner)."""
    build_preset("default", targets=build_targets, log=lambda m: None)
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


def dir_size(path: Path) -> tuple[int, int]:
    """(files, bytes) under path (0, 0 if absent); files vanishing meanwhile are skipped."""
    files = size = 0
    for dirpath, _, names in os.walk(path):
        for n in names:
            try:
                size += os.lstat(os.path.join(dirpath, n)).st_size
                files += 1
            except OSError:
                pass
    return files, size


def finding_rows(findings: Path, stored_before: set[str]) -> list[dict]:
    """Per signature the fuzz runners counted (findings/.counts): how often, and whether it
    is new (stored this run), stored before, known (baselined: counted, not stored) or
    not stored."""
    _, sigs = read_counts(findings)
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
    return list(rows.values())


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def fmt_left(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """The live statistics the fuzzer runners update (engine/fuzzers.py): a progress line
    (executions/s, corpus size, rule sides reached, findings new/known, time left) and,
    every few seconds, status.json in the run's folder for `kconform fuzz status`.
    stop() ends a fuzzing segment early when the corpus passed max_corpus bytes."""

    REFRESH = 5.0  # seconds between scans of the corpus and the counts

    def __init__(self, console: Console, quiet: bool, root: Path | None = None, abi: str | None = None,
                 info: dict | None = None, stored_before: set[str] | None = None, max_corpus: int = 0):
        self.console, self.quiet, self.last = console, quiet, 0.0
        self.stats = {"execs_per_sec": 0.0, "coverage": "0", "findings": 0, "execs": 0}
        self.root, self.abi, self.info = root, abi, dict(info or {})
        self.stored_before = stored_before or set()
        self.max_corpus, self.refreshed = max_corpus, 0.0
        self.done = {"execs": 0, "restarts": 0}  # earlier segments' (each segment's fuzzer counts from 0)
        self.rules = set(abi_rules(abi)) if abi else set()
        self.live = {"corpus_files": 0, "corpus_bytes": 0, "sides_reached": 0,
                     "sides_total": 2 * len(self.rules), "findings_new": 0, "findings_known": 0}

    def totals(self) -> dict:
        return dict(self.stats, execs=self.done["execs"] + self.stats.get("execs", 0),
                    restarts=self.done["restarts"] + self.stats.get("restarts", 0))

    def segment_ended(self) -> None:
        for k in self.done:
            self.done[k] += self.stats.get(k, 0)
            self.stats[k] = 0

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.root is None or (not force and now - self.refreshed < self.REFRESH):
            return
        self.refreshed = now
        files, size = dir_size(self.root / "corpus")
        findings = self.root / "findings"
        rows = finding_rows(findings, self.stored_before)
        self.live.update(corpus_files=files, corpus_bytes=size,
                         sides_reached=sum(1 for r, _ in sides_reached(findings) if r in self.rules),
                         findings_new=sum(1 for r in rows if r["status"] == "new"),
                         findings_known=sum(1 for r in rows if r["status"] == "known"))
        doc = {**self.info, "pid": os.getpid(), "updated": time.time(), **self.totals(), **self.live}
        try:
            atomic_write(self.root / "status.json", json.dumps(doc, indent=2) + "\n")
        except OSError:
            pass  # a full disk: the fuzzer goes on

    def stop(self) -> bool:
        self.refresh()
        return bool(self.max_corpus) and self.live["corpus_bytes"] > self.max_corpus

    def line(self) -> str:
        s, v = self.totals(), self.live
        text = (f"kconform fuzz: {s['execs']} execs, {s['execs_per_sec']:.0f} execs/s, "
                f"corpus {v['corpus_files']} ({fmt_bytes(v['corpus_bytes'])}), "
                f"rule sides {v['sides_reached']}/{v['sides_total']}, "
                f"findings {v['findings_new']} new/{v['findings_known']} known, coverage {s['coverage']}")
        if self.info.get("deadline"):
            text += f", {fmt_left(self.info['deadline'] - time.time())} left"
        return text

    def show(self, force: bool = False) -> None:
        self.refresh(force)
        now = time.monotonic()
        if self.quiet or (not force and now - self.last < (0.5 if self.console.is_terminal else 10)):
            return
        self.last = now
        line = self.line()
        if self.console.is_terminal:
            sys.stdout.write("\r" + line[:self.console.width - 1].ljust(self.console.width - 1))
            sys.stdout.flush()
        else:
            print(line, flush=True)


def cmd_fuzz(args, console: Console) -> int:
    if getattr(args, "fuzz_command", None) == "status":
        return cmd_fuzz_status(args, console)
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    seconds = parse_duration(args.time)
    if args.jobs < 1:
        raise ToolError("flag --jobs: at least 1")
    page_size = {"4K": 4096, "16K": 16384, "64K": 65536}.get(args.page_size.upper())
    if not page_size:
        raise ToolError(f"flag --page-size: '{args.page_size}' is not 4K, 16K or 64K")
    abi = TARGETS[args.target]
    el3 = getattr(args, "el3", None) or "model"
    if el3 != "model" and args.target != "el2":
        raise ToolError(f"flag --el3: says what answers the el2 target's SMCs; not with --target {args.target}")
    label = target_label(args.target, page_size, el3)
    # Absolute: the fuzzers run in root (a relative --out would name a folder inside it).
    root = Path(args.out).resolve() / label if args.out else REPO / "reports" / "fuzz" / label
    if args.rss_limit < 64:
        raise ToolError("flag --rss-limit: at least 64 (MB)")
    if args.max_corpus < 0:
        raise ToolError("flag --max-corpus: 0 (no limit) or more (MB)")
    if args.minimize_every != "0":
        parse_duration(args.minimize_every)
    root.mkdir(parents=True, exist_ok=True)
    recover_corpus(root)  # a swap a killed run left half done
    for d in ("corpus", "artifacts", "findings"):
        (root / d).mkdir(parents=True, exist_ok=True)
    open_report_dir(root)  # INCOMPLETE until this run ends; "interrupted" after a signal
    binary = build_harness(args.engine, label, log, plain=getattr(args, "sanitizers", "asan") == "none")
    n_seeds = make_seeds(abi, root / "seeds", page_size)
    rule_ids = {r["id"] for r in Engine(runner_binary()).rules()}
    replay = run_replay(args.target, page_size, [], log, el3)
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
    atomic_write(root / ".stored-before.json", json.dumps(sorted(stored_before)) + "\n")
    every = parse_duration(args.minimize_every) if not args.no_merge else 0
    max_corpus = args.max_corpus * 1024 * 1024 if not args.no_merge else 0
    start, started = time.monotonic(), time.time()
    progress = Progress(console, args.quiet, root, abi,
                        {"engine": args.engine, "target": label, "jobs": args.jobs, "started": started,
                         "deadline": started + seconds, "rss_limit_mb": args.rss_limit}, stored_before, max_corpus)
    progress.refresh(force=True)
    crashes: list = []
    merged: list[tuple[int, int]] = []
    merge_env = dict(env, KCONFORM_FUZZ_FINDINGS=str(root / ".merge-findings"))

    def minimise() -> None:
        # merging re-runs inputs: their findings are not this run's
        merged.append(merge_corpus(args.engine, binary, root, merge_env, log))
        shutil.rmtree(root / ".merge-findings", ignore_errors=True)
        progress.refresh(force=True)

    try:
        # The campaign runs in segments of --minimize-every (or until the corpus passes
        # --max-corpus); between two, the crash path's inputs are stored and the corpus
        # minimised (swapped in only after the minimiser succeeded), so disk stays bounded.
        while True:
            left = int(start + seconds - time.monotonic() + 0.5)
            if left < 1:
                break
            segment = min(left, every) if every else left
            segment_started = time.time()
            try:
                RUNNERS[args.engine](binary, root, abi, segment, args.jobs, args.max_len, env, progress,
                                     rss_limit=args.rss_limit)
            finally:
                progress.segment_ended()
            if time.monotonic() >= start + seconds - 1 or args.no_merge:
                break
            crashes += collect(binary, root, env, replay, since=segment_started)
            capped = progress.stop()
            minimise()
            if args.engine == "afl":
                # Its queue is in the corpus now and its crashes in findings/: the next
                # segment starts afresh from the minimised corpus.
                shutil.rmtree(root / "afl", ignore_errors=True)
            if capped and progress.stop():
                log(f"kconform fuzz: the minimised corpus is still over --max-corpus {args.max_corpus} MB; "
                    "minimising every --minimize-every only from now on")
                progress.max_corpus = 0
    except Interrupted:
        # The fuzzer is ended (procs); what its runners recorded is summarised, the
        # crash path's inputs are stored by the next run.
        if console.is_terminal and not args.quiet:
            print()
        summarize(log, root, stored_before, crashes, time.monotonic() - start, progress.totals(), args, label,
                  replay.release, span(merged), interrupted=True)
        raise
    elapsed = time.monotonic() - start
    progress.show(force=True)
    if console.is_terminal and not args.quiet:
        print()
    try:
        crashes += collect(binary, root, env, replay, since=started)
        judge_new_records(root, stored_before, replay, log)
        if not args.no_merge:
            minimise()
    except Interrupted:
        # Interrupted while storing, judging or minimising after the fuzzing: still a
        # summary of what ran (what was not stored yet is stored by the next run).
        summarize(log, root, stored_before, crashes, elapsed, progress.totals(), args, label,
                  replay.release, span(merged), interrupted=True)
        raise
    new = summarize(log, root, stored_before, crashes, elapsed, progress.totals(), args, label, replay.release,
                    span(merged))
    return EXIT_VIOLATIONS if new else EXIT_CLEAN


def span(merged: list[tuple[int, int]]) -> tuple[int, int, int] | None:
    """The corpus before the first minimisation, after the last, and how many ran."""
    return (merged[0][0], merged[-1][1], len(merged)) if merged else None


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
        run = replay.engine(False).run(replay.runner_name(), [str(p) for p in new], work / "verdicts.jsonl",
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
              label: str, release: str, merged: tuple[int, int, int] | None, interrupted: bool = False) -> list[Path]:
    """Prints and writes (last-run.json) the run's summary: executions, restarts, and per
    signature how often it was met, whether it is new (stored this run), stored before
    or known (baselined: counted, not stored), and where it is. Returns the new ones."""
    findings = root / "findings"
    runner_execs, _ = read_counts(findings)
    rows: dict[tuple[str, bool], dict] = {(r["signature"], r["status"] == "known"): r
                                          for r in finding_rows(findings, stored_before)}
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
    abi = TARGETS[label.split("-")[0]]
    rules = set(abi_rules(abi))
    sides = sum(1 for r, _ in sides_reached(findings) if r in rules)
    corpus_files, corpus_bytes = dir_size(root / "corpus")
    log(f"kconform fuzz: {'INTERRUPTED after ' if interrupted else ''}{elapsed:.0f} s, {execs} executions, "
        f"{rate:.0f} execs/s, coverage {stats.get('coverage', '?')}, {restarts} restart(s) after a crash; "
        + (f"corpus {merged[0]} -> {merged[1]} after {merged[2]} minimisation(s); " if merged else "")
        + f"corpus {corpus_files} input(s), {fmt_bytes(corpus_bytes)}; "
        f"rule sides reached: {sides} of {2 * len(rules)}; findings: {len(new)} new, {len(rows) - len(new) - known} stored before, {known} known "
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
               "corpus": merged[1] if merged else None, "corpus_files": corpus_files,
               "corpus_bytes": corpus_bytes, "minimisations": merged[2] if merged else 0,
               "sides_reached": sides, "sides_total": 2 * len(rules),
               "rss_limit_mb": getattr(args, "rss_limit", None), "disk_bytes": dir_size(root)[1],
               "findings": [{**r, "path": str(r["path"]) if r["path"] else None} for r in rows.values()],
               "new_findings": [str(p) for p in new], "known_findings": known}
    atomic_write(root / "last-run.json", json.dumps(summary, indent=2) + "\n")
    return new


def campaign_dirs(path: Path) -> list[Path]:
    """DIR as `fuzz status` takes it: one run's folder (reports/fuzz/<target>: it has
    corpus/, findings/ or last-run.json), or the --out folder holding one per target."""
    def is_run(d: Path) -> bool:
        return any((d / n).exists() for n in ("corpus", "findings", "last-run.json", "status.json"))
    if not path.is_dir():
        raise ToolError(f"fuzz status: {path} is not a folder")
    if is_run(path):
        return [path]
    runs = sorted(d for d in path.iterdir() if d.is_dir() and is_run(d))
    if not runs:
        raise ToolError(f"fuzz status: {path} holds no fuzz run (no corpus/, findings/ or last-run.json, "
                        "in it or in a folder of it)")
    return runs


def _read_json(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def campaign_status(root: Path, now: float | None = None) -> dict:
    """A running or finished campaign's state, from its folder alone: running (the
    INCOMPLETE marker's pid is alive), ended (no marker: the run finished), or
    INCOMPLETE (a marker whose process is gone, or one marked interrupted / incomplete);
    executions and exec/s (status.json while it runs, last-run.json after), corpus,
    rule sides reached, findings per signature, time left, disk used."""
    now = time.time() if now is None else now
    from kconform.core.paths import INCOMPLETE
    marker = (root / INCOMPLETE).exists()
    mark = _read_json(root / INCOMPLETE) if marker else None
    live = _read_json(root / "status.json") or {}
    last = _read_json(root / "last-run.json")
    pid = (mark or {}).get("pid")
    if marker and (mark or {}).get("status") == "running" and isinstance(pid, int) and pid_alive(pid):
        state = "running"
    elif marker:
        why = (mark or {}).get("reason") or (f"process {pid} is gone" if pid else "marked")
        state = f"INCOMPLETE ({(mark or {}).get('status', '?')}: {why})"
    elif last is not None:
        state = "interrupted" if last.get("interrupted") else "ended"
    else:
        state = "never run"
    label = root.name
    abi = TARGETS[label.split("-")[0]] if label == "host" or label.startswith("el2-") else None
    if abi is None and (last or live).get("target"):
        t = (last or live)["target"]
        abi = TARGETS["host" if t == "host" else "el2"]
    findings = root / "findings"
    try:
        stored = json.loads((root / ".stored-before.json").read_text())
    except (OSError, ValueError):
        stored = []
    stored_before = {str(x) for x in stored} if isinstance(stored, list) else set()
    rows = finding_rows(findings, stored_before) if findings.exists() else []
    runner_execs, _ = read_counts(findings)
    running = state == "running"
    src = live if running or last is None else last
    execs = max(int(src.get("execs") or 0), runner_execs if running else 0)
    rules = set(abi_rules(abi)) if abi else set()
    corpus_files, corpus_bytes = dir_size(root / "corpus")
    pending = sum(1 for f in (root / "artifacts").glob("*") if f.is_file()) if (root / "artifacts").exists() else 0
    doc = {
        "folder": str(root), "state": state, "running": running, "pid": pid if running else None,
        "engine": src.get("engine") or live.get("engine"), "target": src.get("target") or label,
        "jobs": live.get("jobs"),
        "execs": execs, "execs_per_sec": float(src.get("execs_per_sec") or 0.0),
        "coverage": src.get("coverage"),
        "updated": live.get("updated"),
        "seconds_left": max(0.0, live["deadline"] - now) if running and live.get("deadline") else None,
        "corpus_files": corpus_files, "corpus_bytes": corpus_bytes,
        "sides_reached": sum(1 for r, _ in sides_reached(findings) if r in rules),
        "sides_total": 2 * len(rules),
        "findings": [{"signature": r["signature"], "count": r["count"], "status": r["status"],
                      "path": str(r["path"]) if r["path"] else None} for r in rows],
        "findings_new": sum(1 for r in rows if r["status"] == "new"),
        "findings_known": sum(1 for r in rows if r["status"] == "known"),
        "findings_stored_before": sum(1 for r in rows if r["status"] == "stored before"),
        "crash_inputs_pending": pending,
        "disk_bytes": dir_size(root)[1],
    }
    if last is not None and not running:
        # the crash path's findings are in last-run.json only
        seen = {(f["signature"], f["status"]) for f in doc["findings"]}
        for f in last.get("findings", []):
            if isinstance(f, dict) and (f.get("signature"), f.get("status")) not in seen:
                doc["findings"].append({k: f.get(k) for k in ("signature", "count", "status", "path")})
        doc["findings_new"] = sum(1 for r in doc["findings"] if r["status"] == "new")
        doc["findings_known"] = sum(1 for r in doc["findings"] if r["status"] == "known")
        doc["findings_stored_before"] = sum(1 for r in doc["findings"] if r["status"] == "stored before")
    return doc


def status_text(doc: dict) -> list[str]:
    head = f"{doc['folder']}: {doc['state']}"
    if doc["running"]:
        head += f" (pid {doc['pid']})"
    if doc.get("engine"):
        head += f", {doc['engine']} on {doc['target']}" + (f", {doc['jobs']} job(s)" if doc.get("jobs") else "")
    if doc["seconds_left"] is not None:
        head += f", {fmt_left(doc['seconds_left'])} left"
    lines = [head,
             f"  executions: {doc['execs']} ({doc['execs_per_sec']:.0f} exec/s)"
             + (f", coverage {doc['coverage']}" if doc.get("coverage") else ""),
             f"  corpus: {doc['corpus_files']} file(s), {fmt_bytes(doc['corpus_bytes'])}",
             f"  rule sides reached: {doc['sides_reached']} of {doc['sides_total']}",
             f"  findings: {doc['findings_new']} new, {doc['findings_stored_before']} stored before, "
             f"{doc['findings_known']} known (signatures); {doc['crash_inputs_pending']} crash-path input(s) "
             "not yet stored"]
    order = {"new": 0, "not stored": 1, "stored before": 2, "known": 3}
    for r in sorted(doc["findings"], key=lambda r: (order.get(r["status"], 9), -(r["count"] or 0), r["signature"])):
        lines.append(f"    {r['status']:<13} {r['count']:>8}x  {r['signature']}"
                     + (f" -> {r['path']}" if r.get("path") else ""))
    lines.append(f"  disk used: {fmt_bytes(doc['disk_bytes'])}")
    return lines


def cmd_fuzz_status(args, console: Console) -> int:
    docs = [campaign_status(d) for d in campaign_dirs(Path(args.dir))]
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
    else:
        for doc in docs:
            for line in status_text(doc):
                console.print(line, highlight=False, markup=False)
    return EXIT_CLEAN
