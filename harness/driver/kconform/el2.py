"""The EL2 target's builds: the real ffa.c of a kernel tree (Debian's, or the
user's own, optionally with a patch applied), compiled for the host once per
tree and host PAGE_SIZE, each build with its own runner executable."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from kconform import deps, trees
from kconform.errors import ToolError
from kconform.paths import REPO

PAGE_SIZES = {"4K": 4096, "16K": 16384, "64K": 65536}
DEFAULT_TREE = "debian:7.3"


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
    if spec.startswith("debian:"):
        path = trees.fetch(spec, progress=log)
    else:
        path = Path(spec).resolve()
    info = trees.check(path)
    tree_id = f"{'debian-' if spec.startswith('debian:') else 'local-'}{info.version}"
    if not spec.startswith("debian:"):
        tree_id += "-" + hashlib.sha256(str(path).encode()).hexdigest()[:8]
    if patch:
        from kconform import patches
        patch_path = Path(patch)
        if not patch_path.is_file():
            raise ToolError(f"flag --apply: {patch}: no such patch file")
        path = patches.apply(path, patch_path)
        # "patched-" first, so a baseline pattern for a stock tree never covers a patched one.
        tree_id = f"patched-{tree_id}-{hashlib.sha256(patch_path.read_bytes()).hexdigest()[:8]}"
    return path, tree_id


def build(tree: Path, tree_id: str, page_sizes: list[int], sanitize: bool = False,
          log=print) -> dict[int, Path]:
    """Configures and builds the el2 runners of a tree; returns page size -> binary."""
    deps.ensure(["build"], log)
    out = REPO / "build" / "el2" / (tree_id + ("-asan" if sanitize else ""))
    sizes = ";".join(str(p) for p in sorted(set(page_sizes)))
    configure = ["cmake", "-S", str(REPO), "-B", str(out), "-G", "Ninja",
                 "-DCMAKE_C_COMPILER=clang", "-DCMAKE_CXX_COMPILER=clang++",
                 f"-DCMAKE_BUILD_TYPE={'Debug' if sanitize else 'RelWithDebInfo'}",
                 f"-DKCONFORM_SANITIZE={'ON' if sanitize else 'OFF'}",
                 f"-DKCONFORM_KERNEL_TREE={tree}", f"-DKCONFORM_PAGE_SIZE={sizes}",
                 "-DKCONFORM_EL2_REQUIRED=ON", "-DKCONFORM_TESTS=OFF"]
    log(f"kconform: building the EL2 handler of {tree_id} ({sizes.replace(';', ', ')} byte pages)")
    r = subprocess.run(configure, capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"configuring the EL2 build of {tree} failed:\n" +
                        "\n".join((r.stdout + r.stderr).splitlines()[-30:]))
    targets = [runner_name(p) for p in page_sizes]
    r = subprocess.run(["cmake", "--build", str(out), "--target", *targets],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"building ffa.c of {tree} failed (a tree kconform cannot build names "
                        f"the symbol):\n" + "\n".join((r.stdout + r.stderr).splitlines()[-30:]))
    found = {}
    for p in page_sizes:
        hits = list(out.rglob(runner_name(p)))
        if not hits:
            raise ToolError(f"{out}: the build made no {runner_name(p)}")
        found[p] = hits[0]
    return found
