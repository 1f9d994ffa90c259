"""`kconform gen`: regenerate the Z3 edge cases (corpora/z3/<abi>/*.kcs) with
kconform-gen (harness/gen), or check that the committed ones are current."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kconform.engine.gen import Z3_CORPUS, generate


def cmd_gen(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    out = Path(args.out) if args.out else Z3_CORPUS
    res = generate(out, args.abi, args.check, log)
    if args.format == "json":
        print(json.dumps({k: v for k, v in res.items() if k != "stderr"}, indent=2))
    else:
        table = Table(title=f"Z3 edge cases ({out})", title_justify="left")
        for col in ("abi", "function", "conditions", "cases", "not isolable", "unreachable", "seconds"):
            table.add_column(col, overflow="fold")
        for f in res["functions"]:
            table.add_row(f["abi"], f["function"], str(f["conditions"]), str(f["cases"]),
                          str(len(f["not_isolable"])), str(len(f.get("unreachable", []))),
                          f"{f['seconds']:.2f}")
        console.print(table)
        s = res["summary"]
        log(f"kconform gen: {s.get('cases', 0)} cases from {s.get('functions', 0)} functions in "
            f"{s.get('seconds', 0):.1f} s (Z3 {s.get('z3', '?')})"
            + ("; checked, nothing written" if args.check else f"; written to {out}"))
    if res["differs"]:
        print(res["stderr"].strip())
        print("kconform gen: the committed cases are out of date: run ./kconform gen")
        return 1
    return 0
