"""One boot of the arm64 stack under qemu-system-aarch64 (TCG): TF-A from -bios,
the kernel Image and the initramfs put in RAM by QEMU's loader device, the kernel in
pKVM protected mode; bounded by a timeout, QEMU in its own process group and killed
whatever happens (targets/qemu/boot.py's QemuProcess). Returns the console's verdict
(console.py) and the boot time.

Memory map (virt, RAM from 0x40000000): the DTB that QEMU writes at the start of RAM
(TF-A's BL2 adds the PSCI node to it, BL31 hands its address to the kernel in x0),
the kernel Image at firmware.KERNEL_BASE, the initramfs at INITRD_BASE, found by the
kernel through `initrd=ADDR,SIZE` (with a firmware boot QEMU does not place -initrd).
`-kernel` is given too, only so that QEMU writes -append into the DTB's bootargs; with
-bios QEMU hands it to the firmware through fw_cfg and does not load it itself.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.sources.kernel_image import Kernel
from kconform.targets.qemu.boot import QemuProcess
from kconform.targets.qemu_arm64 import console
from kconform.targets.qemu_arm64.firmware import KERNEL_BASE, Firmware
from kconform.targets.qemu_arm64.toolchain import QEMU

Log = Callable[[str], None]

MACHINE = "virt,secure=on,virtualization=on,gic-version=3"   # EL3 and EL2, GICv3 (TF-A's QEMU_GICV3)
CPU = "max,pauth-impdef=on"     # pauth-impdef: QEMU's own pointer-auth hash, much faster under TCG
VCPUS = 2                       # a secondary core runs the partition's secondary entry (sp.S)
MEMORY_MB = 1024
INITRD_BASE = 0x48000000
BOOT_TIMEOUT = 180.0            # QEMU start -> our /init's last line
EXIT_GRACE = 30.0               # /init done -> QEMU gone (PSCI SYSTEM_OFF)
POLL = 0.1
# The kernel's command line: protected KVM; pr_info lines (arm_ffa's version lines) on
# the console; a panic reboots at once, which -no-reboot turns into QEMU's exit.
KERNEL_ARGS = "console=ttyAMA0 kvm-arm.mode=protected loglevel=7 panic=-1 rdinit=/init"
ARM64_IMAGE_MAGIC = b"ARM\x64"  # Documentation/arch/arm64/booting.rst: the Image header


@dataclasses.dataclass(frozen=True)
class BootResult:
    log: console.StackLog
    console_path: Path
    command: list[str]
    seconds: float | None        # QEMU start -> /init's last line; None if it never came
    exit_code: int | None        # QEMU's; None: killed at the timeout
    timed_out: bool

    def problems(self) -> list[str]:
        out = self.log.problems()
        if self.timed_out:
            out.append(f"the boot did not finish within its timeout (QEMU killed); console: {self.console_path}")
        elif self.exit_code is None:
            out.append(f"QEMU did not exit within {EXIT_GRACE:.0f} s of /init's power-off (killed)")
        elif self.exit_code != 0:
            out.append(f"QEMU exited with status {self.exit_code}")
        return out


def image_size(image: Path) -> int:
    """The kernel's image_size (bytes of memory it occupies from its base, BSS included),
    from the arm64 Image header; a ToolError if image is not an arm64 Image."""
    with image.open("rb") as f:
        head = f.read(64)
    if len(head) < 64 or head[56:60] != ARM64_IMAGE_MAGIC:
        raise ToolError(f"{image}: not an arm64 kernel Image (no 'ARM\\x64' magic at byte 56); "
                        f"a compressed vmlinuz.gz or an EFI zboot image cannot be loaded raw")
    return int.from_bytes(head[16:24], "little")


def check_layout(kernel_image: Path, initrd_size: int) -> None:
    """The kernel ends below the initramfs, which ends inside RAM."""
    end = KERNEL_BASE + image_size(kernel_image)
    if end > INITRD_BASE:
        raise ToolError(f"{kernel_image}: its image_size reaches {end:#x}, past the initramfs at "
                        f"{INITRD_BASE:#x} (targets/qemu_arm64/boot.py INITRD_BASE)")
    if INITRD_BASE + initrd_size > 0x40000000 + MEMORY_MB * 2**20 - 64 * 2**20:
        raise ToolError(f"initramfs of {initrd_size} bytes does not fit below the end of RAM "
                        f"({MEMORY_MB} MiB, boot.py MEMORY_MB)")


def qemu_command(bios: Path, kernel_image: Path, initrd: Path, initrd_size: int) -> list[str]:
    return [QEMU, "-M", MACHINE, "-cpu", CPU, "-smp", str(VCPUS), "-m", str(MEMORY_MB),
            "-nographic", "-monitor", "none", "-no-reboot", "-nic", "none", "-serial", "stdio",
            "-bios", str(bios), "-kernel", str(kernel_image),
            "-append", f"{KERNEL_ARGS} initrd={INITRD_BASE:#x},{initrd_size}",
            "-device", f"loader,file={kernel_image},addr={KERNEL_BASE:#x},force-raw=on",
            "-device", f"loader,file={initrd},addr={INITRD_BASE:#x},force-raw=on"]


def boot(firmware: Firmware, kernel: Kernel, initrd: Path, work: Path, log: Log,
         timeout: float = BOOT_TIMEOUT) -> BootResult:
    """One boot; its console, command and verdict in work/."""
    size = initrd.stat().st_size
    check_layout(kernel.image, size)
    cmd = qemu_command(firmware.bios, kernel.image, initrd, size)
    (work / "qemu.cmd").write_text(shlex.join(cmd) + "\n")
    path = work / "console.log"
    log(f"kconform: qemu-arm64: booting {kernel.release or kernel.image} (timeout {timeout:.0f} s)")
    started = time.monotonic()
    done_at = None
    timed_out = False
    with QemuProcess(cmd, path) as q:
        while True:
            now = time.monotonic()
            if done_at is None and console.INIT_DONE.search(path.read_text(errors="replace")):
                done_at = now
            if q.proc.poll() is not None:
                break
            if done_at is not None and now - done_at > EXIT_GRACE:
                break  # /init finished but the power-off did not end QEMU: killed below
            if now - started > timeout:
                timed_out = done_at is None
                break
            time.sleep(POLL)
        exit_code = q.proc.returncode
    text = path.read_text(errors="replace")
    if done_at is None and console.INIT_DONE.search(text):
        done_at = time.monotonic()
    if exit_code not in (0, None) and "Booting Trusted Firmware" not in text:
        tail = "\n".join(text.strip().splitlines()[-10:])
        raise ToolError(f"{QEMU} exited with status {exit_code} before the firmware printed a line "
                        f"(command in {work / 'qemu.cmd'}):\n{tail}")
    result = BootResult(console.parse(text), path, cmd,
                        None if done_at is None else round(done_at - started, 1), exit_code, timed_out)
    (work / "result.json").write_text(json.dumps(summary(result), indent=2) + "\n")
    return result


def summary(result: BootResult) -> dict:
    """The result as JSON (work/result.json)."""
    s = result.log
    return {"pkvm_protected": s.pkvm_mode, "ffa_firmware_version": s.ffa_firmware,
            "ffa_driver_version": s.ffa_driver, "tfa_version": s.tfa_version,
            "partition_ready": s.partition_ready, "ffa_devices": [list(d) for d in s.ffa_devices],
            "smcs_at_el3": len(s.smcs), "boot_seconds": result.seconds,
            "init_uptime": s.init_uptime, "qemu_exit": result.exit_code,
            "timed_out": result.timed_out, "problems": result.problems(),
            "console": str(result.console_path)}
