"""Debian source packages through the private apt state (debian.py, kind "deb-src").

A source package is looked up in the signed Sources index (apt-cache showsrc),
its files (.dsc, .orig and .debian tarballs) downloaded with
`apt-get source --download-only` (apt checks them against that index; here each
one is checked again against the record's Checksums-Sha256) and unpacked with
`dpkg-source -x`, which checks them against the .dsc and applies debian/patches.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from pathlib import Path

from kconform.core import procs
from kconform.sources.debian import PrivateApt, Progress, sha256_file


@dataclasses.dataclass(frozen=True)
class SourcePackage:
    """A source package version as the signed Sources index describes it."""
    name: str
    version: str
    files: tuple[tuple[str, str], ...]  # (file name, SHA256), the .dsc first

    @property
    def dsc(self) -> str:
        return self.files[0][0]

    @property
    def dsc_sha256(self) -> str:
        return self.files[0][1]

    def info(self) -> dict:
        """What a stamp records of it."""
        return {"package": self.name, "package_version": self.version,
                "sha256": self.dsc_sha256, "files": dict(self.files)}


def parse_showsrc(text: str) -> list[dict[str, str]]:
    """The records of `apt-cache showsrc` output; a multi-line field keeps its
    continuation lines, joined by newlines."""
    records: list[dict[str, str]] = []
    rec: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if not line.strip():
            if rec:
                records.append(rec)
            rec, key = {}, None
        elif line[0] in " \t" and key is not None:
            rec[key] += "\n" + line.strip()
        else:
            m = re.match(r"^([A-Za-z0-9-]+):\s*(.*)$", line)
            if m:
                key = m.group(1)
                rec[key] = m.group(2)
    if rec:
        records.append(rec)
    return records


def _package_of(rec: dict[str, str]) -> SourcePackage | None:
    files = []
    for line in rec.get("Checksums-Sha256", "").splitlines():
        parts = line.split()
        if len(parts) == 3 and re.fullmatch(r"[0-9a-f]{64}", parts[0].lower()):
            files.append((parts[2], parts[0].lower()))
    dsc = [f for f in files if f[0].endswith(".dsc")]
    if len(dsc) != 1 or not rec.get("Version"):
        return None
    rest = [f for f in files if not f[0].endswith(".dsc")]
    return SourcePackage(rec.get("Package", ""), rec["Version"], tuple(dsc + rest))


def show_source(apt: PrivateApt, package: str, version: str, not_found_hint: str) -> SourcePackage:
    """The index record of source package `package` at `version`."""
    r = apt.run("apt-cache", "showsrc", "--only-source", package)
    found = [p for p in map(_package_of, parse_showsrc(r.stdout) if r.returncode == 0 else [])
             if p is not None and p.name == package]
    where = f"{' '.join(apt.suites)} (sources) at {apt.mirror}"
    if not found:
        raise apt.error(f"source package {package} not found in {where}: {not_found_hint}")
    for p in found:
        if p.version == version:
            return p
    raise apt.error(f"source package {package} {version} not found in {where} (it has "
                    f"{', '.join(sorted({p.version for p in found}))}): {not_found_hint}")


def download_and_unpack(apt: PrivateApt, pkg: SourcePackage, dest: Path,
                        progress: Progress, label: str) -> None:
    """Downloads pkg's files, checks their SHA256 and unpacks them into dest (which
    must not exist) with dpkg-source -x. The downloaded files are removed."""
    if not shutil.which("dpkg-source"):
        raise apt.error("dpkg-source not found: unpacking a Debian source package needs "
                        "dpkg-dev (ci/packages.txt group build; ./kconform build installs it)")
    dl_root = apt.root / "src-dl"
    dl_root.mkdir(parents=True, exist_ok=True)
    dl = Path(tempfile.mkdtemp(prefix=f"{pkg.name}.", dir=dl_root))
    try:
        dl.chmod(0o755)
        apt._give_to_apt_user(dl)
        progress(f"{label}: downloading source package {pkg.name} {pkg.version} "
                 f"({len(pkg.files)} files)")
        r = apt.run("apt-get", "-q", "source", "--download-only", f"{pkg.name}={pkg.version}", cwd=dl)
        if r.returncode != 0:
            raise apt.error(f"apt-get source {pkg.name}={pkg.version} failed (network, or disk "
                            f"space in {dl_root}?):\n{r.stderr.strip()[-2000:]}")
        for name, sha in pkg.files:
            f = dl / name
            if not f.is_file():
                raise apt.error(f"apt-get source {pkg.name}={pkg.version} did not download {name}")
            got = sha256_file(f)
            if got != sha:
                raise apt.error(f"{name}: SHA256 {got} does not match the signed Sources index "
                                f"({sha}); the download was corrupted: fetch again")
        progress(f"{label}: dpkg-source -x {pkg.dsc}")
        r = procs.run(["dpkg-source", "-x", str(dl / pkg.dsc), str(dest)], cwd=dl, text=True,
                      capture_output=True)
        if r.returncode != 0:
            raise apt.error(f"dpkg-source -x {pkg.dsc} failed:\n{(r.stdout + r.stderr).strip()[-2000:]}")
    finally:
        shutil.rmtree(dl, ignore_errors=True)
