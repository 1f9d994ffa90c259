"""Kernel trees: fetch Debian's linux-source packages into a cache, or check a local tree.

A tree is the handful of kernel files kconform compiles and reads (NEEDED_PATHS),
never the whole kernel, and never inside the repository: fetched trees live in
<cache>/trees/debian-X.Y.Z/ with a stamp recording the package version and the
.deb's SHA256. Downloads go through a private apt state under the cache, so the
system's apt sources are never touched.

    python3 -m kconform.trees fetch debian:7.3 [--cache DIR]
    python3 -m kconform.trees check PATH
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterable

from .errors import ToolError
from .paths import cache_dir as default_cache_dir

# Every file of a tree that kconform uses, relative to the tree's root. One list:
# fetch() extracts exactly these and check() requires exactly these.
NEEDED_PATHS: tuple[str, ...] = (
    "Makefile",                                         # kernel version
    "arch/arm64/kvm/hyp/nvhe/ffa.c",                    # the EL2 FF-A proxy under test
    "arch/arm64/kvm/hyp/include/nvhe/ffa.h",            # FFA_MIN/MAX_FUNC_NUM
    "arch/arm64/kvm/hyp/include/nvhe/trap_handler.h",   # cpu_reg(), DECLARE_REG()
    "arch/arm64/kvm/hyp/include/nvhe/mem_protect.h",    # host share/unshare prototypes (API drift)
    "arch/arm64/include/asm/kvm_pkvm.h",                # KVM_FFA_MBOX_NR_PAGES, hyp_ffa_proxy_pages()
    "include/linux/scatterlist.h",                      # SG_MAX_SEGMENTS, used by hyp_ffa_proxy_pages()
    "include/linux/arm_ffa.h",                          # FF-A function IDs, descriptors, errors
    "include/linux/arm-smccc.h",                        # SMCCC function-ID encoding, arm_smccc_1_2_regs
    "Documentation/virt/kvm/api.rst",                   # KVM_CREATE_GUEST_MEMFD documentation
    "tools/testing/selftests/kvm/guest_memfd_test.c",
    "tools/testing/selftests/kvm/set_memory_region_test.c",
)

# Debian tree specs: "debian:X.Y" -> package linux-source-X.Y, looked up in these
# suites of the system's own Debian mirror (seen with apt-cache policy).
DEBIAN_SUITES: dict[str, tuple[str, ...]] = {
    "7.3": ("trixie-backports",),
    "7.2": ("trixie-backports",),
    "6.12": ("trixie",),
}

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
STAMP_NAME = ".kconform-tree.json"
SYSTEM_SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))

Progress = Callable[[str], None]


class TreeError(ToolError):
    """A tree could not be fetched or is incomplete; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class TreeSpec:
    distro: str    # "debian"
    series: str    # "7.3"
    package: str   # "linux-source-7.3"
    suites: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class TreeInfo:
    path: Path
    version: str                      # from the Makefile, e.g. "7.3.4"
    present: tuple[str, ...]          # NEEDED_PATHS found in the tree
    missing: tuple[str, ...]          # NEEDED_PATHS not found (empty after check())
    package: str | None = None        # set for fetched trees, from the stamp
    package_version: str | None = None
    sha256: str | None = None


def parse_spec(spec: str) -> TreeSpec:
    """Parses "debian:X.Y"; raises TreeError for anything else."""
    known = ", ".join(f"debian:{s}" for s in DEBIAN_SUITES)
    m = re.fullmatch(r"debian:(\d+\.\d+)", spec.strip())
    if not m:
        raise TreeError(f"unknown tree spec {spec!r}: expected one of {known}, "
                        f"or give a local tree with --tree PATH")
    series = m.group(1)
    if series not in DEBIAN_SUITES:
        raise TreeError(f"unknown tree spec {spec!r}: no Debian suite known for {series}; "
                        f"expected one of {known}, or give a local tree with --tree PATH")
    return TreeSpec("debian", series, f"linux-source-{series}", DEBIAN_SUITES[series])


# --- local trees --------------------------------------------------------------

def makefile_version(makefile: Path) -> str:
    """"VERSION.PATCHLEVEL.SUBLEVEL[EXTRAVERSION]" from a kernel top-level Makefile."""
    fields: dict[str, str] = {}
    for line in makefile.read_text(errors="replace").splitlines()[:20]:
        m = re.match(r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)\s*=\s*(\S*)", line)
        if m:
            fields[m.group(1)] = m.group(2)
    if "VERSION" not in fields or "PATCHLEVEL" not in fields:
        raise TreeError(f"{makefile} has no VERSION/PATCHLEVEL lines: is this a kernel tree?")
    v = f"{fields['VERSION']}.{fields['PATCHLEVEL']}"
    if fields.get("SUBLEVEL"):
        v += f".{fields['SUBLEVEL']}"
    return v + fields.get("EXTRAVERSION", "")


