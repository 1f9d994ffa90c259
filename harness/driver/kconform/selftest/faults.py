"""The oracle's self-test: a target that lies (targets/faulty, `--fault KIND:OP`)
must be caught.

A fault is judged by its lie, never by the run's exit status: the same scenarios
run on the same target and build without the fault (the clean pass) and with it,
and the fault is

  detected      it fired (changed at least one outcome: the runner counts, the
                summary record's "fault": {"fired"}) and the faulty pass has at
                least one violation (an op record: scenario, op and the rules it
                violated) that the clean pass does not have;
  not detected  it fired, but every violation it produced the clean pass has too
                (or there is none): the oracle missed the lie;
  never fired   it changed no outcome: nothing was tested.

`kconform selftest faults` runs the matrix (every KIND:OP that applies to the ABI
of host and el2 at 4K, `kconform-runner faults`) on each target's default corpora,
the clean pass once per target, and each fault only on the scenario files that
contain its op (the others cannot differ). A cell that is not detected passes
only if targets/faulty/blind_spots.json lists it with that outcome and a reason.
`kconform run --fault` uses the same judgement for its exit status.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kconform.core import procs
from kconform.core.errors import EXIT_CLEAN, EXIT_TOOL_ERROR, EXIT_VIOLATIONS, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, runner_binary
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine
from kconform.engine.scenarios import scenario_files
from kconform.engine.verdicts import TargetRun
from kconform.sources.trees import DEFAULT_TREE
from kconform.targets import el2

BLIND_SPOTS = REPO / "targets" / "faulty" / "blind_spots.json"
MATRIX_FORMAT = 1
DETECTED, NOT_DETECTED, NEVER_FIRED = "detected", "not detected", "never fired"
OUTCOMES = (DETECTED, NOT_DETECTED, NEVER_FIRED)
# The matrix's targets: run's target name and the ABI it runs.
TARGETS = {"host": "gmem", "el2": "ffa"}
QEMU_MESSAGE = "--fault works with targets host and el2"


# ---- the runner's table of faults ---------------------------------------------------------

def applicable(engine: Engine) -> dict[str, list[str]]:
    """Every KIND:OP that applies, per ABI, in the runner's order."""
    r = procs.run([str(engine.binary), "faults"], capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"kconform-runner faults failed (exit {r.returncode}): {r.stderr.strip()}")
    out: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():
        rec = json.loads(line)
        out.setdefault(rec["abi"], []).append(rec["fault"])
    return out


