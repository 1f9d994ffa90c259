"""Kernel trees: what a tree is (the files kconform uses), tree specs, checking a
tree, and the trees already in the cache.

A tree is the handful of kernel files kconform compiles and reads (NEEDED_PATHS),
never the whole kernel, and never inside the repository: fetched trees
(tree_fetch.py) live in <cache>/trees/debian-X.Y.Z/ with a stamp recording the
package version and the .deb's SHA256; a user's own tree is checked in place.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources.debian import upstream_version

# Every file of a tree that kconform uses, relative to the tree's root. One list:
# fetch() extracts exactly these and check() requires exactly these.
NEEDED_PATHS: tuple[str, ...] = (
    "Makefile",                                         # kernel version
    "arch/arm64/kvm/hyp/nvhe/ffa.c",                    # the EL2 FF-A proxy under test
    "arch/arm64/kvm/hyp/nvhe/hyp-main.c",               # handle_host_smc(): the host SMC dispatch before the proxy
    "arch/arm64/kvm/hyp/include/nvhe/ffa.h",            # FFA_MIN/MAX_FUNC_NUM
    "arch/arm64/kvm/hyp/include/nvhe/trap_handler.h",   # cpu_reg(), DECLARE_REG()
    "arch/arm64/kvm/hyp/include/nvhe/mem_protect.h",    # host share/unshare prototypes (API drift)
    "arch/arm64/include/asm/kvm_pkvm.h",                # KVM_FFA_MBOX_NR_PAGES, hyp_ffa_proxy_pages()
    "arch/arm64/include/asm/esr.h",                     # ESR_ELx_xVC_IMM_MASK, read by handle_host_smc()
    "include/linux/wordpart.h",                         # upper_32_bits(), read by handle_host_smc()
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
# The tree used when the user names none (el2 target, engine builds, self-tests).
DEFAULT_TREE = "debian:7.3"

STAMP_NAME = ".kconform-tree.json"


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
                        + " (fetch a complete tree with `./kconform tree fetch debian:X.Y`, "
                          "or point --tree at a full kernel source tree)")
    stamp = read_stamp(root)
    return TreeInfo(path=root, version=makefile_version(root / "Makefile"),
                    present=present, missing=(),
                    package=stamp.get("package"), package_version=stamp.get("package_version"),
                    sha256=stamp.get("sha256"))


def read_stamp(root: Path) -> dict:
    """The stamp of a fetched (or patched) tree; {} for a user's own tree."""
    try:
        return json.loads((root / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return {}


def stamp_is_current(stamp: dict, package: str) -> bool:
    """A stamp of package made with today's NEEDED_PATHS."""
    return stamp.get("package") == package and stamp.get("paths") == list(NEEDED_PATHS)


def cached(spec: TreeSpec, cache: Path) -> Path | None:
    """The newest complete tree of spec in the cache, without touching the network."""
    best: tuple[list[int], Path] | None = None
    trees = cache / "trees"
    if not trees.is_dir():
        return None
    for d in trees.glob(f"debian-{spec.series}.*"):
        stamp = read_stamp(d)
        if not stamp_is_current(stamp, spec.package):
            continue
        key = [int(x) for x in re.findall(r"\d+", upstream_version(stamp["package_version"]))]
        if best is None or key > best[0]:
            best = (key, d)
    return best[1] if best else None


def cached_spec(spec: str, cache: Path | None = None) -> Path | None:
    """cached() for a "debian:X.Y" spec; None for anything else or when not cached."""
    try:
        s = parse_spec(spec)
    except TreeError:
        return None
    return cached(s, cache if cache is not None else default_cache_dir())


def cache_listing(cache: Path | None = None) -> tuple[Path, list[Path]]:
    """(<cache>/trees, the tree folders in it)."""
    root = (cache if cache is not None else default_cache_dir()) / "trees"
    return root, sorted(p for p in root.glob("*") if p.is_dir()) if root.exists() else []
