"""`kconform tree fetch|check|list|patch`: kernel trees in the cache, a local one checked, a patched copy."""

from __future__ import annotations

from rich.console import Console

import sys
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.sources import patches, tree_fetch, trees


def _progress(message: str) -> None:
    """Progress goes to stderr: stdout holds only the path, for $(./kconform tree ...)."""
    print(message, file=sys.stderr, flush=True)


def cmd_tree(args, console: Console) -> int:
    if args.tree_command == "fetch":
        path = tree_fetch.fetch(args.spec, progress=_progress,
                                refresh=args.refresh)
        print(path)
    elif args.tree_command == "check":
        info = trees.check(args.path)
        print(f"{info.path}: linux {info.version}, {len(info.present)} needed files present")
    elif args.tree_command == "patch":
        for p in args.patches:
            if not Path(p).is_file():
                raise ToolError(f"tree patch: {p}: no such patch file")
        info = tree_fetch.resolve(args.spec, progress=_progress)
        print(patches.apply_all(info.path, args.patches))
    else:
        root, found = trees.cache_listing()
        for p in found:
            print(p)
        if not found:
            print(f"no trees in {root} (./kconform tree fetch debian:7.3)")
    return 0
