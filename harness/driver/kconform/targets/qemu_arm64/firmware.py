"""The firmware of the arm64 stack: TF-A's BL1, BL2 and BL31 for PLAT=qemu with the
SPMD and the SPMC at EL3, our secure partition as BL32 and its manifest as
TOS_FW_CONFIG, packed by TF-A's own make target into qemu_fw.bios (bl1.bin, then
fip.bin at 256 KiB), which QEMU takes with -bios.

Built from Debian's TF-A source package (debian-src:arm-trusted-firmware, fetched
into the cache by sources/source_trees.py) with Debian's cross compiler, in a copy
of the tree under <cache>/firmware (never in the tree, never in the repository),
and cached like kernels: <cache>/firmware/qemu-arm64-<key>/ holds bl1.bin, fip.bin,
qemu_fw.bios, the make command line (make-command.txt), the build's output
(build.log), the partition it packed (sp.bin, sp_manifest.dts) and a stamp
(.kconform-firmware.json) with every input of the key.

The kernel is not in the FIP: with PRELOADED_BL33_BASE, BL2 skips loading BL33 and
BL31 enters the address KERNEL_BASE, where QEMU's loader device puts the kernel
Image (boot.py); ARM_LINUX_KERNEL_AS_BL33 makes BL31 pass the DTB's address in x0 as
Linux's arm64 boot protocol asks. So one firmware serves every kernel.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from kconform.core import locks, procs
from kconform.core.errors import ToolError
from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources import source_trees
from kconform.sources.trees import read_stamp
from kconform.targets.qemu_arm64 import partition
from kconform.targets.qemu_arm64.toolchain import CROSS_COMPILE, build_tool_versions

Log = Callable[[str], None]

TFA_TREE = source_trees.DEFAULT_SPMC_TREE        # debian-src:arm-trusted-firmware
FORMAT = 1                                       # of the stamp and of what goes into the key
STAMP_NAME = ".kconform-firmware.json"
COMMAND_NAME = "make-command.txt"
OUTPUTS = ("bl1.bin", "fip.bin", "qemu_fw.bios")
BUILD_TIMEOUT = 1800.0                           # seconds; a cold build takes ~10 s on 2 cores
# Where BL31 enters the normal world and QEMU's loader puts the kernel Image: the first
# 2 MiB-aligned address of RAM (0x40000000 on virt) past the DTB, which QEMU puts at the
# start of RAM for a firmware boot and TF-A reads there (ARM_PRELOADED_DTB_BASE; at most
# PLAT_QEMU_DT_MAX_SIZE, 1 MiB). Linux's arm64 Image wants a 2 MiB-aligned base.
KERNEL_BASE = 0x40200000
# LOG_LEVEL 50 (VERBOSE): BL31 prints "SPM(cpu): fid x1..x7" for every FF-A call
# that reaches EL3 from the normal world (at 40 it prints none of them).
LOG_LEVEL = 50

# The build options that do not name a file; BL32 and QEMU_TOS_FW_CONFIG_DTS (the
# partition and its manifest) are added by make_options and keyed by their content.
FIXED_OPTIONS: tuple[tuple[str, str], ...] = (
    ("CROSS_COMPILE", CROSS_COMPILE),
    ("PLAT", "qemu"),
    ("QEMU_USE_GIC_DRIVER", "QEMU_GICV3"),     # QEMU runs with gic-version=3 (boot.py)
    ("SPD", "spmd"),
    ("SPMD_SPM_AT_SEL2", "0"),
    ("SPMC_AT_EL3", "1"),
    ("PRELOADED_BL33_BASE", f"{KERNEL_BASE:#x}"),
    ("ARM_LINUX_KERNEL_AS_BL33", "1"),
    ("LOG_LEVEL", str(LOG_LEVEL)),
)
TARGETS = ("all", "fip", "qemu_fw.bios")


@dataclasses.dataclass(frozen=True)
class Firmware:
    """A built firmware in the cache."""
    folder: Path
    key: str
    stamp: dict

    @property
    def bios(self) -> Path:
        return self.folder / "qemu_fw.bios"

    @property
    def tfa_version(self) -> str:
        return self.stamp.get("inputs", {}).get("tree", {}).get("version", "")


def make_options(sp_bin: Path, manifest: Path) -> list[str]:
    """The NAME=VALUE arguments of make."""
    return [f"{k}={v}" for k, v in FIXED_OPTIONS] + [f"BL32={sp_bin}", f"QEMU_TOS_FW_CONFIG_DTS={manifest}"]


def make_command(sp_bin: Path, manifest: Path, jobs: int) -> list[str]:
    return ["make", f"-j{jobs}", *make_options(sp_bin, manifest), *TARGETS]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_identity(tree: Path) -> dict:
    """What names the TF-A tree's content: its source package and the .dsc's SHA256
    (from the stamp that the fetch wrote), and its version."""
    stamp = read_stamp(tree)
    info = source_trees.check_tfa(tree)
    if not stamp.get("package_version") or not stamp.get("sha256"):
        raise ToolError(f"{tree}: no stamp naming its source package version and SHA256; "
                        f"fetch the tree with ./kconform tree fetch {TFA_TREE}")
    return {"package": stamp.get("package"), "package_version": stamp["package_version"],
            "sha256": stamp["sha256"], "version": info.version}


def key_inputs(tree: dict, sp_source: Path, manifest: Path, tools: dict[str, str]) -> dict:
    """Every input of the firmware: the tree, our partition's source and manifest (by
    content), the fixed build options and the versions of the tools."""
    return {"format": FORMAT, "tree": tree,
            "sp_source": _sha256(sp_source), "sp_manifest": _sha256(manifest),
            "options": [f"{k}={v}" for k, v in FIXED_OPTIONS], "targets": list(TARGETS),
            "tools": tools}


def firmware_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:20]


def _cached(folder: Path, key: str) -> Firmware | None:
    try:
        stamp = json.loads((folder / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("key") != key or not all((folder / o).is_file() for o in OUTPUTS):
        return None
    return Firmware(folder, key, stamp)


FFA_SVC_H = "include/services/ffa_svc.h"


def tfa_max_fnum(log: Log = print, cache_dir: str | os.PathLike | None = None) -> int:
    """SPMC:ROUTED (models/ffa/SPEC.md): the highest FF-A function number BL31 hands to
    the SPMD, FFA_FNUM_MAX_VALUE of the TF-A tree the firmware is built from (BL31's
    is_ffa_fid() takes 0x60 to it; any other SMC is SMC_UNK)."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    tree = source_trees.fetch(TFA_TREE, cache, progress=log)
    try:
        text = (tree / FFA_SVC_H).read_text(errors="replace")
    except OSError as e:
        raise ToolError(f"{tree / FFA_SVC_H}: {e.strerror} (the qemu-arm64 target reads FFA_FNUM_MAX_VALUE there)")
    m = re.search(r"^#define\s+FFA_FNUM_MAX_VALUE\s+U?\(?\s*(0x[0-9a-fA-F]+|\d+)\s*\)?", text, re.M)
    if not m:
        raise ToolError(f"{tree / FFA_SVC_H}: no '#define FFA_FNUM_MAX_VALUE' (the qemu-arm64 target needs it)")
    return int(m.group(1), 0)


