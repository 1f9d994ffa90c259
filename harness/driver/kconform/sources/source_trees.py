"""Firmware trees from Debian source packages: "debian-src:PACKAGE" specs, the
files a tree must hold for its target, checking a tree (fetched, or a user's own
checkout), and fetching one.

Two packages: arm-trusted-firmware, whose EL3 SPMC targets/spmc compiles
(KCONFORM_TFA_TREE), and optee-os, whose S-EL1 SPMC targets/optee compiles
(KCONFORM_OPTEE_TREE). A fetched tree is the whole source package unpacked by
dpkg-source -x (debian_src.py) into <cache>/trees/debian-src-PACKAGE-VERSION/,
beside the kernel trees, with a stamp (.kconform-tree.json) recording the
package version and the .dsc's SHA256; never inside the repository.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources.debian import PrivateApt, Progress, cache_errors, system_mirror
from kconform.sources.debian_src import download_and_unpack, show_source
from kconform.sources.trees import STAMP_NAME, TreeError, read_stamp

PREFIX = "debian-src:"

# Every file of a TF-A tree that targets/spmc compiles or reads (targets/spmc/CMakeLists.txt
# compiles exactly these .c files and includes from the tree's include folders).
TFA_NEEDED_PATHS: tuple[str, ...] = (
    "Makefile",                                               # VERSION_MAJOR/MINOR/PATCH
    "services/std_svc/spm/el3_spmc/spmc_shared_mem.c",        # FF-A memory sharing under test
    "services/std_svc/spm/el3_spmc/spmc_main.c",              # the dispatcher, mailboxes, partitions
    "services/std_svc/spm/el3_spmc/spmc_setup.c",             # SP setup from its manifest
    "services/std_svc/spm/el3_spmc/logical_sp.c",
    "services/std_svc/spm/el3_spmc/spmc_pm.c",
    "services/std_svc/spm/el3_spmc/spmc.h",
    "services/std_svc/spm/el3_spmc/spmc_shared_mem.h",
    "services/std_svc/spm/common/include/spm_common.h",
    "include/services/ffa_svc.h",                             # FF-A function IDs, errors, version
    "include/services/el3_spmc_ffa_memory.h",                 # memory descriptors
    "include/arch/aarch64/smccc_helpers.h",                   # SMC_RETn (wrapped by the shim)
    "include/arch/aarch64/arch_helpers.h",                    # wrapped by the shim
    "common/uuid.c",
    "common/fdt_wrappers.c",
    "lib/libc/strlcpy.c",
    "lib/libfdt/fdt.c", "lib/libfdt/fdt_ro.c", "lib/libfdt/fdt_sw.c", "lib/libfdt/fdt_wip.c",
    "lib/libfdt/fdt_rw.c", "lib/libfdt/fdt_strerror.c", "lib/libfdt/fdt_addresses.c",
    "include/lib/libfdt/libfdt.h",
)


# Every file of an OP-TEE OS tree that targets/optee compiles or needs (targets/optee/
# CMakeLists.txt compiles exactly these .c files and includes from the tree's include
# folders; its conf.h is our own).
OPTEE_NEEDED_PATHS: tuple[str, ...] = (
    "mk/config.mk",                                           # CFG_OPTEE_REVISION_MAJOR/MINOR
    "core/arch/arm/kernel/thread_spmc.c",                     # the S-EL1 SPMC under test
    "core/arch/arm/mm/mobj_ffa.c",                            # its shared-memory objects (the table)
    "core/arch/arm/include/ffa.h",                            # FF-A function IDs, errors, descriptors
    "core/arch/arm/include/optee_ffa.h",                      # OP-TEE's direct-request ABI
    "core/arch/arm/include/kernel/thread_spmc.h",
    "core/arch/arm/plat-vexpress/platform_config.h",          # the platform conf.h names
    "core/include/mm/mobj.h",
    "core/mm/tee_mm.c",                                       # the VA-pool allocator
    "core/kernel/refcount.c", "core/kernel/assert.c", "core/kernel/tee_misc.c",
    "core/kernel/spin_lock_debug.c",
    "core/lib/libfdt/include/libfdt.h",
    "lib/libutils/isoc/bget_malloc.c", "lib/libutils/isoc/bget.c",   # OP-TEE's heap
    "lib/libutils/isoc/include/malloc.h",
    "lib/libutils/ext/trace.c", "lib/libutils/ext/snprintk.c",
)


@dataclasses.dataclass(frozen=True)
class SourceTreeSpec:
    spec: str                 # "debian-src:arm-trusted-firmware"
    package: str              # the Debian source package
    version: str              # pinned: targets/spmc's stand-ins are written against it
    suites: tuple[str, ...]
    needed: tuple[str, ...]
    target: str = "targets/spmc"   # the target whose stand-ins are written against it


SOURCE_TREES: dict[str, SourceTreeSpec] = {
    "arm-trusted-firmware": SourceTreeSpec(
        "debian-src:arm-trusted-firmware", "arm-trusted-firmware", "2.12.1+dfsg-1",
        ("trixie",), TFA_NEEDED_PATHS),
    # Only sid has optee-os (4.10.0-2 when targets/optee was written); sid versions
    # go away, and then the fetch says which version it found instead.
    "optee-os": SourceTreeSpec(
        "debian-src:optee-os", "optee-os", "4.10.0-2", ("sid",), OPTEE_NEEDED_PATHS, "targets/optee"),
}
# The TF-A tree of targets/spmc when the user names none (./kconform build).
DEFAULT_SPMC_TREE = "debian-src:arm-trusted-firmware"
# The OP-TEE tree of targets/optee (./kconform build).
DEFAULT_OPTEE_TREE = "debian-src:optee-os"


@dataclasses.dataclass(frozen=True)
class SourceTreeInfo:
    path: Path
    version: str                      # from the tree itself (TF-A: its Makefile; OP-TEE: mk/config.mk)
    package: str | None = None        # set for fetched trees, from the stamp
    package_version: str | None = None
    sha256: str | None = None


def is_source_spec(text: str) -> bool:
    return str(text).strip().startswith(PREFIX)


def parse_spec(spec: str) -> SourceTreeSpec:
    """Parses "debian-src:PACKAGE"; raises TreeError naming the spec otherwise."""
    known = ", ".join(PREFIX + p for p in SOURCE_TREES)
    text = spec.strip()
    if not text.startswith(PREFIX):
        raise TreeError(f"unknown source tree spec {spec!r}: expected {known}")
    package = text[len(PREFIX):]
    if package not in SOURCE_TREES:
        raise TreeError(f"unknown source tree spec {spec!r}: no source package {package!r} is "
                        f"known to kconform; expected {known}")
    return SOURCE_TREES[package]


def tfa_version(makefile: Path) -> str:
    """"MAJOR.MINOR.PATCH" from TF-A's top-level Makefile."""
    fields: dict[str, str] = {}
    for line in makefile.read_text(errors="replace").splitlines()[:40]:
        m = re.match(r"^(VERSION_MAJOR|VERSION_MINOR|VERSION_PATCH)\s*:?=\s*(\d+)", line)
        if m:
            fields[m.group(1)] = m.group(2)
    if "VERSION_MAJOR" not in fields or "VERSION_MINOR" not in fields:
        raise TreeError(f"{makefile} has no VERSION_MAJOR/VERSION_MINOR lines: "
                        f"is this a TF-A (arm-trusted-firmware) tree?")
    return ".".join(fields[k] for k in ("VERSION_MAJOR", "VERSION_MINOR", "VERSION_PATCH") if k in fields)


