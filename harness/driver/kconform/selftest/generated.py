"""The generated ffa.c kill matrix (`kconform selftest mutants --abi ffa --family generated`).

Every condition and bound check of a tree's `arch/arm64/kvm/hyp/nvhe/ffa.c` (default
debian:7.3, or --tree debian:7.2|debian:6.12|PATH) mutated mechanically by
selftest/mutagen.py (libclang): each mutant is one unified diff against that ffa.c
with a stable ID (FUNCTION.OPERATOR.HASH) and a one-line description
(targets/el2/generated-mutants/README.md lists the operators).

Judged as the stock family judges (selftest/stock.py, whose runner loop this reuses):
the control is the unmutated tree, which runs the directed and Z3 FF-A corpora at 4K
and 16K; its findings, crashes and hangs are the background. A mutant is killed by a
finding the control does not have at the same scenario and op (a violation, a crash,
a sanitizer report or a hang: CRASH.*), a fatal call at EL2, or a handler that does not
come up at all with the control's EL3 (kind INIT: hyp_ffa_init fails or leaves the proxy
off, which the runner refuses); its run stops at the first such finding, and 16K runs
only when 4K did not kill it.

Builds are incremental: the mutants are applied in turn (GNU patch, no fuzz) to one
working copy of the tree's files (<cache>/generated-mutants/work/<tree id>), built in
one folder (build/el2/generated-<tree id>), so only the C from the tree recompiles
(ffa.c's content changes the C flags; the engine's objects and the tree's path do not
change). Builds take turns; the runs of up to --jobs mutants go on side by side, each
on its own hard link of the runners it was built with.

A survivor is read from targets/el2/generated-mutants/survivors.json, its review:
`equivalent` (no input can tell it from the original), `out-of-scope` (what it changes
is outside what the suite judges, with why) or `gap` (a real blind spot of the suite,
with the scenario that would kill it). Reviewed survivors do not fail the matrix; a
survivor with no review does (exit 1), and a reviewed mutant that is killed is reported
as a stale review. The mutation score is killed / (mutants - equivalent ones).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kconform.core import deps, locks
from kconform.core.errors import ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, cache_dir
from kconform.selftest import mutagen
from kconform.selftest.mutants import MutantResult, record_kill
from kconform.selftest.stock import StockRun, run_suite, suite_files
from kconform.sources import patches
from kconform.sources.trees import DEFAULT_TREE, NEEDED_PATHS, STAMP_NAME
from kconform.targets import el2

MUTANTS_DIR = REPO / "targets" / "el2" / "generated-mutants"
SURVIVORS = MUTANTS_DIR / "survivors.json"
KINDS = ("equivalent", "out-of-scope", "gap")
PAGE_SIZES = (4096, 16384)
BUILD_JOBS = 2
NAME = "kconform selftest ffa (generated)"
# a runner that cannot start the handler under test (targets/el2: el2_init, FfaTarget) says so;
# the control started with the same EL3, so the mutant is what failed: a kill of kind INIT
INIT_FAILURES = ("hyp_ffa_init failed", "hyp_ffa_init() did not ask EL3")


def default_jobs() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def reviews(path: Path = SURVIVORS) -> dict[str, dict]:
    """Mutant ID -> {"kind", "reason"[, "scenario"]} (survivors.json: {"mutants": {...}})."""
    try:
        doc = json.loads(path.read_text())
        out = doc["mutants"]
        if not isinstance(out, dict):
            raise ValueError("must be an object: mutant ID -> review")
        for mid, r in out.items():
            if not isinstance(r, dict) or r.get("kind") not in KINDS:
                raise ValueError(f"{mid}: kind must be one of {', '.join(KINDS)}")
            if not isinstance(r.get("reason"), str) or not r["reason"].strip():
                raise ValueError(f"{mid}: a review needs its reason")
            if r["kind"] == "gap" and not (isinstance(r.get("scenario"), str) and r["scenario"].strip()):
                raise ValueError(f"{mid}: a gap names the scenario that would kill it (field scenario)")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ToolError(f"{path}: field 'mutants': {e}") from e
    return out


def select(gen: mutagen.Generation, only: list[str] | None) -> list[mutagen.Mutant]:
    """Every mutant, or those --only names (IDs or shell patterns such as do_ffa_version.*)."""
    if not only:
        return list(gen.mutants)
    picked, missing = [], []
    for want in only:
        hits = [m for m in gen.mutants if m.id == want or fnmatch.fnmatchcase(m.id, want)]
        if not hits:
            missing.append(want)
        picked += [m for m in hits if m not in picked]
    if missing:
        dropped = {d.id: d.reason for d in gen.dropped}
        why = [f"{x} (dropped by the generator: {dropped[x]})" if x in dropped else x for x in missing]
        raise ToolError(f"flag --only: no generated mutant {', '.join(why)} (`python3 -m kconform.selftest.mutagen "
                        f"TREE` lists them)")
    return [m for m in gen.mutants if m in picked]


class Workspace:
    """One working copy of the tree's files and its build folder; builds take turns."""

    def __init__(self, base: Path, tree_id: str):
        self.base = base
        self.work = cache_dir() / "generated-mutants" / "work" / tree_id
        self.build_id = f"generated-{tree_id}"
        self.runs = REPO / "build" / "el2" / self.build_id / "mutant-runs"
        self.lock = threading.Lock()
        self.pristine = (base / mutagen.FFA_C).read_bytes()

    def _file_lock(self):
        return locks.locked(self.work.parent / f"{self.work.name}.lock",
                            f"the generated mutants' working tree {self.work.name}", log=lambda m: None)

    def prepare(self) -> None:
        with self.lock, self._file_lock():
            for rel in [*NEEDED_PATHS, STAMP_NAME]:
                src = self.base / rel
                if not src.is_file():
                    continue
                dst = self.work / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                if not dst.is_file() or dst.read_bytes() != src.read_bytes():
                    shutil.copyfile(src, dst)

    def build(self, label: str, patch: Path | None) -> tuple[dict[int, Path], float]:
        """Builds the tree with patch applied (None: the unmutated tree); returns private
        links to its runners (remove them with release()) and the build's seconds."""
        with self.lock, self._file_lock():
            t0 = time.monotonic()
            ffa = self.work / mutagen.FFA_C
            ffa.write_bytes(self.pristine)
            try:
                if patch is not None:
                    patches.run_patch(self.work, patch, self.base, fuzz=0, dry_run=False)
                bins = el2.build(self.work, self.build_id, list(PAGE_SIZES), jobs=BUILD_JOBS, log=lambda m: None)
            finally:
                built = time.monotonic() - t0
            mine = self.runs / f"{label}.{os.getpid()}.{threading.get_ident()}"
            shutil.rmtree(mine, ignore_errors=True)
            mine.mkdir(parents=True)
            out = {}
            for p, b in bins.items():
                os.link(b, mine / b.name)
                out[p] = mine / b.name
            return out, built

    def restore(self) -> None:
        with self.lock, self._file_lock():
            (self.work / mutagen.FFA_C).write_bytes(self.pristine)

    @staticmethod
    def release(bins: dict[int, Path]) -> None:
        for b in bins.values():
            shutil.rmtree(b.parent, ignore_errors=True)
            break


