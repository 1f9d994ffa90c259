"""The RECLAIM2 kill matrix (`kconform selftest mutants --abi ffa`).

Controls first: stock debian:7.3 must fail FFA.R2.NOT_IMPLEMENTED (it has no
RECLAIM2 handler) and the reference handler (targets/el2/reclaim2/
reclaim2-reference.patch) must run the suite with no violation, else the
matrix means nothing (exit 2). Then each mutant (mutants/NN-name.patch, on top
of the reference) is built for 4K and 16K in one reused build folder
(build/el2/selftest: only the tree changes, so only the code that names it
recompiles) and runs the deterministic RECLAIM2 suite (corpora/ffa/reclaim2*.kcs
and corpora/ffa/smoke.kcs). A mutant is killed by any violation, invariant
break, fatal call at EL2 (FATAL: hyp_panic/BUG/deadlock/failed lock assertion)
or crash (CRASH: exit 3 with a KCONFORM-CRASH marker, or a signal).
"""

from __future__ import annotations

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

R2_DIR = REPO / "targets" / "el2" / "reclaim2"
REFERENCE = R2_DIR / "reclaim2-reference.patch"
MUTANTS_DIR = R2_DIR / "mutants"
PAGE_SIZES = (4096, 16384)
BUILD_ID = "selftest"  # build/el2/selftest, reused for every tree
BUILD_JOBS = 2


def suite_files() -> list[str]:
    files = sorted(str(p) for p in (CORPORA / "ffa").glob("reclaim2*.kcs"))
    if not files:
        raise ToolError(f"{CORPORA / 'ffa'}: no reclaim2*.kcs (the RECLAIM2 suite)")
    return files + [str(CORPORA / "ffa" / "smoke.kcs")]


@dataclass
class SuiteRun:
    """One tree at one page size."""
    page_size: int
    verdict: str = "clean"          # clean | violation | FATAL | CRASH
    rules: list[str] = field(default_factory=list)
    first: str = ""                 # scenario/op of the first kill
    seconds_to_kill: float | None = None
    seconds: float = 0.0


def run_suite(binary: Path, files: list[str], page_size: int, raw: Path | None = None) -> SuiteRun:
    """Runs the suite on one runner, watching the verdict stream for the first kill."""
    res = SuiteRun(page_size)
    t0 = time.monotonic()
    collector = Collector()
    sink = open(raw, "w") if raw else None
    try:
        with procs.Popen([str(binary), "run", "--target", "el2", *files],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            for n, line in enumerate(proc.stdout, 1):
                if sink:
                    sink.write(line)
                where = f"{raw or binary}:{n}"
                rec = parse_line(line, where)
                collector.add(rec, where)
                if rec["type"] == "op" and rec.get("verdict") == "violation" and res.seconds_to_kill is None:
                    res.seconds_to_kill = time.monotonic() - t0
                    res.first = f"{rec.get('scenario')} op {rec.get('op')}"
                    res.verdict = "violation"
            err = proc.stderr.read()
            rc = proc.wait()
    finally:
        if sink:
            sink.close()
    res.seconds = time.monotonic() - t0
    rules: list[str] = []
    for f in collector.run.findings if collector.run else []:
        if f.rule not in rules:
            rules.append(f.rule)
    crash = crash_marker(err)
    if rc in (EXIT_SANITIZER, EXIT_HANG) or rc < 0 or crash:
        res.verdict = "CRASH"
        info = crash or {}
        if res.seconds_to_kill is None:
            res.seconds_to_kill = res.seconds
            res.first = f"{info.get('scenario', '?')} op {info.get('op', '?')}"
        rules.insert(0, CRASH_RULES.get(info.get("kind", "signal"), "CRASH.SIGNAL"))
    elif rc not in (0, 1):
        raise ToolError(f"{binary} failed (exit {rc}): {err.strip()[-2000:]}")
    if "kconform el2: fatal" in err and res.verdict != "CRASH":
        res.verdict = "FATAL"
        rules.insert(0, "FATAL")
    res.rules = rules
    return res


def build_tree(tree: Path, log) -> dict[int, Path]:
    return el2.build(tree, BUILD_ID, list(PAGE_SIZES), jobs=BUILD_JOBS, log=log)


def run_tree(tree: Path, files: list[str], out: Path, label: str, log) -> tuple[list[SuiteRun], float, float]:
    t0 = time.monotonic()
    bins = build_tree(tree, lambda m: None)
    built = time.monotonic() - t0
    runs = [run_suite(bins[p], files, p, out / f"verdicts-{label}-{p // 1024}k.jsonl") for p in PAGE_SIZES]
    return runs, built, time.monotonic() - t0 - built


def matrix(args, out: Path, log) -> dict:
    """Controls, then every mutant (or --only those) on the RECLAIM2 suite; the kill matrix."""
    t_all = time.monotonic()
    files = suite_files()
    patches_ = mutant_patches(MUTANTS_DIR, args.only)
    base = tree_fetch.fetch(DEFAULT_TREE, progress=log)
    ref = patches.apply(base, REFERENCE)
    controls: dict[str, dict] = {}

    log(f"kconform selftest ffa: control: stock {DEFAULT_TREE} (expects FFA.R2.NOT_IMPLEMENTED)")
    runs, b, r = run_tree(base, files, out, "stock", log)
    stock_rules = sorted({x for s in runs for x in s.rules})
    controls["stock"] = {"expect": f"stock {DEFAULT_TREE} fails FFA.R2.NOT_IMPLEMENTED at 4K and 16K",
                         "got": stock_rules, "rules": stock_rules, "build_seconds": round(b, 1),
                         "run_seconds": round(r, 1),
                         "ok": all("FFA.R2.NOT_IMPLEMENTED" in s.rules for s in runs)}
    log("kconform selftest ffa: control: reference handler (expects no violation)")
    runs, b, r = run_tree(ref, files, out, "reference", log)
    ref_rules = sorted({x for s in runs for x in s.rules})
    controls["reference"] = {"expect": "the reference handler runs the suite with no violation",
                             "got": ref_rules + [s.first for s in runs if s.first], "rules": ref_rules,
                             "build_seconds": round(b, 1), "run_seconds": round(r, 1),
                             "ok": all(s.verdict == "clean" for s in runs)}
    results: list[MutantResult] = []
    if all(c["ok"] for c in controls.values()):
        for patch in patches_:
            results.append(_one_mutant(patch, base, files, out, log))
    killed = sum(m.status == "killed" for m in results)
    return {"abi": "ffa", "target": "el2", "tree": DEFAULT_TREE,
            "reference": os.path.relpath(REFERENCE, REPO),
            "suite": [os.path.relpath(f, REPO) for f in files], "page_sizes": list(PAGE_SIZES),
            "controls": controls, "killed": killed, "total": len(results),
            "seconds": round(time.monotonic() - t_all, 1), "mutants": [asdict(m) for m in results]}


def _one_mutant(patch: Path, base: Path, files: list[str], out: Path, log) -> MutantResult:
    m = MutantResult(patch.stem)
    log(f"kconform selftest ffa: {patch.stem}")
    try:
        tree = patches.apply_all(base, [REFERENCE, patch])
        runs, m.build_seconds, m.run_seconds = run_tree(tree, files, out, patch.stem[:2], log)
    except ToolError as e:
        m.status, m.error = "error", str(e).splitlines()[0]
        return m
    m.runs = [asdict(s) for s in runs]
    record_kill(m, runs)
    return m
