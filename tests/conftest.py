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

# `run` minimises its new findings within a budget (commands/triage.py auto_triage);
# the suite's many runs that expect findings would each spend it: off here, and
# tests/test_triage.py turns it on with --triage-budget where it is the subject.
os.environ.setdefault("KCONFORM_TRIAGE_BUDGET", "0")

# In CI (.ci/run sets KCONFORM_CI=1) a missing dependency is a failure, never a
# skip: `./kconform test` installs every package group (ci/packages.txt) first, so
# a skip there means an install step is missing or broken and half the suite would
# go untested while CI is green. The one kind of skip CI accepts is a test that does
# not apply to the running kernel's behaviour: its reason starts with KERNEL_SKIP
# (skip_for_kernel below).
KERNEL_SKIP = "not for this kernel: "
# The other: a test of the nightly matrix (minutes of build or fuzzing), run when
# KCONFORM_NIGHTLY=1; CI runs a bounded slice of the same thing elsewhere.
NIGHTLY_SKIP = "nightly (KCONFORM_NIGHTLY=1): "


def nightly(why: str):
    """Marks a test of the nightly matrix: skipped (accepted in CI too) unless
    KCONFORM_NIGHTLY=1."""
    return pytest.mark.skipif(os.environ.get("KCONFORM_NIGHTLY", "") in ("", "0"), reason=NIGHTLY_SKIP + why)


def is_nightly() -> bool:
    """KCONFORM_NIGHTLY=1: the whole long matrices (every mutant, every fault cell);
    otherwise (CI, a developer's run) a fixed slice of each."""
    return os.environ.get("KCONFORM_NIGHTLY", "") not in ("", "0")


def ci_mode() -> bool:
    return os.environ.get("KCONFORM_CI", "") not in ("", "0")


def skip_for_kernel(why: str) -> None:
    """Skips a test that does not apply to the running kernel (its behaviour, not a
    missing dependency): accepted in CI too."""
    pytest.skip(KERNEL_SKIP + why)


def skip_is_failure(reason: str) -> bool:
    """Whether a skip with this reason fails the test: in CI, any skip but a kernel one."""
    return ci_mode() and KERNEL_SKIP not in reason and NIGHTLY_SKIP not in reason


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and not hasattr(rep, "wasxfail"):
        reason = str(rep.longrepr[2]) if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if skip_is_failure(reason):
            rep.outcome = "failed"
            rep.longrepr = (f"KCONFORM_CI is set: a skip is a failure (a dependency is missing or "
                            f"could not be installed; ./kconform test installs ci/packages.txt): {reason}")


def kconform(*args: str, cwd: Path = REPO, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(KCONFORM), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def run_report(out_dir: Path, *args: str, timeout: int = 1800) -> tuple[int, dict]:
    """`kconform run ARGS --format json` with its report folder and JSON in out_dir:
    (exit code, the JSON document); any exit but 0 or 1 fails the test."""
    import json
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "report.json"
    r = kconform("run", *args, "--format", "json", "--output", str(out), "--report-dir", str(out_dir / "reports"),
                 timeout=timeout)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(out.read_text())


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


def kill_matrix(root: Path, abi: str, key: str | None = None) -> dict:
    """The one kill-matrix.json a `selftest mutants --abi ABI --report-dir root` wrote: the
    matrix named key (default ABI; an ABI's other families are "ABI-FAMILY", e.g. ffa-stock)."""
    import json
    found = list(root.rglob("kill-matrix.json"))
    assert len(found) == 1, found
    doc = json.loads(found[0].read_text())
    assert doc["format"] == 2 and doc["abis"] and all(k.split("-")[0] == abi for k in doc["abis"]), list(doc["abis"])
    return doc["abis"][key or abi]


def have_kvm() -> bool:
    return os.path.exists("/dev/kvm") and os.access("/dev/kvm", os.R_OK | os.W_OK)


needs_kvm = pytest.mark.skipif(not have_kvm(), reason="/dev/kvm is missing or not accessible: "
                                                      "the host target cannot run here")


# The known 6.18 finding (ci/known-findings.json): a bind past 2^63, in the binary-able
# text form a fuzz input has (named "fuzz", as every mutated input is).
BIND_PAST_2_63 = """kconform-scenario 1
abi gmem
name fuzz
requires gmem user_memory2
create_vm
create_gmem vm=0 size=0x4000 flags=0
bind vm=0 slot=0 gpa=0 size=0x1000 gmem=0 gmem_offset=0x7ffffffffffff000
"""


def kernel_build_missing() -> str | None:
    """Why a kernel cannot be built here (its Debian packages missing and no root to
    install them), or None."""
    from kconform.core import deps
    try:
        need = deps.missing(["kernel-build"])
    except Exception as e:  # noqa: BLE001
        return str(e)
    if need and os.geteuid() != 0:
        return "kernel build packages missing: " + " ".join(need)
    return None
