"""Fetching Debian's kernel trees: the linux-source package of a "debian:X.Y" spec,
downloaded through the private apt state (debian.py) into the cache, of which only
the NEEDED_PATHS files are extracted into <cache>/trees/debian-X.Y.Z/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources.debian import (PrivateApt, Progress, cache_errors, system_mirror,
                                     upstream_version)
from kconform.sources.trees import (NEEDED_PATHS, STAMP_NAME, TreeError, TreeInfo, TreeSpec,
                                    cached, check, parse_spec, read_stamp)


def fetch(spec: str, cache_dir: str | os.PathLike | None = None,
          progress: Progress = print, refresh: bool = False) -> Path:
    """Downloads the Debian kernel tree `spec` into cache_dir; returns its path.

    A tree already in the cache is returned without touching the network unless
    refresh is set (then the newest candidate version is looked up again).
    """
    s = parse_spec(spec)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    with cache_errors(cache, spec, TreeError):
        cache.mkdir(parents=True, exist_ok=True)
        if not refresh:
            have = cached(s, cache)
            if have is not None:
                progress(f"tree {spec}: {have} (cached)")
                return have
        return download_tree(s, spec, cache, progress)


def download_tree(s: TreeSpec, spec: str, cache: Path, progress: Progress) -> Path:
    """Looks up the newest linux-source package of s, downloads and extracts it."""
    mirror = system_mirror(error=TreeError)
    apt = PrivateApt(cache, s.suites, mirror, TreeError)
    apt.update(progress, f"tree {spec}")
    pkg = apt.show(s.package, f"Debian may have dropped it; check `apt-cache policy {s.package}` "
                              f"against a newer suite list in trees.DEBIAN_SUITES")

    final = cache / "trees" / f"debian-{upstream_version(pkg.version)}"
    stamp = read_stamp(final)
    if stamp.get("sha256") == pkg.sha256 and stamp.get("paths") == list(NEEDED_PATHS):
        progress(f"tree {spec}: {final} (cached, {pkg.version})")
        return final

    deb = apt.download(pkg, progress, f"tree {spec}")
    progress(f"tree {spec}: extracting {len(NEEDED_PATHS)} files")
    (cache / "trees").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=cache / "trees"))
    tmp.chmod(0o755)
    try:
        found = _extract_needed(deb, f"usr/src/{s.package}.tar.xz", tmp)
        missing = [p for p in NEEDED_PATHS if p not in found]
        if missing:
            raise TreeError(f"{deb.name} lacks needed file(s): {', '.join(missing)}; "
                            f"this kernel series cannot be used by kconform")
        (tmp / STAMP_NAME).write_text(json.dumps({
            "spec": spec, "package": s.package, "package_version": pkg.version,
            "sha256": pkg.sha256, "mirror": mirror, "suites": list(s.suites),
            "paths": list(NEEDED_PATHS)}, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    deb.unlink()  # 150+ MB; the stamp keeps its hash
    progress(f"tree {spec}: {final}")
    return final


def _extract_needed(deb: Path, inner: str, dest: Path) -> set[str]:
    """Streams deb -> data tar -> inner .tar.xz and writes the NEEDED_PATHS files."""
    want = set(NEEDED_PATHS)
    found: set[str] = set()
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as outer:
            for m in outer:
                if m.name.lstrip("./") != inner:
                    continue
                stream = outer.extractfile(m)
                # xz from the system decompresses faster than Python's lzma.
                xz = subprocess.Popen(["xz", "-dc", "-T0"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE) if shutil.which("xz") else None
                if xz is None:
                    found = _copy_members(tarfile.open(fileobj=stream, mode="r|xz"), want, dest)
                else:
                    def pump() -> None:
                        try:
                            shutil.copyfileobj(stream, xz.stdin, 1 << 20)
                        except BrokenPipeError:
                            pass
                        finally:
                            xz.stdin.close()
                    t = threading.Thread(target=pump, daemon=True)
                    t.start()
                    found = _copy_members(tarfile.open(fileobj=xz.stdout, mode="r|"), want, dest)
                    xz.stdout.close()
                    xz.kill()
                    xz.wait()
                    t.join()
                break
    finally:
        proc.stdout.close()
        proc.kill()
        proc.wait()
    return found


def _copy_members(tar: tarfile.TarFile, want: set[str], dest: Path) -> set[str]:
    found: set[str] = set()
    for m in tar:
        # members are "linux-source-X.Y/<path>"
        rel = m.name.split("/", 1)[1] if "/" in m.name else ""
        if rel not in want or not m.isfile():
            continue
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        with tar.extractfile(m) as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        found.add(rel)
        if found == want:
            break  # stop reading: the rest of the tarball is not needed
    return found


def resolve(spec_or_path: str | os.PathLike, progress: Progress = print) -> TreeInfo:
    """A tree spec (fetched, see fetch) or a local path, checked: its TreeInfo."""
    text = str(spec_or_path)
    path = fetch(text, progress=progress) if text.startswith("debian:") else Path(text).resolve()
    return check(path)
