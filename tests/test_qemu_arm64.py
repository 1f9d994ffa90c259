"""The arm64 stack's pieces that need no download (targets/qemu_arm64): the firmware's
make command and cache key, the partition's build commands, the QEMU command line
and memory layout, the initramfs entries, the console read on saved serial logs
(tests/data/qemu_arm64: the relevant lines of the probe's boots and of one
`qemu-arm64 check`), and the apt state of another architecture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, kconform

from kconform.core.errors import ToolError
from kconform.sources import debian_files, debian_kernels
from kconform.sources.debian import PrivateApt
from kconform.sources.kernel_image import Kernel, KernelError
from kconform.targets.qemu_arm64 import boot, console, firmware, initramfs, partition

DATA = REPO / "tests" / "data" / "qemu_arm64"
TREE = {"package": "arm-trusted-firmware", "package_version": "2.12.1+dfsg-1",
        "sha256": "0" * 64, "version": "2.12.1"}
TOOLS = {"cross_gcc": "aarch64-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0", "dtc": "Version: DTC 1.6.1"}


def read(name: str) -> str:
    return (DATA / name).read_text()


# --- firmware: command line and key -------------------------------------------

def test_make_command_builds_the_spmc_at_el3_with_our_partition_and_no_kernel():
    cmd = firmware.make_command(Path("/w/sp/sp.bin"), Path("/w/sp/sp_manifest.dts"), jobs=2)
    assert cmd[:2] == ["make", "-j2"] and cmd[-3:] == ["all", "fip", "qemu_fw.bios"]
    for opt in ("CROSS_COMPILE=aarch64-linux-gnu-", "PLAT=qemu", "SPD=spmd", "SPMC_AT_EL3=1",
                "SPMD_SPM_AT_SEL2=0", "QEMU_USE_GIC_DRIVER=QEMU_GICV3", "ARM_LINUX_KERNEL_AS_BL33=1",
                "BL32=/w/sp/sp.bin", "QEMU_TOS_FW_CONFIG_DTS=/w/sp/sp_manifest.dts", "LOG_LEVEL=50"):
        assert opt in cmd
    # The kernel is not in the FIP: BL31 enters where QEMU's loader puts the Image.
    assert not any(a.startswith("BL33=") for a in cmd)
    assert f"PRELOADED_BL33_BASE={firmware.KERNEL_BASE:#x}" in cmd
    assert firmware.KERNEL_BASE % (2 << 20) == 0


def _sp(tmp_path: Path, source: bytes = b"smc #0\n", manifest: bytes = b"/dts-v1/;\n") -> tuple[Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "sp.S").write_bytes(source)
    (tmp_path / "sp_manifest.dts").write_bytes(manifest)
    return tmp_path / "sp.S", tmp_path / "sp_manifest.dts"


def test_key_is_the_content_of_the_inputs_not_their_paths(tmp_path):
    a = firmware.firmware_key(firmware.key_inputs(TREE, *_sp(tmp_path / "a"), TOOLS))
    b = firmware.firmware_key(firmware.key_inputs(TREE, *_sp(tmp_path / "b"), TOOLS))
    assert a == b and len(a) == 20


@pytest.mark.parametrize("change", ["source", "manifest", "tree", "compiler"])
def test_key_changes_with_each_input(tmp_path, change):
    base = firmware.firmware_key(firmware.key_inputs(TREE, *_sp(tmp_path / "base"), TOOLS))
    tree, tools = dict(TREE), dict(TOOLS)
    sp = _sp(tmp_path / "other",
             source=b"smc #1\n" if change == "source" else b"smc #0\n",
             manifest=b"/dts-v1/; /{};\n" if change == "manifest" else b"/dts-v1/;\n")
    if change == "tree":
        tree["sha256"] = "1" * 64
    if change == "compiler":
        tools["cross_gcc"] = "aarch64-linux-gnu-gcc (Debian 14.2.0) 14.2.0"
    assert firmware.firmware_key(firmware.key_inputs(tree, *sp, tools)) != base


def test_cached_firmware_needs_its_key_and_every_output(tmp_path):
    (tmp_path / firmware.STAMP_NAME).write_text(json.dumps({"key": "k1"}))
    for name in firmware.OUTPUTS[:-1]:
        (tmp_path / name).write_bytes(b"x")
    assert firmware._cached(tmp_path, "k1") is None          # qemu_fw.bios missing
    (tmp_path / "qemu_fw.bios").write_bytes(b"x")
    assert firmware._cached(tmp_path, "k1").bios == tmp_path / "qemu_fw.bios"
    assert firmware._cached(tmp_path, "k2") is None          # another key


def test_partition_is_linked_at_bl32_base_and_cut_to_text():
    link, cut = partition.commands(partition.SP_SOURCE, Path("/o"))
    assert link[0] == "aarch64-linux-gnu-gcc" and "-Wl,-Ttext=0xe100000" in link
    assert cut == ["aarch64-linux-gnu-objcopy", "-O", "binary", "-j", ".text", "/o/sp.elf", "/o/sp.bin"]
    assert partition.SP_SOURCE.is_file() and partition.SP_MANIFEST.is_file()


# --- boot: command line and memory layout ----------------------------------------

def test_qemu_command_line():
    cmd = boot.qemu_command(Path("/f/qemu_fw.bios"), Path("/k/vmlinuz"), Path("/i/initrd.gz"), 12345)
    text = " ".join(cmd)
    assert cmd[0] == "qemu-system-aarch64"
    assert "-M virt,secure=on,virtualization=on,gic-version=3" in text
    assert "-cpu max,pauth-impdef=on" in text and "-bios /f/qemu_fw.bios" in text
    assert "-no-reboot" in cmd
    append = cmd[cmd.index("-append") + 1]
    assert "kvm-arm.mode=protected" in append and "initrd=0x48000000,12345" in append
    assert "loader,file=/k/vmlinuz,addr=0x40200000,force-raw=on" in cmd
    assert "loader,file=/i/initrd.gz,addr=0x48000000,force-raw=on" in cmd


def _image(path: Path, size: int, magic: bytes = b"ARM\x64") -> Path:
    head = bytearray(64)
    head[16:24] = size.to_bytes(8, "little")
    head[56:60] = magic
    path.write_bytes(bytes(head))
    return path


def test_layout_checks_the_arm64_image_header(tmp_path):
    boot.check_layout(_image(tmp_path / "ok", 60 << 20), 2 << 20)
    with pytest.raises(ToolError, match="past the initramfs at 0x48000000"):
        boot.check_layout(_image(tmp_path / "big", 200 << 20), 2 << 20)
    with pytest.raises(ToolError, match="not an arm64 kernel Image"):
        boot.check_layout(_image(tmp_path / "gz", 1 << 20, magic=b"\x1f\x8b\x08\x00"), 2 << 20)


# --- initramfs --------------------------------------------------------------------

def test_initramfs_holds_init_busybox_and_modules_in_order(tmp_path):
    mods = []
    for name in ("ffa-core.ko", "ffa-module.ko"):
        (tmp_path / name).write_bytes(name.encode())
        mods.append(tmp_path / name)
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"\x7fELF")
    kernel = Kernel(image=tmp_path / "vmlinuz", release="7.3.4+deb13-arm64", modules=tuple(mods), source="t")
    entries = {path: (data, mode) for path, data, mode in initramfs.files(kernel, busybox)}
    assert entries["init"][1] == 0o100755 and entries["init"][0].startswith(b"#!/bin/busybox sh")
    assert entries["bin/busybox"] == (b"\x7fELF", 0o100755)
    assert entries["kconform/modules/order"][0] == b"ffa-core.ko\nffa-module.ko\n"
    with pytest.raises(ToolError, match="no such file"):
        initramfs.files(kernel, tmp_path / "absent")


def test_init_script_prints_what_console_reads():
    text = initramfs.INIT_SCRIPT.read_text()
    assert "kconform-arm64: done, uptime" in text and "kconform/modules/order" in text
    assert "poweroff -f" in text


# --- console ------------------------------------------------------------------------

def test_check_boot_came_up():
    log = console.parse(read("check-boot.log"))
    assert log.problems() == []
    assert (log.pkvm_mode, log.ffa_firmware, log.ffa_driver, log.tfa_version) == ("hVHE", "1.2", "1.2", "v2.12.1")
    assert log.partition_ready and log.init_uptime == 6.12
    assert ("arm-ffa-1", "0x8001", "60b4434b-784b-a274-0245-e2ad86286840") in log.ffa_devices
    # pKVM's own FFA_VERSION(1.2) at init, then its RXTX_MAP of the proxy's buffers.
    assert log.smcs[0].regs[:2] == (0x84000063, 0x10002)
    assert any(s.regs[0] == 0xC4000066 for s in log.smcs)
    # TF-A logs its power-off at ERROR level: a TF-A line, not trouble.
    assert log.tfa_lines[-1] == "ERROR:   QEMU System Power off: with GPIO."
    assert log.tfa_trouble == ()


def test_probe_boot_lines_of_tfa_and_the_kernel():
    """The probe's own boot (its init and module, not ours): TF-A and the kernel read
    the same; its FFA_MEM_SHARE at v1.2 left TF-A's warning, and our /init's last line
    is not there."""
    log = console.parse(read("probe-boot-v1.2.log"))
    assert (log.pkvm_mode, log.ffa_firmware, log.tfa_version) == ("hVHE", "1.2", "v2.12.1")
    direct = [s for s in log.smcs if s.regs[0] == 0xC400006F]
    assert direct and direct[0].regs[1:3] == (0x8001, 0) and direct[0].regs[3:8] == (0x11, 0x22, 0x33, 0x44, 0x55)
    assert log.tfa_trouble == ("WARNING: spmc_ffa_mem_send: bad FF-A version.",)
    problems = log.problems()
    assert problems == ["TF-A: WARNING: spmc_ffa_mem_send: bad FF-A version.",
                        "our /init never printed its last line (the boot did not finish)"]


def test_probe_hang_is_trouble():
    log = console.parse(read("probe-hang-no-secondary-ep.log"))
    assert "WARNING: spmc_cpu_on_finish_handler: No secondary ep on core1" in log.tfa_trouble
    assert log.init_uptime is None and len(log.problems()) >= 2


def test_no_protected_mode_no_firmware_and_a_panic_are_each_named():
    text = "\n".join(line for line in read("check-boot.log").splitlines()
                     if "Protected hVHE" not in line and "Firmware version" not in line)
    text += "\n[    9.000000] Kernel panic - not syncing: Attempted to kill init!\n"
    problems = console.parse(text).problems()
    assert any("pKVM is not in protected mode" in p for p in problems)
    assert any("the FF-A driver found no firmware" in p for p in problems)
    assert any(p.startswith("kernel panic: Kernel panic - not syncing") for p in problems)
    assert len(problems) == 3


@pytest.mark.parametrize("cut", [
    # Two boots of 2026-12-03: BL31 on one CPU traced an SMC while the other
    # printed arm_ffa's line; the UART took bytes of both.
    "[    3.47VERBOSE: SPM(1): 0x85984000064 0x1 7] AR0x0 0x0 0x0 0x0 0x0 0x0\r\nM FF-A: Firmware version 1.2 found\r\n",
    "[    4.173VERBOSE: SPM(0): 0x84054000065 0x0 0x] AR0M FF-A: 0x0 0x0 0x0 0x0 0x0\r\n Firmware version 1.2 found\r\n",
])
def test_firmware_version_is_found_when_tfa_bytes_cut_into_the_kernels_line(cut):
    text = ("[    3.476987] ARM FF-A: Driver version 1.2\r\n"
            "VERBOSE: SPM(1): 0x84000064 0x2 0x0 0x0 0x0 0x0 0x0 0x0\r\n" + cut +
            "[    3.482329] ARM FF-A: Notification setup failed -95, not enabled\r\n")
    log = console.parse(text)
    assert log.ffa_firmware == "1.2" and log.ffa_driver == "1.2"
    assert not any("found no firmware" in p for p in log.problems())


def test_nvhe_mode_and_crlf():
    log = console.parse("[    1.0] kvm [1]: Protected nVHE mode initialized successfully\r\n"
                        "NOTICE:  BL31: v2.12.1(release):\r\n")
    assert log.pkvm_mode == "nVHE" and log.tfa_version == "v2.12.1"


def test_boot_result_names_timeout_and_qemu_status():
    log = console.parse(read("check-boot.log"))
    r = boot.BootResult(log, Path("/c.log"), [], None, None, timed_out=True)
    assert any("did not finish within its timeout" in p for p in r.problems())
    r = boot.BootResult(log, Path("/c.log"), [], 8.0, 3, timed_out=False)
    assert r.problems() == ["QEMU exited with status 3"]
    assert boot.summary(boot.BootResult(log, Path("/c.log"), [], 8.0, 0, False))["problems"] == []


# --- sources: another architecture ----------------------------------------------

def test_private_apt_for_arm64(tmp_path):
    apt = PrivateApt(tmp_path, ("trixie-backports",), "http://mirror.example/debian", arch="arm64")
    assert apt.sources.name == "sources-arm64-trixie-backports.list"
    assert apt.sources.read_text().startswith("deb [arch=arm64 signed-by=")
    assert "-oAPT::Architecture=arm64" in apt.opts and "-oAPT::Architectures::=arm64" in apt.opts
    with pytest.raises(ValueError):
        PrivateApt(tmp_path, ("trixie",), "http://mirror.example/debian", kind="deb-src", arch="arm64")


def test_unknown_kernel_architecture(tmp_path):
    with pytest.raises(KernelError, match="no Debian kernel architecture 'riscv64'"):
        debian_kernels.fetch("debian:7.3", cache_dir=tmp_path, arch="riscv64")
    assert debian_kernels.WANTED_MODULES["arm64"] == ("ffa-module",)


def test_package_file_cache_needs_the_same_request(tmp_path):
    want = debian_files.PackageFile("busybox-static", "arm64", ("trixie",), "usr/bin/busybox")
    assert debian_files.cached(want, tmp_path) is None
    want.folder(tmp_path).mkdir(parents=True)
    want.path(tmp_path).write_bytes(b"\x7fELF")
    (want.folder(tmp_path) / debian_files.STAMP_NAME).write_text(json.dumps(
        {"package": "busybox-static", "arch": "arm64", "member": "usr/bin/busybox", "version": "1"}))
    assert debian_files.cached(want, tmp_path) == tmp_path / "debs" / "busybox-static-arm64" / "busybox"
    other = debian_files.PackageFile("busybox-static", "arm64", ("trixie",), "bin/busybox")
    assert debian_files.cached(other, tmp_path) is None


# --- the command ---------------------------------------------------------------------

def test_check_needs_an_action_and_a_positive_timeout(tmp_path):
    r = kconform("qemu-arm64")
    assert r.returncode == 2 and "ACTION" in r.stderr
    r = kconform("qemu-arm64", "check", "--timeout", "0", "--out", str(tmp_path))
    assert r.returncode == 2 and "flag --timeout: 0.0 is not a positive number of seconds" in r.stderr
