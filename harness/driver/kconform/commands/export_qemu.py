"""Running an exported C reproducer inside a kernel booted in QEMU (`kconform
export --as c --qemu`): gcc -static, then an initramfs of busybox, the kernel's
KVM modules and the reproducer (no kconform agent), booted as the qemu target
boots its guests; the reproducer's TAP output comes back on the console and its
exit status in a last line `kconform-export: exit N`."""

from __future__ import annotations

import gzip
import re
import subprocess
import tempfile
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.targets.qemu.boot import CPU, QEMU
from kconform.targets.qemu.initramfs import BUSYBOX, module_files, newc_archive

INIT = """#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
for m in $(/bin/busybox cat /modules/order); do /bin/busybox insmod /modules/$m 2>/dev/null; done
echo "kconform-export: begin"
/repro
echo "kconform-export: exit $?"
/bin/busybox sync
/bin/busybox poweroff -f
"""
TIMEOUT = 600.0


def compile_static(c_file: Path, out: Path) -> Path:
    r = subprocess.run(["gcc", "-static", "-O2", "-Wall", "-o", str(out), str(c_file)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"{c_file}: gcc -static failed: {r.stderr.strip()[-2000:]}")
    return out


def run_in_guest(binary: Path, kernel_path: str | None, accel: str, log) -> tuple[int, str]:
    """(the reproducer's exit status, its output) inside the guest."""
    from kconform.targets.qemu.guest import resolve_kernel
    if not BUSYBOX.is_file():
        raise ToolError(f"{BUSYBOX} not found: install the Debian package busybox-static")
    kernel = resolve_kernel(kernel_path, log)
    files = [("init", INIT.encode(), 0o100755), ("bin/busybox", BUSYBOX.read_bytes(), 0o100755),
             ("repro", binary.read_bytes(), 0o100755)]
    files += module_files(kernel, "modules")
    with tempfile.TemporaryDirectory(prefix="kconform-export-") as tmp:
        initrd = Path(tmp) / "initrd.cpio.gz"
        with open(initrd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            gz.write(newc_archive(files))
        cmd = [QEMU, "-accel", accel, "-cpu", CPU if accel == "tcg" else "host", "-m", "1024",
               "-smp", str(kernel.vcpus), "-nographic", "-monitor", "none", "-no-reboot", "-nic", "none",
               "-serial", "stdio", "-kernel", str(kernel.image), "-initrd", str(initrd),
               "-append", "console=ttyS0 loglevel=3 panic=-1"]
        log(f"kconform: booting {kernel.release} in QEMU ({accel}) to run {binary.name}")
        out = _console_until_exit_line(cmd)
    m = re.search(r"kconform-export: exit (\d+)", out)
    if not m:
        raise ToolError("QEMU: the guest ended without the reproducer's exit line; console tail:\n"
                        + "\n".join(out.splitlines()[-20:]))
    begin = out.find("kconform-export: begin")
    return int(m.group(1)), out[begin + len("kconform-export: begin\n"):m.start()]


def _console_until_exit_line(cmd: list[str]) -> str:
    """QEMU's console until the reproducer's exit line, then QEMU is ended: a kernel
    without ACPI (the small kernel `run --target qemu --build` makes) does not power
    off on `poweroff -f`, it halts; the line is what counts. Bounded by TIMEOUT."""
    import threading
    from kconform.core import procs
    lines: list[str] = []
    with procs.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                     text=True, errors="replace") as p:
        timer = threading.Timer(TIMEOUT, p.kill)
        timer.start()
        try:
            assert p.stdout is not None
            for line in p.stdout:
                lines.append(line.replace("\r", ""))
                if re.search(r"kconform-export: exit \d+", line):
                    break
        finally:
            timer.cancel()
            if p.poll() is None:
                p.kill()
            p.wait()
    out = "".join(lines)
    if not re.search(r"kconform-export: exit \d+", out) and p.returncode == -9:
        raise ToolError(f"QEMU: the guest did not finish within {TIMEOUT:g} s; console tail:\n"
                        + "\n".join(out.splitlines()[-20:]))
    return out