def build(log: Log = print, cache_dir: str | os.PathLike | None = None, jobs: int = 2,
          sp_source: Path = partition.SP_SOURCE, manifest: Path = partition.SP_MANIFEST) -> Firmware:
    """The firmware for these inputs, from the cache or built now."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    for p in (sp_source, manifest):
        if not p.is_file():
            raise ToolError(f"{p}: no such file (the secure partition of the qemu-arm64 target)")
    tree = source_trees.fetch(TFA_TREE, cache, progress=log)
    inputs = key_inputs(tree_identity(tree), sp_source, manifest, build_tool_versions())
    key = firmware_key(inputs)
    folder = cache / "firmware" / f"qemu-arm64-{key}"
    with locks.locked(cache / "locks" / "firmware" / f"{folder.name}.lock",
                      f"the firmware build {folder.name}", log):
        have = _cached(folder, key)
        if have is not None:
            log(f"kconform: qemu-arm64: firmware {folder} (cached)")
            return have
        return _build(tree, inputs, key, folder, sp_source, manifest, jobs, log)


def _build(tree: Path, inputs: dict, key: str, folder: Path, sp_source: Path, manifest: Path,
           jobs: int, log: Log) -> Firmware:
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        log(f"kconform: qemu-arm64: building TF-A {inputs['tree']['version']} (SPMC at EL3) "
            f"and our secure partition in {work}")
        sp = work / "sp"
        sp_bin = partition.build(sp, sp_source)   # first: its errors come before the copy
        sp_dts = sp / manifest.name
        shutil.copy2(manifest, sp_dts)
        src = work / "tf-a"
        shutil.copytree(tree, src, symlinks=True)
        cmd = make_command(sp_bin, sp_dts, jobs)
        out = work / "out"
        out.mkdir()
        build_log = out / "build.log"
        started = time.monotonic()
        with open(build_log, "wb") as f:
            try:
                r = procs.run(cmd, cwd=src, stdout=f, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise ToolError(f"the TF-A build in {src} ran longer than {BUILD_TIMEOUT:.0f} s; "
                                f"its output: {build_log}") from None
        seconds = time.monotonic() - started
        if r.returncode != 0:
            kept = folder.parent / f"{folder.name}.failed.log"
            shutil.copy2(build_log, kept)
            tail = "\n".join(build_log.read_text(errors="replace").splitlines()[-15:])
            raise ToolError(f"the TF-A build failed (make status {r.returncode}) in a copy of {tree} "
                            f"(removed): {shlex.join(cmd)}\nits output: {kept}; last lines:\n{tail}")
        release = src / "build" / "qemu" / "release"
        for name in OUTPUTS:
            if not (release / name).is_file():
                raise ToolError(f"the TF-A build made no {release / name}; its output: {build_log}")
            shutil.copy2(release / name, out / name)
        shutil.copy2(sp_bin, out / sp_bin.name)
        shutil.copy2(sp_dts, out / sp_dts.name)
        (out / COMMAND_NAME).write_text(
            f"# TF-A {inputs['tree']['version']} from {tree}, built in a copy of it (removed after\n"
            f"# the build); BL32 and QEMU_TOS_FW_CONFIG_DTS are the sp.bin and {sp_dts.name} kept here\n"
            f"cd {src}\n{shlex.join(cmd)}\n")
        stamp = {"format": FORMAT, "key": key, "inputs": inputs, "tree_path": str(tree),
                 "command": cmd, "seconds": round(seconds, 1),
                 "outputs": {name: _sha256(out / name) for name in OUTPUTS}}
        (out / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        out.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"kconform: qemu-arm64: firmware {folder} (built in {seconds:.1f} s)")
    return Firmware(folder, key, stamp)
