"""Configuring and building the C++ engine with the CMake presets."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kconform import deps
from kconform.errors import ToolError
from kconform.paths import REPO, build_dir


def _run(cmd: list[str], what: str) -> None:
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).splitlines()[-40:])
        raise ToolError(f"{what} failed ({' '.join(cmd)}):\n{tail}")


def build(preset: str = "default", targets: list[str] | None = None, log=print) -> Path:
    """Builds (incrementally) and returns the build folder of a preset."""
    deps.ensure(["build"], log)
    out = build_dir(preset)
    if not (out / "build.ninja").exists():
        log(f"kconform: configuring the {preset} build in {out.relative_to(REPO)}")
        _run(["cmake", "--preset", preset], f"configuring preset {preset}")
    cmd = ["cmake", "--build", "--preset", preset]
    if targets:
        cmd += ["--target", *targets]
    _run(cmd, f"building preset {preset}")
    return out
