"""Patched kernel trees: a tree (fetched, the user's own, or itself patched) plus a patch.

kconform never patches a tree in place (fetched trees are shared, a user's tree
may be read-only): `apply()` copies the files kconform uses (trees.NEEDED_PATHS,
plus any other file the patch touches) into
<cache>/patched/<key>-<patch name>/, where key hashes the tree's content and the
patch, and runs `patch -p1` there, a dry run first. The result is a tree like
any other (trees.check() accepts it) and may be patched again, which is how a
mutant is applied on top of the reference patch. Applying the same patch to the
same tree again returns the same folder without copying anything, once it checked
that the folder still holds what the patch made (the stamp records the SHA-256 of
the result): a copy changed since (a file restored over it, whatever its mtime) is
made again. Making a copy takes a lock on it (<cache>/locks/patched/, core/locks.py).

    python3 -m kconform.sources.patches apply TREE PATCH [PATCH...] [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kconform.core import locks
from kconform.core.errors import ToolError
from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources.trees import NEEDED_PATHS, STAMP_NAME, TreeError, check

PATCHED_DIR = "patched"
PATCH_STAMP = ".kconform-patch.json"
STAMP_FORMAT = 2   # 2: the stamp records the result's content (result_files, result_content)


class PatchError(ToolError):
    """A patch could not be applied; the message names the patch, the tree and the hunk."""


def apply(tree_path: str | os.PathLike, patch_path: str | os.PathLike,
          cache_dir: str | os.PathLike | None = None, fuzz: int = 0) -> Path:
    """Returns a patched copy of tree_path; creates it in cache_dir if needed.

    fuzz is patch's --fuzz: 0 (the default) lets hunks move but not lose
    context lines, so a patch written for another tree fails loudly instead of
    landing somewhere else.
    """
    tree = Path(tree_path)
    patch = Path(patch_path)
    try:
        check(tree)
    except TreeError as e:
        raise PatchError(f"cannot apply {patch}: {e}") from e
    try:
        patch_bytes = patch.read_bytes()
    except OSError as e:
        raise PatchError(f"cannot read patch {patch}: {e.strerror}") from e
    touched = touched_paths(patch_bytes)
    if not touched:
        raise PatchError(f"{patch} is not a unified diff (no '+++ b/...' lines): "
                         f"make it with `diff -u` or `git diff`")

    files = sorted(set(NEEDED_PATHS) | {p for p in touched if (tree / p).is_file()})
    tree_key = content_key(tree, files)
    patch_sha = hashlib.sha256(patch_bytes).hexdigest()
    key = hashlib.sha256(f"{tree_key}\n{patch_sha}\nfuzz={fuzz}\n".encode()).hexdigest()[:20]
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    dest = cache / PATCHED_DIR / f"{key}-{_slug(patch.stem)}"
    if _complete(dest, key):
        return dest

    try:
        (cache / PATCHED_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PatchError(f"cannot write to cache {cache} ({e}): "
                         f"choose a writable cache with KCONFORM_CACHE") from e
    # the lock lives outside patched/, which holds only finished copies
    with locks.locked(cache / "locks" / PATCHED_DIR / f"{dest.name}.lock", f"the patched copy {dest.name}",
                      log=lambda m: print(m, file=sys.stderr)):
        if _complete(dest, key):        # made by the run that held the lock
            return dest
        _make_copy(tree, patch, files, touched, patch_sha, key, tree_key, fuzz, cache, dest)
    return dest


def _make_copy(tree: Path, patch: Path, files: list[str], touched: list[str], patch_sha: str,
               key: str, tree_key: str, fuzz: int, cache: Path, dest: Path) -> None:
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=cache / PATCHED_DIR))
    except OSError as e:
        raise PatchError(f"cannot write to cache {cache} ({e}): "
                         f"choose a writable cache with KCONFORM_CACHE") from e
    try:
        tmp.chmod(0o755)
        for rel in files:
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / rel, out)  # not copy2: the tree may be read-only
            out.chmod(0o644)
        run_patch(tmp, patch, tree, fuzz, dry_run=True)
        run_patch(tmp, patch, tree, fuzz, dry_run=False)
        leftovers = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*")
                           if p.suffix in (".rej", ".orig"))
        if leftovers:
            raise PatchError(f"patch {patch} on tree {tree} left {', '.join(leftovers)}")
        result_files = sorted(set(files) | set(touched))
        result = content_key(tmp, result_files)
        _write_stamps(tmp, tree, patch, patch_sha, key, tree_key, fuzz, result_files, result)
        if dest.is_dir() and not dest.is_symlink() and content_key(dest, result_files) == result:
            # the copy holds what the patch makes (a stamp of an older format): keep its files,
            # which a build may be reading, and give it the new stamp
            tmp_stamp = tmp / PATCH_STAMP
            os.replace(tmp_stamp, dest / PATCH_STAMP)
            return
        if dest.exists() or dest.is_symlink():
            # a copy that no longer holds what the patch made: set it aside, then replace it
            stale = Path(tempfile.mkdtemp(prefix=f".{dest.name}.stale.", dir=cache / PATCHED_DIR))
            dest.rename(stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def apply_all(tree_path: str | os.PathLike, patch_paths: list[str | os.PathLike],
              cache_dir: str | os.PathLike | None = None, fuzz: int = 0) -> Path:
    """Applies patches in order, each on the result of the one before."""
    tree = Path(tree_path)
    for p in patch_paths:
        tree = apply(tree, p, cache_dir, fuzz)
    return tree


def touched_paths(patch_bytes: bytes) -> list[str]:
    """Files a -p1 unified diff modifies or creates (from its '+++ b/...' lines)."""
    out: list[str] = []
    for line in patch_bytes.decode(errors="replace").splitlines():
        m = re.match(r"^\+\+\+ (\S+)", line)
        if not m or m.group(1) == "/dev/null":
            continue
        rel = m.group(1).split("/", 1)[1] if "/" in m.group(1) else m.group(1)
        if rel not in out:
            out.append(rel)
    return out


def content_key(tree: Path, files: list[str]) -> str:
    """SHA256 over the names and contents of files of tree (missing ones count as absent)."""
    h = hashlib.sha256()
    for rel in sorted(files):
        p = tree / rel
        h.update(rel.encode() + b"\0")
        if p.is_file():
            data = p.read_bytes()
            h.update(str(len(data)).encode() + b"\0" + data)
        else:
            h.update(b"-\0")
    return h.hexdigest()


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", name)[:60] or "patch"


def _complete(dest: Path, key: str) -> bool:
    """dest was made for key and still holds exactly what the patch made."""
    try:
        st = json.loads((dest / PATCH_STAMP).read_text())
    except (OSError, ValueError):
        return False
    if st.get("format") != STAMP_FORMAT or st.get("key") != key:
        return False
    files = st.get("result_files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return False
    return content_key(dest, files) == st.get("result_content")


def run_patch(root: Path, patch: Path, tree: Path, fuzz: int, dry_run: bool) -> None:
    """GNU `patch -p1` of patch in root (a copy of tree, which errors name); PatchError
    naming the first failing file and hunk."""
    if not shutil.which("patch"):
        raise PatchError("GNU patch not found: install it (`apt-get install patch`)")
    cmd = ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch",
           f"--fuzz={fuzz}", "-d", str(root), "-i", str(patch.resolve())]
    if dry_run:
        cmd.append("--dry-run")
    r = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode == 0:
        return
    raise PatchError(f"patch {patch} does not apply to tree {tree}: {_why(r.stdout)}"
                     f"\n--- patch -p1 --dry-run said:\n{r.stdout.strip()}")


def _why(output: str) -> str:
    """The first failing file and hunk in GNU patch's output."""
    current = None
    reasons = []
    for line in output.splitlines():
        m = re.match(r"^(?:checking|patching) file '?([^']+?)'?$", line)
        if m:
            current = m.group(1)
            continue
        # "can't find file to patch" is followed by the header it could not apply:
        # the missing file is named there, not by the last file patch checked.
        m = re.match(r"^\|\+\+\+ (?:b/)?(\S+)", line) or re.match(r"^\|--- (?:a/)?(\S+)", line)
        if m and reasons and reasons[-1] == "a file: not in the tree" and m.group(1) != "/dev/null":
            reasons[-1] = f"{m.group(1)}: not in the tree"
            continue
        m = re.match(r"^Hunk #(\d+) FAILED at (\d+)", line)
        if m:
            reasons.append(f"{current}: hunk #{m.group(1)} FAILED at line {m.group(2)}")
        elif "Reversed (or previously applied) patch detected" in line:
            reasons.append(f"{current}: already applied (or reversed)")
        elif re.search(r"can't find file", line):
            reasons.append("a file: not in the tree")  # named by the header lines that follow
        elif re.search(r"No such file", line):
            reasons.append(f"{current or 'a file'}: not in the tree")
        elif "malformed patch" in line or "Only garbage" in line:
            reasons.append(f"malformed patch ({line.strip()})")
    if not reasons:
        return "patch failed (see its output below)"
    more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return reasons[0] + more


