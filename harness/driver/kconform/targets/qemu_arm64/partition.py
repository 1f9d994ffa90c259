"""Our secure partition (targets/qemu_arm64/sp/sp.S): assembled and linked at the
address where TF-A's BL2 loads BL32 on PLAT=qemu, then cut to a flat binary.

The partition runs with the MMU off and uses no memory; its code is all it has. Only
.text is kept: a plain `objcopy -O binary` of the ELF also copies a note section at
a low address and gives a file of hundreds of MB (seen in the probe).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import REPO
from kconform.targets.qemu_arm64.toolchain import CROSS_COMPILE

SP_FOLDER = REPO / "targets" / "qemu_arm64" / "sp"
SP_SOURCE = SP_FOLDER / "sp.S"
SP_MANIFEST = SP_FOLDER / "sp_manifest.dts"
# BL32_BASE of PLAT=qemu with the SPMC at EL3: SEC_DRAM_BASE (TF-A 2.12.1,
# plat/qemu/qemu/include/platform_def.h); the log shows "Loading image id=4 at address 0xe100000".
LOAD_ADDRESS = 0x0E100000


def commands(source: Path, out: Path) -> list[list[str]]:
    """The two commands that make out/sp.bin from source (out/sp.elf in between)."""
    elf, binary = out / "sp.elf", out / "sp.bin"
    return [
        [CROSS_COMPILE + "gcc", "-nostdlib", "-nostartfiles", f"-Wl,-Ttext={LOAD_ADDRESS:#x}",
         "-Wl,-e,_start", "-Wl,--build-id=none", "-o", str(elf), str(source)],
        [CROSS_COMPILE + "objcopy", "-O", "binary", "-j", ".text", str(elf), str(binary)],
    ]


def build(out: Path, source: Path = SP_SOURCE) -> Path:
    """out/sp.bin, the partition's flat image; a ToolError with the compiler's words on failure."""
    out.mkdir(parents=True, exist_ok=True)
    for cmd in commands(source, out):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise ToolError(f"{source}: {cmd[0]} failed (status {r.returncode}):\n{r.stderr.strip()}")
    binary = out / "sp.bin"
    size = binary.stat().st_size
    if not 0 < size <= 64 * 1024:
        raise ToolError(f"{binary}: {size} bytes; expected the partition's code only (a few hundred bytes)")
    return binary
