"""The RECLAIM2 kill matrix (`kconform selftest mutants --abi ffa`) and the SMC cost
table (`kconform selftest cost`).

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

import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kconform import el2, patches, trees
from kconform.engine import CRASH_PREFIX, EXIT_SANITIZER
from kconform.errors import EXIT_CLEAN, ToolError
from kconform.paths import CORPORA, REPO
from kconform.selftest import MutantResult, mutant_patches

R2_DIR = REPO / "targets" / "el2" / "reclaim2"
REFERENCE = R2_DIR / "reclaim2-reference.patch"
MUTANTS_DIR = R2_DIR / "mutants"
PAGE_SIZES = (4096, 16384)
BUILD_ID = "selftest"  # build/el2/selftest, reused for every tree


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
    proc = subprocess.Popen([str(binary), "run", "--target", "el2", *files],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    sink = open(raw, "w") if raw else None
    rules: list[str] = []
    try:
        for line in proc.stdout:
            if sink:
                sink.write(line)
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("type") == "op" and rec.get("verdict") == "violation":
                if res.seconds_to_kill is None:
                    res.seconds_to_kill = time.monotonic() - t0
                    res.first = f"{rec.get('scenario')} op {rec.get('op')}"
                    res.verdict = "violation"
                for r in rec.get("violated", []):
                    if r not in rules:
                        rules.append(r)
        err = proc.stderr.read()
        rc = proc.wait()
    finally:
        if sink:
            sink.close()
    res.seconds = time.monotonic() - t0
    crash = next((l for l in reversed(err.splitlines()) if l.startswith(CRASH_PREFIX)), None)
    if rc == EXIT_SANITIZER or rc < 0 or crash:
        res.verdict = "CRASH"
        info = {}
        if crash:
            try:
                info = json.loads(crash[len(CRASH_PREFIX):])
            except ValueError:
                pass
        if res.seconds_to_kill is None:
            res.seconds_to_kill = res.seconds
            res.first = f"{info.get('scenario', '?')} op {info.get('op', '?')}"
        rules.insert(0, "CRASH." + ("SANITIZER" if info.get("kind") == "sanitizer" else "SIGNAL"))
    elif rc not in (0, 1):
        raise ToolError(f"{binary} failed (exit {rc}): {err.strip()[-2000:]}")
    if "kconform el2: fatal" in err and res.verdict != "CRASH":
        res.verdict = "FATAL"
        rules.insert(0, "FATAL")
    res.rules = rules
    return res


def build_tree(tree: Path, log) -> dict[int, Path]:
    env_jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL")
    os.environ["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    try:
        return el2.build(tree, BUILD_ID, list(PAGE_SIZES), log=log)
    finally:
        if env_jobs is None:
            os.environ.pop("CMAKE_BUILD_PARALLEL_LEVEL", None)
        else:
            os.environ["CMAKE_BUILD_PARALLEL_LEVEL"] = env_jobs


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
    base = trees.fetch("debian:7.3", progress=log)
    ref = patches.apply(base, REFERENCE)
    controls: dict[str, dict] = {}

    log("kconform selftest ffa: control: stock debian:7.3 (expects FFA.R2.NOT_IMPLEMENTED)")
    runs, b, r = run_tree(base, files, out, "stock", log)
    stock_rules = sorted({x for s in runs for x in s.rules})
    controls["stock"] = {"expect": "stock debian:7.3 fails FFA.R2.NOT_IMPLEMENTED at 4K and 16K",
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
    return {"abi": "ffa", "target": "el2", "tree": "debian:7.3",
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
    dead = [s for s in runs if s.verdict != "clean"]
    if dead:
        m.status = "killed"
        first = dead[0]  # runs are in order: 4K, then 16K
        m.kind, m.first = first.verdict, f"{first.page_size // 1024}K {first.first}"
        # time to kill: the runs go 4K then 16K; a kill at 16K counts the 4K run before it
        before = sum(s.seconds for s in runs if s.page_size < first.page_size)
        m.time_to_kill = round(before + (first.seconds_to_kill or 0), 3)
        for s in dead:
            for x in s.rules:
                if x not in m.rules:
                    m.rules.append(x)
    return m

# --- `kconform selftest cost`: SMC round trips of FFA_MEM_RECLAIM vs RECLAIM2 -----------

COST_RANGES = (1, 16, 256, 4096)
COST_BATCHES = (1, 16, 256)
COST_MEASURED_MAX = 16  # the EL2 target has 64 host pages (ffa_target.cc kHostPages)
FN_RECLAIM, FN_RECLAIM2 = 0x84000077, 0xC4000091


def _cost_scenarios(ps: int, n: int) -> str:
    """A share of n one-host-page ranges, then (a) FFA_MEM_RECLAIM, (b) RECLAIM2 per batch size."""
    import struct
    hp, k = ps // 4096, ps // 1024
    tx, rx, mem = 0x80000000, 0x80000000 + ps, 0x80000000 + 2 * ps
    ranges = [(mem + i * ps, hp) for i in range(n)]
    blob = lambda rs: "hex:" + b"".join(struct.pack("<QI", a, p) for a, p in rs).hex()  # noqa: E731
    head = (f"kconform-scenario 1\nabi ffa\nname cost/{{}}\nrequires reclaim2 page_{k}k\nversion\n"
            f"rxtx_map tx={tx:#x} rx={rx:#x} pages={hp}\ntx_mem_desc ranges={blob(ranges)}\nmem_share\n")
    out = [head.format(f"reclaim-{n}") + "mem_reclaim handle=0\n"]
    for b in COST_BATCHES:
        body = head.format(f"reclaim2-{n}-b{b}")
        for i in range(0, n, b):
            part = ranges[i:i + b]
            body += (f"tx_constituents offset=0 ranges={blob(part)}\n"
                     f"mem_reclaim2 handle=0 count={len(part)} total_pages={len(part) * hp}\n")
        out.append(body)
    return "\n".join(out)


def _trace(binary: Path, text: str, tmp: Path) -> dict[str, list[tuple[int, int, int]]]:
    """Per scenario: (host fid, SMCs to EL3, x2 returned) of each RECLAIM/RECLAIM2 host call."""
    f = tmp / "cost.kcs"
    f.write_text(text)
    env = dict(os.environ, KCONFORM_SMC_TRACE="1")
    r = subprocess.run([str(binary), "run", "--target", "el2", str(f)], capture_output=True, text=True, env=env)
    names = [json.loads(l)["scenario"] for l in r.stdout.splitlines()
             if '"type":"op"' in l and '"op":0,' in l]
    calls: dict[str, list] = {n: [] for n in names}
    idx, cur = -1, None
    for line in r.stderr.splitlines():
        w = line.split()
        if w[:2] == ["kc-smc", "host"]:
            fid = int(w[2], 16)
            if fid == 0x84000063:  # FFA_VERSION: each scenario starts with one
                idx += 1
            cur = [fid, 0, 0] if fid in (FN_RECLAIM, FN_RECLAIM2) else None
        elif w[:2] == ["kc-smc", "el3"] and cur is not None:
            cur[1] += 1
        elif w[:2] == ["kc-smc", "ret"] and cur is not None:
            cur[2] = int(w[3], 16)
            calls[names[idx]].append(tuple(cur))
            cur = None
    return calls


def cmd_cost(args, console: Console) -> int:
    import math
    import tempfile
    log = lambda m: console.print(m, markup=False, highlight=False)  # noqa: E731
    t0 = time.monotonic()
    base = trees.fetch("debian:7.3", progress=log)
    ref, tree_id = el2.resolve_tree(str(patches.apply(base, REFERENCE)), None, log)
    bins = el2.build(ref, tree_id, list(PAGE_SIZES), log=log)
    rows = []
    with tempfile.TemporaryDirectory() as td:
        for ps in PAGE_SIZES:
            hp = ps // 4096
            measured = {n: _trace(bins[ps], _cost_scenarios(ps, n), Path(td)) for n in (1, COST_MEASURED_MAX)}
            # Stock FFA_MEM_RECLAIM: RETRIEVE_REQ + FRAG_RX per further fragment + RECLAIM (+ RX
            # release if any): per-call SMCs = fixed + fragments - 1; fixed is measured at 1 range.
            one = measured[1]["cost/reclaim-1"][0]
            desc = lambda n: 48 + 32 + 16 + 16 * n  # noqa: E731  v1.2: header, one EMAD, composite, ranges
            frags = lambda n: math.ceil(desc(n) / ps)  # noqa: E731  the hypervisor's RX: one host page
            for n in COST_RANGES:
                m = measured.get(n)
                if m:
                    c = m[f"cost/reclaim-{n}"]
                    smcs, pages, src = sum(x[1] for x in c), n * hp, "measured"
                else:
                    smcs, pages, src = one[1] + frags(n) - 1, n * hp, "derived"
                rows.append({"page_size": ps, "ranges": n, "path": "FFA_MEM_RECLAIM (stock)", "batch": None,
                             "host_calls": 1, "smcs": smcs, "max_pages_per_call": pages, "source": src})
                for b in COST_BATCHES:
                    if m:
                        c = m[f"cost/reclaim2-{n}-b{b}"]
                        calls, smcs, mx, src = len(c), sum(x[1] for x in c), max(x[2] for x in c), "measured"
                    else:
                        calls = math.ceil(n / b)
                        smcs, mx, src = calls, min(b, n) * hp, "derived"
                    rows.append({"page_size": ps, "ranges": n, "path": "FFA_MEM_RECLAIM2 (reference)",
                                 "batch": b, "host_calls": calls, "smcs": smcs, "max_pages_per_call": mx,
                                 "source": src})
    doc = {"format": 1, "tree": "debian:7.3 + reclaim2-reference.patch", "rows": rows,
           "seconds": round(time.monotonic() - t0, 1)}
    out = Path(args.output) if args.output else R2_DIR / "cost.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(doc, indent=2))
        return EXIT_CLEAN
    t = Table(title="SMC round trips to EL3 per reclaim of N one-host-page ranges", title_justify="left")
    for col in ("PAGE_SIZE", "ranges", "path", "descs/call", "host calls", "SMCs to EL3",
                "most 4K pages in one call", "source"):
        t.add_column(col)
    for r in rows:
        t.add_row(f"{r['page_size'] // 1024}K", str(r["ranges"]), r["path"], str(r["batch"] or "all"),
                  str(r["host_calls"]), str(r["smcs"]), str(r["max_pages_per_call"]), r["source"])
    console.print(t)
    log(f"kconform selftest cost: {out}")
    return EXIT_CLEAN