def _check_tree(tree_path: str | os.PathLike, what: str, needed: tuple[str, ...], hint: str,
                version) -> SourceTreeInfo:
    """A firmware tree (fetched, or the user's checkout) holding every file of needed:
    its path, version(root) and what its stamp says of the package."""
    root = Path(tree_path)
    if not root.is_dir():
        raise TreeError(f"{what} tree {root} does not exist or is not a directory")
    missing = [p for p in needed if not (root / p).is_file()]
    if missing:
        raise TreeError(f"{what} tree {root} lacks {len(missing)} needed file(s): " + ", ".join(missing) + hint)
    stamp = read_stamp(root)
    return SourceTreeInfo(root, version(root), stamp.get("package"), stamp.get("package_version"),
                          stamp.get("sha256"))


def check_tfa(tree_path: str | os.PathLike) -> SourceTreeInfo:
    """Checks that a TF-A tree (fetched or the user's checkout) holds every file
    targets/spmc uses."""
    return _check_tree(tree_path, "TF-A", TFA_NEEDED_PATHS,
                       f" (fetch one with `./kconform tree fetch {DEFAULT_SPMC_TREE}`, or point "
                       "--spmc-tree at a full arm-trusted-firmware checkout)",
                       lambda root: tfa_version(root / "Makefile"))


