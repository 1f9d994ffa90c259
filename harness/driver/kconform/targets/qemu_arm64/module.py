"""Our FF-A agent module (targets/qemu_arm64/module/kcffa.c) built against Debian's
headers of the kernel it loads into, at run time, cached by content.

Debian's arm64 7.3 kernel (`-arm64`) was built with gcc-14 on trixie; this machine is
bookworm. The build uses Debian's own packages only, downloaded (never installed)
through the private apt state: `linux-headers-<abi>-arm64`, `linux-headers-<abi>-common`
(arm64 index), the amd64 `linux-kbuild-<abi>` (host tools) and trixie's amd64 `libc6`
(unpacked only), with bookworm's `gcc-aarch64-linux-gnu`. Four quirks (the probe,
/work/verify/qemu-probe/REPORT.md problems 7-9) are handled in the prepared tree:
gcc-12 lacks `-fmin-function-alignment=N` (a wrapper passes `-falign-functions=N`),
trixie's modpost needs glibc 2.38 (run through trixie's loader), the headers' Makefile
names /usr/src (rewritten to the unpacked path), and the BTF step needs pahole (the
headers' vmlinux is renamed, so kbuild skips BTF).

The 16K kernel (`-arm64-16k`) is the same with `linux-headers-<abi>-arm64-16k`.

Cache: <cache>/kmod/hdr-<abi>-<versions hash>/ (the prepared headers, with a stamp) and
<cache>/kmod/kcffa-<key>/kcffa.ko, key = hash of the module's sources, the package
versions and the cross compiler's version; the make command and log next to it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.core.paths import REPO
from kconform.sources.debian import PrivateApt, cache_errors, system_mirror
from kconform.targets.qemu_arm64.toolchain import CROSS_COMPILE, version_line

Log = Callable[[str], None]

MODULE_SRC = REPO / "targets" / "qemu_arm64" / "module"
SOURCES = ("kcffa.c", "kcffa_uapi.h", "Kbuild")
ABI = "7.3.4+deb13"          # Debian's kernel ABI name (the default arm64 kernel's)
FLAVOUR = "arm64"
SUITES = ("trixie-backports", "trixie")
STAMP = ".kconform-hdr.json"

GCC_WRAP = """#!/bin/sh
# Debian's arm64 kernel was built with gcc-14; bookworm's cross gcc is 12 (kconform module.py).
for a in "$@"; do
  shift
  case "$a" in
    -fmin-function-alignment=*) set -- "$@" "-falign-functions=${a#*=}" ;;
    *) set -- "$@" "$a" ;;
  esac
