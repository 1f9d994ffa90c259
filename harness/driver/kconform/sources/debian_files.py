"""One file out of a Debian binary package of any architecture (e.g. the arm64
busybox of `busybox-static`, for an arm64 initramfs).

The package is looked up and downloaded through the private apt state (debian.py)
for that architecture, checked against the signed index's SHA256, and the one file
is kept in <cache>/debs/<package>-<arch>/ with a stamp (.kconform-file.json) naming
the package version and its hash; the .deb is deleted. A cached file is returned
without touching the network unless refresh is set.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources.debian import PrivateApt, Progress, cache_errors, system_mirror

STAMP_NAME = ".kconform-file.json"


@dataclasses.dataclass(frozen=True)
class PackageFile:
    """Which file of which package: `member` is its path inside the .deb (no leading /)."""
    package: str
    arch: str
    suites: tuple[str, ...]
    member: str

    def folder(self, cache: Path) -> Path:
        return cache / "debs" / f"{self.package}-{self.arch}"

    def path(self, cache: Path) -> Path:
        return self.folder(cache) / Path(self.member).name


def cached(want: PackageFile, cache: Path) -> Path | None:
    """The file in the cache if a complete fetch of this very request left it there."""
    try:
        stamp = json.loads((want.folder(cache) / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    same = (stamp.get("package") == want.package and stamp.get("arch") == want.arch
            and stamp.get("member") == want.member)
    return want.path(cache) if same and want.path(cache).is_file() else None


def fetch(want: PackageFile, cache_dir: str | os.PathLike | None = None,
          progress: Progress = print, refresh: bool = False) -> Path:
    """The path of want's file in the cache, downloaded first if it is not there."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    label = f"{want.package} ({want.arch})"
    with cache_errors(cache, label, ToolError):
        have = None if refresh else cached(want, cache)
        if have is not None:
            progress(f"{label}: {have} (cached)")
            return have
        cache.mkdir(parents=True, exist_ok=True)
        return _download(want, cache, label, progress)


def _download(want: PackageFile, cache: Path, label: str, progress: Progress) -> Path:
    mirror = system_mirror()
    apt = PrivateApt(cache, want.suites, mirror, arch=want.arch)
    apt.update(progress, label)
    pkg = apt.show(want.package, f"Debian {' '.join(want.suites)} has no {want.package} for "
                                 f"{want.arch}; the package list in the calling module needs updating")
    deb = apt.download(pkg, progress, label)
    final = want.folder(cache)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        unpack = tmp / "unpack"
        r = subprocess.run(["dpkg-deb", "-x", str(deb), str(unpack)], capture_output=True, text=True)
        if r.returncode != 0:
            raise ToolError(f"dpkg-deb -x {deb.name} failed: {r.stderr.strip()}")
        src = unpack / want.member
        if not src.is_file():
            raise ToolError(f"{deb.name}: no file {want.member} in the package "
                            f"(the member path in the calling module needs updating)")
        out = tmp / "out"
        out.mkdir()
        shutil.copy2(src, out / src.name)
        (out / STAMP_NAME).write_text(json.dumps({
            "package": want.package, "arch": want.arch, "member": want.member, "mirror": mirror,
            "suites": list(want.suites), **pkg.info()}, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    deb.unlink()  # the stamp keeps its hash
    progress(f"{label}: {want.path(cache)} ({pkg.version})")
    return want.path(cache)
