"""`kconform build`: build the engine of a CMake preset (incremental)."""

from __future__ import annotations

from rich.console import Console

from kconform.engine.build import build_preset


def cmd_build(args, console: Console) -> int:
    out = build_preset(args.preset, log=lambda m: console.print(m, markup=False),
                       spmc_tree=args.spmc_tree)
    console.print(f"kconform: built {out}", markup=False)
    return 0
