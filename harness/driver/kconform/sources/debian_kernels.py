"""Debian's packaged kernels, to boot in QEMU.

A Debian kernel is two packages of trixie-backports: `linux-binary-<abi>-<arch>`
(the vmlinuz; on arm64 an uncompressed Image) and `linux-modules-<abi>-<arch>`
(modules as .ko.xz). Both are downloaded through the private apt state (debian.py)
for that architecture, checked against the signed index's SHA256, and unpacked into
<cache>/kernels/debian-<abi>-<arch>/: `vmlinuz`, `modules/<name>.ko.xz` (only the
modules of WANTED_MODULES[arch] and what they depend on) and a stamp
(.kconform-kernel.json) naming the package versions, hashes and the module load order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources.debian import PrivateApt, Progress, cache_errors, system_mirror
from kconform.sources.kernel_image import Kernel, KernelError

# "debian:X.Y" -> (Debian kernel ABI name, suites). Package names verified with
# `apt-cache policy linux-binary-7.3.4+deb13-amd64 linux-modules-7.3.4+deb13-amd64`
# through the private apt state (both 7.3.4-1~bpo13+1 in trixie-backports).
DEBIAN_KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "7.3": ("7.3.4+deb13", ("trixie-backports",)),
}
DEFAULT_KERNEL = "debian:7.3"
ARCH = "amd64"  # the default architecture: the x86 QEMU target's
# Per architecture, the modules the target loads, plus their dependencies (found with
# `modinfo -F depends`), in dependency order. amd64: what gives a guest /dev/kvm on an
# (emulated) AMD CPU. arm64: the FF-A driver (CONFIG_ARM_FFA_TRANSPORT=m in Debian:
# ffa-core.ko and ffa-module.ko), which pKVM's FF-A proxy answers at EL2.
WANTED_MODULES: dict[str, tuple[str, ...]] = {
    "amd64": ("kvm-amd",),
    "arm64": ("ffa-module",),
}
STAMP_NAME = ".kconform-kernel.json"
STAMP_FORMAT = 1
NOT_FOUND_HINT = ("Debian may have moved to a newer ABI; update debian_kernels.DEBIAN_KERNELS "
                  "(see `apt-cache search linux-binary-` in that suite)")


def parse_spec(spec: str) -> tuple[str, str, tuple[str, ...]]:
    known = ", ".join(f"debian:{s}" for s in DEBIAN_KERNELS)
    m = re.fullmatch(r"debian:(\d+\.\d+)", spec.strip())
    if not m or m.group(1) not in DEBIAN_KERNELS:
        raise KernelError(f"unknown kernel spec {spec!r}: expected one of {known}, "
                          f"or give your own bzImage with --kernel PATH")
    abi, suites = DEBIAN_KERNELS[m.group(1)]
    return m.group(1), abi, suites


def _read_stamp(d: Path) -> dict:
    try:
        return json.loads((d / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return {}


def _from_dir(d: Path, spec: str) -> Kernel | None:
    st = _read_stamp(d)
    if st.get("format") != STAMP_FORMAT or not (d / "vmlinuz").is_file():
        return None
    mods = tuple(d / "modules" / m for m in st.get("load_order", []))
    if not all(m.is_file() for m in mods):
        return None
    return Kernel(image=d / "vmlinuz", release=st.get("release", ""), modules=mods,
                  source=spec, stamp=st)


def fetch(spec: str = DEFAULT_KERNEL, cache_dir: str | os.PathLike | None = None,
          progress: Progress = print, refresh: bool = False, arch: str = ARCH,
          flavour: str | None = None) -> Kernel:
    """Downloads Debian's kernel `spec` for arch (vmlinuz + the modules of
    WANTED_MODULES[arch]) into the cache; cached kernels are returned without touching
    the network unless refresh is set. flavour is the packages' suffix
    (`linux-binary-<abi>-<flavour>`: "arm64-16k" for arm64's 16K-page kernel); the
    architecture's own name by default."""
    series, abi, suites = parse_spec(spec)
    if arch not in WANTED_MODULES:
        raise KernelError(f"kernel {spec}: no Debian kernel architecture {arch!r} known to kconform "
                          f"(expected one of {', '.join(WANTED_MODULES)})")
    flavour = flavour or arch
    if flavour != arch and not flavour.startswith(arch + "-"):
        raise KernelError(f"kernel {spec}: flavour {flavour!r} is not one of architecture {arch!r}")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = cache / "kernels" / f"debian-{abi}-{flavour}"
    with cache_errors(cache, f"kernel {spec}", KernelError):
        if not refresh:
            have = _from_dir(final, spec)
            if have is not None:
                progress(f"kernel {spec}: {final} (cached)")
                return have
        cache.mkdir(parents=True, exist_ok=True)
        return _download(spec, abi, suites, arch, cache, final, progress, flavour)


def module_depends(ko: Path) -> list[str]:
    """Module names a .ko(.xz) depends on (`modinfo -F depends`, from kmod)."""
    if not shutil.which("modinfo"):
        raise KernelError("modinfo not found: install the Debian package kmod")
    r = subprocess.run(["modinfo", "-F", "depends", str(ko)], capture_output=True, text=True)
    if r.returncode != 0:
        raise KernelError(f"modinfo {ko} failed: {r.stderr.strip()}")
    return [d for d in r.stdout.strip().split(",") if d]


def load_order(root: Path, wanted: tuple[str, ...]) -> list[Path]:
    """The .ko.xz files of wanted and their dependencies under root, dependencies first."""
    index: dict[str, Path] = {}
    for ko in root.rglob("*.ko*"):
        name = re.sub(r"\.ko(\.xz|\.zst|\.gz)?$", "", ko.name)
        index[name.replace("-", "_")] = ko
    order: list[Path] = []
    seen: set[str] = set()

    def visit(name: str, chain: tuple[str, ...]) -> None:
        key = name.replace("-", "_")
        if key in seen:
            return
        if key not in index:
            raise KernelError(f"module {name} (needed by {' -> '.join(chain) or 'kconform'}) "
                              f"is not in the modules package")
        seen.add(key)
        for dep in module_depends(index[key]):
            visit(dep, chain + (name,))
        order.append(index[key])

    for w in wanted:
        visit(w, ())
    return order


def _download(spec, abi, suites, arch: str, cache: Path, final: Path, progress: Progress,
              flavour: str | None = None) -> Kernel:
    flavour = flavour or arch
    mirror = system_mirror(error=KernelError)
    apt = PrivateApt(cache, suites, mirror, KernelError, arch=arch)
    apt.update(progress, f"kernel {spec} ({flavour})")
    binary = apt.show(f"linux-binary-{abi}-{flavour}", NOT_FOUND_HINT)
    modules = apt.show(f"linux-modules-{abi}-{flavour}", NOT_FOUND_HINT)
    bdeb = apt.download(binary, progress, "kernel")
    mdeb = apt.download(modules, progress, "kernel")

    (cache / "kernels").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=cache / "kernels"))
    try:
        unpack = tmp / "unpack"
        for deb in (bdeb, mdeb):
            r = subprocess.run(["dpkg-deb", "-x", str(deb), str(unpack)], capture_output=True, text=True)
            if r.returncode != 0:
                raise KernelError(f"dpkg-deb -x {deb.name} failed: {r.stderr.strip()}")
        # 7.3's linux-binary ships usr/lib/modules/<release>/vmlinuz; older
        # linux-image packages ship boot/vmlinuz-<release>.
        images = sorted((unpack / "usr" / "lib" / "modules").glob("*/vmlinuz"))
        release = images[0].parent.name if len(images) == 1 else ""
        if not images:
            images = sorted((unpack / "boot").glob("vmlinuz-*"))
            release = images[0].name.removeprefix("vmlinuz-") if len(images) == 1 else ""
        if len(images) != 1:
            raise KernelError(f"{bdeb.name}: expected one usr/lib/modules/*/vmlinuz or "
                              f"boot/vmlinuz-*, found {len(images)}")
        mod_root = unpack / "usr" / "lib" / "modules" / release
        if not (mod_root / "kernel").is_dir():
            mod_root = unpack / "lib" / "modules" / release
        if not mod_root.is_dir():
            raise KernelError(f"{mdeb.name}: no lib/modules/{release}/ folder")
        order = load_order(mod_root, WANTED_MODULES[arch])
        out = tmp / "kernel"
        (out / "modules").mkdir(parents=True)
        shutil.copy2(images[0], out / "vmlinuz")
        for ko in order:
            shutil.copy2(ko, out / "modules" / ko.name)
        (out / STAMP_NAME).write_text(json.dumps({
            "format": STAMP_FORMAT, "spec": spec, "arch": arch, "flavour": flavour, "release": release, "mirror": mirror,
            "suites": list(suites), "binary": binary.info(), "modules": modules.info(),
            "load_order": [ko.name for ko in order],
            "module_paths": [str(ko.relative_to(mod_root)) for ko in order]}, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for deb in (bdeb, mdeb):
        deb.unlink()  # the stamp keeps their hashes
    k = _from_dir(final, spec)
    assert k is not None
    progress(f"kernel {spec}: {final} ({k.release}; modules {', '.join(m.name for m in k.modules)})")
    return k


def cached(cache_dir: str | os.PathLike | None = None) -> list[Kernel]:
    root = (Path(cache_dir) if cache_dir else default_cache_dir()) / "kernels"
    out = []
    for d in sorted(root.glob("debian-*")) if root.is_dir() else []:
        k = _from_dir(d, _read_stamp(d).get("spec", "?"))
        if k:
            out.append(k)
    return out
