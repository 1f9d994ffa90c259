"""The EL2 target's builds: the real ffa.c of a kernel tree (Debian's, or the
user's own, optionally with a patch applied), compiled for the host once per
tree and host PAGE_SIZE, each build with its own runner executable."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import REPO
from kconform.engine.build import cmake_build
from kconform.sources import patches, tree_fetch

PAGE_SIZES = {"4K": 4096, "16K": 16384, "64K": 65536}


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


def build(tree: Path, tree_id: str, page_sizes: list[int], sanitize: bool = False,
          jobs: int | None = None, log=print) -> dict[int, Path]:
    """Configures and builds the el2 runners of a tree; returns page size -> binary."""
    out = REPO / "build" / "el2" / (tree_id + ("-asan" if sanitize else ""))
    sizes = ";".join(str(p) for p in sorted(set(page_sizes)))
    log(f"kconform: building the EL2 handler of {tree_id} ({sizes.replace(';', ', ')} byte pages)")
    cmake_build(out, definitions={
                    "CMAKE_C_COMPILER": "clang", "CMAKE_CXX_COMPILER": "clang++",
                    "CMAKE_BUILD_TYPE": "Debug" if sanitize else "RelWithDebInfo",
                    "KCONFORM_SANITIZE": "ON" if sanitize else "OFF",
                    "KCONFORM_PAGE_SIZE": sizes, "KCONFORM_EL2_REQUIRED": "ON", "KCONFORM_TESTS": "OFF"},
                targets=[runner_name(p) for p in page_sizes], tree=tree, tree_required=True,
                jobs=jobs, what=f"the EL2 handler of {tree}",
                build_hint=" (a tree kconform cannot build names the symbol)", log=log)
    found = {}
    for p in page_sizes:
        hits = list(out.rglob(runner_name(p)))
        if not hits:
            raise ToolError(f"{out}: the build made no {runner_name(p)}")
        found[p] = hits[0]
    return found
