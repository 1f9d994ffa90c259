"""Reading the verdict stream (JSON lines written by kconform-runner).

Record types, all with a "type" field (format 1):
  plan     {"scenarios", "ops"}                      what the run will do
  target   {"target", "release", "profile", "caps"}   who ran it
  op       {"scenario", "file", "index", "op", "call", "verdict",
            "rules": [[id, "allowed"|"forbidden"], ...], "expected": [...],
            "observed", "violated"?: [id, ...], "class"?: "conformance"|"robustness",
            "note"?, "missing"?: [cap, ...]}
            (an unsupported op names the capabilities the target lacks in "missing"
            and/or, in "note", what else keeps the target from the scenario)
  summary  {"scenarios", "ops", "violations", "seconds"}
verdict is one of pass, violation, unsupported, unchecked.

What failed is one list: TargetRun.findings, one Finding per violated rule at
an op, plus those added for crashes and hangs of the code under test
(engine/runner.py: CRASH.*; the run resumes with the next scenario) and of a booted guest (targets/qemu/replay.py: QEMU.*;
QEMU.NO-RECORD too: a scenario given to the guest whose outcome never came back whole,
targets/qemu/replay.py no_record(), for both QEMU targets). Every report form (engine/report.py), the saved
reproducers and the exit status are written from it. What was not judged because
the target cannot run it is TargetRun.unsupported: one entry per scenario with its
reason, shown in every form too (KTAP `# SKIP`, JUnit <skipped>).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from typing import Iterable

from kconform.core.errors import ToolError

VERDICTS = ("pass", "violation", "unsupported", "unchecked")
FORMAT = 1

# What a finding is, from its rule ID and evidence (finding_kind):
#   violation      the target's outcome is not one the model allows (a model rule)
#   invariant      a target invariant broke (no change on an error, stage-2 agrees with EL3, ...)
#   sanitizer      a sanitizer report in the code under test (CRASH.SANITIZER)
#   crash          a fatal signal in the code under test (CRASH.SIGNAL)
#   hang           an op of the code under test did not return within the runner's
#                  watchdog (CRASH.HANG), or a booted guest stopped answering
#                  (QEMU.HANG, QEMU.BOOT-TIMEOUT)
#   guest-panic    a booted guest crashed: panic, oops, early exit, agent error (QEMU.*)
#   guest-warning  a kernel warning or lockdep report in a booted guest (QEMU.WARNING, QEMU.LOCKDEP)
#   no-record      a scenario given to a booted guest whose outcome never came back: its
#                  frames were lost, or the run ended (boots used up, a crash) before it
#                  (QEMU.NO-RECORD); nothing judged it, so the run cannot pass
#   (a KASAN/KFENCE/UBSAN report in a booted guest, QEMU.KASAN, is a sanitizer finding)
KINDS = ("violation", "invariant", "sanitizer", "crash", "hang", "guest-panic", "guest-warning", "no-record")
# A finding's class (the op record's "class", oracles/README.md): conformance to the
# ABI, or robustness against an environment the scenario made misbehave on purpose
# (an injected EL3 fault). Reports show each class in its own section.
CLASSES = ("conformance", "robustness")
_TAG = re.compile(r"\[([^\[\]]+)\]\s*$")


def finding_kind(rule: str, expected: list[str], note: str) -> str:
    if rule in ("CRASH.SANITIZER", "QEMU.KASAN"):
        return "sanitizer"
    if rule in ("CRASH.HANG", "QEMU.HANG", "QEMU.BOOT-TIMEOUT"):
        return "hang"
    if rule.startswith("CRASH."):
        return "crash"
    if rule in ("QEMU.WARNING", "QEMU.LOCKDEP"):
        return "guest-warning"
    if rule == "QEMU.NO-RECORD":
        return "no-record"
    if rule.startswith("QEMU."):
        return "guest-panic"
    # A broken invariant's rule is added to the violated ones (harness/runner/step.cc)
    # without licensing any allowed outcome: no "[RULE]" tag names it in expected.
    tags = {m.group(1) for e in expected if (m := _TAG.search(e))}
    if "invariant:" in note and rule not in tags:
        return "invariant"
    return "violation"


@dataclasses.dataclass
class Finding:
    """One violated rule (or one crash) at one op: the evidence a user triages,
    and how to see it again (rerun: a command that reproduces it; saved: the
    reproducer file it runs)."""
    rule: str
    target: str
    release: str
    scenario: str
    file: str
    index: int
    op: int
    call: str
    expected: list[str]
    observed: str
    note: str = ""
    baselined_by: dict | None = None
    kind: str = ""      # one of KINDS (derived from rule and evidence when not given)
    rerun: str = ""     # set by `kconform run` once the reproducer is saved
    saved: str = ""     # the reproducer file (one per distinct finding)
    minimised: str = ""  # its minimised form, when `run` triaged it in its budget (<saved>.min.kcs)
    finding_class: str = "conformance"  # one of CLASSES ("class" in the records and the JSON report)

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = finding_kind(self.rule, self.expected, self.note)

    def key(self) -> tuple:
        return (self.rule, self.target, self.release, self.scenario, self.op)

    @property
    def op_kind(self) -> str:
        """The op's call name ("mem_reclaim2"), or "scenario" for a finding at no op."""
        return self.call.split()[0] if self.op >= 0 and self.call.split() else "scenario"


