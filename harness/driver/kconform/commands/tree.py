"""`kconform tree fetch|check|list|patch`: kernel trees (and TF-A's and OP-TEE's, debian-src:) in the
cache, a local one checked, a patched copy."""

from __future__ import annotations

from rich.console import Console

import sys
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.sources import patches, source_trees, tree_fetch, trees


def _progress(message: str) -> None:
    """Progress goes to stderr: stdout holds only the path, for $(./kconform tree ...)."""
    print(message, file=sys.stderr, flush=True)


def cmd_tree(args, console: Console) -> int:
    if args.tree_command == "fetch":
        if source_trees.is_source_spec(args.spec):
            print(source_trees.fetch(args.spec, progress=_progress, refresh=args.refresh))
            return 0
        try:
            trees.parse_spec(args.spec)
        except trees.TreeError as e:
            raise trees.TreeError(f"{e}; or a firmware tree: {', '.join(source_trees.PREFIX + p for p in source_trees.SOURCE_TREES)}") from None
        print(tree_fetch.fetch(args.spec, progress=_progress, refresh=args.refresh))
    elif args.tree_command == "check":
        if (Path(args.path) / "services" / "std_svc").is_dir():  # a TF-A tree
            tfa = source_trees.check_tfa(args.path)
            print(f"{tfa.path}: TF-A {tfa.version}, {len(source_trees.TFA_NEEDED_PATHS)} needed files present")
            return 0
        if (Path(args.path) / "core" / "arch" / "arm" / "kernel").is_dir():  # an OP-TEE tree
            optee = source_trees.check_optee(args.path)
            print(f"{optee.path}: OP-TEE {optee.version}, {len(source_trees.OPTEE_NEEDED_PATHS)} needed files present")
            return 0
        info = trees.check(args.path)
        print(f"{info.path}: linux {info.version}, {len(info.present)} needed files present")
    elif args.tree_command == "patch":
        if source_trees.is_source_spec(args.spec):
            raise ToolError(f"tree patch: {args.spec.strip()} is a firmware tree; "
                            f"patch takes kernel trees (debian:X.Y or a path)")
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
            print(f"no trees in {root} (./kconform tree fetch debian:7.3, "
                  f"./kconform tree fetch {source_trees.DEFAULT_SPMC_TREE})")
    return 0