def check(engine: Engine, spec: str) -> dict[str, str]:
    """Parses spec (ToolError naming it if it does not); per ABI, "" if spec applies
    to it, else the one-line reason why not."""
    r = procs.run([str(engine.binary), "faults", "--fault", spec], capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(r.stderr.strip().removeprefix("kconform-runner: ") or
                        f"kconform-runner faults --fault {spec} failed (exit {r.returncode})")
    return {rec["abi"]: "" if rec["applies"] else rec["why"]
            for rec in map(json.loads, r.stdout.splitlines())}


def require(spec: str, abi: str, target: str, engine: Engine | None = None) -> None:
    """ToolError (exit 2, one line) unless spec parses and applies to the ABI target runs."""
    why = check(engine or Engine(runner_binary("default")), spec).get(abi, f"no ABI {abi}")
    if why:
        raise ToolError(f"flag --fault: {why} (target {target} runs the {abi} ABI)")


# ---- judging one fault ------------------------------------------------------------------

def violation_ops(run: TargetRun) -> set[tuple]:
    """The run's violations, one per op record: (file, index, op, its rules)."""
    by_op: dict[tuple, set] = {}
    for f in run.findings:
        by_op.setdefault((f.file, f.index, f.op), set()).add(f.rule)
    return {(*k, tuple(sorted(rules))) for k, rules in by_op.items()}


@dataclass
class Judgement:
    fault: str
    outcome: str = NEVER_FIRED
    fired: int = 0
    scenarios: int = 0            # scenarios it fired in
    new: int = 0                  # violation op records the clean pass does not have
    rules: list[str] = field(default_factory=list)   # the rules those blame
    first: str = ""               # the first of them: scenario, op, call
    files: int = 0                # scenario files the faulty pass ran
    seconds: float = 0.0


def judge(fault: str, clean: TargetRun, faulty: TargetRun | None, files: int = 0,
          seconds: float = 0.0) -> Judgement:
    """The lie's outcome from the clean and the faulty pass (None: no file has the op)."""
    j = Judgement(fault, files=files, seconds=round(seconds, 3))
    if faulty is None:
        return j
    info = faulty.summary.get("fault") or {}
    j.fired, j.scenarios = int(info.get("fired", 0)), int(info.get("scenarios", 0))
    new = sorted(violation_ops(faulty) - violation_ops(clean))
    j.new = len(new)
    j.rules = sorted({r for *_, rules in new for r in rules})
    if new:
        file, index, op, _ = new[0]
        hit = next((f for f in faulty.findings if (f.file, f.index, f.op) == (file, index, op)), None)
        j.first = f"{hit.scenario} op {op}: {hit.call}" if hit else f"{file} #{index} op {op}"
    # A crash of the code under test ends the faulty pass early: its summary has no count.
    crashed = bool(faulty.summary.get("crashed"))
    if j.fired == 0 and not (crashed and new):
        j.outcome = NEVER_FIRED
    else:
        j.outcome = DETECTED if new else NOT_DETECTED
    return j


# ---- which files can show a fault --------------------------------------------------------

_HEADER_WORDS = {"kconform-scenario", "abi", "name", "requires"}


def ops_in(engine: Engine, files: list[str]) -> dict[str, set[str]]:
    """The op names each scenario file uses (from its text form)."""
    out = {}
    for f in files:
        names = set()
        for line in engine.to_text(f).splitlines():
            words = line.split("#", 1)[0].split()
            if words and words[0] not in _HEADER_WORDS:
                names.add(words[0])
        out[f] = names
    return out


def op_of(spec: str) -> str:
    return spec.split(":")[1] if spec.count(":") >= 1 else ""


# ---- blind spots -------------------------------------------------------------------------

def load_blind_spots(path: Path = BLIND_SPOTS) -> list[dict]:
    """The reviewed cells that are known not to be detected: target, fault, outcome, reason
    (profile: only on that profile)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ToolError(f"{path}: not a blind-spot table: {e}") from None
    spots = doc.get("blind_spots") if isinstance(doc, dict) else None
    if not isinstance(spots, list):
        raise ToolError(f"{path}: field 'blind_spots': expected a list")
    for n, s in enumerate(spots):
        for key in ("target", "fault", "outcome", "reason"):
            if not isinstance(s.get(key), str) or not s[key]:
                raise ToolError(f"{path}: blind_spots[{n}]: field '{key}' missing or empty")
        if s["outcome"] not in (NOT_DETECTED, NEVER_FIRED):
            raise ToolError(f"{path}: blind_spots[{n}]: field 'outcome': '{s['outcome']}' is not "
                            f"'{NOT_DETECTED}' or '{NEVER_FIRED}'")
    return spots


def blind_spot(spots: list[dict], target: str, profile: str, fault: str) -> dict | None:
    for s in spots:
        if s["target"] == target and s["fault"] == fault and s.get("profile", profile) == profile:
            return s
    return None


# ---- the matrix --------------------------------------------------------------------------

@dataclass
class TargetMatrix:
    target: str                 # host, el2
    label: str                  # host, el2-debian-7.3.4-4k
    identity: dict
    clean: dict
    cells: list[dict] = field(default_factory=list)

    @property
    def profile(self) -> str:
        return self.identity.get("profile", "?")


def run_matrix(target: str, label: str, engine: Engine, files: list[str], faults: list[str],
               spots: list[dict], out: Path, log, release: str | None = None) -> TargetMatrix:
    """The clean pass once, then each fault on the files that have its op."""
    t0 = time.monotonic()
    clean = engine.run(target, files, out / f"verdicts-{label}-clean.jsonl", release=release)
    m = TargetMatrix(target, label, clean.target,
                     {"files": len(files), "violations": len(violation_ops(clean)),
                      "seconds": round(time.monotonic() - t0, 3)})
    has_op = ops_in(engine, files)
    for n, fault in enumerate(faults, 1):
        mine = [f for f in files if op_of(fault) in has_op[f]]
        t1 = time.monotonic()
        faulty = None
        if mine:
            raw = out / f"verdicts-{label}-{re.sub(r'[^A-Za-z0-9._-]+', '_', fault)}.jsonl"
            faulty = engine.run(target, mine, raw, fault, release=release)
        j = judge(fault, clean, faulty, len(mine), time.monotonic() - t1)
        cell = asdict(j)
        spot = blind_spot(spots, target, m.profile, fault)
        cell["blind_spot"] = spot["reason"] if spot else None
        cell["listed_as"] = spot["outcome"] if spot else None
        cell["ok"] = j.outcome == DETECTED or bool(spot and spot["outcome"] == j.outcome)
        cell["stale"] = bool(spot and j.outcome == DETECTED)
        m.cells.append(cell)
        log(f"kconform selftest faults: {label} [{n}/{len(faults)}] {fault}: {j.outcome}"
            f" (fired {j.fired}, {j.new} new violation(s){': ' + ', '.join(j.rules) if j.rules else ''})"
            + ("" if cell["ok"] or not spot else f"; listed as {spot['outcome']}")
            + (" [known blind spot]" if spot and cell["ok"] and j.outcome != DETECTED else ""))
    return m


EL2_PAGE_SIZE = 4096  # the matrix's EL2 build: debian:7.3 at 4K


def selected(table: dict[str, list[str]], engine: Engine, targets: list[str],
             only: list[str] | None) -> dict[str, list[str]]:
    """Per target, the faults to run: every applicable one, or those of --only (KIND:OP
    or KIND:OP:NTH) that apply to its ABI; one that applies to none of them is an error."""
    if not only:
        return {t: list(table.get(TARGETS[t], [])) for t in targets}
    out: dict[str, list[str]] = {t: [] for t in targets}
    for spec in only:
        why = check(engine, spec)
        fits = [t for t in targets if not why.get(TARGETS[t], "no such ABI")]
        if not fits:
            raise ToolError("flag --only: " + "; ".join(
                f"{why.get(TARGETS[t], 'no such ABI')} (target {t})" for t in targets))
        for t in fits:
            out[t].append(spec)
    return out


def matrix(targets: list[str], only: list[str] | None, out: Path, log) -> list[TargetMatrix]:
    """`kconform selftest faults`: builds what `run` would, then the matrix per target.
    A target that cannot run here (no /dev/kvm) is skipped with a note unless it is the
    only one asked for."""
    build_preset("default", log=log)
    main = Engine(runner_binary("default"))
    faults = selected(applicable(main), main, targets, only)
    spots = load_blind_spots()
    result = []
    for t in targets:
        if not faults[t]:
            continue
        files = scenario_files([], TARGETS[t])
        if t == "host":
            engine, label, release = main, "host", None
        else:
            tree, tree_id = el2.resolve_tree(DEFAULT_TREE, None, log)
            engine = Engine(el2.build(tree, tree_id, [EL2_PAGE_SIZE], log=log)[EL2_PAGE_SIZE])
            release = f"{tree_id}-{EL2_PAGE_SIZE // 1024}k"
            label = f"el2-{release}"
        ident, why = engine.probe(t)
        if not ident:
            if len(targets) == 1:
                raise ToolError(f"target {t} cannot run here: {why}")
            log(f"kconform selftest faults: target {t} skipped: {why}")
            continue
        result.append(run_matrix(t, label, engine, files, faults[t], spots, out, log, release))
    if not result:
        raise ToolError("selftest faults: no target could run")
    return result


def exit_code(matrices: list[TargetMatrix]) -> int:
    return EXIT_CLEAN if all(c["ok"] for m in matrices for c in m.cells) else EXIT_VIOLATIONS


def to_json(matrices: list[TargetMatrix], code: int) -> dict:
    return {"format": MATRIX_FORMAT, "exit": code,
            "outcomes": list(OUTCOMES),
            "targets": {m.label: {"target": m.target, "identity": m.identity, "clean": m.clean,
                                  "cells": m.cells} for m in matrices}}


_SHORT = {DETECTED: "detected", NOT_DETECTED: "NOT detected", NEVER_FIRED: "never fired"}


def cell_text(c: dict) -> str:
    """One cell of the printed matrix: the outcome, how often the lie fired, '*' for a
    known blind spot, '!' for a cell that fails the self-test."""
    text = _SHORT[c["outcome"]] + (f" ({c['fired']})" if c["outcome"] != NEVER_FIRED else "")
    if not c["ok"]:
        return text + " !"
    return text + (" *" if c["blind_spot"] else "")


def matrix_lines(m: TargetMatrix) -> list[str]:
    """The matrix of one target as a Markdown table: ops down, kinds across."""
    kinds: list[str] = []
    ops: list[str] = []
    grid: dict = {}
    extra = []
    for c in m.cells:
        parts = c["fault"].split(":")
        if len(parts) != 2:
            extra.append(c)
            continue
        kind, op = parts
        kinds += [] if kind in kinds else [kind]
        ops += [] if op in ops else [op]
        grid[(op, kind)] = c
    lines = []
    if ops:
        head = ["op"] + kinds
        rows = [[op] + [cell_text(grid[(op, k)]) if (op, k) in grid else "-" for k in kinds] for op in ops]
        widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
        fmt = lambda r: "| " + " | ".join(x.ljust(w) for x, w in zip(r, widths)) + " |"  # noqa: E731
        lines += [fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [fmt(r) for r in rows]
    for c in extra:
        lines.append(f"{c['fault']}: {cell_text(c)}")
    return lines


def summary_line(m: TargetMatrix) -> str:
    n = {o: sum(1 for c in m.cells if c["outcome"] == o) for o in OUTCOMES}
    known = sum(1 for c in m.cells if c["ok"] and c["outcome"] != DETECTED)
    bad = sum(1 for c in m.cells if not c["ok"])
    return (f"{m.label} ({m.identity.get('profile', '?')}, {m.identity.get('release', '?')}): "
            f"{len(m.cells)} faults: {n[DETECTED]} detected, {n[NOT_DETECTED]} not detected, "
            f"{n[NEVER_FIRED]} never fired; {known} known blind spot(s), {bad} failing")


# ---- `kconform run --fault` --------------------------------------------------------------

def judge_run(plans: list, runs: list, out_dir: Path, fault: str) -> tuple[int, list[str]]:
    """`run --fault`: runs each plan again without the fault (verdicts-<label>-clean.jsonl)
    and says, per target run, whether the lie was detected, fired but not detected, or
    never fired (fault.json in the report folder). Exit status: 1 detected on every target
    run (the run fails, as a lie must make it), 0 a lie fired but was not detected (no
    violation beyond the clean run's), 2 it never fired on some target run; and one line
    per target run that says so."""
    results, lines = [], []
    for plan, run in zip(plans, runs):
        if plan.target not in TARGETS:
            continue
        clean = plan.engine.run(plan.target, plan.files, out_dir / f"verdicts-{plan.label}-clean.jsonl",
                                release=plan.release)
        j = judge(fault, clean, run, len(plan.files))
        results.append((plan.label, j))
        how = {DETECTED: f"DETECTED: {j.new} violation(s) the clean run does not have "
                         f"({', '.join(j.rules)}; first: {j.first})",
               NOT_DETECTED: "NOT DETECTED: no violation beyond the clean run's (the oracle missed the lie)",
               NEVER_FIRED: "NEVER FIRED: it changed no outcome, so nothing was tested"}[j.outcome]
        lines.append(f"kconform: fault {fault} on {plan.label}: fired {j.fired} time(s) in {j.scenarios} "
                     f"scenario(s): {how}")
    atomic_write(out_dir / "fault.json", json.dumps(
        {"format": MATRIX_FORMAT, "fault": fault, "runs": {label: asdict(j) for label, j in results}},
        indent=2) + "\n")
    outcomes = {j.outcome for _, j in results}
    if not results or NEVER_FIRED in outcomes:
        code = EXIT_TOOL_ERROR
    else:
        code = EXIT_VIOLATIONS if outcomes == {DETECTED} else EXIT_CLEAN
    lines.append(f"kconform: fault {fault}: exit {code} ("
                 + {EXIT_VIOLATIONS: "detected", EXIT_CLEAN: "fired but not detected",
                    EXIT_TOOL_ERROR: "never fired"}[code] + "; the findings above are the faulty run's)")
    return code, lines
