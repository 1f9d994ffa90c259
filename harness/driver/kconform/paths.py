"""Where things are: the repository, build trees, the cache, report folders."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CORPORA = REPO / "corpora"
DEFAULT_BASELINE = REPO / "ci" / "known-findings.json"
PACKAGES_FILE = REPO / "ci" / "packages.txt"


def build_dir(preset: str = "default") -> Path:
    return REPO / "build" / preset


def runner_binary(preset: str = "default") -> Path:
    return build_dir(preset) / "harness" / "kconform-runner"


def cache_dir() -> Path:
    env = os.environ.get("KCONFORM_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kconform"


def reports_dir() -> Path:
    return REPO / "reports" / "out"