@dataclasses.dataclass
class Unsupported:
    """A scenario the target could not run, and why: the capabilities it lacks (by
    name, the records' "missing") and/or what the target said ("note")."""
    scenario: str
    file: str
    index: int
    reason: str


def unsupported_reason(rec: dict) -> str:
    """The reason of an `unsupported` op record, in words."""
    missing = rec.get("missing") or []
    parts = []
    if missing:
        parts.append(f"missing capabilit{'y' if len(missing) == 1 else 'ies'}: {', '.join(missing)}")
    if rec.get("note"):
        parts.append(rec["note"])
    return "; ".join(parts) or "the target cannot run it"


@dataclasses.dataclass
class RuleTally:
    allowed: int = 0      # ops on the rule's allowed side that passed
    forbidden: int = 0    # ops on its forbidden side that passed
    violations: int = 0
    unsupported: int = 0


@dataclasses.dataclass
class TargetRun:
    target: dict
    plan: dict = dataclasses.field(default_factory=dict)
    summary: dict = dataclasses.field(default_factory=dict)
    counts: dict = dataclasses.field(default_factory=lambda: {v: 0 for v in VERDICTS})
    rules: dict = dataclasses.field(default_factory=lambda: defaultdict(RuleTally))
    findings: list = dataclasses.field(default_factory=list)
    scenarios: set = dataclasses.field(default_factory=set)
    # Names of the scenarios that ran on this target: at least one op not
    # `unsupported` (what a baseline entry's scenario pattern is matched against).
    ran: set = dataclasses.field(default_factory=set)
    # The scenarios the target could not run, (file, index) -> Unsupported, in
    # stream order: every report form lists each with its reason.
    unsupported: dict = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.target.get("target", "?")

    @property
    def release(self) -> str:
        return self.target.get("release", "?")


def parse_line(line: str, where: str) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise ToolError(f"{where}: not a JSON verdict record: {e}") from None
    if not isinstance(rec, dict) or "type" not in rec:
        raise ToolError(f"{where}: field 'type' missing")
    return rec


class Collector:
    """Folds records, one at a time, into a TargetRun."""

    def __init__(self, release: str | None = None) -> None:
        self.run: TargetRun | None = None
        self._plan: dict = {}
        self._release = release  # names the build (tree, patch, page size) instead of the runner's

    def add(self, rec: dict, where: str) -> None:
        kind = rec["type"]
        if kind == "plan":
            if rec.get("format") != FORMAT:
                raise ToolError(f"{where}: field 'format': {rec.get('format')} is not {FORMAT}")
            self._plan = rec
            return
        if kind == "target":
            if self._release:
                rec = dict(rec, release=self._release, runner_release=rec.get("release"))
            self.run = TargetRun(target=rec, plan=self._plan)
            return
        if self.run is None:
            raise ToolError(f"{where}: '{kind}' record before the 'target' record")
        if kind == "summary":
            self.run.summary = rec
            return
        if kind != "op":
            raise ToolError(f"{where}: field 'type': unknown record type '{kind}'")
        verdict = rec.get("verdict")
        if verdict not in VERDICTS:
            raise ToolError(f"{where}: field 'verdict': unknown verdict '{verdict}'")
        run = self.run
        run.counts[verdict] += 1
        run.scenarios.add((rec["file"], rec["index"]))
        if verdict != "unsupported":
            run.ran.add(rec.get("scenario", ""))
        elif (rec["file"], rec["index"]) not in run.unsupported:
            run.unsupported[(rec["file"], rec["index"])] = Unsupported(
                rec.get("scenario", ""), rec["file"], rec["index"], unsupported_reason(rec))
        if verdict == "pass":
            for rule, side in rec.get("rules", []):
                t = run.rules[rule]
                if side == "forbidden":
                    t.forbidden += 1
                else:
                    t.allowed += 1
        elif verdict == "violation":
            cls = rec.get("class", "conformance")
            if cls not in CLASSES:
                raise ToolError(f"{where}: field 'class': unknown class '{cls}'")
            for rule in rec.get("violated", []):
                run.rules[rule].violations += 1
                run.findings.append(Finding(
                    rule=rule, target=run.name, release=run.release,
                    scenario=rec["scenario"], file=rec["file"], index=rec["index"],
                    op=rec["op"], call=rec["call"], expected=rec.get("expected", []),
                    observed=rec.get("observed", ""), note=rec.get("note", ""),
                    finding_class=cls))


def read_stream(lines: Iterable[str], where: str) -> TargetRun:
    c = Collector()
    for n, line in enumerate(lines, 1):
        if line.strip():
            c.add(parse_line(line, f"{where}:{n}"), f"{where}:{n}")
    if c.run is None:
        raise ToolError(f"{where}: no 'target' record")
    return c.run
