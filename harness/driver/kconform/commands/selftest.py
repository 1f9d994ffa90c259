"""`kconform selftest mutants|faults|cost`: the kill matrices of our own reference
implementations (selftest/mutants.py says how they are read), the oracle's
self-test against a lying target (selftest/faults.py), and RECLAIM2's SMC cost
table (selftest/cost.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kconform.core.errors import EXIT_CLEAN, EXIT_TOOL_ERROR, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import new_report_dir, reports_dir
from kconform.selftest import cost, faults, generated, reclaim2, stock, write
from kconform.selftest.mutants import ABIS, MATRIX_FORMAT, exit_code, print_matrix

# Matrix key -> (ABI, family, builder). An ABI's families run in this order; the key
# names the matrix in kill-matrix.json ("ffa" stays the RECLAIM2 family's).
MATRICES = {"ffa": ("ffa", "reclaim2", reclaim2.matrix),
            "ffa-stock": ("ffa", "stock", stock.matrix),
            "ffa-generated": ("ffa", "generated", generated.matrix),
            "gmem": ("gmem", "write", write.matrix)}
FAMILIES = {"ffa": ("reclaim2", "stock", "generated"), "gmem": ("write",)}
# run only when named with --family (hundreds of mutants: the nightly run's, or a user's --tree)
OPT_IN = {"generated"}
TITLES = {"ffa": "RECLAIM2 kill matrix (EL2 proxy, in-process)",
          "ffa-stock": "stock ffa.c kill matrix (single-line mutants of Debian 7.3, EL2 in-process)",
          "ffa-generated": "generated ffa.c kill matrix (every condition and bound check mutated, EL2 in-process)",
          "gmem": "guest_memfd write() kill matrix (inside QEMU)"}
PRINTERS = {"ffa-generated": generated.print_matrix}


def cmd_selftest(args, console: Console) -> int:
    log = lambda m: console.print(m, markup=False, highlight=False)  # noqa: E731
    if args.selftest_command == "cost":
        return _cost(args, console, log)
    if args.selftest_command == "faults":
        return _faults(args, log)
    if args.selftest_command != "mutants":
        raise ToolError(f"unknown selftest {args.selftest_command}")
    abis = list(ABIS) if args.abi == "all" else [args.abi]
    if args.only and len(abis) > 1:
        raise ToolError("flag --only: mutant numbers repeat across ABIs; give --abi ffa or --abi gmem too")
    family = getattr(args, "family", None) or "all"
    if family != "all" and any(family not in FAMILIES[a] for a in abis):
        raise ToolError(f"flag --family: {family} is not a family of "
                        + ", ".join(f"--abi {a} ({', '.join(FAMILIES[a])})" for a in abis))
    if getattr(args, "tree", None) and family != "generated":
        raise ToolError("flag --tree: only with --family generated (the other families are mutants of "
                        "debian:7.3 and of our patch to it)")
    keys = [k for k, (a, fam, _) in MATRICES.items()
            if a in abis and (fam == family or (family == "all" and fam not in OPT_IN))]
    if args.only and len(keys) > 1:
        raise ToolError("flag --only: mutant numbers repeat across the ffa families; "
                        "give --family reclaim2 or --family stock too")
    out = new_report_dir(Path(args.report_dir) if args.report_dir else reports_dir())
    t0 = time.monotonic()
    matrices: dict[str, dict] = {}
    for abi in keys:
        matrices[abi] = MATRICES[abi][2](args, out, log)
        # written after each ABI, so an interrupted run keeps what it found
        atomic_write(out / "kill-matrix.json", json.dumps(
            {"format": MATRIX_FORMAT, "abis": matrices}, indent=2) + "\n")
        if args.format == "table":
            if all(c["ok"] for c in matrices[abi]["controls"].values()):
                PRINTERS.get(abi, print_matrix)(console, TITLES[abi], matrices[abi])
            for name, c in matrices[abi]["controls"].items():
                log(f"kconform selftest {abi}: control {name}: {'ok' if c['ok'] else 'FAILED'}: {c['expect']}"
                    + ("" if c["ok"] else f" (got {c.get('got', '')})"))
    code = exit_code(matrices)
    if args.format == "json":
        print(json.dumps({"format": MATRIX_FORMAT, "abis": matrices}, indent=2))
    else:
        summary = "; ".join(f"{a}: {m['killed']}/{m['total']} killed"
                            + (f", {m['waiting']} waiting" if m.get("waiting") else "")
                            + (f", {m['reviewed']} reviewed survivors (score {m['score']['percent']}%)"
                               if "reviewed" in m else "")
                            for a, m in matrices.items())
        log(f"kconform selftest: {summary} in {time.monotonic() - t0:.0f} s; "
            f"matrix in {os.path.relpath(out / 'kill-matrix.json')}")
        if code == EXIT_TOOL_ERROR:
            log("kconform selftest: a control failed or a mutant could not be built/run: the matrix is not complete")
    return code


def _faults(args, log) -> int:
    targets = [args.target] if getattr(args, "target", None) else list(faults.TARGETS)
    out = new_report_dir(Path(args.report_dir) if args.report_dir else reports_dir())
    t0 = time.monotonic()
    matrices = faults.matrix(targets, args.only, out, log)
    code = faults.exit_code(matrices)
    doc = faults.to_json(matrices, code)
    atomic_write(out / "fault-matrix.json", json.dumps(doc, indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(doc, indent=2))
        return code
    for m in matrices:
        log(f"\nOracle self-test on {m.label} ({m.profile}): outcome (times the lie fired); "
            "* a known blind spot (targets/faulty/BLIND_SPOTS.md), ! fails the self-test")
        for line in faults.matrix_lines(m):
            log(line)
    for m in matrices:
        for c in m.cells:
            if not c["ok"]:
                log(f"kconform selftest faults: {m.label} {c['fault']}: {c['outcome']}"
                    + (f" (listed in {faults.BLIND_SPOTS.name} as {c['listed_as']})" if c["listed_as"] else
                       f": not in {faults.BLIND_SPOTS.name}"))
            elif c["stale"]:
                log(f"kconform selftest faults: {m.label} {c['fault']}: detected, yet listed as a blind spot: "
                    f"remove it from {faults.BLIND_SPOTS.name}")
    for m in matrices:
        log("kconform selftest faults: " + faults.summary_line(m))
    log(f"kconform selftest faults: {'PASS' if code == EXIT_CLEAN else 'FAIL'} in {time.monotonic() - t0:.0f} s; "
        f"matrix in {os.path.relpath(out / 'fault-matrix.json')}")
    return code


def _cost(args, console: Console, log) -> int:
    doc = cost.measure(log)
    out = Path(args.output) if args.output else cost.DEFAULT_OUTPUT
    atomic_write(out, json.dumps(doc, indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(doc, indent=2))
        return EXIT_CLEAN
    t = Table(title="SMC round trips to EL3 per reclaim of N one-host-page ranges", title_justify="left")
    for col in ("PAGE_SIZE", "ranges", "path", "descs/call", "host calls", "SMCs to EL3",
                "most 4K pages in one call", "source"):
        t.add_column(col)
    for r in doc["rows"]:
        t.add_row(f"{r['page_size'] // 1024}K", str(r["ranges"]), r["path"], str(r["batch"] or "all"),
                  str(r["host_calls"]), str(r["smcs"]), str(r["max_pages_per_call"]), r["source"])
    console.print(t)
    log(f"kconform selftest cost: {out}")
    return EXIT_CLEAN
