"""A bootable kernel: its image, release and the modules to load, and the check of a
user's own bzImage (`--kernel PATH`)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.sources.debian import sha256_file


class KernelError(ToolError):
    """A kernel could not be fetched, built or used; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A bootable kernel and the modules to load before the suite runs."""
    image: Path                  # vmlinuz / bzImage
    release: str                 # e.g. "7.3.4+deb13-amd64", or "" when unknown (user's bzImage)
    modules: tuple[Path, ...]    # .ko or .ko.xz in load order; empty: KVM is built in
    source: str                  # "debian:7.3" or the user's path
    stamp: dict = dataclasses.field(default_factory=dict)
    # vCPUs to boot it with: 2 for the kernels we build (targets/qemu/kernel.config has
    # CONFIG_SMP, so concurrent groups race on two CPUs); 1 for packaged and user kernels,
    # whose boot under TCG with two vCPUs is not reliable (Debian's 7.3 oopsed on an int3
    # while live-patching its own text: a cross-modifying-code hazard of multi-threaded
    # TCG, not the code under test).
    vcpus: int = 1

    def key(self) -> str:
        """What identifies this kernel's content (for the initramfs cache key)."""
        return json.dumps({"image": sha256_file(self.image),
                           "modules": [sha256_file(m) for m in self.modules]}, sort_keys=True)


def user_kernel(path: str | os.PathLike) -> Kernel:
    """A bzImage given with --kernel PATH; KVM must be built in (no modules are loaded)."""
    p = Path(path)
    if not p.is_file():
        raise KernelError(f"--kernel {p}: no such file (give a bzImage, e.g. arch/x86/boot/bzImage)")
    with p.open("rb") as f:
        head = f.read(0x240)
    # x86 boot protocol: "HdrS" at 0x202 marks a bzImage.
    if len(head) < 0x206 or head[0x202:0x206] != b"HdrS":
        raise KernelError(f"--kernel {p}: not an x86 bzImage (no 'HdrS' boot header at 0x202)")
    return Kernel(image=p.resolve(), release=_bzimage_release(head, p), modules=(), source=str(p))


def _bzimage_release(head: bytes, p: Path) -> str:
    # The kernel_version field (0x20e) points at "release (builder) #..." + 0x200.
    off = int.from_bytes(head[0x20e:0x210], "little")
    if not off:
        return ""
    with p.open("rb") as f:
        f.seek(off + 0x200)
        s = f.read(128).split(b"\0", 1)[0].decode(errors="replace")
    return s.split(" ", 1)[0]
