"""What the serial console of one arm64 boot says about the stack: TF-A's lines
(and the FF-A calls that reached EL3), whether pKVM came up in protected mode, the
FF-A version the arm_ffa driver found, what our /init saw, and kernel crashes.

TF-A and the kernel share one UART (ttyAMA0), so lines of either may appear
anywhere in the log; each is recognised by its own prefix.
"""

from __future__ import annotations

import dataclasses
import re

from kconform.targets.qemu.boot import console_events

# TF-A's log prefixes (include/common/debug.h: one per LOG_LEVEL).
TFA_LINE = re.compile(r"^(NOTICE|INFO|WARNING|ERROR|VERBOSE):\s+(.*)$")
TFA_VERSION = re.compile(r"^NOTICE:\s+BL31: (v\S+?)(?:\(|:|$)")
# services/std_svc/spmd/spmd_main.c (VERBOSE): every SMC from the normal world that
# the SPMD handles, "SPM(cpu): x0 x1 ... x7".
TFA_SMC = re.compile(r"^VERBOSE:\s+SPM\((\d+)\): (0x[0-9a-f]+(?: 0x[0-9a-f]+)*)\s*$")
# Lines TF-A prints at WARNING or ERROR level that are not trouble: the qemu platform
# logs its own power-off at ERROR (plat/qemu/common/qemu_pm.c).
TFA_BENIGN = (re.compile(r"^ERROR:\s+QEMU System Power off: with GPIO\.$"),)
PARTITION_READY = "Secure Partition initialized."
# arch/arm64/kvm/arm.c: "Protected hVHE mode initialized successfully" or "Protected
# nVHE mode ...", after "CPU features: detected: Protected KVM".
PKVM = re.compile(r"kvm \[\d+\]: Protected (hVHE|nVHE) mode initialized successfully")
# Found anywhere in a line, only its tail ("ARM FF-A: " is pr_fmt's): TF-A on
# another CPU writes to the same UART byte by byte, and its bytes land inside the
# kernel's line ("[    3.47VERBOSE: SPM(1): 0x85984000064 0x1 7] AR0x0 ...", then
# "M FF-A: Firmware version 1.2 found"; or "... 0x] AR0M FF-A: 0x0 ...", then
# " Firmware version 1.2 found"). Cut worse, the line is also in our /init's
# "kconform-arm64: dmesg: ..." (the kernel's log, read back after boot).
FFA_FIRMWARE = re.compile(r"Firmware version (\d+\.\d+) found")
FFA_DRIVER = re.compile(r"ARM FF-A: Driver version (\d+\.\d+)")
# What targets/qemu_arm64/initramfs/init prints.
INIT_PREFIX = "kconform-arm64: "
INIT_DONE = re.compile(r"kconform-arm64: done, uptime ([0-9.]+) s")
INIT_FFA_DEVICE = re.compile(r"kconform-arm64: ffa device (\S+) id=(\S*) uuid=(\S*)")
KERNEL_TIME = re.compile(r"^\[\s*\d+\.\d+\] ")


@dataclasses.dataclass(frozen=True)
class Smc:
    """An FF-A call seen at EL3 (BL31's trace): the CPU and x0..x7."""
    cpu: int
    regs: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class StackLog:
    tfa_version: str | None              # "v2.12.1"
    tfa_lines: tuple[str, ...]           # NOTICE/INFO/WARNING/ERROR lines, in order
    tfa_trouble: tuple[str, ...]         # WARNING/ERROR lines but the benign ones
    smcs: tuple[Smc, ...]                # FF-A calls that reached EL3
    partition_ready: bool                # the SPMC initialised our secure partition
    pkvm_mode: str | None                # "hVHE", "nVHE" or None: pKVM not in protected mode
    ffa_firmware: str | None             # the FF-A version arm_ffa found ("1.2")
    ffa_driver: str | None               # arm_ffa's own version
    ffa_devices: tuple[tuple[str, str, str], ...]   # (name, partition id, uuid) per init
    init_lines: tuple[str, ...]          # our /init's lines
    init_uptime: float | None            # kernel uptime when /init finished; None: it never did
    kernel_events: tuple[tuple[str, str], ...]      # (kind, line): panic, oops, warning...

    def problems(self) -> list[str]:
        """Why the stack did not come up as it should; empty when it did."""
        out = []
        if self.tfa_version is None:
            out.append("TF-A's BL31 never printed its version (the firmware did not reach BL31)")
        if not self.partition_ready:
            out.append(f"TF-A never printed '{PARTITION_READY}' (the SPMC did not start our partition)")
        out += [f"TF-A: {line}" for line in self.tfa_trouble]
        if self.pkvm_mode is None:
            out.append("no 'Protected hVHE/nVHE mode initialized successfully': pKVM is not in protected mode")
        if self.ffa_firmware is None:
            out.append("no 'ARM FF-A: Firmware version X.Y found': the FF-A driver found no firmware")
        out += [f"kernel {kind}: {line}" for kind, line in self.kernel_events]
        if self.init_uptime is None:
            out.append("our /init never printed its last line (the boot did not finish)")
        return out


def _is_benign(line: str) -> bool:
    return any(p.match(line) for p in TFA_BENIGN)


def parse(text: str) -> StackLog:
    tfa, trouble, smcs, init = [], [], [], []
    tfa_version = pkvm = ffa_fw = ffa_drv = uptime = None
    devices = []
    ready = False
    for raw in text.splitlines():
        line = raw.rstrip()
        m = TFA_LINE.match(line)
        if m:
            s = TFA_SMC.match(line)
            if s:
                smcs.append(Smc(int(s.group(1)), tuple(int(x, 16) for x in s.group(2).split())))
                continue
            if m.group(1) == "VERBOSE":
                continue
            tfa.append(line)
            if m.group(1) in ("WARNING", "ERROR") and not _is_benign(line):
                trouble.append(line)
            v = TFA_VERSION.match(line)
            if v and tfa_version is None:
                tfa_version = v.group(1)
            ready = ready or m.group(2).strip() == PARTITION_READY
            continue
        if (m := PKVM.search(line)) and pkvm is None:
            pkvm = m.group(1)
        if (m := FFA_FIRMWARE.search(line)) and ffa_fw is None:
            ffa_fw = m.group(1)
        if (m := FFA_DRIVER.search(line)) and ffa_drv is None:
            ffa_drv = m.group(1)
        at = line.find(INIT_PREFIX)
        if at >= 0 and not KERNEL_TIME.match(line):
            init.append(line[at:])
            if m := INIT_FFA_DEVICE.search(line):
                devices.append((m.group(1), m.group(2), m.group(3)))
            if m := INIT_DONE.search(line):
                uptime = float(m.group(1))
    # Every panic, oops, sanitizer report, lockdep splat and kernel WARNING is trouble here:
    # the check boot runs nothing of ours that could excuse one.
    events = tuple((kind, line) for kind, line, _ in console_events(text))
    return StackLog(tfa_version, tuple(tfa), tuple(trouble), tuple(smcs), ready, pkvm, ffa_fw,
                    ffa_drv, tuple(devices), tuple(init), uptime, events)