def check(tree_path: str | os.PathLike) -> TreeInfo:
    """Checks that a tree (fetched or the user's own) holds every NEEDED_PATHS file."""
    root = Path(tree_path)
    if not root.is_dir():
        raise TreeError(f"kernel tree {root} does not exist or is not a directory")
    present = tuple(p for p in NEEDED_PATHS if (root / p).is_file())
    missing = tuple(p for p in NEEDED_PATHS if p not in present)
    if missing:
        raise TreeError(f"kernel tree {root} lacks {len(missing)} needed file(s): "
                        + ", ".join(missing)
                        + " (fetch a complete tree with `trees fetch debian:X.Y`, "
                          "or point --tree at a full kernel source tree)")
    stamp = _read_stamp(root)
    return TreeInfo(path=root, version=makefile_version(root / "Makefile"),
                    present=present, missing=(),
                    package=stamp.get("package"), package_version=stamp.get("package_version"),
                    sha256=stamp.get("sha256"))


def _read_stamp(root: Path) -> dict:
    try:
        return json.loads((root / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return {}


# --- fetching from Debian -----------------------------------------------------

def system_mirror(sources: Iterable[Path] = SYSTEM_SOURCES) -> str:
    """The Debian archive URI of the system's own apt sources (not debian-security)."""
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
                    if m:
                        fields[m.group(1).lower()] = m.group(2)
                if "deb" not in fields.get("types", "").split():
                    continue
                for uri in fields.get("uris", "").split():
                    if _is_main_archive(uri):
                        return uri.rstrip("/")
        else:
            for line in text.splitlines():
                m = re.match(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+", line)
                if m and _is_main_archive(m.group(1)):
                    return m.group(1).rstrip("/")
    raise TreeError("no Debian mirror found in " + " or ".join(map(str, sources))
                    + ": kconform reads the mirror from the system's apt sources; "
                      "add a 'deb' entry for a Debian archive there")


def _is_main_archive(uri: str) -> bool:
    return uri.startswith(("http://", "https://", "file:", "mirror")) and \
        not uri.rstrip("/").endswith("debian-security")


class _PrivateApt:
    """apt-get/apt-cache with their own sources, lists and cache under cache_dir/apt."""

    def __init__(self, cache_dir: Path, suites: tuple[str, ...], mirror: str):
        self.root = cache_dir / "apt"
        self.lists = self.root / "lists"
        self.cache = self.root / "cache"
        self.download = self.root / "dl"
        for d in (self.lists / "partial", self.cache / "archives" / "partial", self.download):
            d.mkdir(parents=True, exist_ok=True)
        self._give_to_apt_user(self.download)
        self.sources = self.root / ("sources-" + "-".join(suites) + ".list")
        self.sources.write_text("".join(
            f"deb [signed-by={KEYRING}] {mirror} {s} main\n" for s in suites))
        self.opts = [
            f"-oDir::Etc::SourceList={self.sources}",
            "-oDir::Etc::SourceParts=/nonexistent",
            f"-oDir::State::Lists={self.lists}",
            f"-oDir::Cache={self.cache}",
            "-oAcquire::Languages=none",
            "-oAPT::Get::List-Cleanup=false",  # keep the other suites' lists
        ]

    @staticmethod
    def _give_to_apt_user(d: Path) -> None:
        # apt downloads as the _apt user when run as root; it must be able to write here.
        if os.geteuid() != 0:
            return
        try:
            pw = pwd.getpwnam("_apt")
        except KeyError:
            return
        os.chown(d, pw.pw_uid, -1)

    def run(self, tool: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        if not shutil.which(tool):
            raise TreeError(f"{tool} not found: fetching Debian trees needs apt (a Debian system)")
        return subprocess.run([tool, *self.opts, *args], cwd=cwd, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _show_record(text: str) -> dict[str, str]:
    rec: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        m = re.match(r"^([A-Za-z0-9-]+):\s*(.*)$", line)
        if m:
            rec[m.group(1)] = m.group(2)
    return rec


def _upstream_version(package_version: str) -> str:
    # "7.3.4-1~bpo13+1" -> "7.3.4"; "6.12.117-1" -> "6.12.117"
    return re.split(r"[-~+]", package_version.split(":")[-1], maxsplit=1)[0]


def _existing_tree(cache_dir: Path, spec: TreeSpec) -> Path | None:
    best: tuple[list[int], Path] | None = None
    trees = cache_dir / "trees"
    if not trees.is_dir():
        return None
    for d in trees.glob(f"debian-{spec.series}.*"):
        stamp = _read_stamp(d)
        if stamp.get("package") != spec.package or stamp.get("paths") != list(NEEDED_PATHS):
            continue
        key = [int(x) for x in re.findall(r"\d+", _upstream_version(stamp["package_version"]))]
        if best is None or key > best[0]:
            best = (key, d)
    return best[1] if best else None


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
            have = _existing_tree(cache, s)
            if have is not None:
                progress(f"tree {spec}: {have} (cached)")
                return have
        return _fetch(s, spec, cache, progress)


@contextlib.contextmanager
def cache_errors(cache: Path, what: str, error: type[ToolError]):
    """Turns a full or unwritable cache into an error saying what to do."""
    try:
        yield
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise error(f"no space left in cache {cache} while fetching {what}: "
                        f"free disk space or point KCONFORM_CACHE elsewhere") from e
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise error(f"cannot write to cache {cache} ({e}): "
                        f"choose a writable cache with KCONFORM_CACHE") from e
        raise


def _fetch(s: TreeSpec, spec: str, cache: Path, progress: Progress) -> Path:
    mirror = system_mirror()
    apt = _PrivateApt(cache, s.suites, mirror)
    progress(f"tree {spec}: apt update ({mirror} {' '.join(s.suites)})")
    r = apt.run("apt-get", "-q", "update")
    if r.returncode != 0 or re.search(r"^(E|W):.*(NO_PUBKEY|not signed|Failed to fetch)",
                                      r.stderr, re.M):
        raise TreeError(f"apt-get update for {' '.join(s.suites)} at {mirror} failed "
                        f"(is the network up?):\n{r.stderr.strip()}")

    r = apt.run("apt-cache", "show", "--no-all-versions", s.package)
    rec = _show_record(r.stdout) if r.returncode == 0 else {}
    if rec.get("Package") != s.package:
        raise TreeError(f"package {s.package} not found in {' '.join(s.suites)} at {mirror}: "
                        f"Debian may have dropped it; check `apt-cache policy {s.package}` "
                        f"against a newer suite list in trees.DEBIAN_SUITES")
    pkg_version, want_sha = rec.get("Version", ""), rec.get("SHA256", "").lower()
    if not pkg_version or not re.fullmatch(r"[0-9a-f]{64}", want_sha):
        raise TreeError(f"apt-cache show {s.package} gave no Version/SHA256: {r.stdout[:400]}")

    final = cache / "trees" / f"debian-{_upstream_version(pkg_version)}"
    if _read_stamp(final).get("sha256") == want_sha and \
            _read_stamp(final).get("paths") == list(NEEDED_PATHS):
        progress(f"tree {spec}: {final} (cached, {pkg_version})")
        return final

    progress(f"tree {spec}: downloading {s.package} {pkg_version} ({rec.get('Size', '?')} bytes)")
    for old in apt.download.glob(f"{s.package}_*.deb"):
        old.unlink()
    r = apt.run("apt-get", "-q", "download", f"{s.package}={pkg_version}", cwd=apt.download)
    debs = sorted(apt.download.glob(f"{s.package}_*.deb"))
    if r.returncode != 0 or len(debs) != 1:
        raise TreeError(f"downloading {s.package}={pkg_version} failed "
                        f"(network, or disk space in {apt.download}?):\n{r.stderr.strip()}")
    deb = debs[0]
    got_sha = _sha256(deb)
    if got_sha != want_sha:
        deb.unlink()
        raise TreeError(f"{deb.name}: SHA256 {got_sha} does not match the signed index "
                        f"({want_sha}); the download was corrupted: fetch again")

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
            "spec": spec, "package": s.package, "package_version": pkg_version,
            "sha256": want_sha, "mirror": mirror, "suites": list(s.suites),
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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


# --- command line -------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kconform.trees", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download a Debian tree into the cache; prints its path")
    f.add_argument("spec", help="debian:7.3, debian:7.2 or debian:6.12")
    f.add_argument("--cache", type=Path, default=None, help="default: $KCONFORM_CACHE or ~/.cache/kconform")
    f.add_argument("--refresh", action="store_true", help="look for a newer package version")
    c = sub.add_parser("check", help="check a local tree has every needed file")
    c.add_argument("path", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "fetch":
            path = fetch(a.spec, a.cache, progress=lambda m: print(m, file=sys.stderr),
                         refresh=a.refresh)
            print(path)
        else:
            info = check(a.path)
            print(f"{info.path}: linux {info.version}, {len(info.present)} needed files present")
    except TreeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
