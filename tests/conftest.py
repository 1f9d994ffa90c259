"""Shared fixtures: the repository, the built engine, a temporary report root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "harness" / "driver"))
from kconform.core import skips  # noqa: E402

KCONFORM = REPO / "kconform"

# `run` minimises its new findings within a budget (commands/triage.py auto_triage);
# the suite's many runs that expect findings would each spend it: off here, and
# tests/test_triage.py turns it on with --triage-budget where it is the subject.
os.environ.setdefault("KCONFORM_TRIAGE_BUDGET", "0")

# In CI (.ci/run sets KCONFORM_CI=1) a missing dependency is a failure, never a
# skip: `./kconform test` installs every package group (ci/packages.txt) first, so
# a skip there means an install step is missing or broken and half the suite would
# go untested while CI is green. CI accepts only the skips of kconform.core.skips
# (one vocabulary for the C++ and the Python tests), whose reason starts with one
# of its prefixes: what the machine cannot change (no /dev/kvm: needs_kvm; the
# running kernel's behaviour: skip_for_kernel) and the nightly matrix (nightly).


def nightly(why: str):
    """Marks a test of the nightly matrix: skipped (accepted in CI too) unless
    KCONFORM_NIGHTLY=1."""
    return pytest.mark.skipif(os.environ.get("KCONFORM_NIGHTLY", "") in ("", "0"), reason=skips.NIGHTLY + why)


def is_nightly() -> bool:
    """KCONFORM_NIGHTLY=1: the whole long matrices (every mutant, every fault cell);
    otherwise (CI, a developer's run) a fixed slice of each."""
    return os.environ.get("KCONFORM_NIGHTLY", "") not in ("", "0")


def ci_mode() -> bool:
    return os.environ.get("KCONFORM_CI", "") not in ("", "0")


def skip_for_kernel(why: str) -> None:
    """Skips a test that does not apply to the running kernel (its behaviour, not a
    missing dependency): accepted in CI too."""
    pytest.skip(skips.KERNEL + why)


def skip_is_failure(reason: str) -> bool:
    """Whether a skip with this reason fails the test: in CI, any skip whose reason does
    not start with one of kconform.core.skips.ACCEPTED's prefixes."""
    return ci_mode() and skips.category(reason) is None


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


def reclaim2_on_stock(name: str) -> str:
    """A finding on every stock tree (FFA_MEM_RECLAIM2 has no handler there: the
    tests of triage and of the run summary need one), as scenario text named name."""
    return f"""kconform-scenario 1
abi ffa
name {name}
requires page_4k
version
rxtx_map tx=0x80000000 rx=0x80010000 pages=1
tx_mem_desc ranges=hex:000002800000000004000000
mem_share
tx_constituents offset=0 ranges=hex:000002800000000004000000
mem_reclaim2 handle=0 count=1 total_pages=4
mem_reclaim handle=0
"""


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


# Accepted in CI (skips.NO_KVM): the machine has no KVM to give, which no install step changes.
needs_kvm = pytest.mark.skipif(not have_kvm(), reason=skips.NO_KVM + "/dev/kvm is missing or not read-write "
                                                      "here: the host target cannot run")

KVMIO_CREATE_VM, KVMIO_CHECK_EXTENSION = 0xAE01, 0xAE03       # _IO(KVMIO, 0x01), _IO(KVMIO, 0x03)
KVM_CAP_GUEST_MEMFD, KVM_CAP_VM_TYPES = 234, 235               # include/uapi/linux/kvm.h


def host_gmem_missing() -> str | None:
    """Why the running kernel's KVM has no guest_memfd for the host target to test, or
    None (also without /dev/kvm: needs_kvm says that). Asked of the kernel here, with
    its own ioctls, not through the host target's probe: a probe that wrongly read 0
    cannot turn the host tests into skips. No guest_memfd is KVM_CAP_GUEST_MEMFD 0 on
    /dev/kvm and on a VM of every type KVM_CAP_VM_TYPES reports (a KVM without it,
    e.g. kvm-pvm, runs every gmem scenario as unsupported)."""
    import fcntl
    if not have_kvm():
        return None
    kvm = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    try:
        if fcntl.ioctl(kvm, KVMIO_CHECK_EXTENSION, KVM_CAP_GUEST_MEMFD) > 0:
            return None
        types = fcntl.ioctl(kvm, KVMIO_CHECK_EXTENSION, KVM_CAP_VM_TYPES) or 1   # 0: the default type only
        for vm_type in (t for t in range(32) if types >> t & 1):
            try:
                vm = fcntl.ioctl(kvm, KVMIO_CREATE_VM, vm_type)
            except OSError:  # a type this machine cannot create a VM of (SEV without firmware, ...)
                continue
            try:
                if fcntl.ioctl(vm, KVMIO_CHECK_EXTENSION, KVM_CAP_GUEST_MEMFD) > 0:
                    return None
            finally:
                os.close(vm)
    finally:
        os.close(kvm)
    return (f"{os.uname().release}: KVM has no guest_memfd (KVM_CAP_GUEST_MEMFD is 0 on /dev/kvm and on a "
            f"VM of each type in KVM_CAP_VM_TYPES {types:#x}): every gmem scenario is unsupported on the host")


_HOST_GMEM_MISSING = host_gmem_missing()
# The host target's tests that need guest_memfd itself: on a kernel whose KVM has
# none, a kernel skip (accepted in CI: the running kernel's capability).
needs_host_gmem = pytest.mark.skipif(_HOST_GMEM_MISSING is not None,
                                     reason=skips.KERNEL + (_HOST_GMEM_MISSING or ""))


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


def default_tree_missing() -> str | None:
    """Why the EL2 target's default kernel tree (trees.DEFAULT_TREE, Debian's 7.3) is
    neither in the cache nor downloadable here, or None. Only its fetch is asked
    (TreeError): a build from it that fails is the code's failure, never a skip."""
    from kconform.sources import tree_fetch, trees
    try:
        tree_fetch.fetch(trees.DEFAULT_TREE, progress=lambda m: None)
    except trees.TreeError as e:
        return f"{trees.DEFAULT_TREE} cannot be fetched here: {str(e).splitlines()[0] if str(e) else e!r}"
    return None


def kernel_build_missing() -> str | None:
    """Why a kernel cannot be built here (its Debian packages missing and no root to
    install them), or None."""
    from kconform.core import deps
    try:
        need = deps.missing(["kernel-build"])
    except FileNotFoundError as e:  # no dpkg-query: not a Debian system, nothing to ask
        return f"cannot tell which Debian packages are installed: {e}"
    if need and os.geteuid() != 0:
        return "kernel build packages missing: " + " ".join(need)
    return None


# Taken out of the environment at once, so a pytest a test starts (tests/test_ci_skips.py
# loads this conftest) never writes the count of its own few tests over ours.
_COLLECTED_FILE = os.environ.pop("KCONFORM_TEST_COLLECTED", None)


def pytest_collection_finish(session):
    """`kconform test` compares what ran (the JUnit file) with what was collected:
    the count goes to the file KCONFORM_TEST_COLLECTED named (commands/test.py)."""
    if _COLLECTED_FILE:
        Path(_COLLECTED_FILE).write_text(f"{len(session.items)}\n")
