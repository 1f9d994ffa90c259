"""Where things are: the repository, build trees, the cache, report folders."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from kconform.core.errors import ToolError

REPO = Path(__file__).resolve().parents[4]
CORPORA = REPO / "corpora"
DEFAULT_BASELINE = REPO / "ci" / "known-findings.json"
PACKAGES_FILE = REPO / "ci" / "packages.txt"


def build_dir(preset: str = "default") -> Path:
    return REPO / "build" / preset


def runner_binary(preset: str = "default") -> Path:
    return build_dir(preset) / "harness" / "runner" / "kconform-runner"


def cache_dir() -> Path:
    env = os.environ.get("KCONFORM_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kconform"


def reports_dir() -> Path:
    return REPO / "reports" / "out"


def new_report_dir(root: Path) -> Path:
    """A fresh folder per run; an existing one is never reused or overwritten."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        d = root / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise ToolError(f"{root}: cannot make a new report folder")
