"""The stock ffa.c kill matrix (`kconform selftest mutants --abi ffa --family stock`).

Each mutant in targets/el2/stock-mutants/NN-name.patch changes one line of the
unmodified Debian 7.3 `arch/arm64/kvm/hyp/nvhe/ffa.c` (README.md there says which
check it weakens and what kills it). The control is the stock tree itself: it runs
the directed and Z3 FF-A corpora (corpora/ffa, corpora/z3/ffa; no fuzzer) at 4K and
16K and must finish without a fatal call at EL2; its findings (the stock tree's known
ones, ci/known-findings.json), its crashes and hangs included (a fresh runner resumes
after each, as `kconform run` does), are the background. A mutant is built in the same build
folder as the RECLAIM2 family (build/el2/selftest: only the C that names the tree
recompiles), runs the same corpora, and is killed by a violation the stock run does
not have (same scenario, op and rule; a crash, sanitizer report or hang counts as
one with rule CRASH.*), or a fatal call at EL2.

A mutant that only a part of the suite still being built can kill is listed in
targets/el2/stock-mutants/waiting.json with what it waits on: if it survives, its
status is "waiting" (reported, not a failure); if it is killed, the matrix says the
entry is stale (remove it).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kconform.core import procs
from kconform.core.errors import ToolError
from kconform.core.paths import CORPORA, REPO
from kconform.engine.runner import CRASH_RULES, EXIT_HANG, EXIT_SANITIZER, crash_marker
from kconform.engine.verdicts import Collector, parse_line
from kconform.selftest.mutants import MutantResult, mutant_patches, record_kill
from kconform.sources import patches, tree_fetch
from kconform.sources.trees import DEFAULT_TREE
from kconform.targets import el2

MUTANTS_DIR = REPO / "targets" / "el2" / "stock-mutants"
WAITING = MUTANTS_DIR / "waiting.json"
PAGE_SIZES = (4096, 16384)
BUILD_ID = "selftest"  # shared with the RECLAIM2 family (selftest/reclaim2.py)
BUILD_JOBS = 2
# The runner's watchdog (seconds): the stock tree's own hangs (el3_reclaim.kcs
# frag1-stall, frag2-stall) cost this much each, per tree and page size.
WATCHDOG = 2.0


def waiting() -> dict[str, str]:
    """Mutant name -> what it waits on (waiting.json: {"mutants": {name: reason}})."""
    try:
        doc = json.loads(WAITING.read_text())
        out = doc["mutants"]
        if not isinstance(out, dict) or not all(isinstance(v, str) and v for v in out.values()):
            raise ValueError("every entry must be a non-empty reason")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ToolError(f"{WAITING}: field 'mutants': {e}") from e
    stems = {p.stem for p in MUTANTS_DIR.glob("[0-9][0-9]-*.patch")}
    unknown = sorted(set(out) - stems)
    if unknown:
        raise ToolError(f"{WAITING}: field 'mutants': no mutant {', '.join(unknown)} in {MUTANTS_DIR}")
    return out


def suite_files() -> list[str]:
    """The directed and Z3 FF-A corpora: what `run --target el2` runs by default."""
    files = sorted(str(p) for d in (CORPORA / "ffa", CORPORA / "z3" / "ffa") for p in d.glob("*.kcs"))
    if not files:
        raise ToolError(f"{CORPORA / 'ffa'}: no *.kcs")
    return files


@dataclass
class StockRun:
    """One tree at one page size: its findings as (scenario, op, rule) keys."""
    page_size: int
    verdict: str = "clean"          # clean | violation | FATAL | CRASH (relative to the control)
    findings: list[tuple[str, int, str]] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)   # the rules of the new findings (or CRASH.*/FATAL)
    first: str = ""
    seconds_to_kill: float | None = None
    seconds: float = 0.0
    ops: int = 0
    scenarios: int = 0


def run_suite(binary: Path, files: list[str], page_size: int, background: set | None,
              raw: Path | None = None, stop_on_kill: bool = False) -> StockRun:
    """Runs the corpora on one runner. With background (the control's findings), a
    finding not in it is a kill; the first one seen is recorded with its time.
    stop_on_kill (the generated family, selftest/generated.py): the runner is ended at
    the first kill, so res holds the findings up to it.

    A crash or hang of the code under test is a finding (scenario, op, CRASH.*) like
    a violation, and a fresh runner resumes with the next scenario (`run --from`, as
    `kconform run` does: Engine.run), so every scenario runs: the stock tree itself
    hangs and crashes on some EL3 reply faults (corpora/ffa/el3_reclaim.kcs), which
    are then background like its violations."""
    res = StockRun(page_size)
    t0 = time.monotonic()
    sink = open(raw, "w") if raw else None
    errs: list[str] = []

    def found(key: tuple[str, int, str], kind: str) -> None:
        res.findings.append(key)
        if background is None or key in background:
            return
        if key[2] not in res.rules:
            res.rules.append(key[2])
        if res.seconds_to_kill is None:
            res.seconds_to_kill = time.monotonic() - t0
            res.first = f"{key[0]} op {key[1]} ({key[2]})"
            res.verdict = kind

    start = 0
    try:
        while True:
            collector = Collector()
            args = [str(binary), "run", "--target", "el2", "--watchdog", f"{WATCHDOG:g}",
                    *(["--from", str(start)] if start else []), *files]
            with procs.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
                assert proc.stdout is not None and proc.stderr is not None
                for n, line in enumerate(proc.stdout, 1):
                    if sink:
                        sink.write(line)
                    where = f"{raw or binary}:{n}"
                    rec = parse_line(line, where)
                    collector.add(rec, where)
                    if rec["type"] != "op" or rec.get("verdict") != "violation":
                        continue
                    for rule in rec.get("violated", []):
                        found((rec.get("scenario", ""), int(rec.get("op", -1)), rule), "violation")
                    if stop_on_kill and res.seconds_to_kill is not None:
                        proc.end(grace=0)
                        break
                err = proc.stderr.read()
                rc = proc.wait()
            errs.append(err)
            if stop_on_kill and res.seconds_to_kill is not None:
                break
            if collector.run is not None:
                res.ops += sum(collector.run.counts.values())
                if not start:
                    res.scenarios = int(collector.run.plan.get("scenarios", 0))
            crash = crash_marker(err)
            if rc in (EXIT_SANITIZER, EXIT_HANG) or rc < 0 or crash:
                info = crash or {}
                rule = CRASH_RULES.get(info.get("kind", "signal"), "CRASH.SIGNAL")
                found((info.get("scenario", "?"), int(info.get("op", -1)), rule), "CRASH")
                if stop_on_kill and res.seconds_to_kill is not None:
                    break
                at = info.get("at")
                if isinstance(at, int) and start <= at < res.scenarios - 1:
                    start = at + 1
                    continue
                break
            if rc not in (0, 1):
                raise ToolError(f"{binary} failed (exit {rc}): {err.strip()[-2000:]}")
            break
    finally:
        if sink:
            sink.close()
    res.seconds = time.monotonic() - t0
    if any("kconform el2: fatal" in e for e in errs) and res.verdict != "CRASH":
        res.verdict = "FATAL"
        res.rules.insert(0, "FATAL")
        if res.seconds_to_kill is None:
            res.seconds_to_kill = res.seconds
            res.first = "a fatal call at EL2 (FATAL)"
    return res


def _run_tree(tree: Path, files: list[str], out: Path, label: str, background: dict | None):
    t0 = time.monotonic()
    bins = el2.build(tree, BUILD_ID, list(PAGE_SIZES), jobs=BUILD_JOBS, log=lambda m: None)
    built = time.monotonic() - t0
    runs = [run_suite(bins[p], files, p, None if background is None else background[p],
                      out / f"verdicts-stock-{label}-{p // 1024}k.jsonl") for p in PAGE_SIZES]
    return runs, built, time.monotonic() - t0 - built


def matrix(args, out: Path, log) -> dict:
    """The stock control, then every stock mutant (or --only those); the kill matrix."""
    t_all = time.monotonic()
    files = suite_files()
    patches_ = mutant_patches(MUTANTS_DIR, args.only)
    base = tree_fetch.fetch(DEFAULT_TREE, progress=log)
    log(f"kconform selftest ffa (stock): control: stock {DEFAULT_TREE} (its findings are the background)")
    runs, b, r = _run_tree(base, files, out, "control", None)
    background = {s.page_size: set(s.findings) for s in runs}
    crashed = [s for s in runs if s.verdict != "clean"]
    controls = {"stock-background": {
        "expect": f"stock {DEFAULT_TREE} runs the directed and Z3 corpora at 4K and 16K without a fatal call at EL2 (its crashes and hangs are background)",
        "got": [f"{s.page_size // 1024}K: {s.verdict} {s.first}".strip() for s in runs],
        "rules": sorted({k[2] for s in runs for k in s.findings}),
        "findings": {f"{s.page_size // 1024}K": len(set(s.findings)) for s in runs},
        "ops": {f"{s.page_size // 1024}K": s.ops for s in runs},
        "build_seconds": round(b, 1), "run_seconds": round(r, 1), "ok": not crashed}}
    results: list[MutantResult] = []
    wait = waiting()
    stale: list[str] = []
    if not crashed:
        for patch in patches_:
            m = _one_mutant(patch, base, files, out, background, log)
            if patch.stem in wait:
                if m.status == "survived":
                    m.status, m.error = "waiting", f"waiting on {wait[patch.stem]}"
                elif m.status == "killed":
                    stale.append(patch.stem)
            results.append(m)
    for name in stale:
        log(f"kconform selftest ffa (stock): {name} is killed yet listed in {WAITING.name}: remove it there")
    killed = sum(m.status == "killed" for m in results)
    return {"abi": "ffa", "family": "stock", "waiting": sum(m.status == "waiting" for m in results),
            "stale_waiting": stale, "target": "el2", "tree": DEFAULT_TREE,
            "suite": [os.path.relpath(f, REPO) for f in files], "page_sizes": list(PAGE_SIZES),
            "controls": controls, "killed": killed, "total": len(results),
            "seconds": round(time.monotonic() - t_all, 1), "mutants": [asdict(m) for m in results]}


def _one_mutant(patch: Path, base: Path, files: list[str], out: Path, background: dict, log) -> MutantResult:
    m = MutantResult(patch.stem)
    log(f"kconform selftest ffa (stock): {patch.stem}")
    try:
        tree = patches.apply(base, patch)
        runs, m.build_seconds, m.run_seconds = _run_tree(tree, files, out, patch.stem[:2], background)
    except ToolError as e:
        m.status, m.error = "error", str(e).splitlines()[0]
        return m
    m.runs = [{k: v for k, v in asdict(s).items() if k != "findings"} for s in runs]
    record_kill(m, runs)
    return m
