"""The guest's initramfs: busybox-static, the static guest agent, the kernel's KVM
modules and the packed scenarios, as a deterministic cpio newc archive cached by
the hash of its content."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.core.paths import REPO
from kconform.sources.kernel_image import Kernel

INIT_SCRIPT = REPO / "targets" / "qemu" / "initramfs" / "init"
BUSYBOX = Path("/bin/busybox")


def _newc_entry(name: str, data: bytes, mode: int, ino: int) -> bytes:
    nb = name.encode() + b"\0"
    hdr = "070701" + "".join(f"{v:08x}" for v in (
        ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
    out = hdr.encode() + nb
    out += b"\0" * (-len(out) % 4) + data
    return out + b"\0" * (-len(out) % 4)


def newc_archive(files: list[tuple[str, bytes, int]]) -> bytes:
    """A cpio newc archive (what the kernel unpacks) of (path, data, mode) entries,
    parent folders included; deterministic (no times, fixed inode numbers)."""
    dirs: set[str] = set()
    for path, _, _ in files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    out = b""
    ino = 1
    for d in sorted(dirs):
        out += _newc_entry(d, b"", 0o040755, ino)
        ino += 1
    for path, data, mode in sorted(files):
        out += _newc_entry(path, data, mode, ino)
        ino += 1
    return out + _newc_entry("TRAILER!!!", b"", 0, 0)


def _module_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    if path.suffix == ".xz":  # the guest's finit_module gets plain .ko: decompress here
        import lzma
        return lzma.decompress(raw)
    return raw


def module_files(kernel: Kernel, folder: str) -> list[tuple[str, bytes, int]]:
    """The kernel's KVM modules (decompressed) as initramfs entries under folder, and
    folder/order: their names in load order, for the init script's insmod loop."""
    files, order = [], []
    for m in kernel.modules:
        name = re.sub(r"\.xz$", "", m.name)
        files.append((f"{folder}/{name}", _module_bytes(m), 0o100644))
        order.append(name)
    files.append((f"{folder}/order", "".join(n + "\n" for n in order).encode(), 0o100644))
    return files


def build_initramfs(kernel: Kernel, agent: Path, pack_dir: Path, cache: Path,
                    log: Callable[[str], None]) -> Path:
    """The initramfs for kernel + these scenarios, cached by the hash of its content."""
    if not BUSYBOX.is_file():
        raise ToolError(f"{BUSYBOX} not found: install the Debian package busybox-static")
    if not agent.is_file():
        raise ToolError(f"{agent}: the guest agent is not built (./kconform build)")
    files = [("init", INIT_SCRIPT.read_bytes(), 0o100755),
             ("bin/busybox", BUSYBOX.read_bytes(), 0o100755),
             ("kconform/agent", agent.read_bytes(), 0o100755)]
    files += module_files(kernel, "kconform/modules")
    for f in sorted(pack_dir.glob("*.kcsb")):
        files.append((f"kconform/scenarios/{f.name}", f.read_bytes(), 0o100644))
    return cache_archive(files, cache, "", "qemu", log)


def cache_archive(files: list[tuple[str, bytes, int]], cache: Path, prefix: str, who: str,
                  log: Callable[[str], None]) -> Path:
    """files as a gzipped newc archive in <cache>/initramfs/<prefix><hash of its content>.cpio.gz,
    written (atomically) unless it is there already."""
    archive = newc_archive(files)
    digest = hashlib.sha256(archive).hexdigest()[:24]
    out = cache / "initramfs" / f"{prefix}{digest}.cpio.gz"
    if out.is_file():
        log(f"kconform: {who}: initramfs {out} (cached)")
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(archive)
    tmp.rename(out)
    log(f"kconform: {who}: initramfs {out} ({out.stat().st_size} bytes, {len(files)} files)")
    return out
