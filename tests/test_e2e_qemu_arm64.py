"""End to end on the whole arm64 stack: `./kconform qemu-arm64 check` builds TF-A
with the EL3 SPMC and our secure partition (or takes it from the cache), fetches
Debian's arm64 7.3 kernel and boots both once under qemu-system-aarch64 (TCG).
pKVM must come up in protected mode and the kernel's FF-A driver must find TF-A's
FF-A v1.2 through pKVM's proxy. On a fresh 2-core machine: downloads (~100 MB),
the firmware build (~15 s) and one boot (~10 s)."""

import json

import pytest

from conftest import kconform

pytestmark = pytest.mark.network  # Debian's arm64 kernel, busybox and TF-A source package


def test_the_stack_comes_up_with_pkvm_protected_and_ffa_12(tmp_path):
    r = kconform("qemu-arm64", "check", "--out", str(tmp_path), timeout=290)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pKVM protected mode: yes (" in r.stdout
    assert "FF-A firmware version: 1.2" in r.stdout
    assert "qemu-arm64 check: the stack came up" in r.stdout
    (folder,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert not (folder / "INCOMPLETE").exists()
    result = json.loads((folder / "result.json").read_text())
    assert result["pkvm_protected"] in ("hVHE", "nVHE") and result["ffa_firmware_version"] == "1.2"
    assert result["partition_ready"] and result["problems"] == [] and result["qemu_exit"] == 0
    assert 0 < result["boot_seconds"] < 120
    console = (folder / "console.log").read_text(errors="replace")
    assert "Firmware version 1.2 found" in console  # its "ARM FF-A: " may be cut by TF-A's bytes (console.py)
    assert "Protected KVM" in console
