"""Debian packages through a private apt state.

apt-get and apt-cache run with their own sources, lists and cache under
<cache>/apt, pointed at the mirror of the system's own apt sources: the
system's apt state is never touched. A download is checked against the SHA256
of the signed index. Every function raises the error class its caller names
(trees raise TreeError, kernels KernelError).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterable

from kconform.core import procs
from kconform.core.errors import ToolError

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SYSTEM_SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))

Progress = Callable[[str], None]


def system_mirror(sources: Iterable[Path] = SYSTEM_SOURCES,
                  error: type[ToolError] = ToolError) -> str:
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
    raise error("no Debian mirror found in " + " or ".join(map(str, sources))
                + ": kconform reads the mirror from the system's apt sources; "
                  "add a 'deb' entry for a Debian archive there")


def _is_main_archive(uri: str) -> bool:
    return uri.startswith(("http://", "https://", "file:", "mirror")) and \
        not uri.rstrip("/").endswith("debian-security")


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


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def upstream_version(package_version: str) -> str:
    """"7.3.4-1~bpo13+1" -> "7.3.4"; "6.12.117-1" -> "6.12.117"."""
    return re.split(r"[-~+]", package_version.split(":")[-1], maxsplit=1)[0]


def _show_record(text: str) -> dict[str, str]:
    rec: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        m = re.match(r"^([A-Za-z0-9-]+):\s*(.*)$", line)
        if m:
            rec[m.group(1)] = m.group(2)
    return rec


@dataclasses.dataclass(frozen=True)
class Package:
    """A package version as the signed index describes it."""
    name: str
    version: str
    sha256: str
    size: str

    def info(self) -> dict:
        """What stamps record of a downloaded package."""
        return {"package": self.name, "version": self.version, "sha256": self.sha256}


class PrivateApt:
    """apt-get/apt-cache with their own sources, lists and cache under cache_dir/apt."""

    def __init__(self, cache_dir: Path, suites: tuple[str, ...], mirror: str,
                 error: type[ToolError] = ToolError, kind: str = "deb", arch: str | None = None):
        """kind: "deb" (binary packages) or "deb-src" (source packages, debian_src.py).
        arch: the Debian architecture of the binary packages ("arm64"); None is the
        system's own (apt's default)."""
        if kind not in ("deb", "deb-src"):
            raise ValueError(f"PrivateApt: kind {kind!r} is not deb or deb-src")
        if arch is not None and (kind != "deb" or not re.fullmatch(r"[a-z0-9]+", arch)):
            raise ValueError(f"PrivateApt: arch {arch!r} needs kind deb and a Debian architecture name")
        self.suites, self.mirror, self.error, self.kind, self.arch = suites, mirror, error, kind, arch
        self.root = cache_dir / "apt"
        self.lists = self.root / "lists"
        self.cache = self.root / "cache"
        self.download_dir = self.root / "dl"
        for d in (self.lists / "partial", self.cache / "archives" / "partial", self.download_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._give_to_apt_user(self.download_dir)
        # Binary and source lists, of every architecture, share the lists folder
        # (List-Cleanup=false below; apt names each index by its architecture).
        prefix = "sources-" if kind == "deb" else "sources-src-"
        if arch is not None:
            prefix += arch + "-"
        self.sources = self.root / (prefix + "-".join(suites) + ".list")
        options = (f"arch={arch} " if arch else "") + f"signed-by={KEYRING}"
        self.sources.write_text("".join(
            f"{kind} [{options}] {mirror} {s} main\n" for s in suites))
        self.opts = [
            f"-oDir::Etc::SourceList={self.sources}",
            "-oDir::Etc::SourceParts=/nonexistent",
            f"-oDir::State::Lists={self.lists}",
            f"-oDir::Cache={self.cache}",
            "-oAcquire::Languages=none",
            "-oAPT::Get::List-Cleanup=false",  # keep the other suites' lists
        ]
        if arch is not None:  # show and download that architecture's packages, only it
            self.opts += [f"-oAPT::Architecture={arch}", f"-oAPT::Architectures::={arch}"]

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
            raise self.error(f"{tool} not found: fetching from Debian needs apt (a Debian system)")
        return procs.run([tool, *self.opts, *args], cwd=cwd, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def update(self, progress: Progress, label: str) -> None:
        what = " ".join(self.suites) + (" (sources)" if self.kind == "deb-src" else "")
        progress(f"{label}: apt update ({self.mirror} {what})")
        r = self.run("apt-get", "-q", "update")
        if r.returncode != 0 or re.search(r"^(E|W):.*(NO_PUBKEY|not signed|Failed to fetch)",
                                          r.stderr, re.M):
            raise self.error(f"apt-get update for {' '.join(self.suites)} at {self.mirror} failed "
                             f"(is the network up?):\n{r.stderr.strip()}")

    def show(self, package: str, not_found_hint: str) -> Package:
        """The candidate version of package; not_found_hint says what to do if there is none."""
        r = self.run("apt-cache", "show", "--no-all-versions", package)
        rec = _show_record(r.stdout) if r.returncode == 0 else {}
        if rec.get("Package") != package:
            raise self.error(f"package {package} not found in {' '.join(self.suites)} at "
                             f"{self.mirror}: {not_found_hint}")
        version, sha = rec.get("Version", ""), rec.get("SHA256", "").lower()
        if not version or not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise self.error(f"apt-cache show {package} gave no Version/SHA256: {r.stdout[:400]}")
        return Package(package, version, sha, rec.get("Size", "?"))

    def download(self, pkg: Package, progress: Progress, label: str) -> Path:
        """The .deb of pkg in download_dir, checked against the signed index."""
        for old in self.download_dir.glob(f"{pkg.name}_*.deb"):
            if sha256_file(old) == pkg.sha256:  # left by an interrupted fetch
                return old
            old.unlink()
        progress(f"{label}: downloading {pkg.name} {pkg.version} ({pkg.size} bytes)")
        r = self.run("apt-get", "-q", "download", f"{pkg.name}={pkg.version}", cwd=self.download_dir)
        debs = sorted(self.download_dir.glob(f"{pkg.name}_*.deb"))
        if r.returncode != 0 or len(debs) != 1:
            raise self.error(f"downloading {pkg.name}={pkg.version} failed (network, or disk "
                             f"space in {self.download_dir}?):\n{r.stderr.strip()}")
        got = sha256_file(debs[0])
        if got != pkg.sha256:
            debs[0].unlink()
            raise self.error(f"{debs[0].name}: SHA256 {got} does not match the signed index "
                             f"({pkg.sha256}); the download was corrupted: fetch again")
        return debs[0]
