"""What every kill matrix shares: the mutant patches of a folder, a mutant's result,
the matrix table and the exit status.

Each of our own reference implementations has single-fault mutants beside it:
  ffa   targets/el2/reclaim2/mutants  RECLAIM2 in pKVM's EL2 proxy, run in-process
        (reclaim2.py)
  gmem  targets/qemu/write/mutants    guest_memfd write(), built into a kernel and
        run inside QEMU (write.py)
and stock 7.3 ffa.c has single-line mutants of its own (family "stock"):
  ffa   targets/el2/stock-mutants     pKVM's proxy checks, run in-process on the
        directed and Z3 corpora against the stock tree's findings (stock.py);
        matrix "ffa-stock" in kill-matrix.json
and every condition and bound check of a tree's ffa.c has generated mutants (family
"generated"): mutagen.py makes them from the AST, generated.py runs them like the
stock family against the unmutated tree; matrix "ffa-generated". Its survivors are
reviewed in targets/el2/generated-mutants/survivors.json (equivalent, out-of-scope
or gap, each with its reason): a reviewed survivor counts like a waiting one.
Controls come first in each (the stock code and the reference implementation must
behave as expected, else the matrix means nothing: exit 2). A mutant is killed by
any violation or crash finding. Exit 0 when every mutant is killed and the controls
hold, 1 when one survives (a hole in the suite: add a scenario or a rule, never drop
the mutant), 2 when kconform could not run. The matrices go to
reports/out/<time>/kill-matrix.json: {"format": 2, "abis": {"ffa": {...}, "gmem": {...}}}.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kconform.core.errors import EXIT_CLEAN, EXIT_TOOL_ERROR, EXIT_VIOLATIONS, ToolError

ABIS = ("ffa", "gmem")
MATRIX_FORMAT = 2


@dataclass
class MutantResult:
    mutant: str
    status: str = "survived"        # killed | survived | error | waiting (stock family: waiting.json)
    kind: str = ""                  # violation | FATAL | CRASH | QEMU
    rules: list[str] = field(default_factory=list)
    first: str = ""
    time_to_kill: float | None = None   # seconds of suite run until the first kill was seen
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    error: str = ""
    runs: list[dict] = field(default_factory=list)


def record_kill(m: MutantResult, runs) -> None:
    """Marks m killed by the first of its page-size runs (in order: 4K, then 16K) that is
    not clean: its kind, first finding and time to kill (a kill at 16K counts the 4K run
    before it), and every rule any dead run broke."""
    dead = [s for s in runs if s.verdict != "clean"]
    if not dead:
        return
    m.status = "killed"
    first = dead[0]
    m.kind, m.first = first.verdict, f"{first.page_size // 1024}K {first.first}"
    before = sum(s.seconds for s in runs if s.page_size < first.page_size)
    m.time_to_kill = round(before + (first.seconds_to_kill or 0), 3)
    for s in dead:
        for x in s.rules:
            if x not in m.rules:
                m.rules.append(x)


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
    wait = f", {matrix['waiting']} waiting" if matrix.get("waiting") else ""
    t = Table(title=f"{title}: {matrix['killed']}/{matrix['total']} killed{wait}", title_justify="left")
    for col in ("mutant", "status", "kind", "rule(s)", "first kill", "time to kill (s)", "build (s)"):
        t.add_column(col, overflow="fold")
    for m in results:
        rules = m["rules"]
        t.add_row(m["mutant"], m["status"].upper() if m["status"] not in ("killed", "waiting") else m["status"],
                  m["kind"],
                  ", ".join(rules[:4]) + (" …" if len(rules) > 4 else "") or m["error"],
                  m["first"], "" if m["time_to_kill"] is None else f"{m['time_to_kill']:.2f}",
                  f"{m['build_seconds']:.0f}")
    console.print(t)


def exit_code(matrices: dict) -> int:
    if any(not c["ok"] for m in matrices.values() for c in m["controls"].values()):
        return EXIT_TOOL_ERROR
    if any(x["status"] == "error" for m in matrices.values() for x in m["mutants"]):
        return EXIT_TOOL_ERROR
    # a mutant listed as waiting on a part of the suite not built yet may survive (selftest/stock.py),
    # and so may a generated one whose survival is reviewed (selftest/generated.py)
    return EXIT_CLEAN if all(m["killed"] + m.get("waiting", 0) + m.get("reviewed", 0) == m["total"]
                             for m in matrices.values()) else EXIT_VIOLATIONS
