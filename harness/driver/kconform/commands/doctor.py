"""`kconform doctor`: what this machine has for kconform, in one table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from rich.console import Console
from rich.table import Table

from kconform.core import deps
from kconform.core.paths import cache_dir, runner_binary
from kconform.sources.kernel_build import built_images


def _version(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (r.stdout or r.stderr).strip().splitlines()
    return text[0] if text and r.returncode == 0 else ""


def checks() -> list[tuple[str, str, str]]:
    """(what, status, detail) rows; status is ok, missing or warn."""
    rows = []
    for name, cmd in (("clang++", ["clang++", "--version"]), ("g++", ["g++", "--version"]),
                      ("cmake", ["cmake", "--version"]), ("ninja", ["ninja", "--version"]),
                      ("afl-clang-fast", ["afl-clang-fast", "--version"]),
                      ("qemu-system-x86_64", ["qemu-system-x86_64", "--version"]),
                      ("qemu-system-aarch64", ["qemu-system-aarch64", "--version"])):
        v = _version(cmd) if shutil.which(cmd[0]) else ""
        rows.append((name, "ok" if v else "missing", v or "not on PATH"))
    groups = deps.read_groups()
    for group, pkgs in groups.items():
        miss = [p for p in pkgs if not deps.installed(p)]
        rows.append((f"packages: {group}", "missing" if miss else "ok",
                     ("missing " + " ".join(miss)) if miss else f"{len(pkgs)} installed"))
    kvm = "/dev/kvm"
    if not os.path.exists(kvm):
        rows.append((kvm, "missing", "no KVM: host and guest_memfd targets skip"))
    elif not os.access(kvm, os.R_OK | os.W_OK):
        rows.append((kvm, "warn", "exists but this user cannot open it read-write"))
    else:
        rows.append((kvm, "ok", "read-write"))
    binary = runner_binary()
    if binary.exists():
        r = subprocess.run([str(binary), "probe", "--target", "host"], capture_output=True, text=True)
        if r.returncode == 0:
            ident = json.loads(r.stdout.splitlines()[-1])
            caps = ", ".join(f"{k}={v}" for k, v in ident["caps"].items())
            rows.append(("host target", "ok", f"{ident['release']} profile {ident['profile']}: {caps}"))
        else:
            rows.append(("host target", "missing", r.stderr.strip()))
    else:
        rows.append(("engine", "missing", f"{binary} not built (./kconform build)"))
    cache = cache_dir()
    trees = sorted(p.name for p in (cache / "trees").glob("*")) if (cache / "trees").exists() else []
    kernels = sorted(p.name for p in (cache / "kernels").glob("*")) if (cache / "kernels").exists() else []
    rows.append(("cached trees", "ok" if trees else "warn", ", ".join(trees) or f"none in {cache}/trees"))
    rows.append(("cached kernels", "ok" if kernels else "warn", ", ".join(kernels) or f"none in {cache}/kernels"))
    full = sorted(p.name for p in (cache / "fulltrees").glob("*")) if (cache / "fulltrees").exists() else []
    rows.append(("full trees (--build)", "ok" if full else "warn", ", ".join(full) or f"none in {cache}/fulltrees"))
    rows.append(("built kernels (--build)", "ok", _built_kernels(cache)))
    firmware = sorted(p.name for p in (cache / "firmware").glob("qemu-arm64-*")
                      if p.is_dir()) if (cache / "firmware").exists() else []
    rows.append(("firmware (qemu-arm64 check)", "ok" if firmware else "warn",
                 ", ".join(firmware) or f"none in {cache}/firmware"))
    return rows


def _built_kernels(cache) -> str:
    """What <cache>/kbuild/img holds: tree + patch of each image, and its architecture and
    page size (a 4K and a 16K arm64 build of one patch are two images)."""
    def where(st: dict) -> str:
        ps = st.get("page_size")
        return f" ({st.get('arch', 'x86_64')}" + (f", {ps // 1024}K" if isinstance(ps, int) else "") + ")"
    names = [st.get("tree", "?") + (f"+{os.path.basename(st['patch'])}" if st.get("patch") else "") + where(st)
             for st in built_images(cache)]
    return f"{len(names)}: " + ", ".join(names) if names else f"none in {cache}/kbuild/img"


def cmd_doctor(args, console: Console) -> int:
    table = Table(title="kconform doctor", title_justify="left")
    table.add_column("what")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    rows = checks()
    for what, status, detail in rows:
        table.add_row(what, status, detail,
                      style={"missing": "red", "warn": "yellow"}.get(status))
    console.print(table)
    return 0