def optee_version(config_mk: Path) -> str:
    """"MAJOR.MINOR" from OP-TEE's mk/config.mk (CFG_OPTEE_REVISION_MAJOR/MINOR)."""
    fields: dict[str, str] = {}
    for line in config_mk.read_text(errors="replace").splitlines():
        m = re.match(r"^CFG_OPTEE_REVISION_(MAJOR|MINOR)\s*\??=\s*(\d+)", line)
        if m:
            fields[m.group(1)] = m.group(2)
    if set(fields) != {"MAJOR", "MINOR"}:
        raise TreeError(f"{config_mk} has no CFG_OPTEE_REVISION_MAJOR/MINOR lines: "
                        f"is this an OP-TEE OS (optee-os) tree?")
    return f"{fields['MAJOR']}.{fields['MINOR']}"


def check_optee(tree_path: str | os.PathLike) -> SourceTreeInfo:
    """Checks that an OP-TEE OS tree (fetched or the user's checkout) holds every
    file targets/optee uses."""
    return _check_tree(tree_path, "OP-TEE", OPTEE_NEEDED_PATHS,
                       f" (fetch one with `./kconform tree fetch {DEFAULT_OPTEE_TREE}`, or point "
                       "KCONFORM_OPTEE_TREE at a full optee_os checkout)",
                       lambda root: optee_version(root / "mk" / "config.mk"))


def _folder(s: SourceTreeSpec, cache: Path) -> Path:
    return cache / "trees" / f"debian-src-{s.package}-{s.version}"


def _stamp_is_current(stamp: dict, s: SourceTreeSpec) -> bool:
    return (stamp.get("kind") == "debian-src" and stamp.get("package") == s.package
            and stamp.get("package_version") == s.version and stamp.get("paths") == list(s.needed))


def cached(spec: str, cache: Path | None = None) -> Path | None:
    """The fetched tree of spec in the cache, without touching the network; None when
    it is not there (or spec is not a known source spec)."""
    try:
        s = parse_spec(spec)
    except TreeError:
        return None
    d = _folder(s, cache if cache is not None else default_cache_dir())
    return d if _stamp_is_current(read_stamp(d), s) else None


def fetch(spec: str, cache_dir: str | os.PathLike | None = None,
          progress: Progress = print, refresh: bool = False) -> Path:
    """Downloads and unpacks the source package of spec into the cache; returns the
    tree's path. A tree already there is returned without the network unless refresh."""
    s = parse_spec(spec)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    with cache_errors(cache, spec, TreeError):
        cache.mkdir(parents=True, exist_ok=True)
        have = cached(spec, cache)
        if have is not None and not refresh:
            progress(f"tree {s.spec}: {have} (cached)")
            return have
        return _download(s, cache, progress)


def _download(s: SourceTreeSpec, cache: Path, progress: Progress) -> Path:
    mirror = system_mirror(error=TreeError)
    apt = PrivateApt(cache, s.suites, mirror, TreeError, kind="deb-src")
    apt.update(progress, f"tree {s.spec}")
    pkg = show_source(apt, s.package, s.version,
                      f"kconform pins {s.version} ({s.target}'s stand-ins are written for it); "
                      f"a newer one needs SOURCE_TREES in sources/source_trees.py updated and "
                      f"{s.target} rebuilt against it")
    final = _folder(s, cache)
    (cache / "trees").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=cache / "trees"))
    tmp.chmod(0o755)
    try:
        download_and_unpack(apt, pkg, tmp / "src", progress, f"tree {s.spec}")
        missing = [p for p in s.needed if not (tmp / "src" / p).is_file()]
        if missing:
            raise TreeError(f"{pkg.dsc} lacks needed file(s): {', '.join(missing)}; "
                            f"this version cannot be used by kconform")
        (tmp / "src" / STAMP_NAME).write_text(json.dumps({
            "spec": s.spec, "kind": "debian-src", **pkg.info(), "mirror": mirror,
            "suites": list(s.suites), "paths": list(s.needed)}, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        (tmp / "src").rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    progress(f"tree {s.spec}: {final}")
    return final
