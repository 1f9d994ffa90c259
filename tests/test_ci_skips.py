"""In CI (KCONFORM_CI=1, set by .ci/run) a skip is a failure unless its reason starts
with one of kconform.core.skips.ACCEPTED's prefixes: the running kernel's behaviour
(conftest.skip_for_kernel), no /dev/kvm (conftest.needs_kvm), the nightly matrix
(conftest.nightly); a reason that only contains those words elsewhere is a failure
too. Outside CI a skip is a skip."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

PROBE = '''
import pytest
from conftest import needs_kvm, nightly, skip_for_kernel

@nightly("an hour of fuzzing")
def test_of_the_nightly_matrix():
    pass

def test_needs_a_missing_package():
    pytest.skip("qemu-system-x86_64 not installed")

@pytest.mark.skipif(True, reason="cpio not installed")
def test_marked_skip():
    pass

def test_not_for_this_kernel():
    skip_for_kernel("this kernel has guest_memfd write()")

# needs_kvm's own reason, as on a machine without /dev/kvm (this one may have it)
@pytest.mark.skipif(True, reason=needs_kvm.kwargs["reason"])
def test_marked_no_kvm():
    pass

def test_no_kvm():
    pytest.skip("no /dev/kvm: the host target cannot run")

# the accepted words, but not where a reason starts: a dependency skip all the same
def test_words_inside_no_kvm():
    pytest.skip("qemu-system-x86_64 not installed, so the guest has no /dev/kvm: nothing runs")

def test_words_inside_kernel():
    pytest.skip("cpio not installed (the initramfs is not for this kernel: any)")

@pytest.mark.skipif(True, reason="clang missing; nightly (KCONFORM_NIGHTLY=1): would build")
def test_words_inside_nightly():
    pass

def test_runs():
    assert True
'''


def _outcomes(tmp_path, ci: str) -> dict[str, str]:
    """Each probe test's outcome as JUnit records it (what `kconform test` counts):
    passed, failed (a failure or an error), skipped; and "_rc" pytest's exit status."""
    import xml.etree.ElementTree as ET
    (tmp_path / "test_probe.py").write_text(PROBE)
    junit = tmp_path / "junit.xml"
    env = dict(os.environ, KCONFORM_CI=ci, KCONFORM_NIGHTLY="", PYTHONPATH=str(REPO / "tests"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-q", "-p", "no:cacheprovider",
                        f"--junitxml={junit}", "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    got = {"_rc": str(r.returncode)}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name").removeprefix("test_")
        kinds = {c.tag for c in case}
        got[name] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed")
        for c in case:
            got.setdefault("_text", "")
            got["_text"] += (c.get("message") or "") + (c.text or "")
    return got


def test_in_ci_a_dependency_skip_fails_and_a_kernel_skip_does_not(tmp_path):
    got = _outcomes(tmp_path, "1")
    assert got["needs_a_missing_package"] == "failed", got
    assert got["marked_skip"] == "failed", got
    assert got["runs"] == "passed", got
    assert got["not_for_this_kernel"] == "skipped", got
    assert got["of_the_nightly_matrix"] == "skipped", got
    assert got["marked_no_kvm"] == "skipped" and got["no_kvm"] == "skipped", got
    assert [got[k] for k in ("words_inside_no_kvm", "words_inside_kernel", "words_inside_nightly")] == \
        ["failed", "failed", "failed"], got
    assert "a skip is a failure" in got["_text"] and got["_rc"] == "1", got


def test_needs_kvm_says_no_kvm_first():
    from conftest import needs_kvm
    from kconform.core import skips
    reason = needs_kvm.kwargs["reason"]
    assert reason.startswith(skips.NO_KVM) and skips.category(reason) == "no /dev/kvm", reason


def test_outside_ci_a_skip_is_a_skip(tmp_path):
    got = _outcomes(tmp_path, "")
    assert [got[k] for k in ("needs_a_missing_package", "marked_skip", "not_for_this_kernel", "runs")] == \
        ["skipped", "skipped", "skipped", "passed"], got
    assert [got[k] for k in ("marked_no_kvm", "no_kvm", "words_inside_no_kvm", "words_inside_kernel",
                             "words_inside_nightly")] == ["skipped"] * 5, got
    assert got["_rc"] == "0", got
