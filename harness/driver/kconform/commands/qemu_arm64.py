"""`kconform qemu-arm64 check`: boot the whole arm64 stack once (TF-A with its EL3
SPMC and our secure partition, Debian's arm64 kernel in pKVM protected mode, the
FF-A driver) and say whether it came up: pKVM protected mode, the FF-A version the
driver found, the boot time. Exit 0 it came up, 1 it came up wrong, 2 it could not
run (ToolError). The console, the QEMU command and result.json are kept in
reports/qemu-arm64/<time>/."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from kconform.core.errors import EXIT_CLEAN, EXIT_VIOLATIONS, ToolError
from kconform.core.paths import cache_dir, new_report_dir, reports_dir
from kconform.sources import debian_kernels
from kconform.targets.qemu_arm64 import boot, firmware, initramfs, toolchain

KERNEL = debian_kernels.DEFAULT_KERNEL   # debian:7.3, its arm64 build


def report_root() -> Path:
    return reports_dir().parent / "qemu-arm64"


def cmd_qemu_arm64(args, console: Console) -> int:
    if args.qemu_arm64_command != "check":
        raise ToolError(f"qemu-arm64: unknown action {args.qemu_arm64_command!r}")
    if not args.timeout > 0:
        raise ToolError(f"flag --timeout: {args.timeout} is not a positive number of seconds")
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    toolchain.ensure(log)
    fw = firmware.build(log)
    kernel = debian_kernels.fetch(KERNEL, progress=log, arch="arm64")
    initrd = initramfs.build(kernel, cache_dir(), log)
    work = new_report_dir(Path(args.out) if args.out else report_root())
    result = boot.boot(fw, kernel, initrd, work, log, timeout=args.timeout)
    s = result.log
    pkvm = f"yes ({s.pkvm_mode})" if s.pkvm_mode else "no"
    ffa = s.ffa_firmware or "none found"
    if s.ffa_firmware and s.ffa_driver:
        ffa += f" (driver {s.ffa_driver})"
    took = f"{result.seconds:.1f} s (QEMU start to /init's last line)" if result.seconds is not None \
        else "did not finish"
    for what, value in (("firmware", f"TF-A {fw.tfa_version} (SPMC at EL3) {fw.folder}"),
                        ("kernel", f"{kernel.release} ({KERNEL})"),
                        ("pKVM protected mode", pkvm),
                        ("FF-A firmware version", ffa),
                        ("FF-A calls seen at EL3", str(len(s.smcs))),
                        ("boot time", took),
                        ("console", str(result.console_path))):
        console.print(f"{what}: {value}", highlight=False, markup=False)
    problems = result.problems()
    for p in problems:
        console.print(f"problem: {p}", style="red", highlight=False, markup=False)
    console.print("qemu-arm64 check: " + ("the stack came up" if not problems else
                                          f"the stack came up wrong ({len(problems)} problem(s))"),
                  highlight=False, markup=False)
    return EXIT_VIOLATIONS if problems else EXIT_CLEAN
