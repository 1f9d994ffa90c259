"""`kconform export --as el2`: an FF-A finding as a folder that builds the tree's
ffa.c with kconform's stand-in headers (our CMake, one page size) and runs the
finding's scenario through it: scenario.kcs, build.sh, README.

This is the existing EL2 runner (kconform-runner-el2-<N>k: the tree's unmodified
ffa.c compiled against targets/el2/shim, our SPMC model as EL3, the FF-A model as
judge), not a new program: build.sh needs this kconform checkout (KCONFORM=...),
clang, cmake and ninja, and prints the runner's verdict lines; its exit status is
the runner's (0 no violation, 1 a violation).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import REPO
from kconform.engine.export_c import Finding

PAGE = {"4K": 4096, "16K": 16384, "64K": 65536}


def rerun_flags(f: Finding) -> tuple[str | None, str | None]:
    """(--tree, --page-size) of the finding's re-run line, if any."""
    for line in f.head:
        if "re-run:" in line:
            tree = re.search(r"--tree (\S+)", line)
            page = re.search(r"--page-size (\S+)", line)
            return (tree.group(1) if tree else None, page.group(1) if page else None)
    return None, None


def write_el2(f: Finding, out: Path, tree: str | None, page_size: str | None, log) -> Path:
    if f.abi != "ffa":
        raise ToolError(f"{f.path}: abi {f.abi}: --as el2 exports FF-A findings; a guest_memfd finding "
                        "exports with --as c or --as kselftest")
    t, p = rerun_flags(f)
    tree = tree or t or "debian:7.3"
    page_size = (page_size or p or "4K").upper()
    if page_size not in PAGE:
        raise ToolError(f"flag --page-size: '{page_size}' is not one of {', '.join(PAGE)}")
    from kconform.targets.el2 import resolve_tree
    tree_path, tree_id = resolve_tree(tree, log=log)
    if out.exists() and any(out.iterdir()):
        raise ToolError(f"{out}: exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    n = PAGE[page_size]
    runner = f"kconform-runner-el2-{n // 1024}k"
    (out / "scenario.kcs").write_text("\n".join(f.head) + "\n" + f.text)
    q = shlex.quote
    script = f"""#!/bin/sh
# Builds {tree_id}'s ffa.c ({tree_path}) at {page_size} pages with kconform's stand-ins
# and runs the finding's scenario through it. Written by `kconform export --as el2`
# from {f.path}.
# Finding: {f.rule} at op {f.op}: {f.ops[f.op].line}
#   expected: {f.expected}
#   observed: {f.observed}
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
KCONFORM=${{KCONFORM:-{q(str(REPO))}}}
TREE=${{TREE:-{q(str(tree_path))}}}
BUILD=${{BUILD:-$HERE/build}}
cmake -S "$KCONFORM" -B "$BUILD" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \\
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCONFORM_KERNEL_TREE="$TREE" -DKCONFORM_PAGE_SIZE={n} \\
  -DKCONFORM_EL2_REQUIRED=ON -DKCONFORM_TESTS=OFF >"$BUILD.log" 2>&1 || {{ cat "$BUILD.log"; exit 2; }}
ninja -C "$BUILD" {runner} >>"$BUILD.log" 2>&1 || {{ tail -40 "$BUILD.log"; exit 2; }}
echo "# expected at op {f.op} ({f.rule}): {f.expected.replace('"', '')}"
echo "# observed when found: {f.observed.replace('"', '')}"
R=$(find "$BUILD" -name {runner} -type f | head -1)
set +e
"$R" run --target el2 --out "$HERE/verdicts.jsonl" "$HERE/scenario.kcs"
rc=$?
grep '"violation"' "$HERE/verdicts.jsonl" | head -5
exit $rc
"""
    (out / "build.sh").write_text(script)
    (out / "build.sh").chmod(0o755)
    (out / "README").write_text(
        f"{f.rule} on {tree_id} at {page_size} pages, scenario {f.name}.\n"
        f"Run ./build.sh (KCONFORM=<kconform checkout>, TREE=<kernel tree> to override).\n"
        f"It prints the verdict of every op (JSON lines, verdicts.jsonl) and exits 1 while the finding "
        f"reproduces.\n")
    return out
