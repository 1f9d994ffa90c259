"""`kconform scenario check|convert`: kconform-runner's own check and convert, on files."""

from __future__ import annotations

import subprocess

from rich.console import Console

from kconform.core.paths import runner_binary
from kconform.engine.build import build_preset


def cmd_scenario(args, console: Console) -> int:
    build_preset("default", log=lambda m: console.print(m, markup=False))
    cmd = [str(runner_binary()), args.scenario_command]
    if args.scenario_command == "convert":
        cmd += ["--to", args.to] + (["--out-dir", args.out_dir] if args.out_dir else [])
    r = subprocess.run(cmd + args.files)  # the runner prints its own output and errors
    return 0 if r.returncode == 0 else 2
