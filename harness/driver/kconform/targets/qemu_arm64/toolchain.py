"""The host tools of the arm64 stack: Debian's cross compiler, dtc and
qemu-system-aarch64 (package group qemu-arm64 in ci/packages.txt), and the
versions that key the firmware cache."""

from __future__ import annotations

import shutil
import subprocess
from typing import Callable

from kconform.core import deps
from kconform.core.errors import ToolError

GROUP = "qemu-arm64"
CROSS_COMPILE = "aarch64-linux-gnu-"
QEMU = "qemu-system-aarch64"
# Every program the firmware build and the boot run, by name.
PROGRAMS = (CROSS_COMPILE + "gcc", CROSS_COMPILE + "g++", CROSS_COMPILE + "objcopy", "dtc", "make", "gcc", QEMU)


def ensure(log: Callable[[str], None]) -> None:
    """Installs group qemu-arm64 if a package is missing, then checks every program."""
    deps.ensure([GROUP], log)
    absent = [p for p in PROGRAMS if not shutil.which(p)]
    if absent:
        raise ToolError(f"{', '.join(absent)} not found after installing group '{GROUP}' "
                        f"(ci/packages.txt)")


def version_line(program: str, flag: str = "--version") -> str:
    """The first line of `program flag`; a ToolError naming the program if it fails."""
    try:
        r = subprocess.run([program, flag], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolError(f"{program} {flag}: {e}") from None
    lines = (r.stdout or r.stderr).strip().splitlines()
    if r.returncode != 0 or not lines:
        raise ToolError(f"{program} {flag} failed (status {r.returncode}): {r.stderr.strip()[:300]}")
    return lines[0].strip()


def build_tool_versions() -> dict[str, str]:
    """The versions of the tools whose output goes into the firmware (part of its key)."""
    return {"cross_gcc": version_line(CROSS_COMPILE + "gcc"), "dtc": version_line("dtc")}
