"""`kconform selftest mutants`: the suite's mutation self-test, one kill matrix per ABI.

Each of our own reference implementations has single-fault mutants beside it:
  ffa   targets/el2/reclaim2/mutants  RECLAIM2 in pKVM's EL2 proxy, run in-process
        (selftest_reclaim2.py)
  gmem  targets/qemu/write/mutants    guest_memfd write(), built into a kernel and
        run inside QEMU (selftest_write.py)
Controls come first in each (the stock code and the reference implementation must
behave as expected, else the matrix means nothing: exit 2). A mutant is killed by
any violation or crash finding. Exit 0 when every mutant is killed and the controls
hold, 1 when one survives (a hole in the suite: add a scenario or a rule, never drop
the mutant), 2 when kconform could not run. The matrices go to
reports/out/<time>/kill-matrix.json: {"format": 2, "abis": {"ffa": {...}, "gmem": {...}}}.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kconform.errors import EXIT_CLEAN, EXIT_TOOL_ERROR, EXIT_VIOLATIONS, ToolError
from kconform.paths import reports_dir

ABIS = ("ffa", "gmem")
MATRIX_FORMAT = 2


@dataclass
class MutantResult:
    mutant: str
    status: str = "survived"        # killed | survived | error
    kind: str = ""                  # violation | FATAL | CRASH | QEMU
    rules: list[str] = field(default_factory=list)
    first: str = ""
    time_to_kill: float | None = None   # seconds of suite run until the first kill was seen
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    error: str = ""
    runs: list[dict] = field(default_factory=list)


def mutant_patches(folder: Path, only: list[str] | None, flag: str = "--only") -> list[Path]:
    """NN-name.patch files of folder, or those `only` names (numbers or names; flag names
    the option they came from in the error)."""
    found = sorted(folder.glob("[0-9][0-9]-*.patch"))
    if not found:
        raise ToolError(f"{folder}: no mutants (NN-name.patch)")
    if only:
        want = set(only)
        found = [p for p in found if p.name[:2] in want or p.stem in want]
        missing = want - {p.name[:2] for p in found} - {p.stem for p in found}
        if missing:
            raise ToolError(f"flag {flag}: no mutant {', '.join(sorted(missing))} in {folder}")
    return found


def print_matrix(console: Console, title: str, matrix: dict) -> None:
    results = matrix["mutants"]
    t = Table(title=f"{title}: {matrix['killed']}/{matrix['total']} killed", title_justify="left")
    for col in ("mutant", "status", "kind", "rule(s)", "first kill", "time to kill (s)", "build (s)"):
        t.add_column(col, overflow="fold")
    for m in results:
        rules = m["rules"]
        t.add_row(m["mutant"], m["status"].upper() if m["status"] != "killed" else "killed", m["kind"],
                  ", ".join(rules[:4]) + (" …" if len(rules) > 4 else "") or m["error"],
                  m["first"], "" if m["time_to_kill"] is None else f"{m['time_to_kill']:.2f}",
                  f"{m['build_seconds']:.0f}")
    console.print(t)


def exit_code(matrices: dict) -> int:
    if any(not c["ok"] for m in matrices.values() for c in m["controls"].values()):
        return EXIT_TOOL_ERROR
    if any(x["status"] == "error" for m in matrices.values() for x in m["mutants"]):
        return EXIT_TOOL_ERROR
    return EXIT_CLEAN if all(m["killed"] == m["total"] for m in matrices.values()) else EXIT_VIOLATIONS


def cmd_selftest(args, console: Console) -> int:
    log = lambda m: console.print(m, markup=False, highlight=False)  # noqa: E731
    if args.selftest_command == "cost":
        from kconform.selftest_reclaim2 import cmd_cost
        return cmd_cost(args, console)
    if args.selftest_command != "mutants":
        raise ToolError(f"unknown selftest {args.selftest_command}")
    abis = list(ABIS) if args.abi == "all" else [args.abi]
    if args.only and len(abis) > 1:
        raise ToolError("flag --only: mutant numbers repeat across ABIs; give --abi ffa or --abi gmem too")
    from kconform.run import new_report_dir
    out = new_report_dir(Path(args.report_dir) if args.report_dir else reports_dir())
    t0 = time.monotonic()
    matrices: dict[str, dict] = {}
    titles = {"ffa": "RECLAIM2 kill matrix (EL2 proxy, in-process)",
              "gmem": "guest_memfd write() kill matrix (inside QEMU)"}
    for abi in abis:
        if abi == "ffa":
            from kconform.selftest_reclaim2 import matrix
        else:
            from kconform.selftest_write import matrix
        matrices[abi] = matrix(args, out, log)
        # written after each ABI, so an interrupted run keeps what it found
        (out / "kill-matrix.json").write_text(json.dumps(
            {"format": MATRIX_FORMAT, "abis": matrices}, indent=2) + "\n")
        if args.format == "table":
            if all(c["ok"] for c in matrices[abi]["controls"].values()):
                print_matrix(console, titles[abi], matrices[abi])
            for name, c in matrices[abi]["controls"].items():
                log(f"kconform selftest {abi}: control {name}: {'ok' if c['ok'] else 'FAILED'}: {c['expect']}"
                    + ("" if c["ok"] else f" (got {c.get('got', '')})"))
    code = exit_code(matrices)
    if args.format == "json":
        print(json.dumps({"format": MATRIX_FORMAT, "abis": matrices}, indent=2))
    else:
        summary = "; ".join(f"{a}: {m['killed']}/{m['total']} killed" for a, m in matrices.items())
        log(f"kconform selftest: {summary} in {time.monotonic() - t0:.0f} s; "
            f"matrix in {os.path.relpath(out / 'kill-matrix.json')}")
        if code == EXIT_TOOL_ERROR:
            log("kconform selftest: a control failed or a mutant could not be built/run: the matrix is not complete")
    return code
