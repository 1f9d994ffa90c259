"""`kconform export FINDING --as c|kselftest|el2`: a finding as code to hand to a
kernel developer (engine/export_c.py, commands/export_el2.py; --qemu: commands/export_qemu.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from kconform.core.errors import EXIT_CLEAN, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, runner_binary
from kconform.engine import export_c


def _text_of(path: Path, log) -> str:
    data = path.read_bytes()
    try:
        text = data.decode()
        if any(line.strip().startswith("kconform-scenario") for line in text.splitlines()):
            return text
    except UnicodeDecodeError:
        pass
    # The binary form: converted by the engine (no header: the finding's
    # expected outcome is not in a binary file).
    from kconform.engine.build import build_preset
    from kconform.engine.runner import Engine
    build_preset("default", log=log)
    return Engine(runner_binary("default")).to_text(str(path))


def cmd_export(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    path = Path(args.finding)
    if not path.is_file():
        raise ToolError(f"{args.finding}: no such finding file")
    finding = export_c.load_finding(args.finding, _text_of(path, log), REPO)
    if args.as_ == "el2":
        if not args.output:
            raise ToolError("flag --output: --as el2 writes a folder: name it with -o DIR")
        from kconform.commands.export_el2 import write_el2
        out = write_el2(finding, Path(args.output), args.tree, args.page_size, log)
        log(f"kconform export: {out}/build.sh builds and runs it")
        return EXIT_CLEAN
    if args.tree or args.page_size:
        raise ToolError("flags --tree and --page-size: only with --as el2")
    source = args.finding
    code = export_c.to_c(finding, source) if args.as_ == "c" else export_c.to_kselftest(finding, source)
    if args.qemu and args.as_ != "c":
        raise ToolError("flag --qemu: only with --as c")
    if (args.kernel or args.accel != "tcg") and not args.qemu:
        raise ToolError("flags --kernel and --accel: only with --qemu")
    if args.output:
        atomic_write(Path(args.output), code)
        if args.as_ == "c":
            log(f"kconform export: {args.output}: gcc -O2 -o repro {args.output} && ./repro")
    elif not args.qemu:
        sys.stdout.write(code)
    if args.qemu:
        return _run_in_qemu(code, args, log)
    return EXIT_CLEAN


def _run_in_qemu(code: str, args, log) -> int:
    import tempfile
    from kconform.commands import export_qemu
    with tempfile.TemporaryDirectory(prefix="kconform-export-") as tmp:
        c = Path(tmp) / "repro.c"
        c.write_text(code)
        binary = export_qemu.compile_static(c, Path(tmp) / "repro")
        rc, out = export_qemu.run_in_guest(binary, args.kernel, args.accel, log)
    sys.stdout.write(out)
    log(f"kconform export: the reproducer exited {rc} inside the guest")
    if rc == 4:
        raise ToolError("the reproducer skipped inside the guest (no /dev/kvm or guest_memfd there)")
    if rc not in (0, 1):
        raise ToolError(f"the reproducer exited {rc} inside the guest")
    return rc
