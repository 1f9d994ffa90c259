"""The initramfs of the arm64 check boot: Debian's arm64 busybox-static, the
kernel's FF-A modules (decompressed, with their load order) and our /init
(targets/qemu_arm64/initramfs/init), as a deterministic cpio newc archive cached
by the hash of its content (the archive format is targets/qemu's)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.core.paths import REPO
from kconform.sources import debian_files
from kconform.sources.kernel_image import Kernel
from kconform.targets.qemu.initramfs import cache_archive, module_files

INIT_SCRIPT = REPO / "targets" / "qemu_arm64" / "initramfs" / "init"
# busybox-static for arm64 is in trixie main (bookworm's would do as well; trixie is the
# kernel's own release). The static binary is usr/bin/busybox in the package.
BUSYBOX = debian_files.PackageFile("busybox-static", "arm64", ("trixie",), "usr/bin/busybox")
MODULES_FOLDER = "kconform/modules"   # the init script reads MODULES_FOLDER/order


def files(kernel: Kernel, busybox: Path, init: Path = INIT_SCRIPT) -> list[tuple[str, bytes, int]]:
    """The archive's (path, data, mode) entries."""
    for p in (init, busybox):
        if not p.is_file():
            raise ToolError(f"{p}: no such file (the qemu-arm64 initramfs needs it)")
    out = [("init", init.read_bytes(), 0o100755),
           ("bin/busybox", busybox.read_bytes(), 0o100755)]
    return out + module_files(kernel, MODULES_FOLDER)


def build(kernel: Kernel, cache: Path, log: Callable[[str], None]) -> Path:
    """The gzipped initramfs for kernel, from the cache or written now."""
    busybox = debian_files.fetch(BUSYBOX, cache, progress=log)
    return cache_archive(files(kernel, busybox), cache, "arm64-", "qemu-arm64", log)
