"""The userspace half of the FF-A agent (targets/qemu_arm64/agent/ffa_agent.cc),
cross-compiled static for arm64 with Debian's g++-aarch64-linux-gnu (group qemu-arm64 of
ci/packages.txt) from the project's own sources: the scenario codec, the FF-A
descriptor builder (models/ffa/desc.cc) and the model's scenario conventions
(models/ffa/scenario_ops.h), so the agent builds each call as the model does.

Cached in build/default/qemu_arm64/agent-<key>/ by the hash of every source and header
of the folders it compiles from and the compiler's version (about 30 s to build).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.core.paths import REPO, build_dir
from kconform.targets.qemu_arm64.toolchain import CROSS_COMPILE, version_line

Log = Callable[[str], None]

CXX = CROSS_COMPILE + "g++"
SOURCES = ("targets/qemu_arm64/agent/ffa_agent.cc", "targets/qemu/wire/frame.cc", "targets/qemu/wire/guest_io.cc",
           "harness/scenario/abi.cc", "harness/scenario/gmem_abi.cc", "harness/scenario/ffa_abi.cc",
           "harness/scenario/codec_text.cc", "harness/scenario/codec_binary.cc", "harness/scenario/load.cc",
           "models/ffa/desc.cc")
# Folders whose headers the sources include (all of them go into the key).
HEADER_DIRS = ("harness/scenario", "models/ffa", "models/common", "models/gmem", "targets/qemu/wire",
               "targets/qemu_arm64/module", "targets/qemu_arm64/agent")
FLAGS = ("-std=c++20", "-O2", "-static", "-Wall")


def key(repo: Path = REPO) -> str:
    h = hashlib.sha256()
    files = {repo / s for s in SOURCES}
    for d in HEADER_DIRS:
        files |= {p for p in (repo / d).glob("*") if p.suffix in (".h", ".def", ".cc")}
    for p in sorted(files):
        if not p.is_file():
            raise ToolError(f"{p}: no such file (the FF-A agent is built from it)")
        h.update(str(p.relative_to(repo)).encode() + b"\0" + p.read_bytes())
    h.update(" ".join(FLAGS).encode())
    h.update(version_line(CXX).encode())
    return h.hexdigest()[:20]


def build(log: Log, repo: Path = REPO) -> Path:
    """The static arm64 agent, from the cache or built now."""
    if not shutil.which(CXX):
        raise ToolError(f"{CXX} not found (package g++-aarch64-linux-gnu, group qemu-arm64 of ci/packages.txt)")
    k = key(repo)
    final = build_dir("default") / "qemu_arm64" / f"agent-{k}"
    binary = final / "kconform-ffa-agent"
    if binary.is_file():
        log(f"kconform: qemu-arm64: agent {binary} (cached)")
        return binary
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        cmd = ["nice", "-n", "10", CXX, *FLAGS, f"-I{repo}", "-o", str(tmp / binary.name),
               *[str(repo / s) for s in SOURCES]]
        (tmp / "command.txt").write_text(" ".join(cmd) + "\n")
        log(f"kconform: qemu-arm64: building the agent with {CXX} (about 30 s)")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise ToolError(f"building the FF-A agent failed (status {r.returncode}):\n"
                            + "\n".join(r.stderr.strip().splitlines()[-15:]))
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"kconform: qemu-arm64: agent built: {binary}")
    return binary
