"""`kconform gen`: regenerate the Z3 edge cases (corpora/z3/<abi>/*.kcs) with
kconform-gen (harness/gen), or check that the committed ones are current."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kconform import build
from kconform.errors import ToolError
from kconform.paths import CORPORA, build_dir

Z3_CORPUS = CORPORA / "z3"


def gen_binary(preset: str = "default") -> Path:
    return build_dir(preset) / "harness" / "gen" / "kconform-gen"


def generate(out: Path = Z3_CORPUS, abi: str = "all", check: bool = False, log=print) -> dict:
    """Runs kconform-gen; returns {"functions": [...], "summary": {...}, "differs": bool}."""
    build.build("default", targets=["kconform-gen"], log=log)
    binary = gen_binary()
    if not binary.exists():
        raise ToolError(f"{binary} was not built: is libz3-dev installed? (ci/packages.txt group 'build')")
    cmd = [str(binary), "--out", str(out), "--abi", abi] + (["--check"] if check else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise ToolError(f"kconform-gen failed ({' '.join(cmd)}):\n{r.stderr.strip()}")
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    summary = next((x for x in lines if x.get("summary")), {})
    return {"functions": [x for x in lines if not x.get("summary")], "summary": summary,
            "differs": r.returncode == 1, "stderr": r.stderr}


def cmd_gen(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    out = Path(args.out) if args.out else Z3_CORPUS
    res = generate(out, args.abi, args.check, log)
    if args.format == "json":
        print(json.dumps({k: v for k, v in res.items() if k != "stderr"}, indent=2))
    else:
        table = Table(title=f"Z3 edge cases ({out})", title_justify="left")
        for col in ("abi", "function", "conditions", "cases", "not isolable", "seconds"):
            table.add_column(col, overflow="fold")
        for f in res["functions"]:
            table.add_row(f["abi"], f["function"], str(f["conditions"]), str(f["cases"]),
                          str(len(f["not_isolable"])), f"{f['seconds']:.2f}")
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
