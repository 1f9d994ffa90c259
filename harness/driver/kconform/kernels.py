"""Kernels to boot in QEMU: Debian's packaged kernels (downloaded into the cache) or a
user's own bzImage.

A Debian kernel is two packages of trixie-backports: `linux-binary-<abi>-amd64`
(the vmlinuz) and `linux-modules-<abi>-amd64` (modules as .ko.xz). Both are
downloaded through the private apt state of trees.py (the system's apt sources
are never touched), checked against the signed index's SHA256, and unpacked into
<cache>/kernels/debian-<abi>-amd64/: `vmlinuz`, `modules/<name>.ko.xz` (only the
KVM modules and what they depend on) and a stamp (.kconform-kernel.json) naming
the package versions, hashes and the module load order.

    python3 -m kconform.kernels fetch debian:7.3 [--cache DIR]
    python3 -m kconform.kernels check PATH        (a bzImage of your own)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .errors import ToolError
from .paths import cache_dir as default_cache_dir
from .trees import (Progress, _PrivateApt, _sha256, _show_record, cache_errors, system_mirror)

# "debian:X.Y" -> (Debian kernel ABI name, suites). Package names verified with
# `apt-cache policy linux-binary-7.3.4+deb13-amd64 linux-modules-7.3.4+deb13-amd64`
# through the private apt state (both 7.3.4-1~bpo13+1 in trixie-backports).
DEBIAN_KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "7.3": ("7.3.4+deb13", ("trixie-backports",)),
}
ARCH = "amd64"
# The modules that give a guest /dev/kvm on an (emulated) AMD CPU, plus their
# dependencies (found with `modinfo -F depends`); loaded in dependency order.
WANTED_MODULES = ("kvm-amd",)
STAMP_NAME = ".kconform-kernel.json"
STAMP_FORMAT = 1


class KernelError(ToolError):
    """A kernel could not be fetched or used; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A bootable kernel and the modules to load before the suite runs."""
    image: Path                  # vmlinuz / bzImage
    release: str                 # e.g. "7.3.4+deb13-amd64", or "" when unknown (user's bzImage)
    modules: tuple[Path, ...]    # .ko or .ko.xz in load order; empty: KVM is built in
    source: str                  # "debian:7.3" or the user's path
    stamp: dict = dataclasses.field(default_factory=dict)

    def key(self) -> str:
        """What identifies this kernel's content (for the initramfs cache key)."""
        return json.dumps({"image": _sha256(self.image),
                           "modules": [_sha256(m) for m in self.modules]}, sort_keys=True)


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


def fetch(spec: str = "debian:7.3", cache_dir: str | os.PathLike | None = None,
          progress: Progress = print, refresh: bool = False) -> Kernel:
    """Downloads Debian's kernel `spec` (vmlinuz + KVM modules) into the cache; cached
    kernels are returned without touching the network unless refresh is set."""
    series, abi, suites = parse_spec(spec)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = cache / "kernels" / f"debian-{abi}-{ARCH}"
    with cache_errors(cache, f"kernel {spec}", KernelError):
        if not refresh:
            have = _from_dir(final, spec)
            if have is not None:
                progress(f"kernel {spec}: {final} (cached)")
                return have
        cache.mkdir(parents=True, exist_ok=True)
        return _fetch(spec, abi, suites, cache, final, progress)


