"""The EL2 target's builds: the real ffa.c of a kernel tree (Debian's, or the
user's own, optionally with a patch applied), compiled for the host once per
tree and host PAGE_SIZE, each build with its own runner executable.

Built from content, whatever the mtimes: ffa.c is compiled in place from the tree
(KCONFORM_KERNEL_TREE), so a file restored with an older mtime (`cp -p`, `rsync -t`,
`tar x`) would look older than its object to ninja, which would skip it. Every build
therefore passes the SHA-256 of the tree files the EL2 build reads (trees.NEEDED_PATHS,
a superset of what targets/el2/tools/extract_tree.py lists in deps.txt) as a C
definition (CMAKE_C_FLAGS): when that content changes, the command line of every C
object changes and ninja recompiles them. The configure step (which reads the tree's
facts, e.g. whether ffa.c handles RECLAIM2) runs on every build. The content is hashed
again after the build; if it changed meanwhile, the build runs again.

Every build folder (one per tree, per sanitizer, per coverage) compiles the same engine
(runner, oracle, models: nine tenths of its objects); only the C from the tree and the
EL2 target's glue differ. With ccache installed (ci/packages.txt, group ccache) the
compilers run under it (compiler_launcher()), so a second tree's build compiles only
what differs. ccache keys on the preprocessed content and the command line, never on
mtimes: a file restored with an older mtime is still a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from kconform.core import locks
from kconform.core.errors import ToolError
from kconform.core.paths import REPO
from kconform.engine.build import cmake_build
from kconform.sources import patches, tree_fetch
from kconform.sources.trees import NEEDED_PATHS

PAGE_SIZES = {"4K": 4096, "16K": 16384, "64K": 65536}
CONTENT_DEFINE = "KC_TREE_CONTENT_SHA256"   # in CMAKE_C_FLAGS; read by nothing, changes the command
CONTENT_STAMP = ".kconform-el2-content.json"
RUNNERS_DIR = "runners"      # <build folder>/runners/<content hash>/kconform-runner-el2-*
KEEP_RUNNERS = 4
BUILD_ATTEMPTS = 3


def parse_page_size(text: str) -> int:
    key = text.upper().removesuffix("B")
    if key in PAGE_SIZES:
        return PAGE_SIZES[key]
    if key.isdigit() and int(key) in PAGE_SIZES.values():
        return int(key)
    raise ToolError(f"flag --page-size: '{text}' is not one of {', '.join(PAGE_SIZES)}")


def runner_name(page_size: int) -> str:
    return f"kconform-runner-el2-{page_size // 1024}k"


def resolve_tree(spec: str, patch: str | None = None, log=print) -> tuple[Path, str]:
    """A tree spec (debian:X.Y) or a local path, with an optional patch applied
    to a copy; returns (tree path, a short id naming its build)."""
    info = tree_fetch.resolve(spec, progress=log)
    path = info.path
    tree_id = f"{'debian-' if spec.startswith('debian:') else 'local-'}{info.version}"
    if not spec.startswith("debian:"):
        tree_id += "-" + hashlib.sha256(str(path).encode()).hexdigest()[:8]
    if patch:
        patch_path = Path(patch)
        if not patch_path.is_file():
            raise ToolError(f"flag --apply: {patch}: no such patch file")
        path = patches.apply(path, patch_path)
        # "patched-" first, so a baseline pattern for a stock tree never covers a patched one.
        tree_id = f"patched-{tree_id}-{hashlib.sha256(patch_path.read_bytes()).hexdigest()[:8]}"
    return path, tree_id


def compiler_launcher() -> dict[str, str]:
    """CMake's compiler launchers for ccache, if installed: its cache in kconform's
    (cache_dir()/ccache), paths under the repository hashed relative to it and the
    build folder left out of the hash (CCACHE_BASEDIR, CCACHE_NOHASHDIR), so the
    objects of build/el2/A serve build/el2/B: every build folder sits at the same
    depth, so their relative paths are the same. Without ccache, empty launchers (a
    folder configured while it was installed builds plainly once it is gone)."""
    ccache = shutil.which("ccache")
    if not ccache:
        return {"CMAKE_C_COMPILER_LAUNCHER": "", "CMAKE_CXX_COMPILER_LAUNCHER": ""}
    from kconform.core.paths import cache_dir
    env = shutil.which("env") or "/usr/bin/env"
    launcher = ";".join([env, f"CCACHE_DIR={cache_dir() / 'ccache'}", f"CCACHE_BASEDIR={REPO}",
                         "CCACHE_NOHASHDIR=true", ccache])
    return {"CMAKE_C_COMPILER_LAUNCHER": launcher, "CMAKE_CXX_COMPILER_LAUNCHER": launcher}


def tree_content(tree: Path) -> str:
    """SHA-256 of the names and contents of the tree files the EL2 build reads."""
    return patches.content_key(Path(tree), list(NEEDED_PATHS))


# clang's source-based coverage of the C compiled from the tree (ffa.c and the C
# stand-ins): `kconform coverage` (engine/coverage.py).
COVERAGE_FLAGS = "-fprofile-instr-generate -fcoverage-mapping"


def build(tree: Path, tree_id: str, page_sizes: list[int], sanitize: bool = False,
          jobs: int | None = None, log=print, coverage: bool = False,
          spmc_tree: str | os.PathLike | None = None) -> dict[int, Path]:
    """Configures and builds the el2 runners of a tree; returns page size -> binary.

    spmc_tree (a debian-src: spec or a TF-A checkout): also build TF-A's EL3 SPMC into
    the runners, as target family "el2-tfa" (`run --target el2 --el3 tf-a`); the build
    folder keeps it for later builds.

    The build folder is locked from the configure to the copy-out: each runner is copied
    to runners/<content hash>/ in the build folder, so a run keeps the binary built from
    the content it hashed even if another run rebuilds the folder for other content."""
    out = REPO / "build" / "el2" / (tree_id + ("-asan" if sanitize else "") + ("-cov" if coverage else ""))
    sizes = ";".join(str(p) for p in sorted(set(page_sizes)))
    log(f"kconform: building the EL2 handler of {tree_id} ({sizes.replace(';', ', ')} byte pages)")
    with locks.locked(out / locks.LOCK_NAME, f"the build folder build/el2/{out.name}", log):
        for _ in range(BUILD_ATTEMPTS):
            content = tree_content(tree)
            cmake_build(out, definitions={
                            "CMAKE_C_COMPILER": "clang", "CMAKE_CXX_COMPILER": "clang++",
                            "CMAKE_BUILD_TYPE": "Debug" if sanitize else "RelWithDebInfo",
                            "CMAKE_C_FLAGS": f"-D{CONTENT_DEFINE}={content[:32]}"
                                             + (f" {COVERAGE_FLAGS}" if coverage else ""),
                            "CMAKE_EXE_LINKER_FLAGS": "-fprofile-instr-generate" if coverage else "",
                            "KCONFORM_SANITIZE": "ON" if sanitize else "OFF",
                            "KCONFORM_PAGE_SIZE": sizes, "KCONFORM_EL2_REQUIRED": "ON",
                            "KCONFORM_TESTS": "OFF", **compiler_launcher()},
                        targets=[runner_name(p) for p in page_sizes], tree=tree, tree_required=True,
                        spmc_tree=spmc_tree, spmc_tree_required=spmc_tree is not None,
                        jobs=jobs, what=f"the EL2 handler of {tree}",
                        build_hint=" (a tree kconform cannot build names the symbol)", log=log)
            if tree_content(tree) == content:
                break
            log(f"kconform: {tree} changed while its EL2 handler was built; building again")
        else:
            raise ToolError(f"{tree} kept changing while its EL2 handler was built "
                            f"({BUILD_ATTEMPTS} attempts): build it when it is not being written to")
        return _copy_out(out, tree, content, page_sizes)


def _copy_out(out: Path, tree: Path, content: str, page_sizes: list[int]) -> dict[int, Path]:
    dest = out / RUNNERS_DIR / content[:16]
    dest.mkdir(parents=True, exist_ok=True)
    found = {}
    for p in page_sizes:
        built = out / "harness" / "runner" / runner_name(p)
        if not built.is_file():
            hits = [h for h in out.rglob(runner_name(p)) if RUNNERS_DIR not in h.relative_to(out).parts]
            if not hits:
                raise ToolError(f"{out}: the build made no {runner_name(p)}")
            built = hits[0]
        tmp = dest / f".{runner_name(p)}.{os.getpid()}"
        shutil.copy2(built, tmp)
        os.replace(tmp, dest / runner_name(p))   # a run still using the old file keeps it
        found[p] = dest / runner_name(p)
    (dest / CONTENT_STAMP).write_text(json.dumps({"tree": str(tree), "content_sha256": content,
                                                  "page_sizes": sorted(set(page_sizes))}) + "\n")
    os.utime(dest)
    # keep the runners of the last few contents (a run may still be using one of them)
    others = sorted((d for d in (out / RUNNERS_DIR).iterdir() if d.is_dir() and d != dest),
                    key=lambda d: d.stat().st_mtime, reverse=True)
    for old in others[KEEP_RUNNERS - 1:]:
        shutil.rmtree(old, ignore_errors=True)
    return found