def _control(ws: Workspace, files: list[str], out: Path, log) -> tuple[dict, dict]:
    bins, built = ws.build("control", None)
    t0 = time.monotonic()
    try:
        runs = [run_suite(bins[p], files, p, None, out / f"verdicts-generated-control-{p // 1024}k.jsonl")
                for p in PAGE_SIZES]
    finally:
        ws.release(bins)
    bad = [s for s in runs if s.verdict != "clean"]
    control = {"expect": "the unmutated tree runs the directed and Z3 corpora at 4K and 16K without a fatal call "
                         "at EL2 (its findings, crashes and hangs are the background)",
               "got": [f"{s.page_size // 1024}K: {s.verdict} {s.first}".strip() for s in runs],
               "rules": sorted({k[2] for s in runs for k in s.findings}),
               "findings": {f"{s.page_size // 1024}K": len(set(s.findings)) for s in runs},
               "ops": {f"{s.page_size // 1024}K": s.ops for s in runs},
               "build_seconds": round(built, 1), "run_seconds": round(time.monotonic() - t0, 1), "ok": not bad}
    return control, {s.page_size: set(s.findings) for s in runs}


def _one(ws: Workspace, m: mutagen.Mutant, patch: Path, files: list[str], background: dict) -> MutantResult:
    r = MutantResult(m.id)
    try:
        bins, r.build_seconds = ws.build(m.id, patch)
    except ToolError as e:
        r.status, r.error = "error", str(e).splitlines()[0]
        return r
    t0 = time.monotonic()
    runs: list[StockRun] = []
    try:
        for p in PAGE_SIZES:
            try:
                runs.append(run_suite(bins[p], files, p, background[p], None, stop_on_kill=True))
            except ToolError as e:
                why = next((ln for ln in str(e).splitlines() if any(k in ln for k in INIT_FAILURES)), "")
                if not why:
                    raise
                # the runner refuses a handler that does not come up with the EL3 the control
                # came up with: the mutant broke hyp_ffa_init (or turned the proxy off)
                r.status, r.kind, r.rules = "killed", "INIT", ["INIT"]
                r.first = f"{p // 1024}K {why[why.find('el2: ') + 5 if 'el2: ' in why else 0:].strip()}"
                r.time_to_kill = round(time.monotonic() - t0, 3)
                break
            if runs[-1].verdict != "clean":
                break                       # killed: the next page size adds nothing to the score
    except ToolError as e:
        r.status, r.error = "error", str(e).splitlines()[0]
    finally:
        ws.release(bins)
        r.run_seconds = round(time.monotonic() - t0, 1)
    r.build_seconds = round(r.build_seconds, 1)
    r.runs = [{k: v for k, v in asdict(s).items() if k != "findings"} for s in runs]
    if r.status == "survived":
        record_kill(r, runs)
    return r


