"""`kconform rules`: every rule with its ID, statement and citation."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from kconform.core.paths import runner_binary
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine


def cmd_rules(args, console: Console) -> int:
    build_preset("default", log=lambda m: console.print(m, markup=False))
    rules = [r for r in Engine(runner_binary()).rules() if not args.abi or r["abi"] == args.abi]
    if args.format == "json":
        print(json.dumps(rules, indent=2))
        return 0
    table = Table(title=f"kconform rules ({len(rules)})", title_justify="left")
    for col in ("rule", "statement", "citation"):
        table.add_column(col, overflow="fold")
    for r in rules:
        table.add_row(r["id"], r["summary"], r["citation"])
    console.print(table)
    return 0