done
exec %sgcc "$@"
"""


def packages(abi: str = ABI, flavour: str = FLAVOUR) -> list[tuple[str, str]]:
    """(package, Debian architecture) of everything the module build unpacks."""
    return [(f"linux-headers-{abi}-{flavour}", "arm64"), (f"linux-headers-{abi}-common", "arm64"),
            (f"linux-kbuild-{abi}", "amd64"), ("libc6", "amd64")]


def _fetch_debs(cache: Path, abi: str, flavour: str, log: Log) -> list[tuple[Path, dict]]:
    """The .debs (downloaded into the private apt state's folder) and their index records."""
    mirror = system_mirror()
    out = []
    apts: dict[str, PrivateApt] = {}
    for name, arch in packages(abi, flavour):
        label = f"{name} ({arch})"
        with cache_errors(cache, label, ToolError):
            if arch not in apts:
                apts[arch] = PrivateApt(cache, SUITES, mirror, arch=arch)
                apts[arch].update(log, label)
            apt = apts[arch]
            pkg = apt.show(name, f"Debian {' '.join(SUITES)} has no {name} for {arch} "
                                 f"(targets/qemu_arm64 module.py ABI needs updating)")
            out.append((apt.download(pkg, log, label), pkg.info() | {"arch": arch}))
    return out


def prepared_headers(cache: Path, log: Log, abi: str = ABI, flavour: str = FLAVOUR) -> Path:
    """The prepared headers tree (see the top), from the cache or unpacked now."""
    root = cache / "kmod"
    for d in sorted(root.glob(f"hdr-{abi}-*")) if root.is_dir() else []:
        try:
            stamp = json.loads((d / STAMP).read_text())
        except (OSError, ValueError):
            continue
        if stamp.get("abi") == abi and stamp.get("flavour") == flavour and (d / "kbuild-dir").is_file():
            return d
    debs = _fetch_debs(cache, abi, flavour, log)
    key = hashlib.sha256(json.dumps([i for _, i in debs], sort_keys=True).encode()).hexdigest()[:16]
    final = root / f"hdr-{abi}-{key}"
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        for deb, _ in debs:
            dest = tmp / ("glibc" if deb.name.startswith("libc6_") else "hdr")
            r = subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], capture_output=True, text=True)
            if r.returncode != 0:
                raise ToolError(f"dpkg-deb -x {deb} failed: {r.stderr.strip()}")
        src = tmp / "hdr" / "usr" / "src"
        kdir = src / f"linux-headers-{abi}-{flavour}"
        makefile = kdir / "Makefile"
        if not makefile.is_file():
            raise ToolError(f"{makefile}: not in linux-headers-{abi}-{flavour} (module.py needs updating)")
        final_src = final / "hdr" / "usr" / "src"
        makefile.write_text(makefile.read_text().replace("/usr/src/", f"{final_src}/"))
        if (kdir / "vmlinux").exists():
            (kdir / "vmlinux").rename(kdir / "vmlinux.no-btf")   # no pahole: kbuild skips BTF
        mod = tmp / "hdr" / "usr" / "lib" / f"linux-kbuild-{abi}" / "scripts" / "mod"
        real = mod / "modpost.real-lsb-64"
        if not real.is_file():
            raise ToolError(f"linux-kbuild-{abi}: no scripts/mod/modpost.real-lsb-64 (module.py needs updating)")
        real.rename(mod / "modpost.real-lsb-64.bin")
        glibc = final / "glibc" / "usr" / "lib" / "x86_64-linux-gnu"
        final_mod = final / "hdr" / "usr" / "lib" / f"linux-kbuild-{abi}" / "scripts" / "mod"
        real.write_text(f"#!/bin/sh\nexec {glibc}/ld-linux-x86-64.so.2 --library-path {glibc} "
                        f"{final_mod}/modpost.real-lsb-64.bin \"$@\"\n")
        real.chmod(0o755)
        wrap = tmp / "gcc-wrap.sh"
        wrap.write_text(GCC_WRAP % CROSS_COMPILE)
        wrap.chmod(0o755)
        (tmp / "kbuild-dir").write_text(str(final_src / kdir.name) + "\n")
        (tmp / STAMP).write_text(json.dumps({"abi": abi, "flavour": flavour, "mirror": system_mirror(),
                                             "packages": [i for _, i in debs]}, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for deb, _ in debs:
        deb.unlink(missing_ok=True)   # the stamp keeps their hashes
    log(f"kconform: qemu-arm64: module headers prepared in {final}")
    return final


def module_key(hdr: Path, src: Path = MODULE_SRC) -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        p = src / name
        if not p.is_file():
            raise ToolError(f"{p}: no such file (the FF-A agent module needs it)")
        h.update(name.encode() + b"\0" + p.read_bytes())
    h.update((hdr / STAMP).read_bytes())
    h.update(version_line(CROSS_COMPILE + "gcc").encode())
    return h.hexdigest()[:20]


def build(cache: Path, log: Log, src: Path = MODULE_SRC, flavour: str = FLAVOUR) -> Path:
    """kcffa.ko for Debian's arm64 kernel of flavour ("arm64": 4K pages, "arm64-16k"),
    from the cache or built now (about 2 s)."""
    hdr = prepared_headers(cache, log, flavour=flavour)
    key = module_key(hdr, src)
    final = cache / "kmod" / f"kcffa-{key}"
    ko = final / "kcffa.ko"
    if ko.is_file():
        log(f"kconform: qemu-arm64: module {ko} (cached)")
        return ko
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        for name in SOURCES:
            shutil.copy2(src / name, tmp / name)
        kdir = (hdr / "kbuild-dir").read_text().strip()
        cmd = ["nice", "-n", "10", "make", "-C", kdir, f"M={tmp}", f"CC={hdr / 'gcc-wrap.sh'}", "modules"]
        (tmp / "make-command.txt").write_text(" ".join(cmd) + "\n")
        r = subprocess.run(cmd, capture_output=True, text=True)
        (tmp / "build.log").write_text(r.stdout + r.stderr)
        if r.returncode != 0 or not (tmp / "kcffa.ko").is_file():
            tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
            raise ToolError(f"building the FF-A agent module (targets/qemu_arm64/module) failed "
                            f"(status {r.returncode}):\n{tail}")
        for junk in tmp.glob("*.o"):
            junk.unlink()
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"kconform: qemu-arm64: module built: {ko}")
    return ko