def matrix(args, out: Path, log) -> dict:
    """The unmutated tree, then every generated mutant (or --only those): the kill matrix."""
    t_all = time.monotonic()
    deps.ensure(["mutants"], log)
    spec = getattr(args, "tree", None) or DEFAULT_TREE
    jobs = getattr(args, "jobs", None) or default_jobs()
    if jobs < 1:
        raise ToolError("flag --jobs: must be at least 1")
    base, tree_id = el2.resolve_tree(spec, log=log)
    gen = mutagen.generate_tree(base, cache=cache_dir() / "generated-mutants" / "generations", jobs=jobs, log=log)
    chosen = select(gen, getattr(args, "only", None))
    review = reviews()
    files = snapshot_suite(suite_files(), out / "suite")
    engine = engine_sources()
    folder = out / "generated-mutants"
    mutagen.write_patches(gen, folder)
    atomic_write(out / "generated-mutants.json", json.dumps(gen.to_json(), indent=2) + "\n")
    log(f"{NAME}: {spec} ({base}): {len(gen.mutants)} mutants generated, {len(gen.dropped)} dropped by the "
        f"generator; running {len(chosen)} with {jobs} job(s); patches in {os.path.relpath(folder)}")
    ws = Workspace(base, tree_id)
    ws.prepare()
    control, background = _control(ws, files, out, log)
    results: list[MutantResult] = []
    if control["ok"]:
        done = [0]
        done_lock = threading.Lock()

        def task(m: mutagen.Mutant) -> MutantResult:
            r = _one(ws, m, folder / f"{m.id}.patch", files, background)
            with done_lock:
                done[0] += 1
                what = r.status if r.status != "killed" else f"killed ({r.first})"
                log(f"{NAME}: [{done[0]}/{len(chosen)}] {m.id}: {what}"
                    + (f": {r.error}" if r.error else ""))
            return r

        try:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                results = list(pool.map(task, chosen))
        finally:
            ws.restore()
    doc = summarize(spec, base, gen, chosen, results, review, control, files, time.monotonic() - t_all, jobs)
    doc["suite"] = [os.path.relpath(f, out / "suite") for f in files]
    doc["engine_sources_sha256"] = engine
    if engine_sources() != engine:
        doc["warning"] = ("the engine's sources (models/, harness/, targets/el2/) changed during the run: the "
                          "mutants built after the change were judged by another oracle than the control; run again")
        log(f"{NAME}: {doc['warning']}")
    return doc


def snapshot_suite(files: list[str], into: Path) -> list[str]:
    """Copies of the corpora as they are when the control runs (scenario names are in the
    files): the control and every mutant run the same scenarios, even if the corpora are
    edited during a long run."""
    out = []
    for f in files:
        dst = into / os.path.relpath(f, REPO)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dst)
        out.append(str(dst))
    return out


