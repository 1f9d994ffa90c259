"""Running scenarios inside a guest: pack them, build the initramfs, boot, collect
the agent's observed outcomes; after a crash, boot again past the scenario in
flight (at most MAX_BOOTS boots)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from kconform.core import deps
from kconform.core.errors import ToolError
from kconform.core.files import naming
from kconform.core.paths import build_dir, cache_dir
from kconform.engine.runner import Engine
from kconform.sources import debian_kernels
from kconform.sources.kernel_image import Kernel, user_kernel
from kconform.targets.qemu.boot import NONFATAL_KINDS, QEMU, Log, boot_once, console_events
from kconform.targets.qemu.initramfs import build_initramfs

MAX_BOOTS = 8             # resumes after crashes before giving up


@dataclasses.dataclass
class GuestRun:
    identity: dict                    # the observations' identity record
    # s -> [[kind, value, aux], ...], each op placed by its frame's op index, contiguous
    # from op 0 up to the first frame lost, repeated or out of order (replay.place_ops())
    observations: dict
    crashes: list                     # [Crash]
    warnings: list                    # console kernel warnings: (line, scenario)
    boots: list                       # [Boot]
    agent_seconds: float
    agent_ops: int
    agent_scenarios: int
    kernel: Kernel
    work: Path
    # seconds from the first QEMU start until the agent's 'begin' frame of each scenario
    began: dict = dataclasses.field(default_factory=dict)
    total: int = 0                    # scenarios packed for the guest
    skipped: set = dataclasses.field(default_factory=set)  # 'skip' frames: capabilities missing
    completed: set = dataclasses.field(default_factory=set)  # 'end' frames: run to its end
    # (first scenario not run, why the run ended before it), or None: replay.no_record()
    ended: tuple | None = None
    # s -> (why its op frames were cut short, what was judged): replay.place_ops()
    cut: dict = dataclasses.field(default_factory=dict)


def agent_binary() -> Path:
    return build_dir("default") / "targets" / "qemu" / "kconform-qemu-agent"


def ensure_tools(log: Log) -> None:
    deps.ensure(["qemu"], log)
    if not shutil.which(QEMU):
        raise ToolError(f"{QEMU} not found after installing group 'qemu' (ci/packages.txt)")


# Seconds between two progress lines of a running guest when stderr is not a terminal.
LOG_TICK_EVERY = 30.0


def resolve_kernel(kernel_path: str | None, log: Log) -> Kernel:
    if kernel_path:
        return user_kernel(kernel_path)
    return debian_kernels.fetch(debian_kernels.DEFAULT_KERNEL, progress=log)


def run_guest(engine: Engine, files: list[str], kernel: Kernel, work: Path,
              accel: str, log: Log, progress: Callable[[int, int], None] | None = None) -> GuestRun:
    pack = work / "scenarios"
    pack.mkdir()
    total = engine.pack(files, pack)
    initrd = build_initramfs(kernel, agent_binary(), pack, cache_dir(), log)

    frames: dict[int, list] = {}          # s -> its op frames as they came (placed below)
    state = {"identity": None, "done": 0}
    crashes, boots, warnings = [], [], []
    start_from = 0
    agent_seconds = 0.0
    agent_ops = agent_scenarios = 0
    began: dict[int, float] = {}
    skipped: set[int] = set()
    completed: set[int] = set()
    ended: tuple[int, str] | None = None
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
            frames[rec["s"]] = []
            began[rec["s"]] = time.monotonic() - t_start
        elif t == "op":
            frames.setdefault(rec["s"], []).append(rec)
            state["done"] += 1
            if progress and state["done"] % 50 == 0:
                progress(state["done"], 0)
        elif t == "skip":  # the replay writes it unsupported (identity cap_bits)
            skipped.add(rec["s"])
        elif t == "end":
            completed.add(rec["s"])
        elif t == "bad":
            raise ToolError(f"target qemu: the agent could not decode scenario {rec['s']}: {rec['error']}")

    def on_tick(seconds: float, probed: bool) -> None:
        """A progress line on stderr every few seconds while the guest runs (in a log,
        not a terminal, every LOG_TICK_EVERY seconds)."""
        if not sys.stderr.isatty():
            if seconds - state.get("logged", 0.0) < LOG_TICK_EVERY:
                return
            state["logged"] = seconds
        if not probed:
            what = "booting, no frame from the guest yet"
        else:
            in_flight = max(began) + 1 if began else 0
            what = f"{state['done']} ops received, scenario {in_flight} of {total}"
        print(f"kconform: qemu: {seconds:.0f} s: {what}", file=sys.stderr, flush=True)

    for n in range(MAX_BOOTS):
        log(f"kconform: qemu: booting {kernel.release or kernel.image} ({accel}), "
            f"scenarios {start_from}..{total - 1}")
        boot = boot_once(kernel, initrd, work, accel, start_from, log, on_record, on_tick=on_tick)
        boots.append(boot)
        text = boot.console.read_text(errors="replace")
        warnings += [(kind, line, s) for kind, line, s in console_events(text) if kind in NONFATAL_KINDS]
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
            # nothing to skip past: resuming would crash the same way
            # (without a probe the run is an error below, whatever ended says)
            ended = (start_from, f"not run: the run stopped after a guest {c.kind} with no scenario in flight "
                                 f"({c.detail}; console: {c.console})")
            break
        start_from = c.scenario + 1
        if start_from >= total:
            break
        if n == MAX_BOOTS - 1:
            ended = (start_from, f"not run: the run's {MAX_BOOTS} boots (MAX_BOOTS) were used up before it")
            log(f"kconform: qemu: {MAX_BOOTS} boots used; scenarios {start_from}..{total - 1} not run")
    if state["identity"] is None:
        c = crashes[-1] if crashes else None
        raise ToolError(f"target qemu: the guest never reported a probe "
                        f"({c.kind + ': ' + c.detail if c else 'no frames'}); console log: "
                        f"{boots[-1].console}")
    # Each op where its op index "i" puts it (an import here: replay.py imports this module).
    # [kind, value, aux] and, after an op that can change data, the pages re-read.
    from kconform.targets.qemu.replay import place_ops, scenario_shapes
    obs, cut = place_ops(frames, scenario_shapes(engine, files), completed,
                         lambda r: [r["k"], r["v"], r["a"]] + ([r["c"]] if "c" in r else []), "qemu")
    p = state["identity"]
    identity = {"type": "identity", "target": "qemu", "release": p["release"],
                "profile": p["profile"], "caps": p["caps"], "cap_bits": p["cap_bits"],
                "seconds": agent_seconds}
    return GuestRun(identity, obs, crashes, warnings, boots, agent_seconds, agent_ops, agent_scenarios,
                    kernel, work, began, total, skipped, completed, ended, cut)


def write_observations(g: GuestRun, path: Path) -> None:
    with naming(path), open(path, "x") as f:
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