def _download(apt: _PrivateApt, package: str, suites, mirror, progress) -> tuple[Path, dict]:
    r = apt.run("apt-cache", "show", "--no-all-versions", package)
    rec = _show_record(r.stdout) if r.returncode == 0 else {}
    if rec.get("Package") != package:
        raise KernelError(f"package {package} not found in {' '.join(suites)} at {mirror}: Debian "
                          f"may have moved to a newer ABI; update kernels.DEBIAN_KERNELS "
                          f"(see `apt-cache search linux-binary-` in that suite)")
    version, want = rec.get("Version", ""), rec.get("SHA256", "").lower()
    if not version or not re.fullmatch(r"[0-9a-f]{64}", want):
        raise KernelError(f"apt-cache show {package} gave no Version/SHA256")
    for old in apt.download.glob(f"{package}_*.deb"):
        if _sha256(old) == want:  # left by an interrupted fetch
            return old, {"package": package, "version": version, "sha256": want}
        old.unlink()
    progress(f"kernel: downloading {package} {version} ({rec.get('Size', '?')} bytes)")
    r = apt.run("apt-get", "-q", "download", f"{package}={version}", cwd=apt.download)
    debs = sorted(apt.download.glob(f"{package}_*.deb"))
    if r.returncode != 0 or len(debs) != 1:
        raise KernelError(f"downloading {package}={version} failed (network, or disk space "
                          f"in {apt.download}?):\n{r.stderr.strip()}")
    got = _sha256(debs[0])
    if got != want:
        debs[0].unlink()
        raise KernelError(f"{debs[0].name}: SHA256 {got} does not match the signed index "
                          f"({want}); the download was corrupted: fetch again")
    return debs[0], {"package": package, "version": version, "sha256": want}


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


