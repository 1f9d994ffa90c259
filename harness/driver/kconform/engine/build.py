"""Configuring and building with CMake: the one helper every build goes through
(the engine's presets, the EL2 handler of each tree, the fuzz runner of a
RECLAIM2 mutant).

CMake never calls the driver: before configuring, the kernel tree of the EL2
target is fetched here (a debian:X.Y spec; debian:7.3 unless the caller names
another) and checked, and its path is passed as KCONFORM_KERNEL_TREE; for the
engine's presets, the TF-A tree of the SPMC target likewise
(debian-src:arm-trusted-firmware) as KCONFORM_TFA_TREE, and the OP-TEE tree of the
OP-TEE SPMC (debian-src:optee-os) as KCONFORM_OPTEE_TREE: never required, a failure
to fetch it is a warning and the build goes on without targets/optee.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable

from kconform.core import deps, locks, procs
from kconform.core.errors import ToolError
from kconform.core.paths import REPO, build_dir
from kconform.sources import source_trees, tree_fetch, trees

Log = Callable[[str], None]
TREE_VARIABLE = "KCONFORM_KERNEL_TREE"
SPMC_TREE_VARIABLE = "KCONFORM_TFA_TREE"
OPTEE_TREE_VARIABLE = "KCONFORM_OPTEE_TREE"


def cache_value(build: Path, name: str) -> str | None:
    """A variable of build/CMakeCache.txt (None: not configured, or not set)."""
    try:
        text = (build / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.split(":", 1)[0] == name:
            return value
    return None


def _generated(build: Path) -> bool:
    return (build / "build.ninja").exists() or (build / "Makefile").exists()


def _run(cmd: list[str], what: str) -> None:
    # pass_fds: the build folder's lock stays held while cmake or ninja still runs, even
    # if this process is gone (see core/locks.py)
    r = procs.run(cmd, cwd=REPO, capture_output=True, text=True, pass_fds=locks.held_fds())
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).splitlines()[-40:])
        raise ToolError(f"{what} failed ({' '.join(cmd)}):\n{tail}")


@dataclasses.dataclass(frozen=True)
class TreeKind:
    """A kind of source tree the build configures with: how its specs are told from
    paths, looked up in the cache, fetched and checked."""
    what: str
    is_spec: Callable[[str], bool]
    cached: Callable[[str], Path | None]
    fetch: Callable[..., Path]
    check: Callable[[Path], object]


KERNEL_TREE = TreeKind("kernel tree for the EL2 target", lambda t: t.startswith("debian:"),
                       lambda t: trees.cached_spec(t), lambda t, progress: tree_fetch.fetch(t, progress=progress),
                       lambda p: trees.check(p))
TFA_TREE = TreeKind("TF-A tree for the SPMC target", lambda t: source_trees.is_source_spec(t),
                    lambda t: source_trees.cached(t),
                    lambda t, progress: source_trees.fetch(t, progress=progress), lambda p: source_trees.check_tfa(p))
OPTEE_TREE = TreeKind("OP-TEE tree for the SPMC target (--spmc op-tee)", lambda t: source_trees.is_source_spec(t),
                      lambda t: source_trees.cached(t),
                      lambda t, progress: source_trees.fetch(t, progress=progress),
                      lambda p: source_trees.check_optee(p))


def _checked(kind: TreeKind, tree: str | os.PathLike, required: bool, offline: bool, log: Log) -> Path | None:
    """The tree to configure with: a spec fetched (only from the cache when offline) or
    a path, checked. None when there is none and it is not required (the build then
    lacks that target, as CMake warns)."""
    text = str(tree)
    try:
        if kind.is_spec(text):
            path = kind.cached(text) if offline else kind.fetch(text, progress=log)
            if path is None:
                return None
        else:
            path = Path(text).resolve()
        return kind.check(path).path
    except trees.TreeError as e:
        if required:
            raise
        log(f"kconform: no {kind.what} ({str(e).splitlines()[0]}); building without it")
        return None


def _checked_tree(tree: str | os.PathLike, required: bool, offline: bool, log: Log) -> Path | None:
    """The kernel tree of the EL2 target (debian:X.Y or a path)."""
    return _checked(KERNEL_TREE, tree, required, offline, log)


def _checked_spmc_tree(tree: str | os.PathLike, offline: bool, log: Log,
                       required: bool = False) -> Path | None:
    """The TF-A tree of the SPMC target (debian-src:arm-trusted-firmware or a path)."""
    return _checked(TFA_TREE, tree, required, offline, log)


def _checked_optee_tree(tree: str | os.PathLike, offline: bool, log: Log,
                        required: bool = False) -> Path | None:
    """The OP-TEE tree of targets/optee (debian-src:optee-os or a path). Unless required
    (`kconform test`, whose OP-TEE test programs need it), any failure to fetch or check
    it is a warning, and the build goes on without it."""
    try:
        return _checked(OPTEE_TREE, tree, required, offline, log)
    except ToolError as e:  # not a TreeError (say, the disk): still not this build's failure
        if required:
            raise
        log(f"kconform: no {OPTEE_TREE.what} ({str(e).splitlines()[0]}); building without it")
        return None


def cmake_build(build: Path, *, source: Path = REPO, preset: str | None = None,
                generator: str = "Ninja", definitions: dict[str, str] | None = None,
                targets: list[str] | None = None,
                tree: str | os.PathLike | None = trees.DEFAULT_TREE, tree_required: bool = False,
                spmc_tree: str | os.PathLike | None = None, spmc_tree_required: bool = False,
                reconfigure: bool = True, jobs: int | None = None, what: str | None = None,
                build_hint: str = "", log: Log = print,
                optee_tree: str | os.PathLike | None = None, optee_tree_required: bool = False) -> Path:
    """Configures build (from source with generator, or from a CMake preset, plus the
    cache definitions and the checked kernel tree) and builds targets (all if None).

    reconfigure=False configures only a build folder never generated, or one whose
    kernel tree is unset or gone while a tree is in the cache; otherwise `cmake --build`
    re-runs the configure step itself when CMake files change. spmc_tree (the engine's
    presets pass one) is the TF-A tree of targets/spmc, handled the same way; a build
    folder configured before targets/spmc existed (no KCONFORM_TFA_TREE at all) is
    configured again with it, fetched if need be. optee_tree (the engine's presets pass
    one) is the OP-TEE tree of targets/optee, handled like an spmc_tree that is not
    required unless optee_tree_required.

    The build folder is locked (build/.kconform.lock) from the configure decision to the
    end of the build: a second kconform on the same folder waits for the first.
    """
    deps.ensure(["build"], log)
    what = what or (f"preset {preset}" if preset else str(build))
    rel = build.relative_to(REPO) if build.is_relative_to(REPO) else build
    with locks.locked(build / locks.LOCK_NAME, f"the build folder {rel}", log):
        _configure_and_build(build, source, preset, generator, definitions, targets, tree,
                             tree_required, spmc_tree, spmc_tree_required, reconfigure, jobs, what,
                             build_hint, log, optee_tree=optee_tree, optee_tree_required=optee_tree_required)
    return build


def _configure_and_build(build: Path, source: Path, preset: str | None, generator: str,
                         definitions: dict[str, str] | None, targets: list[str] | None,
                         tree: str | os.PathLike | None, tree_required: bool,
                         spmc_tree: str | os.PathLike | None, spmc_tree_required: bool,
                         reconfigure: bool,
                         jobs: int | None, what: str, build_hint: str, log: Log,
                         optee_tree: str | os.PathLike | None = None, optee_tree_required: bool = False) -> None:
    tree_path: Path | None = None
    configure = reconfigure or not _generated(build)
    if tree is not None:
        if configure:
            tree_path = _checked_tree(tree, tree_required, offline=False, log=log)
        else:
            have = cache_value(build, TREE_VARIABLE)
            if not have or not Path(have).is_dir():
                tree_path = _checked_tree(tree, tree_required, offline=True, log=log)
                configure = tree_path is not None
    spmc_path: Path | None = None
    if spmc_tree is not None:
        have = cache_value(build, SPMC_TREE_VARIABLE)
        if spmc_tree_required:  # the user named it (build --spmc-tree): it replaces the folder's
            spmc_path = _checked_spmc_tree(spmc_tree, offline=False, log=log, required=True)
            configure = configure or str(spmc_path) != have
        elif configure or have is None:
            # A fresh configure, or a folder configured before targets/spmc existed.
            spmc_path = _checked_spmc_tree(spmc_tree, offline=False, log=log)
            configure = configure or spmc_path is not None
        elif not have or not Path(have).is_dir():
            spmc_path = _checked_spmc_tree(spmc_tree, offline=True, log=log)
            configure = configure or spmc_path is not None
    optee_path: Path | None = None
    if optee_tree is not None:
        have = cache_value(build, OPTEE_TREE_VARIABLE)
        if configure or have is None or (optee_tree_required and not have):
            # A fresh configure, a folder configured before targets/optee existed, or one
            # configured without it when it is now required.
            optee_path = _checked_optee_tree(optee_tree, offline=False, log=log, required=optee_tree_required)
            configure = configure or optee_path is not None
        elif not have or not Path(have).is_dir():
            optee_path = _checked_optee_tree(optee_tree, offline=not optee_tree_required, log=log,
                                             required=optee_tree_required)
            configure = configure or optee_path is not None
    if configure:
        if not reconfigure:
            rel = build.relative_to(REPO) if build.is_relative_to(REPO) else build
            log(f"kconform: configuring {what} in {rel}")
        cmd = (["cmake", "--preset", preset] if preset else
               ["cmake", "-S", str(source), "-B", str(build), "-G", generator])
        cmd += [f"-D{k}={v}" for k, v in (definitions or {}).items()]
        if tree_path is not None:
            cmd.append(f"-D{TREE_VARIABLE}={tree_path}")
        if spmc_path is not None:
            cmd.append(f"-D{SPMC_TREE_VARIABLE}={spmc_path}")
        if optee_path is not None:
            cmd.append(f"-D{OPTEE_TREE_VARIABLE}={optee_path}")
        _run(cmd, f"configuring {what}")
    cmd = ["cmake", "--build", str(build)]
    if targets:
        cmd += ["--target", *targets]
    if jobs:
        cmd += ["--parallel", str(jobs)]
    _run(cmd, f"building {what}{build_hint}")


def build_preset(preset: str = "default", targets: list[str] | None = None, log: Log = print,
                 spmc_tree: str | os.PathLike | None = None, optee_required: bool = False) -> Path:
    """Builds (incrementally) and returns the build folder of a CMake preset, with the
    default kernel tree for its EL2 handler, a TF-A tree for its SPMC: spmc_tree
    (a debian-src: spec or a path, the user's checkout; it must be usable, and later
    builds of the preset keep it) or the default one, and Debian's OP-TEE tree for
    targets/optee when it can be had (required only with optee_required: `kconform
    test`, whose OP-TEE test programs need it)."""
    return cmake_build(build_dir(preset), preset=preset, targets=targets, reconfigure=False,
                       spmc_tree=spmc_tree or source_trees.DEFAULT_SPMC_TREE,
                       spmc_tree_required=spmc_tree is not None, log=log,
                       optee_tree=source_trees.DEFAULT_OPTEE_TREE, optee_tree_required=optee_required)
