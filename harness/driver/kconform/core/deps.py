"""Debian packages the suite needs, installed on first use.

ci/packages.txt lists them by group. ensure() installs what is missing with
apt-get when running as root (idempotent: nothing happens when all are
there); otherwise it stops with the exact command to run.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import PACKAGES_FILE


def read_groups(path: Path = PACKAGES_FILE) -> dict[str, list[str]]:
    """Parses 'group: pkg pkg ...' lines; '#' starts a comment."""
    groups: dict[str, list[str]] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            raise ToolError(f"{path}:{lineno}: expected 'group: package ...'")
        group, pkgs = line.split(":", 1)
        groups.setdefault(group.strip(), []).extend(pkgs.split())
    return groups


def installed(package: str) -> bool:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                       capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.strip().endswith(" installed")


def missing(groups: list[str]) -> list[str]:
    table = read_groups()
    wanted: list[str] = []
    for g in groups:
        if g not in table:
            raise ToolError(f"{PACKAGES_FILE}: no package group '{g}'")
        wanted += [p for p in table[g] if p not in wanted]
    return [p for p in wanted if not installed(p)]


def ensure(groups: list[str], log=print) -> None:
    need = missing(groups)
    if not need:
        return
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + need
    if os.geteuid() != 0:
        raise ToolError("missing Debian packages: " + " ".join(need) +
                        "\nrun: sudo apt-get update && sudo " + shlex.join(cmd))
    log(f"kconform: installing {' '.join(need)} (Debian packages)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    upd = subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, env=env)
    if upd.returncode != 0:
        raise ToolError("apt-get update failed:\n" + upd.stderr[-2000:])
    inst = subprocess.run(cmd + ["-q"], capture_output=True, text=True, env=env)
    if inst.returncode != 0:
        raise ToolError(f"{shlex.join(cmd)} failed:\n" + inst.stderr[-2000:])
