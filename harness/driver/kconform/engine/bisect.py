"""Bisecting a finding and comparing two revisions (`kconform bisect`, `kconform ci`):
the parts that need no target.

  git trees   a user's git tree is never checked out or changed: each revision's
              files the EL2 build reads (trees.NEEDED_PATHS) are written from git's
              objects (`git show REV:PATH`) into one folder in the cache, the same
              folder for every revision and every repository (export_el2_tree), so
              the EL2 build (keyed by the tree's path, rebuilt by content) rebuilds
              only what changed (ffa.c); `git bisect` runs in a private linked
              worktree with --no-checkout (bisect_worktree), so the user's checkout
              and any bisect of theirs are left alone.
  Debian      `debian:6.12..debian:7.3`: the Debian series kconform knows
              (trees.DEBIAN_SUITES), in version order, from one end to the other.
  verdicts    which of a run's findings are the finding bisected (its signatures,
              engine/triage.py signature_of) and which findings a head introduces
              over a base (keys: target and page size, scenario, signature).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Iterable

from kconform.core import procs
from kconform.core.errors import ToolError
from kconform.core.paths import cache_dir
from kconform.engine.triage import signature_of
from kconform.sources.trees import DEBIAN_SUITES, NEEDED_PATHS

# Files a QEMU kernel's guest_memfd comes from: `ci` runs the qemu target only when
# one of them differs between base and head.
GMEM_PATHS = ("virt/kvm/guest_memfd.c",)
EL2_PATHS = ("arch/arm64/kvm/hyp/nvhe/ffa.c",)


def _series_key(series: str) -> tuple[int, ...]:
    return tuple(int(x) for x in series.split("."))


def debian_series() -> list[str]:
    """The Debian series kconform can fetch, oldest first: ["6.12", "7.2", "7.3"]."""
    return sorted(DEBIAN_SUITES, key=_series_key)


def debian_range(text: str, flag: str = "--tree") -> list[str] | None:
    """"debian:6.12..debian:7.3" -> ["debian:6.12", "debian:7.2", "debian:7.3"]
    (either order of ends: the list runs from the first end to the second); None if
    text is not a range."""
    if ".." not in text or not text.startswith("debian:"):
        return None
    first, _, last = text.partition("..")
    known = debian_series()
    ends = []
    for end in (first, last):
        series = end.removeprefix("debian:")
        if not end.startswith("debian:") or series not in known:
            raise ToolError(f"flag {flag}: '{end}' in '{text}' is not a Debian series kconform knows "
                            f"({', '.join('debian:' + s for s in known)})")
        ends.append(known.index(series))
    a, b = ends
    if a == b:
        raise ToolError(f"flag {flag}: '{text}' has one series at both ends; give two")
    span = known[a:b + 1] if a < b else list(reversed(known[b:a + 1]))
    return ["debian:" + s for s in span]


def first_change(states: list[bool]) -> int | None:
    """The index of the first state that differs from the first one (None: none does)."""
    for i, s in enumerate(states):
        if s != states[0]:
            return i
    return None


# --- git -------------------------------------------------------------------------------

def git(repo: Path | str, *args: str, check: bool = True, text: bool = True,
        what: str = "") -> subprocess.CompletedProcess:
    r = procs.run(["git", "-C", str(repo), *args], capture_output=True, text=text)
    if check and r.returncode != 0:
        err = (r.stderr if text else r.stderr.decode(errors="replace")).strip().splitlines()
        raise ToolError(f"{what or 'git ' + ' '.join(args)}: {err[-1] if err else 'failed'} ({repo})")
    return r


def git_repo(path: str, flag: str = "--tree") -> Path:
    p = Path(path)
    if not p.is_dir():
        raise ToolError(f"flag {flag}: {path}: no such folder")
    r = git(p, "rev-parse", "--show-toplevel", check=False)
    if r.returncode != 0:
        raise ToolError(f"flag {flag}: {path}: not a git tree (bisect and ci need the tree's history)")
    return Path(r.stdout.strip())


def resolve_rev(repo: Path, rev: str, flag: str) -> str:
    r = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if r.returncode != 0 or not r.stdout.strip():
        raise ToolError(f"flag {flag}: '{rev}' is not a commit of {repo}")
    return r.stdout.strip()


def subject(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%s", sha).stdout.strip()


def short(repo: Path, sha: str) -> str:
    return git(repo, "rev-parse", "--short=12", sha).stdout.strip()


def paths_differ(repo: Path, a: str, b: str, paths: Iterable[str]) -> bool:
    """Whether any of paths differs between commits a and b."""
    r = git(repo, "diff", "--quiet", a, b, "--", *paths, check=False)
    if r.returncode not in (0, 1):
        raise ToolError(f"git diff {a} {b}: {r.stderr.strip()} ({repo})")
    return r.returncode == 1


def has_path(repo: Path, rev: str, path: str) -> bool:
    return git(repo, "cat-file", "-e", f"{rev}:{path}", check=False).returncode == 0


def el2_tree_dir() -> Path:
    """The one folder every revision's EL2 files are written to (one EL2 build folder)."""
    return cache_dir() / "bisect" / "el2-tree"


def export_el2_tree(repo: Path, rev: str, dest: Path | None = None) -> Path:
    """Writes the files the EL2 build reads (NEEDED_PATHS) as they are at rev into dest
    (default el2_tree_dir()); a file the revision lacks is removed from dest. A file
    whose content is already there is left as it is. The caller holds the lock."""
    dest = dest or el2_tree_dir()
    for rel in NEEDED_PATHS:
        target = dest / rel
        r = git(repo, "show", f"{rev}:{rel}", check=False, text=False)
        if r.returncode != 0:
            if target.exists():
                target.unlink()
            continue
        if target.is_file() and target.read_bytes() == r.stdout:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        tmp.write_bytes(r.stdout)
        os.replace(tmp, target)
    return dest


def content_at(repo: Path, rev: str, paths: Iterable[str] = NEEDED_PATHS) -> str:
    """A hash of paths' blob IDs at rev (equal: the same files)."""
    h = hashlib.sha256()
    for rel in paths:
        r = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}:{rel}", check=False)
        h.update(f"{rel}\0{r.stdout.strip()}\n".encode())
    return h.hexdigest()


def bisect_worktree(repo: Path) -> Path:
    """A private linked worktree of repo for `git bisect --no-checkout` (made without a
    checkout; removed by remove_worktree)."""
    key = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    wt = cache_dir() / "bisect" / f"wt-{key}"
    if wt.exists():
        remove_worktree(repo, wt)
    wt.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--detach", "--no-checkout", str(wt), "HEAD", what="git worktree add")
    return wt


def remove_worktree(repo: Path, wt: Path) -> None:
    git(wt, "bisect", "reset", check=False)
    git(repo, "worktree", "remove", "--force", str(wt), check=False)
    if wt.exists():
        import shutil
        shutil.rmtree(wt, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)


# --- verdicts --------------------------------------------------------------------------

def run_keys(label: str, findings: Iterable) -> set[tuple[str, str, str]]:
    """(label, scenario, signature) of every finding of one target run: what `ci`
    compares between base and head (the op's index and the build's name are not in it)."""
    by_scenario: dict[str, list] = {}
    for f in findings:
        by_scenario.setdefault(f.scenario, []).append(f)
    return {(label, s, sig) for s, fs in by_scenario.items() for sig in signature_of(fs)}


def matching(signatures: Iterable[str], wanted: Iterable[str]) -> list[str]:
    """The signatures among `signatures` that are one of `wanted`."""
    w = set(wanted)
    return [s for s in signatures if s in w]
