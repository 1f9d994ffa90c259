"""The QEMU target as `kconform run` sees it: boot, collect the guest's outcomes,
replay them through the model on the host (Engine.replay), and add each guest crash
and kernel warning as a QEMU.* finding with the console log as evidence, and each
scenario whose outcome never came back whole as QEMU.NO-RECORD (shared with qemu-arm64).

Both QEMU targets place each op frame of a scenario by its op index "i" (place_ops(),
shared too): a frame lost, repeated or out of order cuts the scenario where it happened,
and the rest of it is a QEMU.NO-RECORD finding."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.engine.runner import Engine
from kconform.engine.verdicts import Finding, TargetRun
from kconform.targets.qemu.boot import Log
from kconform.targets.qemu.guest import (GuestRun, ensure_tools, resolve_kernel, run_guest,
                                         timing_summary, write_observations)


def run_target(engine: Engine, files: list[str], raw_out: Path, out_dir: Path, kernel_path: str | None,
               accel: str, log: Log, progress: Callable[[int, int], None] | None = None) -> TargetRun:
    """`kconform run --target qemu`: boot, collect outcomes, replay them on the host; returns
    the TargetRun of the verdict stream with each guest crash added as a finding."""
    ensure_tools(log)
    kernel = resolve_kernel(kernel_path, log)
    work = out_dir / "qemu"
    work.mkdir()
    g = run_guest(engine, files, kernel, work, accel, log, progress)
    return replay_guest(engine, files, g, raw_out, log)


def replay_guest(engine: Engine, files: list[str], g: GuestRun, raw_out: Path, log: Log) -> TargetRun:
    """Replays a guest's observations through the model on the host into a TargetRun;
    guest crashes and kernel warnings become QEMU.* findings."""
    kernel, work = g.kernel, g.work
    obs_path = work / "observations.jsonl"
    write_observations(g, obs_path)
    run = engine.replay(obs_path, files, raw_out, "qemu")
    run.target["kernel"] = str(kernel.image)
    run.target["timing"] = timing_summary(g)
    run.summary["boot_to_first_op_seconds"] = (g.boots[0].first_op - g.boots[0].started
                                               if g.boots[0].first_op else None)
    run.summary["guest_scenarios_per_second"] = (g.agent_scenarios / g.agent_seconds
                                                 if g.agent_seconds else None)
    log(f"kconform: qemu: {timing_summary(g)}")

    # Guest crashes and kernel warnings are findings of their own, with the console
    # log as evidence; "file"/"index" name the scenario in flight.
    where = scenario_locations(engine, files)
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
    run.findings += console_findings(g.warnings, where, run.name, run.release, str(work))
    # Every scenario given is judged, unsupported (a 'skip' frame: the replay writes it so),
    # or a finding: a crash in flight in it, or QEMU.NO-RECORD.
    in_flight = {c.scenario for c in g.crashes if c.scenario is not None}
    lost = no_record(g.total, g.observations, g.completed, in_flight | g.skipped, g.ended, g.boots, g.cut)
    run.summary["no_record"] = len(lost)
    run.findings += no_record_findings(lost, where, run, work)
    return run


# A report on the console that does not stop the guest, by console_events kind.
CONSOLE_RULES = {
    "warning": ("QEMU.WARNING", "no kernel warning"),
    "kasan": ("QEMU.KASAN", "no KASAN, KFENCE or UBSAN report"),
    "lockdep": ("QEMU.LOCKDEP", "no lockdep report"),
}


def console_findings(events: list, where: list, target: str, release: str, work: str) -> list[Finding]:
    """A finding for each (kind, line, scenario in flight) of a kernel warning, sanitizer
    report or lockdep report on the console, at the scenario that was running."""
    out = []
    for kind, line, s in events:
        if s is None:
            continue
        file, index, name = where[s]
        rule, expected = CONSOLE_RULES[kind]
        out.append(Finding(
            rule=rule, target=target, release=release, scenario=name, file=file,
            index=index, op=-1, call="during the scenario", expected=[expected],
            observed=line, note="console log in " + work))
    return out


def scenario_locations(engine: Engine, files: list[str]) -> list[tuple[str, int, str]]:
    """(file, index in file, name) of each scenario in pack order."""
    out = []
    for f in files:
        out += [(f, i, n) for i, n in enumerate(engine.scenario_names(f))]
    return out


# The header lines of a scenario's text form (harness/scenario/codec_text.cc format_text):
# every other line is one op.
HEADER_WORDS = ("kconform-scenario", "abi", "name", "requires", "repeat")


def scenario_shapes(engine: Engine, files: list[str]) -> list[tuple[int, int]]:
    """(ops, repeat) of each scenario in pack order: the agent sends ops x repeat op
    frames for it, op indices 0..ops-1 run after run."""
    out = []
    for f in files:
        for chunk in re.split(r"^(?=kconform-scenario )", engine.to_text(f), flags=re.M):
            lines = [line.split() for line in chunk.splitlines() if line.strip()]
            if not lines:
                continue
            repeat = next((int(w[1]) for w in lines if w[0] == "repeat"), 1)
            out.append((sum(1 for w in lines if w[0] not in HEADER_WORDS), repeat))
    return out


def op_index(rec: dict, target: str) -> int:
    """The op index "i" of an op frame; an agent that sends none is older than this driver,
    and its ops cannot be placed (a lost frame would shift the ones after it)."""
    i = rec.get("i")
    if type(i) is not int or i < 0:
        raise ToolError(f"target {target}: an op frame without an op index \"i\" came back from the guest: "
                        f"{json.dumps(rec)[:300]}; the guest agent is older than this driver (rebuild it)")
    return i


def place_ops(frames: dict[int, list[dict]], shapes: list[tuple[int, int]], completed: set,
              to_op: Callable[[dict], list], target: str) -> tuple[dict[int, list], dict[int, tuple[str, str]]]:
    """The op frames of each scenario (frames: scenario -> its op frames in the order they
    came, for those whose begin frame came back) placed by their op index "i":
    (scenario -> its ops, contiguous from op 0, each to_op(frame): what the replay judges;
    scenario -> (why it was cut short, what of it was judged), for each where a frame was
    lost, repeated or out of order). Frames come in order: at position p of a scenario of
    shape (n, repeat) (scenario_shapes()) the next frame must carry i = p % n; the first
    that does not cuts the scenario at p, and the ops before it are the ones placed. A
    scenario whose end frame came back (completed) with some but fewer op frames than
    n x repeat lost its last ones: cut there too. One with no op frame, or without its
    end frame, is left to no_record() (nothing judged; judged up to its last op frame)."""
    placed: dict[int, list] = {}
    cut: dict[int, tuple[str, str]] = {}
    for s, recs in frames.items():
        n, repeat = shapes[s]
        ops: list = []

        def name(p: int) -> str:
            return f"op {p % n} (run {p // n + 1} of {repeat})" if repeat > 1 else f"op {p}"

        def judged(p: int) -> str:
            if p == 0:
                return "no op of it judged"
            if repeat > 1 and p >= n:
                return f"only its first {p // n} of {repeat} runs judged"
            return f"judged only up to its op {p - 1}"

        for rec in recs:
            i, p = op_index(rec, target), len(ops)
            if p >= n * repeat:
                cut[s] = (f"more op frames came back than it has ops (op {i} after its last)", judged(p))
                break
            if i != p % n:
                # frames keep their order on the port: a later index than the next one's says
                # that one was lost, unless runs repeat (it may be the last run's again)
                what = ("was lost" if i > p % n and repeat == 1
                        else "did not come next (a frame lost, repeated or out of order)")
                cut[s] = (f"its {name(p)} frame {what}, its op {i} frame came in its place", judged(p))
                break
            ops.append(to_op(rec))
        placed[s] = ops
        if s in completed and s not in cut and 0 < len(ops) < n * repeat:
            p = len(ops)
            cut[s] = (f"its {name(p)} frame was lost, its end frame came back before it", judged(p))
    return placed, cut


def no_record(total: int, observations: dict[int, list], completed: set, excused: set,
              ended: tuple[int, str] | None, boots: list, cut: dict[int, tuple[str, str]]) -> dict[int, str]:
    """Scenario position -> why it was not judged whole, for each of 0..total-1 not
    accounted for: its op frames (observations: scenario -> ops placed by place_ops(),
    for those whose begin frame came back) and its end frame (completed) came back, none
    of them lost, repeated or out of order (cut: scenario -> why not, place_ops()), or it
    is excused (the agent reported it cannot run it, caps/skip frames; a crash was in
    flight in it: each its own finding). One cut short was judged only up to the op before
    the first frame missing; one with op frames but no end frame only up to its last op
    frame; the rest of either is a finding. boots: their garbled and gaps counts are quoted.

    A scenario the run never reached because its boots were used up (MAX_BOOTS) or a
    crash with no scenario in flight ended it is a finding too, not `unsupported`:
    unsupported says this target cannot run the scenario, and it can; a kernel developer
    reading exit 0 expects every scenario to have been judged, so a run that left some
    unjudged must fail (exit 1) and name each one and why."""
    accounted = {s for s in completed if observations.get(s) and s not in cut} | excused
    lost = (f"frames lost in this run: {sum(b.garbled for b in boots)} garbled, "
            f"{sum(b.gaps for b in boots)} gaps")
    out = {}
    for s in range(total):
        if s in accounted:
            continue
        if s in cut:
            what, judged = cut[s]
            out[s] = f"{what} ({lost}): {judged}"
        elif observations.get(s):
            n = len(observations[s])
            out[s] = (f"its begin frame and {n} op frame(s) came back from the guest, not its end "
                      f"frame: judged only up to its op {n - 1} ({lost})")
        elif s in observations:
            out[s] = f"its begin frame came back from the guest, no op frame did ({lost})"
        elif ended is not None and s >= ended[0]:
            out[s] = ended[1]
        else:
            out[s] = f"no frame for it came back from the guest (no begin, op, caps or skip frame; {lost})"
    return out


def no_record_findings(lost: dict[int, str], where: list, run: TargetRun, work: Path) -> list[Finding]:
    """A QEMU.NO-RECORD finding for each scenario nothing judged (no_record())."""
    out = []
    for s, why in sorted(lost.items()):
        file, index, name = where[s]
        run.scenarios.add((file, index))
        out.append(Finding(
            rule="QEMU.NO-RECORD", target=run.name, release=run.release, scenario=name, file=file,
            index=index, op=-1, call="the whole scenario",
            expected=["the guest reports the scenario's outcome (begin/op frames) or why it cannot run it "
                      "(caps/skip frames)"],
            observed=why, note=f"frames and console logs in {work}"))
    return out
