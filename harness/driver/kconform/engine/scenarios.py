"""Scenario files: which ABI a file is for, folders expanded, each ABI's default corpus."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import CORPORA

# The directed suite of each ABI, then its Z3-generated edge cases (./kconform gen).
DEFAULT_CORPUS = {"gmem": [CORPORA / "gmem", CORPORA / "z3" / "gmem"],
                  "ffa": [CORPORA / "ffa", CORPORA / "z3" / "ffa"]}
SCENARIO_SUFFIXES = (".kcs", ".kcsb")
ABI_CODES = {1: "gmem", 2: "ffa"}


def expand(paths: list[str]) -> list[str]:
    """The scenario files of paths, folders expanded (sorted); an error names a bad path."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.suffix in SCENARIO_SUFFIXES)
            if not found:
                raise ToolError(f"{p}: no scenario files (*.kcs, *.kcsb) in this folder")
            out += found
        elif path.is_file():
            if path.stat().st_size == 0:
                raise ToolError(f"{p}: not a scenario file: it is empty")
            out.append(str(path))
        elif path.exists():
            raise ToolError(f"{p}: not a scenario file: {_kind(path)}, not a regular file")
        elif path.is_symlink():
            raise ToolError(f"{p}: no such scenario file (a symbolic link to {os.readlink(path)}, which is missing)")
        else:
            raise ToolError(f"{p}: no such scenario file or folder")
    return out


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    for test, word in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "a special file"


def scenario_abi(path: str) -> str:
    """The ABI of a scenario file: byte 5 of a binary one, the first 'abi' line of a text one."""
    data = Path(path).read_bytes()
    if data[:4] == b"KCSN":
        return ABI_CODES.get(data[5] if len(data) > 5 else 0, "?")
    for line in data.decode(errors="replace").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2 and words[0] == "abi":
            return words[1]
    return "?"


def scenario_files(paths: list[str], abi: str) -> list[str]:
    """The files of one ABI among those given (folders expanded); default: its corpus."""
    if not paths:
        return expand([str(c) for c in DEFAULT_CORPUS[abi] if c.exists()])
    return [f for f in expand(paths) if scenario_abi(f) == abi]
