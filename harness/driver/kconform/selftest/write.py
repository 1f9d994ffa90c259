"""The guest_memfd write() kill matrix (`kconform selftest mutants --abi gmem`), inside QEMU.

Controls first:
  stock      Debian's packaged 7.3 kernel (no GUEST_MEMFD_FLAG_WRITE): the guest must
             report the base profile, the write-profile scenarios must come back
             `unsupported`, GMEM.WRITE.UNSUPPORTED (write() refused) must be exercised
             and nothing may be violated;
  reference  Debian's 7.3 tree + targets/qemu/write/gmem-write-reference.patch, built
             (kernel_build.build) and booted: the guest must report the write profile,
             every other GMEM.WRITE* rule must be exercised and nothing may be violated.
Then each mutant (targets/qemu/write/mutants/NN-name.patch: the whole reference patch
with one fault) is built into the same kernel build folder (only what the fault changes
recompiles: guest_memfd.o and the link), booted, and runs the whole guest_memfd suite
(corpora/gmem and corpora/z3/gmem); the outcomes are replayed on the host. A mutant is
killed by any rule violation or any QEMU.* finding (panic, oops, kernel warning, hang).
Time to kill: seconds from QEMU's start to the agent's 'begin' of the first scenario
with a kill, so it includes the boot.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import REPO, runner_binary
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine
from kconform.engine.scenarios import scenario_files
from kconform.selftest.mutants import MutantResult, mutant_patches
from kconform.sources import debian_kernels, kernel_build
from kconform.sources.kernel_image import Kernel
from kconform.targets.qemu.guest import GuestRun, ensure_tools, run_guest
from kconform.targets.qemu.replay import replay_guest, scenario_locations

WRITE_DIR = REPO / "targets" / "qemu" / "write"
REFERENCE = WRITE_DIR / "gmem-write-reference.patch"
MUTANTS_DIR = WRITE_DIR / "mutants"
TREE = "debian:7.3"
ACCEL = "tcg"
WRITE_RULE_PREFIXES = ("GMEM.WRITE.", "GMEM.WRITEV.")
# The one write rule for kernels without the write ABI (write() must fail there):
# the stock control must exercise it, the reference every other write rule.
WITHOUT_WRITE_ABI = "GMEM.WRITE.UNSUPPORTED"


def kills(run) -> list:
    """Findings that kill: every violation and every QEMU.* finding, in the order found."""
    return list(run.findings)


def first_kill(run, g: GuestRun, where: dict):
    """(the earliest kill in pack order, its "scenario op N (rule)", seconds from QEMU start)."""
    best = None
    for f in kills(run):
        s = where.get((f.file, f.index))
        k = (s if s is not None else 1 << 30, f.op)
        if best is None or k < best[0]:
            best = (k, f)
    if best is None:
        return None, "", None
    (s, op), f = best
    t = g.began.get(s) if s is not None else None
    if t is None:  # a crash after the last 'begin' frame: the end of the last boot
        t = g.boots[-1].ended - g.boots[0].started
    return f, f"{f.scenario} op {op} ({f.rule})", round(t, 3)


def _run_kernel(kernel: Kernel, files: list[str], out: Path, label: str, log):
    """Boots kernel, runs files, replays them: (TargetRun, GuestRun, seconds)."""
    t0 = time.monotonic()
    work = out / f"qemu-gmem-{label}"
    work.mkdir()
    engine = Engine(runner_binary("default"))
    g = run_guest(engine, files, kernel, work, ACCEL, log)
    run = replay_guest(engine, files, g, out / f"verdicts-gmem-{label}.jsonl", lambda m: None)
    return run, g, time.monotonic() - t0


def _observed(run, g: GuestRun) -> dict:
    """What a control is checked on: the guest's write ABI and release, the rules found
    violated, and the write rules the run exercised (on either side)."""
    return {"write_abi": bool(g.identity["profile"].get("write_abi")), "release": g.identity["release"],
            "findings": sorted({f.rule for f in run.findings}),
            "write_rules_exercised": sorted(r for r, t in run.rules.items()
                                            if r.startswith(WRITE_RULE_PREFIXES) and (t.allowed or t.forbidden))}


def matrix(args, out: Path, log) -> dict:
    """Controls, then every mutant (or --only those) inside QEMU; the kill matrix."""
    t_all = time.monotonic()
    files = scenario_files([], "gmem")
    patches_ = mutant_patches(MUTANTS_DIR, args.only)
    build_preset("default", log=log)
    ensure_tools(log)
    locations = scenario_locations(Engine(runner_binary("default")), files)
    where = {(f, i): s for s, (f, i, _n) in enumerate(locations)}
    controls: dict[str, dict] = {}

    log(f"kconform selftest gmem: control: Debian's packaged {TREE} kernel "
        f"(expects the base profile, write() refused, no violation)")
    stock = debian_kernels.fetch(TREE, progress=log)
    run, g, secs = _run_kernel(stock, files, out, "stock", log)
    got = dict(_observed(run, g), unsupported_ops=run.counts["unsupported"])
    controls["stock"] = {
        "expect": f"Debian's {TREE} kernel: no write ABI, write-profile scenarios unsupported, "
                  f"{WITHOUT_WRITE_ABI} exercised, no finding",
        "got": got, "run_seconds": round(secs, 1), "timing": run.target.get("timing", ""),
        "ok": (not got["write_abi"] and got["unsupported_ops"] > 0 and not got["findings"]
               and WITHOUT_WRITE_ABI in got["write_rules_exercised"])}

    log(f"kconform selftest gmem: control: {TREE} + {REFERENCE.name} (expects the write ABI, "
        f"every write rule but {WITHOUT_WRITE_ABI} exercised, no violation)")
    t0 = time.monotonic()
    ref = kernel_build.build(TREE, str(REFERENCE), progress=log)
    b = time.monotonic() - t0
    run, g, secs = _run_kernel(ref, files, out, "reference", log)
    all_write = sorted(r["id"] for r in _gmem_rules()
                       if r["id"].startswith(WRITE_RULE_PREFIXES) and r["id"] != WITHOUT_WRITE_ABI)
    got = _observed(run, g)
    missing = sorted(set(all_write) - set(got["write_rules_exercised"]))
    got["write_rules_not_exercised"] = missing
    controls["reference"] = {
        "expect": f"the reference write() implementation: write ABI, every GMEM.WRITE* rule but "
                  f"{WITHOUT_WRITE_ABI} exercised, no finding",
        "got": got, "build_seconds": round(b, 1), "run_seconds": round(secs, 1),
        "timing": run.target.get("timing", ""),
        "boot_to_first_op_seconds": run.summary.get("boot_to_first_op_seconds"),
        "guest_scenarios_per_second": run.summary.get("guest_scenarios_per_second"),
        "ok": got["write_abi"] and not got["findings"] and not missing}

    results: list[MutantResult] = []
    if all(c["ok"] for c in controls.values()):
        for patch in patches_:
            results.append(_one_mutant(patch, files, out, where, log))
    killed = sum(m.status == "killed" for m in results)
    return {"abi": "gmem", "target": "qemu", "tree": TREE, "accel": ACCEL,
            "reference": os.path.relpath(REFERENCE, REPO),
            "suite": [os.path.relpath(f, REPO) for f in files],
            "controls": controls, "killed": killed, "total": len(results),
            "seconds": round(time.monotonic() - t_all, 1), "mutants": [asdict(m) for m in results]}


def _gmem_rules() -> list[dict]:
    return [r for r in Engine(runner_binary("default")).rules() if r["abi"] == "gmem"]


def _one_mutant(patch: Path, files: list[str], out: Path, where: dict, log) -> MutantResult:
    m = MutantResult(patch.stem)
    log(f"kconform selftest gmem: {patch.stem}")
    try:
        t0 = time.monotonic()
        kernel = kernel_build.build(TREE, str(patch), progress=log)
        m.build_seconds = round(time.monotonic() - t0, 1)
        run, g, secs = _run_kernel(kernel, files, out, patch.stem[:2], log)
    except ToolError as e:
        m.status, m.error = "error", str(e).splitlines()[0]
        return m
    m.run_seconds = round(secs, 1)
    seen = _observed(run, g)
    m.runs = [{"release": seen["release"], "write_abi": seen["write_abi"],
               "counts": dict(run.counts), "timing": run.target.get("timing", "")}]
    found = kills(run)
    if found:
        m.status = "killed"
        for f in found:
            if f.rule not in m.rules:
                m.rules.append(f.rule)
        first, m.first, m.time_to_kill = first_kill(run, g, where)
        m.kind = "QEMU" if first.rule.startswith("QEMU.") else "violation"
    return m