def _write_stamps(root: Path, tree: Path, patch: Path, patch_sha: str, key: str,
                  tree_key: str, fuzz: int, result_files: list[str], result_content: str) -> None:
    # The tree stamp (trees.check reads it) keeps the base's package identity and
    # lists the patches applied so far, oldest first.
    base = {}
    try:
        base = json.loads((tree / STAMP_NAME).read_text())
    except (OSError, ValueError):
        pass
    patches = list(base.get("patches", []))
    patches.append({"name": patch.name, "sha256": patch_sha})
    stamp = {k: base[k] for k in ("spec", "package", "package_version", "sha256") if k in base}
    stamp.update({"paths": list(NEEDED_PATHS), "base_tree": str(tree), "patches": patches})
    (root / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n")
    (root / PATCH_STAMP).write_text(json.dumps({
        "format": STAMP_FORMAT, "key": key, "tree": str(tree), "tree_content": tree_key,
        "patch": str(patch), "patch_sha256": patch_sha, "fuzz": fuzz,
        "result_files": result_files, "result_content": result_content}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kconform.sources.patches", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("apply", help="apply patches in order to a copy of TREE; prints its path")
    a.add_argument("tree", type=Path)
    a.add_argument("patches", type=Path, nargs="+")
    a.add_argument("--cache", type=Path, default=None, help="default: $KCONFORM_CACHE or ~/.cache/kconform")
    a.add_argument("--fuzz", type=int, default=0, help="patch --fuzz (default 0)")
    args = ap.parse_args(argv)
    try:
        print(apply_all(args.tree, args.patches, args.cache, args.fuzz))
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
