"""Shared fixtures: the repository, the built engine, a temporary report root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "harness" / "driver"))

KCONFORM = REPO / "kconform"


def kconform(*args: str, cwd: Path = REPO, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(KCONFORM), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def engine():
    from kconform.core.paths import runner_binary
    from kconform.engine.build import build_preset
    from kconform.engine.runner import Engine
    build_preset("default", log=lambda m: None)
    return Engine(runner_binary())


@pytest.fixture(scope="session")
def rules(engine):
    return engine.rules()


def kill_matrix(root: Path, abi: str) -> dict:
    """The one kill-matrix.json a `selftest mutants --abi ABI --report-dir root` wrote: ABI's matrix."""
    import json
    found = list(root.rglob("kill-matrix.json"))
    assert len(found) == 1, found
    doc = json.loads(found[0].read_text())
    assert doc["format"] == 2 and list(doc["abis"]) == [abi]
    return doc["abis"][abi]


def have_kvm() -> bool:
    return os.path.exists("/dev/kvm") and os.access("/dev/kvm", os.R_OK | os.W_OK)


needs_kvm = pytest.mark.skipif(not have_kvm(), reason="/dev/kvm is missing or not accessible: "
                                                      "the host target cannot run here")
