"""Whole kernel trees, to build a kernel from (`run --target qemu --tree T --build`):
Debian's linux-source tarball extracted once into <cache>/fulltrees/debian-X.Y.Z/
(pristine), or a user's own tree in place, each with a key of its content."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from kconform.sources.debian import PrivateApt, Progress, system_mirror, upstream_version
from kconform.sources.kernel_image import KernelError
from kconform.sources.trees import DEBIAN_SUITES, makefile_version

FULLTREE_STAMP = ".kconform-fulltree.json"


def _h(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def full_tree(spec: str, cache: Path, progress: Progress = print) -> tuple[Path, str, str]:
    """A whole kernel tree: (path, tree state key, tree id). debian:X.Y is downloaded
    (through the private apt state) and extracted once into <cache>/fulltrees/."""
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
    return path, local_state(path), tree_id


def local_state(path: Path) -> str:
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
    mirror = system_mirror(error=KernelError)
    apt = PrivateApt(cache, suites, mirror, KernelError)
    apt.update(progress, f"tree {spec}")
    pkg = apt.show(f"linux-source-{series}", "Debian may have dropped it; check the suite list "
                                              "in trees.DEBIAN_SUITES")
    deb = apt.download(pkg, progress, "kernel")
    final = cache / "fulltrees" / f"debian-{upstream_version(pkg.version)}"
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    t0 = time.monotonic()
    progress(f"tree {spec}: extracting the whole tree into {final} (~20 s)")
    try:
        inner = f"./usr/src/{pkg.name}.tar.xz"
        cmd = (f"dpkg-deb --fsys-tarfile {shlex.quote(str(deb))} | tar -xO {shlex.quote(inner)} "
               f"| tar -xJ --strip-components=1 -C {shlex.quote(str(tmp))}")
        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
        if r.returncode != 0 or not (tmp / "Makefile").is_file():
            raise KernelError(f"extracting {deb.name} failed: {r.stderr.strip()[-1000:]}")
        (tmp / FULLTREE_STAMP).write_text(json.dumps(dict(pkg.info(), spec=spec, mirror=mirror),
                                                     indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    deb.unlink()
    progress(f"tree {spec}: {final} ({time.monotonic() - t0:.0f} s)")
    return final, pkg.sha256, final.name
