"""The QEMU target as `kconform run` sees it: boot, collect the guest's outcomes,
replay them through the model on the host (Engine.replay), and add each guest crash
and kernel warning as a QEMU.* finding with the console log as evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

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