def engine_sources() -> str:
    """SHA-256 of the C/C++ the runners are built from besides the tree (models/,
    harness/, targets/el2/ but the generated mutants' folder)."""
    h = hashlib.sha256()
    for top in ("models", "harness", "targets/el2"):
        for p in sorted((REPO / top).rglob("*")):
            if p.suffix in (".cc", ".h", ".c", ".def", ".txt", ".cmake") and p.is_file() \
                    and MUTANTS_DIR not in p.parents:
                h.update(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def summarize(spec: str, base: Path, gen: mutagen.Generation, chosen: list[mutagen.Mutant],
              results: list[MutantResult], review: dict, control: dict, files: list[str], seconds: float,
              jobs: int) -> dict:
    rows, stale = [], []
    by_id = {m.id: m for m in chosen}
    for r in results:
        m = by_id[r.mutant]
        rev = review.get(r.mutant)
        if r.status == "survived" and rev:
            r.status = rev["kind"]
        elif r.status == "killed" and rev:
            stale.append(r.mutant)
        row = asdict(r)
        row.update({"op": m.op, "function": m.function, "line": m.line, "description": m.description})
        if rev:
            row["review"] = rev
        rows.append(row)
    not_generated = sorted(set(review) - {m.id for m in gen.mutants})
    count = {k: sum(x["status"] == k for x in rows) for k in ("killed", "survived", "error", *KINDS)}
    judged = len(rows) - count["equivalent"]
    by_op = {}
    for op in mutagen.OPERATORS:
        mine = [x for x in rows if x["op"] == op]
        if mine:
            by_op[op] = {"total": len(mine), "killed": sum(x["status"] == "killed" for x in mine),
                         **{k: sum(x["status"] == k for x in mine) for k in ("survived", *KINDS) if
                            any(x["status"] == k for x in mine)}}
    return {"abi": "ffa", "family": "generated", "target": "el2", "tree": spec, "tree_path": str(base),
            "generator": {"mutants": len(gen.mutants), "dropped": [asdict(d) for d in gen.dropped],
                          "selected": len(chosen), "source_sha256": gen.source_sha256},
            "suite": [os.path.relpath(f, REPO) for f in files], "page_sizes": list(PAGE_SIZES), "jobs": jobs,
            "controls": {"unmutated": control}, "killed": count["killed"], "total": len(rows),
            "waiting": 0, "reviewed": sum(count[k] for k in KINDS), "survived": count["survived"],
            "by_kind": {k: count[k] for k in KINDS}, "errors": count["error"], "by_operator": by_op,
            "score": {"killed": count["killed"], "non_equivalent": judged,
                      "percent": round(100.0 * count["killed"] / judged, 1) if judged else None},
            "stale_reviews": stale, "reviews_not_generated": not_generated, "seconds": round(seconds, 1),
            "mutants": rows}


def score_line(m: dict) -> str:
    s = m["score"]
    pct = "n/a" if s["percent"] is None else f"{s['percent']:.1f}%"
    k = m["by_kind"]
    return (f"mutation score {pct}: {s['killed']} killed of {s['non_equivalent']} non-equivalent "
            f"({m['total']} run, {k['equivalent']} equivalent); survivors: {k['gap']} gap, "
            f"{k['out-of-scope']} out-of-scope, {m['survived']} not reviewed"
            + (f"; {m['errors']} could not be built or run" if m["errors"] else ""))


def print_matrix(console: Console, title: str, m: dict) -> None:
    log = lambda s: console.print(s, markup=False, highlight=False)  # noqa: E731
    t = Table(title=f"{title}: {m['tree']}, {m['killed']}/{m['total']} killed", title_justify="left")
    for col in ("operator", "mutants", "killed", "equivalent", "out-of-scope", "gap", "not reviewed"):
        t.add_column(col)
    for op, c in m["by_operator"].items():
        t.add_row(op, str(c["total"]), str(c["killed"]), *(str(c.get(k, 0)) for k in (*KINDS, "survived")))
    console.print(t)
    survivors = [x for x in m["mutants"] if x["status"] != "killed"]
    if survivors:
        s = Table(title="survivors (targets/el2/generated-mutants/survivors.json)", title_justify="left")
        for col in ("mutant", "status", "what it changes", "reason"):
            s.add_column(col, overflow="fold")
        order = {"survived": 0, "error": 1, "gap": 2, "out-of-scope": 3, "equivalent": 4}
        for x in sorted(survivors, key=lambda x: (order.get(x["status"], 9), x["line"])):
            rev = x.get("review") or {}
            reason = rev.get("reason", x.get("error") or "NOT REVIEWED: add it to survivors.json")
            if rev.get("scenario"):
                reason += f" Would be killed by: {rev['scenario']}"
            s.add_row(x["mutant"], x["status"].upper() if x["status"] in ("survived", "error") else x["status"],
                      x["description"], reason)
        console.print(s)
    if m["reviews_not_generated"] and m["tree"] == DEFAULT_TREE:
        log(f"{NAME}: {len(m['reviews_not_generated'])} review(s) in {SURVIVORS.name} name no mutant of "
            f"{m['tree']}: {', '.join(m['reviews_not_generated'][:5])}")
    for mid in m["stale_reviews"]:
        log(f"{NAME}: {mid} is killed yet reviewed in {SURVIVORS.name}: remove its entry")
    log(f"{NAME}: {score_line(m)}")