def _fetch(spec, abi, suites, cache: Path, final: Path, progress: Progress) -> Kernel:
    mirror = system_mirror()
    apt = _PrivateApt(cache, suites, mirror)
    progress(f"kernel {spec}: apt update ({mirror} {' '.join(suites)})")
    r = apt.run("apt-get", "-q", "update")
    if r.returncode != 0 or re.search(r"^(E|W):.*(NO_PUBKEY|not signed|Failed to fetch)",
                                      r.stderr, re.M):
        raise KernelError(f"apt-get update for {' '.join(suites)} at {mirror} failed "
                          f"(is the network up?):\n{r.stderr.strip()}")
    binary_pkg, modules_pkg = f"linux-binary-{abi}-{ARCH}", f"linux-modules-{abi}-{ARCH}"
    bdeb, binfo = _download(apt, binary_pkg, suites, mirror, progress)
    mdeb, minfo = _download(apt, modules_pkg, suites, mirror, progress)

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
        order = load_order(mod_root, WANTED_MODULES)
        out = tmp / "kernel"
        (out / "modules").mkdir(parents=True)
        shutil.copy2(images[0], out / "vmlinuz")
        for ko in order:
            shutil.copy2(ko, out / "modules" / ko.name)
        (out / STAMP_NAME).write_text(json.dumps({
            "format": STAMP_FORMAT, "spec": spec, "release": release, "mirror": mirror,
            "suites": list(suites), "binary": binfo, "modules": minfo,
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


def cached(cache_dir: str | os.PathLike | None = None) -> list[Kernel]:
    root = (Path(cache_dir) if cache_dir else default_cache_dir()) / "kernels"
    out = []
    for d in sorted(root.glob("debian-*")) if root.is_dir() else []:
        k = _from_dir(d, _read_stamp(d).get("spec", "?"))
        if k:
            out.append(k)
    return out


# --- kernels built from a full tree (`run --target qemu --tree T --build [--apply P]`) ---------
#
# Layout under <cache>:
#   fulltrees/debian-X.Y.Z/        the whole linux-source tarball of a Debian tree (pristine)
#   kbuild/src-<tree_id>/          a hard-link mirror of the tree with the patch applied
#                                  (GNU patch writes new files, so the tree itself never changes)
#   kbuild/obj-<tree_id>-<frag>/   make O= output: incremental across patches of one tree
#   kbuild/img/<key>/bzImage       built kernels by (tree state, patch hash, fragment hash)

KERNEL_FRAGMENT = Path(__file__).resolve().parents[3] / "targets" / "qemu" / "kernel.config"
FULLTREE_STAMP = ".kconform-fulltree.json"
MIRROR_STAMP = ".kconform-mirror.json"
IMAGE_STAMP = "kconform-image.json"


def _h(data: bytes) -> str:
    import hashlib
    return hashlib.sha256(data).hexdigest()


def full_tree(spec: str, cache: Path, progress: Progress = print) -> tuple[Path, str, str]:
    """A whole kernel tree: (path, tree state key, tree id). debian:X.Y is downloaded
    (through the private apt state) and extracted once into <cache>/fulltrees/."""
    from .trees import DEBIAN_SUITES, makefile_version
    if spec.startswith("debian:"):
        series = spec.split(":", 1)[1]
        if series not in DEBIAN_SUITES:
            raise KernelError(f"flag --tree: unknown spec {spec!r} (known: "
                              + ", ".join(f"debian:{s}" for s in DEBIAN_SUITES) + ", or a path)")
        root = cache / "fulltrees"
        for d in sorted(root.glob(f"debian-{series}.*")) if root.is_dir() else []:
            try:
                st = json.loads((d / FULLTREE_STAMP).read_text())
            except (OSError, ValueError):
                continue
            if st.get("spec") == spec and (d / "Makefile").is_file():
                progress(f"tree {spec}: {d} (cached, full tree)")
                return d, st["sha256"], d.name
        return _fetch_full_tree(spec, series, DEBIAN_SUITES[series], cache, progress)
    path = Path(spec).resolve()
    if not (path / "Makefile").is_file() or not (path / "virt" / "kvm" / "guest_memfd.c").is_file():
        raise KernelError(f"flag --tree: {path} is not a full kernel tree with guest_memfd "
                          f"(no Makefile or virt/kvm/guest_memfd.c)")
    version = makefile_version(path / "Makefile")
    tree_id = f"local-{version}-{_h(str(path).encode())[:8]}"
    return path, _local_state(path), tree_id


def _local_state(path: Path) -> str:
    """What identifies a local tree's content: git HEAD + diff + untracked names, or
    else every file's name, size and mtime."""
    if (path / ".git").exists() and shutil.which("git"):
        g = lambda *a: subprocess.run(["git", "-C", str(path), *a], capture_output=True).stdout  # noqa: E731
        head = g("rev-parse", "HEAD")
        if head:
            return _h(head + g("diff", "HEAD", "--binary") +
                      g("ls-files", "--others", "--exclude-standard"))
    h = []
    for dirpath, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for f in sorted(files):
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            h.append(f"{os.path.relpath(os.path.join(dirpath, f), path)}\0{st.st_size}\0{st.st_mtime_ns}")
    return _h("\n".join(h).encode())


def _fetch_full_tree(spec, series, suites, cache: Path, progress: Progress) -> tuple[Path, str, str]:
    from .trees import _upstream_version
    import time
    mirror = system_mirror()
    apt = _PrivateApt(cache, suites, mirror)
    progress(f"tree {spec}: apt update ({mirror} {' '.join(suites)})")
    r = apt.run("apt-get", "-q", "update")
    if r.returncode != 0:
        raise KernelError(f"apt-get update for {' '.join(suites)} failed:\n{r.stderr.strip()}")
    package = f"linux-source-{series}"
    deb, info = _download(apt, package, suites, mirror, progress)
    final = cache / "fulltrees" / f"debian-{_upstream_version(info['version'])}"
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    t0 = time.monotonic()
    progress(f"tree {spec}: extracting the whole tree into {final} (~20 s)")
    try:
        inner = f"./usr/src/{package}.tar.xz"
        cmd = (f"dpkg-deb --fsys-tarfile {shlex_quote(str(deb))} | tar -xO {shlex_quote(inner)} "
               f"| tar -xJ --strip-components=1 -C {shlex_quote(str(tmp))}")
        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
        if r.returncode != 0 or not (tmp / "Makefile").is_file():
            raise KernelError(f"extracting {deb.name} failed: {r.stderr.strip()[-1000:]}")
        (tmp / FULLTREE_STAMP).write_text(json.dumps(dict(info, spec=spec, mirror=mirror), indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    deb.unlink()
    progress(f"tree {spec}: {final} ({time.monotonic() - t0:.0f} s)")
    return final, info["sha256"], final.name


def shlex_quote(s: str) -> str:
    import shlex
    return shlex.quote(s)


def _mirror(src: Path, tree_state: str, tree_id: str, patch: Path | None, cache: Path,
            progress: Progress) -> Path:
    """kbuild/src-<tree_id>: src hard-linked, with patch applied. Files a previous patch
    touched are replaced by fresh copies with a new mtime, so make rebuilds them."""
    from . import patches
    m = cache / "kbuild" / f"src-{tree_id}"
    patch_bytes = patch.read_bytes() if patch else b""
    want = {"tree_state": tree_state, "patch_sha256": _h(patch_bytes) if patch else None}
    try:
        st = json.loads((m / MIRROR_STAMP).read_text())
    except (OSError, ValueError):
        st = {}
    if st.get("tree_state") == want["tree_state"] and st.get("patch_sha256") == want["patch_sha256"] \
            and st.get("complete"):
        return m
    touched = set(st.get("touched", [])) | set(patches.touched_paths(patch_bytes))
    if m.exists() and not st:
        # Unknown state (interrupted before a stamp): rebuild what any patch may have touched.
        touched |= {"virt/kvm/guest_memfd.c", "include/uapi/linux/kvm.h", "include/linux/kvm_host.h"}
    if m.exists():
        shutil.rmtree(m)
    m.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["cp", "-al", str(src), str(m)], capture_output=True, text=True)
    if r.returncode != 0:
        raise KernelError(f"cp -al {src} {m} failed (the cache must be on the tree's file "
                          f"system for hard links): {r.stderr.strip()}")
    built = st.get("built", {}) if st.get("complete") else {}
    (m / MIRROR_STAMP).write_text(json.dumps(dict(want, touched=sorted(touched), complete=False)))
    for rel in sorted(touched):
        p = m / rel
        if p.is_file():
            data = p.read_bytes()
            p.unlink()               # break the hard link; new inode, new mtime
            p.write_bytes(data)
    if patch:
        try:
            patches._run_patch(m, patch, src, 0, False)
        except patches.PatchError as e:
            raise KernelError(str(e)) from e
        progress(f"kernel build: applied {patch} to {m}")
    # A file whose content is what the last build compiled gets that build's mtime back,
    # so make rebuilds only what this patch really changes (a mutant of a patch: one
    # object file and the link, not everything that includes a header of the patch).
    kept = 0
    for rel in sorted(touched):
        p = m / rel
        old = built.get(rel)
        if old and p.is_file() and _h(p.read_bytes()) == old[0]:
            os.utime(p, ns=(old[1], old[1]))  # p is a fresh inode (above), never the tree's
            kept += 1
    if kept:
        progress(f"kernel build: {kept} of {len(touched)} patched file(s) unchanged since the last build")
    (m / MIRROR_STAMP).write_text(json.dumps(dict(want, touched=sorted(touched), complete=True)))
    return m


def _record_built(tree: Path, touched: list[str]) -> None:
    """After a build: the touched files as compiled (content hash, mtime), for _mirror."""
    mst = json.loads((tree / MIRROR_STAMP).read_text())
    built = {}
    for rel in touched:
        p = tree / rel
        if p.is_file():
            built[rel] = [_h(p.read_bytes()), p.stat().st_mtime_ns]
    mst.update(touched=touched, built=built)
    (tree / MIRROR_STAMP).write_text(json.dumps(mst))


def _configure(src: Path, obj: Path, fragment: bytes, log: Path) -> None:
    fh = _h(fragment)
    try:
        if json.loads((obj / ".kconform-config.json").read_text()).get("fragment") == fh \
                and (obj / ".config").is_file():
            return
    except (OSError, ValueError):
        pass
    obj.mkdir(parents=True, exist_ok=True)
    with log.open("a") as lf:
        for step in ("tinyconfig", None, "olddefconfig"):
            if step is None:
                with (obj / ".config").open("a") as c:
                    c.write("\n# kconform: " + str(KERNEL_FRAGMENT) + "\n" + fragment.decode())
                continue
            r = subprocess.run(["make", "-C", str(src), f"O={obj}", step], stdout=lf,
                               stderr=subprocess.STDOUT)
            if r.returncode != 0:
                raise KernelError(f"make {step} failed; see {log}")
    have = set((obj / ".config").read_text().splitlines())
    lost = [l for l in fragment.decode().splitlines() if l.startswith("CONFIG_") and l not in have]
    if lost:
        raise KernelError(f"{KERNEL_FRAGMENT}: olddefconfig dropped {', '.join(lost)} "
                          f"(a dependency is missing from the fragment)")
    (obj / ".kconform-config.json").write_text(json.dumps({"fragment": fh}))


def build(tree_spec: str, patch: str | None = None, cache_dir: str | os.PathLike | None = None,
          progress: Progress = print, jobs: int | None = None) -> Kernel:
    """Builds (incrementally) a small x86-64 kernel with KVM built in from a full tree,
    optionally patched; cached by (tree state, patch hash, fragment hash)."""
    import time
    from . import deps
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    patch_path = Path(patch).resolve() if patch else None
    if patch_path is not None and not patch_path.is_file():
        raise KernelError(f"flag --apply: {patch}: no such patch file")
    fragment = KERNEL_FRAGMENT.read_bytes()
    src, tree_state, tree_id = full_tree(tree_spec, cache, progress)
    ph = _h(patch_path.read_bytes())[:12] if patch_path else "none"
    fh = _h(fragment)[:12]
    key = _h(f"{tree_state}\0{ph}\0{fh}".encode())[:20]
    img_dir = cache / "kbuild" / "img" / key
    image = img_dir / "bzImage"
    source = f"{tree_spec}" + (f"+{patch_path.name}" if patch_path else "")
    try:
        st = json.loads((img_dir / IMAGE_STAMP).read_text())
    except (OSError, ValueError):
        st = {}
    if st.get("key") == key and image.is_file():
        progress(f"kernel build: {image} (cached: {source})")
        return _built(image, source, st)
    deps.ensure(["kernel-build"], progress)
    t0 = time.monotonic()
    tree = _mirror(src, tree_state, tree_id, patch_path, cache, progress)
    obj = cache / "kbuild" / f"obj-{tree_id}-{fh}"
    obj.mkdir(parents=True, exist_ok=True)
    log = obj / "kconform-build.log"
    log.write_text("")
    _configure(tree, obj, fragment, log)
    n = jobs or os.cpu_count() or 2
    again = (obj / "vmlinux").is_file()
    progress(f"kernel build: make -j{n} bzImage in {obj} ("
             + ("incremental" if again else "first build ~10 min on 2 cores") + f"; log {log})")
    with log.open("a") as lf:
        r = subprocess.run(["make", "-C", str(tree), f"O={obj}", f"-j{n}", "bzImage"],
                           stdout=lf, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise KernelError(f"kernel build of {source} failed (exit {r.returncode}); "
                          f"last lines of {log}:\n{tail}")
    # Built: only the current patch's files differ from the tree from now on.
    from . import patches
    _record_built(tree, patches.touched_paths(patch_path.read_bytes()) if patch_path else [])
    built = obj / "arch" / "x86" / "boot" / "bzImage"
    img_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, image)
    st = {"key": key, "tree": tree_spec, "tree_id": tree_id, "tree_state": tree_state,
          "patch": str(patch_path) if patch_path else None, "patch_sha256_12": ph,
          "fragment_sha256_12": fh, "seconds": round(time.monotonic() - t0, 1)}
    (img_dir / IMAGE_STAMP).write_text(json.dumps(st, indent=2) + "\n")
    progress(f"kernel build: {image} ({st['seconds']} s)")
    return _built(image, source, st)


def _built(image: Path, source: str, stamp: dict) -> Kernel:
    k = user_kernel(image)
    return Kernel(image=k.image, release=k.release, modules=(), source=source, stamp=stamp)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kconform.kernels", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download a Debian kernel into the cache")
    f.add_argument("spec", nargs="?", default="debian:7.3")
    f.add_argument("--cache", type=Path, default=None)
    f.add_argument("--refresh", action="store_true")
    c = sub.add_parser("check", help="check a bzImage of your own")
    c.add_argument("path", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "fetch":
            k = fetch(a.spec, a.cache, progress=lambda m: print(m, file=sys.stderr), refresh=a.refresh)
        else:
            k = user_kernel(a.path)
        print(json.dumps({"image": str(k.image), "release": k.release,
                          "modules": [str(m) for m in k.modules]}, indent=2))
    except KernelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
