"""One boot of a kernel under QEMU: the command line, the process (its own process
group, killed when the boot ends, times out or is interrupted), the frames read while
it runs, and what the console says went wrong.

Every wait is bounded. A panic, oops, hang or early exit is a Crash with the console
log and the scenario in flight.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import time
from pathlib import Path
from typing import Callable

from kconform.core import procs
from kconform.sources.kernel_image import Kernel
from kconform.targets.qemu.frames import FrameStream

QEMU = "qemu-system-x86_64"
# bookworm's own qemu-system-x86 (7.2) boots Debian 7.3 with -cpu EPYC,+svm,+npt
# under TCG and the guest's kvm-amd loads (checked): no backports suite is needed.
CPU = "EPYC,+svm,+npt"
BOOT_TIMEOUT = 180.0      # QEMU start -> the agent's probe frame
SILENCE_TIMEOUT = 120.0   # no frame for this long while scenarios run: a hang
RUN_TIMEOUT = 3600.0      # one boot, start to finish
TICK_EVERY = 5.0          # seconds between two calls of boot_once's on_tick (progress lines)

Log = Callable[[str], None]


@dataclasses.dataclass
class Crash:
    """A guest that did not finish: a finding with its evidence."""
    kind: str            # panic | oops | warning | hang | boot-timeout | early-exit | agent-error
    detail: str
    scenario: int | None  # index of the scenario in flight, if any
    op: int | None        # op index in flight (ops recorded so far)
    console: Path


@dataclasses.dataclass
class Boot:
    records: list
    console: Path
    frames: Path
    started: float
    first_op: float | None
    ended: float
    exit_code: int | None
    crash: Crash | None
    garbled: int
    gaps: int


# First match wins, line by line. A KASAN/KFENCE/UBSAN report or a lockdep splat does not
# stop the kernel (the guest goes on and the agent finishes): each is a finding of its own
# (QEMU.KASAN, QEMU.LOCKDEP; replay.py), as a kernel warning is (QEMU.WARNING).
CONSOLE_PATTERNS = (
    ("panic", re.compile(r"Kernel panic - not syncing[^\n]*")),
    ("kasan", re.compile(r"(?:BUG: KASAN: [^\n]*|BUG: KFENCE: [^\n]*|UBSAN: [^\n]*)")),
    ("lockdep", re.compile(r"WARNING: (?:possible circular locking dependency detected|possible recursive "
                           r"locking detected|inconsistent lock state|suspicious RCU usage|bad unlock balance "
                           r"detected!|held lock freed!|lock held when returning to user space!|possible irq lock "
                           r"inversion dependency detected|.*-safe -> .*-unsafe lock order detected|"
                           r"Nested lock was not taken|lock held at task exit time!)[^\n]*")),
    ("oops", re.compile(r"(?:BUG: [^\n]*|Oops: [^\n]*|general protection fault[^\n]*)")),
    ("warning", re.compile(r"WARNING: CPU: [^\n]*")),
)
# Console events that are findings while the guest runs on (the others end the boot).
NONFATAL_KINDS = ("warning", "kasan", "lockdep")


def console_events(text: str) -> list[tuple[str, str, int | None]]:
    """(kind, line, scenario in flight per the agent's kmsg markers) for every panic,
    oops, sanitizer report (kasan), lockdep report or kernel warning on the console."""
    events = []
    in_flight = None
    for line in text.splitlines():
        m = re.search(r"kconform: begin s=(\d+)", line)
        if m:
            in_flight = int(m.group(1))
            continue
        for kind, pat in CONSOLE_PATTERNS:
            hit = pat.search(line)
            if hit:
                events.append((kind, hit.group(0).strip(), in_flight))
                break
    return events


class QemuProcess:
    """One QEMU process in its own process group (core/procs.py); killed on exit,
    whatever happens (an error, SIGINT or SIGTERM included)."""

    def __init__(self, cmd: list[str], console: Path):
        self._out = open(console, "wb")
        try:
            self.proc = procs.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._out,
                                    stderr=subprocess.STDOUT)
        except BaseException:
            self._out.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.kill()
        finally:
            self._out.close()

    def kill(self) -> None:
        self.proc.end(grace=0)  # SIGKILL to its group: nothing of a guest is worth keeping


def qemu_command(kernel: Kernel, initrd: Path, frames: Path, accel: str,
                 start_from: int, memory_mb: int = 1024) -> list[str]:
    cmd = [QEMU, "-accel", accel, "-cpu", CPU if accel == "tcg" else "host", "-m", str(memory_mb),
           "-smp", str(kernel.vcpus), "-nographic", "-monitor", "none", "-no-reboot", "-nic", "none",
           "-serial", "stdio", "-serial", f"file:{frames}",
           "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
           "-kernel", str(kernel.image), "-initrd", str(initrd),
           "-append", ("console=ttyS0 loglevel=6 panic=-1 kconform.port=/dev/ttyS1 "
                       f"kconform.exit=1 kconform.from={start_from}")]
    return cmd


def boot_once(kernel: Kernel, initrd: Path, work: Path, accel: str, start_from: int, log: Log,
              on_record: Callable[[dict], None] = lambda r: None,
              boot_timeout: float = BOOT_TIMEOUT, silence_timeout: float = SILENCE_TIMEOUT,
              run_timeout: float = RUN_TIMEOUT,
              on_tick: Callable[[float, bool], None] | None = None) -> Boot:
    """One boot; on_tick(seconds since QEMU started, probe frame seen) every TICK_EVERY s."""
    n = len(list(work.glob("console-*.log")))
    console, frames = work / f"console-{n}.log", work / f"frames-{n}.log"
    frames.touch()
    stream = FrameStream()
    cmd = qemu_command(kernel, initrd, frames, accel, start_from)
    (work / f"qemu-{n}.cmd").write_text(" ".join(cmd) + "\n")
    started = time.monotonic()
    first_op = None
    crash_kind = crash_detail = None
    probed = done = False
    last_frame = last_tick = started
    with QemuProcess(cmd, console) as q, open(frames, "rb") as fr:
        while True:
            new = stream.feed(fr.read())
            now = time.monotonic()
            if on_tick and now - last_tick >= TICK_EVERY:
                last_tick = now
                on_tick(now - started, probed)
            for rec in new:
                last_frame = now
                t = rec.get("t")
                if t == "probe":
                    probed = True
                elif t == "op" and first_op is None:
                    first_op = now
                elif t == "done":
                    done = True
                on_record(rec)
            if done:
                try:
                    q.proc.wait(timeout=30)  # the agent powers off; else killed below
                except subprocess.TimeoutExpired:
                    pass
                break
            if q.proc.poll() is not None:
                stream.feed(fr.read() + b"\n")
                crash_kind, crash_detail = "early-exit", f"QEMU exited with status {q.proc.returncode} " \
                                                         f"before the agent's 'done' frame"
                break
            if not probed and now - started > boot_timeout:
                crash_kind, crash_detail = "boot-timeout", f"no probe frame {boot_timeout:.0f} s after start"
                break
            if probed and now - last_frame > silence_timeout:
                crash_kind, crash_detail = "hang", f"no frame for {silence_timeout:.0f} s"
                break
            if now - started > run_timeout:
                crash_kind, crash_detail = "hang", f"the boot ran longer than {run_timeout:.0f} s"
                break
            time.sleep(0.05)
        ended = time.monotonic()
    exit_code = q.proc.returncode  # after the kill: the process is gone
    text = console.read_text(errors="replace")
    crash = None
    in_flight, op = in_flight_at(stream.records)
    events = console_events(text)
    fatal = [e for e in events if e[0] in ("panic", "oops")]
    if fatal and (crash_kind or not done):
        crash_kind, crash_detail = fatal[0][0], fatal[0][1]
    if crash_kind:
        crash = Crash(crash_kind, crash_detail, in_flight, op, console)
    return Boot(stream.records, console, frames, started, first_op, ended, exit_code, crash,
                stream.garbled, stream.gaps)


def in_flight_at(records: list[dict]) -> tuple[int | None, int | None]:
    """(scenario, ops recorded) of the scenario begun and not ended in records, if any."""
    s = None
    ops = 0
    for r in records:
        if r.get("t") == "begin":
            s, ops = r["s"], 0
        elif r.get("t") == "op" and r.get("s") == s:
            ops += 1
        elif r.get("t") == "end" and r.get("s") == s:
            s = None
    return (s, ops) if s is not None else (None, None)
