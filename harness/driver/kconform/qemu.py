"""The QEMU target: the guest_memfd suite inside a real kernel booted in QEMU.

The host packs the scenarios (binary form), builds an initramfs (busybox-static,
the static guest agent, the kernel's KVM modules, the scenarios; cached by content
hash), boots the kernel under TCG with emulated SVM, and reads the agent's frames
(targets/qemu/agent/frame.h) from a second serial port while the first carries the
kernel console. The guest sends observed outcomes only; `kconform-runner judge`
replays them through the model and writes verdicts in the one verdict format.

Every wait is bounded. A panic, oops, kernel warning, hang or early exit is a
finding with the console log and the scenario in flight; the run then resumes
after that scenario (at most MAX_BOOTS boots). QEMU runs in its own process group
and is killed when the run ends, times out or is interrupted.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import zlib
from pathlib import Path
from typing import Callable

from kconform import deps, kernels
from kconform.errors import ToolError
from kconform.paths import REPO, build_dir, cache_dir

QEMU = "qemu-system-x86_64"
# bookworm's own qemu-system-x86 (7.2) boots Debian 7.3 with -cpu EPYC,+svm,+npt
# under TCG and the guest's kvm-amd loads (checked): no backports suite is needed.
CPU = "EPYC,+svm,+npt"
INIT_SCRIPT = REPO / "targets" / "qemu" / "initramfs" / "init"
BUSYBOX = Path("/bin/busybox")
BOOT_TIMEOUT = 180.0      # QEMU start -> the agent's probe frame
SILENCE_TIMEOUT = 120.0   # no frame for this long while scenarios run: a hang
RUN_TIMEOUT = 3600.0      # one boot, start to finish
MAX_BOOTS = 8             # resumes after crashes before giving up

Log = Callable[[str], None]

# --- framing (the host side of targets/qemu/agent/frame.cc) ----------------------

FRAME_RE = re.compile(r"@@KC (\d{1,19}) ([0-9a-f]*) ([0-9a-f]{8})@@")


def encode_frame(seq: int, payload: bytes) -> str:
    """One frame line (the agent's encode_frame), for tests."""
    return f"@@KC {seq} {payload.hex()} {zlib.crc32(payload):08x}@@\n"


def decode_frame(line: str) -> tuple[str, int, bytes]:
    """("ok", seq, payload) | ("none", ...) for a line without a frame |
    ("malformed", ...) for a cut or garbled frame | ("badcrc", ...)."""
    start = line.find("@@KC ")
    if start < 0:
        return "none", -1, b""
    m = FRAME_RE.match(line, start)
    if not m or len(m.group(2)) % 2:
        return "malformed", -1, b""
    payload = bytes.fromhex(m.group(2))
    if zlib.crc32(payload) != int(m.group(3), 16):
        return "badcrc", -1, b""
    return "ok", int(m.group(1)), payload


@dataclasses.dataclass
class FrameStream:
    """Turns the bytes of the frame port into records; counts what was lost."""
    records: list = dataclasses.field(default_factory=list)
    garbled: int = 0          # lines with a frame start that did not decode
    gaps: int = 0             # frames missing by sequence number
    _buf: bytes = b""
    _next: int = 0

    def feed(self, data: bytes) -> list[dict]:
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        new = []
        for raw in lines:
            status, seq, payload = decode_frame(raw.decode("latin-1"))
            if status == "none":
                continue
            if status != "ok":
                self.garbled += 1
                continue
            try:
                rec = json.loads(payload)
            except ValueError:
                self.garbled += 1
                continue
            if seq == 0 and self._next:   # a new boot starts counting again
                self._next = 0
            if seq > self._next:
                self.gaps += seq - self._next
            self._next = seq + 1
            new.append(rec)
        self.records += new
        return new


# --- initramfs ----------------------------------------------------------------------

def _newc_entry(name: str, data: bytes, mode: int, ino: int) -> bytes:
    nb = name.encode() + b"\0"
    hdr = "070701" + "".join(f"{v:08x}" for v in (
        ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
    out = hdr.encode() + nb
    out += b"\0" * (-len(out) % 4) + data
    return out + b"\0" * (-len(out) % 4)


def newc_archive(files: list[tuple[str, bytes, int]]) -> bytes:
    """A cpio newc archive (what the kernel unpacks) of (path, data, mode) entries,
    parent folders included; deterministic (no times, fixed inode numbers)."""
    dirs: set[str] = set()
    for path, _, _ in files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    out = b""
    ino = 1
    for d in sorted(dirs):
        out += _newc_entry(d, b"", 0o040755, ino)
        ino += 1
    for path, data, mode in sorted(files):
        out += _newc_entry(path, data, mode, ino)
        ino += 1
    return out + _newc_entry("TRAILER!!!", b"", 0, 0)


def _module_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    if path.suffix == ".xz":  # the guest's finit_module gets plain .ko: decompress here
        import lzma
        return lzma.decompress(raw)
    return raw


def build_initramfs(kernel: kernels.Kernel, agent: Path, pack_dir: Path, cache: Path,
                    log: Log) -> Path:
    """The initramfs for kernel + these scenarios, cached by the hash of its content."""
    if not BUSYBOX.is_file():
        raise ToolError(f"{BUSYBOX} not found: install the Debian package busybox-static")
    if not agent.is_file():
        raise ToolError(f"{agent}: the guest agent is not built (./kconform build)")
    files = [("init", INIT_SCRIPT.read_bytes(), 0o100755),
             ("bin/busybox", BUSYBOX.read_bytes(), 0o100755),
             ("kconform/agent", agent.read_bytes(), 0o100755)]
    order = []
    for m in kernel.modules:
        name = re.sub(r"\.xz$", "", m.name)
        files.append((f"kconform/modules/{name}", _module_bytes(m), 0o100644))
        order.append(name)
    files.append(("kconform/modules/order", "".join(n + "\n" for n in order).encode(), 0o100644))
    for f in sorted(pack_dir.glob("*.kcsb")):
        files.append((f"kconform/scenarios/{f.name}", f.read_bytes(), 0o100644))
    archive = newc_archive(files)
    digest = hashlib.sha256(archive).hexdigest()[:24]
    out = cache / "initramfs" / f"{digest}.cpio.gz"
    if out.is_file():
        log(f"kconform: qemu: initramfs {out} (cached)")
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(archive)
    tmp.rename(out)
    log(f"kconform: qemu: initramfs {out} ({out.stat().st_size} bytes, {len(files)} files)")
    return out


# --- running QEMU -------------------------------------------------------------------

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


CONSOLE_PATTERNS = (
    ("panic", re.compile(r"Kernel panic - not syncing[^\n]*")),
    ("oops", re.compile(r"(?:BUG: [^\n]*|Oops: [^\n]*|general protection fault[^\n]*)")),
    ("warning", re.compile(r"WARNING: CPU: [^\n]*")),
)


def console_events(text: str) -> list[tuple[str, str, int | None]]:
    """(kind, line, scenario in flight per the agent's kmsg markers) for every panic,
    oops or kernel warning on the console."""
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


class _Qemu:
    """One QEMU process in its own process group; killed on exit, whatever happens."""

    def __init__(self, cmd: list[str], console: Path):
        self._out = open(console, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        self._out.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # our own group, by its id
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)


def qemu_command(kernel: kernels.Kernel, initrd: Path, frames: Path, accel: str,
                 start_from: int, memory_mb: int = 1024) -> list[str]:
    cmd = [QEMU, "-accel", accel, "-cpu", CPU if accel == "tcg" else "host", "-m", str(memory_mb),
           "-smp", "1", "-nographic", "-monitor", "none", "-no-reboot", "-nic", "none",
           "-serial", "stdio", "-serial", f"file:{frames}",
           "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
           "-kernel", str(kernel.image), "-initrd", str(initrd),
           "-append", ("console=ttyS0 loglevel=6 panic=-1 kconform.port=/dev/ttyS1 "
                       f"kconform.exit=1 kconform.from={start_from}")]
    return cmd


def boot_once(kernel, initrd: Path, work: Path, accel: str, start_from: int, log: Log,
              on_record: Callable[[dict], None] = lambda r: None,
              boot_timeout: float = BOOT_TIMEOUT, silence_timeout: float = SILENCE_TIMEOUT,
              run_timeout: float = RUN_TIMEOUT) -> Boot:
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
    last_frame = started
    with _Qemu(cmd, console) as q, open(frames, "rb") as fr:
        while True:
            new = stream.feed(fr.read())
            now = time.monotonic()
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
    in_flight, op = _in_flight(stream.records)
    events = console_events(text)
    fatal = [e for e in events if e[0] in ("panic", "oops")]
    if fatal and (crash_kind or not done):
        crash_kind, crash_detail = fatal[0][0], fatal[0][1]
    if crash_kind:
        crash = Crash(crash_kind, crash_detail, in_flight, op, console)
    return Boot(stream.records, console, frames, started, first_op, ended, exit_code, crash,
                stream.garbled, stream.gaps)


def _in_flight(records: list[dict]) -> tuple[int | None, int | None]:
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


# --- the target as `kconform run` sees it --------------------------------------------

@dataclasses.dataclass
class GuestRun:
    identity: dict                    # the observations' identity record
    observations: dict                # s -> [[kind, value, aux], ...]
    crashes: list                     # [Crash]
    warnings: list                    # console kernel warnings: (line, scenario)
    boots: list                       # [Boot]
    agent_seconds: float
    agent_ops: int
    agent_scenarios: int
    kernel: kernels.Kernel
    work: Path
    # seconds from the first QEMU start until the agent's 'begin' frame of each scenario
    began: dict = dataclasses.field(default_factory=dict)


def agent_binary() -> Path:
    return build_dir("default") / "targets" / "qemu" / "kconform-qemu-agent"


def ensure_tools(log: Log) -> None:
    deps.ensure(["qemu"], log)
    if not shutil.which(QEMU):
        raise ToolError(f"{QEMU} not found after installing group 'qemu' (ci/packages.txt)")


def resolve_kernel(kernel_path: str | None, log: Log) -> kernels.Kernel:
    if kernel_path:
        return kernels.user_kernel(kernel_path)
    return kernels.fetch("debian:7.3", progress=log)


def run_guest(engine_binary: Path, files: list[str], kernel: kernels.Kernel, work: Path,
              accel: str, log: Log, progress: Callable[[int, int], None] | None = None) -> GuestRun:
    pack = work / "scenarios"
    pack.mkdir()
    r = subprocess.run([str(engine_binary), "pack", "--out-dir", str(pack), *files],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"kconform-runner pack failed: {r.stderr.strip()}")
    total = int(r.stdout.strip() or 0)
    initrd = build_initramfs(kernel, agent_binary(), pack, cache_dir(), log)

    obs: dict[int, list] = {}
    state = {"identity": None, "done": 0}
    crashes, boots, warnings = [], [], []
    start_from = 0
    agent_seconds = 0.0
    agent_ops = agent_scenarios = 0
    began: dict[int, float] = {}
    t_start = time.monotonic()

    def on_record(rec: dict) -> None:
        t = rec.get("t")
        if t == "probe":
            if not rec.get("ok"):
                raise ToolError(f"target qemu: /dev/kvm unusable in the guest ({kernel.release or kernel.source}): "
                                f"{rec.get('error')}; see {work}/console-*.log")
            state["identity"] = rec
        elif t == "module" and not rec.get("ok"):
            log(f"kconform: qemu: module {rec.get('name')} did not load: {rec.get('errno')}")
        elif t == "begin":
            obs[rec["s"]] = []
            began[rec["s"]] = time.monotonic() - t_start
        elif t == "op":
            obs.setdefault(rec["s"], []).append([rec["k"], rec["v"], rec["a"]])
            state["done"] += 1
            if progress and state["done"] % 50 == 0:
                progress(state["done"], 0)
        elif t == "bad":
            raise ToolError(f"target qemu: the agent could not decode scenario {rec['s']}: {rec['error']}")

    for n in range(MAX_BOOTS):
        log(f"kconform: qemu: booting {kernel.release or kernel.image} ({accel}), "
            f"scenarios {start_from}..{total - 1}")
        boot = boot_once(kernel, initrd, work, accel, start_from, log, on_record)
        boots.append(boot)
        text = boot.console.read_text(errors="replace")
        warnings += [(line, s) for kind, line, s in console_events(text) if kind == "warning"]
        for rec in boot.records:
            if rec.get("t") == "done":
                agent_seconds += rec["seconds"]
                agent_ops += rec["ops"]
                agent_scenarios += rec["scenarios"]
        if boot.crash is None:
            break
        crashes.append(boot.crash)
        c = boot.crash
        log(f"kconform: qemu: guest {c.kind}: {c.detail} (scenario in flight: {c.scenario}, op {c.op}); "
            f"console: {c.console}")
        if c.scenario is None or state["identity"] is None:
            break  # nothing to skip past: resuming would crash the same way
        start_from = c.scenario + 1
        if start_from >= total:
            break
    if state["identity"] is None:
        c = crashes[-1] if crashes else None
        raise ToolError(f"target qemu: the guest never reported a probe "
                        f"({c.kind + ': ' + c.detail if c else 'no frames'}); console log: "
                        f"{boots[-1].console}")
    p = state["identity"]
    identity = {"type": "identity", "target": "qemu", "release": p["release"],
                "profile": p["profile"], "caps": p["caps"], "cap_bits": p["cap_bits"],
                "seconds": agent_seconds}
    return GuestRun(identity, obs, crashes, warnings, boots, agent_seconds, agent_ops, agent_scenarios,
                    kernel, work, began)


def write_observations(g: GuestRun, path: Path) -> None:
    with open(path, "x") as f:
        f.write(json.dumps(g.identity) + "\n")
        for s in sorted(g.observations):
            f.write(json.dumps({"type": "scenario", "s": s, "ops": g.observations[s]}) + "\n")


def timing_summary(g: GuestRun) -> str:
    b = g.boots[0]
    first = f"{b.first_op - b.started:.1f} s" if b.first_op else "n/a"
    rate = f"{g.agent_scenarios / g.agent_seconds:.1f}" if g.agent_seconds else "n/a"
    return (f"boot to first observed op {first}; in the guest {g.agent_scenarios} scenarios, "
            f"{g.agent_ops} ops in {g.agent_seconds:.2f} s ({rate} scenarios/s); "
            f"{len(g.boots)} boot(s), wall {sum(x.ended - x.started for x in g.boots):.1f} s; "
            f"frames lost: {sum(x.garbled for x in g.boots)} garbled, {sum(x.gaps for x in g.boots)} gaps")


def run_target(engine_binary: Path, files: list[str], raw_out: Path, out_dir: Path, kernel_path: str | None,
               accel: str, log: Log, progress: Callable[[int, int], None] | None = None):
    """`kconform run --target qemu`: boot, collect outcomes, judge on the host; returns the
    TargetRun of the verdict stream with each guest crash added as a finding."""
    ensure_tools(log)
    kernel = resolve_kernel(kernel_path, log)
    work = out_dir / "qemu"
    work.mkdir()
    g = run_guest(engine_binary, files, kernel, work, accel, log, progress)
    return judge_guest(engine_binary, files, g, raw_out, log)


def judge_guest(engine_binary: Path, files: list[str], g: GuestRun, raw_out: Path, log: Log):
    """Judges a guest's observations on the host (kconform-runner judge) into a TargetRun;
    guest crashes and kernel warnings become QEMU.* findings."""
    from kconform.verdicts import Collector, Finding, parse_line
    kernel, work = g.kernel, g.work
    obs_path = work / "observations.jsonl"
    write_observations(g, obs_path)

    collector = Collector()
    with open(raw_out, "x") as raw, subprocess.Popen(
            [str(engine_binary), "judge", "--observations", str(obs_path), *files],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for n, line in enumerate(proc.stdout, 1):
            raw.write(line)
            collector.add(parse_line(line, f"{raw_out}:{n}"), f"{raw_out}:{n}")
        err = proc.stderr.read() if proc.stderr else ""
        rc = proc.wait()
    if rc not in (0, 1) or collector.run is None or not collector.run.summary:
        raise ToolError(f"kconform-runner judge for target qemu failed (exit {rc}): {err.strip()}")
    run = collector.run
    run.target["kernel"] = str(kernel.image)
    run.target["timing"] = timing_summary(g)
    run.summary["boot_to_first_op_seconds"] = (g.boots[0].first_op - g.boots[0].started
                                               if g.boots[0].first_op else None)
    run.summary["guest_scenarios_per_second"] = (g.agent_scenarios / g.agent_seconds
                                                 if g.agent_seconds else None)
    log(f"kconform: qemu: {timing_summary(g)}")

    # Guest crashes and kernel warnings are findings of their own, with the console
    # log as evidence; "file"/"index" name the scenario in flight.
    where = scenario_locations(engine_binary, files)
    for c in g.crashes:
        s = c.scenario if c.scenario is not None else (max(g.observations) if g.observations else None)
        if s is None:
            continue
        file, index, name = where[s]
        run.findings.append(Finding(
            rule=f"QEMU.{c.kind.upper()}", target=run.name, release=run.release, scenario=name,
            file=file, index=index, op=c.op if c.op is not None else -1,
            call=f"op {c.op} in flight" if c.op is not None else "after the scenario",
            expected=["the guest runs the scenario to its end"], observed=c.detail,
            note=f"console log: {c.console}"))
    for line, s in g.warnings:
        if s is None:
            continue
        file, index, name = where[s]
        run.findings.append(Finding(
            rule="QEMU.WARNING", target=run.name, release=run.release, scenario=name, file=file,
            index=index, op=-1, call="during the scenario", expected=["no kernel warning"],
            observed=line, note="console log in " + str(work)))
    return run


def scenario_locations(engine_binary: Path, files: list[str]) -> list[tuple[str, int, str]]:
    """(file, index in file, name) of each scenario in pack order."""
    out = []
    for f in files:
        r = subprocess.run([str(engine_binary), "convert", "--to", "text", f], capture_output=True, text=True)
        names = re.findall(r"^name (\S+)", r.stdout, re.M)
        out += [(f, i, n) for i, n in enumerate(names)]
    return out
