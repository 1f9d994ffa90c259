"""Triage of one finding: reproduce, minimise, explain, and group by signature.

A finding is a scenario (text form) and its signature: the finding's kind, the
rules violated at one op and that op's kind ("violation FFA.R2.PAGE_INDEX
mem_reclaim2"); for a crash, the rule (CRASH.SIGNAL, ...) and the op in flight.
The op's index is not part of it: minimising moves ops.

  reproduce  runs the scenario N times on the target and says which runs show
             the signature (deterministic when all do).
  minimise   delta debugging over the scenario's structure, not its bytes:
             first fewest ops (ddmin over the op lines: removing chunks, then
             single ops), then each op's arguments: an optional argument left
             out (its default), numbers toward 0 (0, 1, halves, one less),
             byte strings shorter and zeroed. A candidate is kept when it still
             shows the same signature; one that does not parse or validate is
             simply not kept. Bounded by a time budget and a run count.
  explain    for each rule: its statement, its citation and the SPEC.md clause
             it names (quoted), the expected set against the observed outcome,
             and the model's note (what it decided on the way).
  group      reports/triage/index.json: every signature triaged, with counts,
             first and last seen, and its minimised reproducers.

Running is delegated to a callable `run(text) -> list[Finding]` (the command
builds it from `run`'s planners), so the logic here is tested with a fake.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path
from typing import Callable, Iterable

from kconform.core.errors import ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO

HEADER_WORDS = ("kconform-scenario", "abi", "name", "requires", "repeat")
RunFn = Callable[[str], list]  # scenario text -> the Findings of running it


def signature_of(findings: Iterable) -> list[str]:
    """The signatures of a run's findings: one per op that violated rules,
    '<kind> <RULE,RULE> <op kind>' (crashes: their rule and the op in flight)."""
    by_op: dict[tuple, list] = {}
    for f in findings:
        by_op.setdefault((f.file, f.index, f.op), []).append(f)
    out = []
    for fs in by_op.values():
        kinds = sorted({f.kind for f in fs})
        rules = ",".join(sorted({f.rule for f in fs}))
        sig = f"{'+'.join(kinds)} {rules} {fs[0].op_kind}"
        if sig not in out:
            out.append(sig)
    return out


def split_scenario(text: str) -> tuple[list[str], list[str]]:
    """(header lines, op lines) of one scenario's text form; comments and blank
    lines dropped."""
    head: list[str] = []
    ops: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        word = line.split()[0]
        (head if word in HEADER_WORDS and not ops else ops).append(line)
    if not head or not head[0].startswith("kconform-scenario"):
        raise ToolError("the finding's scenario has no 'kconform-scenario' line")
    return head, ops


def join_scenario(head: list[str], ops: list[str]) -> str:
    return "\n".join(head + ops) + "\n"


@dataclasses.dataclass
class Minimised:
    text: str
    ops_before: int
    ops_after: int
    size_before: int   # bytes of the text form, comments dropped
    size_after: int
    runs: int          # candidate runs made
    seconds: float
    complete: bool     # False when the budget ended it


class _Oracle:
    """Whether a candidate still shows the signature; memoised; counts runs; bounded."""

    def __init__(self, run: RunFn, sig: str, deadline: float, max_runs: int):
        self.run, self.sig, self.deadline, self.max_runs = run, sig, deadline, max_runs
        self.seen: dict[str, bool] = {}
        self.runs = 0

    def out_of_budget(self) -> bool:
        return time.monotonic() >= self.deadline or self.runs >= self.max_runs

    def __call__(self, text: str) -> bool:
        if text in self.seen:
            return self.seen[text]
        if self.out_of_budget():
            return False
        self.runs += 1
        try:
            ok = self.sig in signature_of(self.run(text))
        except ToolError:
            ok = False  # does not parse, validate or run: not kept
        self.seen[text] = ok
        return ok


def _ddmin(items: list[str], keeps: Callable[[list[str]], bool], oracle: _Oracle) -> list[str]:
    """Zeller's ddmin over a list: a 1-minimal sublist that keeps() (as far as the
    budget allows)."""
    n = 2
    while len(items) >= 2 and not oracle.out_of_budget():
        chunk = max(1, len(items) // n)
        parts = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        reduced = False
        for i in range(len(parts)):  # a complement: everything but part i
            rest = [x for j, p in enumerate(parts) if j != i for x in p]
            if rest and keeps(rest):
                items, n, reduced = rest, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    return items


_NUM = re.compile(r"^(0x[0-9a-fA-F]+|\d+)([KMG]?)$")


def _smaller_values(value: str) -> list[str]:
    """Candidates for a value, smallest first: numbers toward 0, byte strings
    shorter and zeroed; names and flags are left alone."""
    m = _NUM.match(value)
    if m:
        v = int(m.group(1), 0) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
        out = []
        for c in (0, 1, v >> 1, v - 1):
            if 0 <= c < v and str(c) not in out:
                out.append(str(c) if c < 4096 else hex(c))
        return out
    if value.startswith("hex:"):
        data = value[4:]
        out = []
        for c in (data[:len(data) // 2 // 2 * 2], "0" * len(data)):
            if c != data and ("hex:" + c) not in out:
                out.append("hex:" + c)
        return out
    return []


def minimise(text: str, sig: str, run: RunFn, budget_s: float = 120.0, max_runs: int = 2000) -> Minimised:
    """The smallest scenario found (ops first, then arguments) that still shows sig."""
    t0 = time.monotonic()
    head, ops = split_scenario(text)
    oracle = _Oracle(run, sig, t0 + budget_s, max_runs)
    start = join_scenario(head, ops)
    if not oracle(start):
        raise ToolError(f"the finding does not reproduce ({sig}): nothing to minimise")
    ops = _ddmin(ops, lambda cand: oracle(join_scenario(head, cand)), oracle)
    # Arguments, op by op: drop each (its default), else shrink its value.
    changed = True
    while changed and not oracle.out_of_budget():
        changed = False
        for i, line in enumerate(ops):
            words = line.split()
            for w in range(1, len(words)):
                if "=" not in words[w] or oracle.out_of_budget():
                    continue
                key, value = words[w].split("=", 1)
                cands = [words[:w] + words[w + 1:]] + [
                    words[:w] + [f"{key}={v}"] + words[w + 1:] for v in _smaller_values(value)]
                for cw in cands:
                    cand = ops[:i] + [" ".join(cw)] + ops[i + 1:]
                    if oracle(join_scenario(head, cand)):
                        ops, changed = cand, True
                        break
                if changed:
                    break
            if changed:
                break
    out = join_scenario(head, ops)
    return Minimised(out, len(split_scenario(text)[1]), len(ops), len(start), len(out), oracle.runs,
                     round(time.monotonic() - t0, 3), not oracle.out_of_budget())


def reproduce(text: str, sig: str, run: RunFn, n: int) -> list[bool]:
    """Whether each of n runs shows sig."""
    out = []
    for _ in range(n):
        try:
            out.append(sig in signature_of(run(text)))
        except ToolError:
            out.append(False)
    return out


# --- Explaining ---------------------------------------------------------------

def spec_clause(citation: str) -> tuple[str, str]:
    """(SPEC.md path, the clause's text) for a citation "SPEC.md LABEL ..." of a
    model's rule ("", "" when there is none)."""
    m = re.match(r"SPEC\.md ([A-Z0-9][A-Z0-9:_-]*)", citation)
    if not m:
        return "", ""
    label = m.group(1)
    for spec in sorted((REPO / "models").glob("*/SPEC.md")):
        lines = spec.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.startswith(f"- **{label}**"):
                body = [line]
                for nxt in lines[i + 1:]:
                    if nxt.startswith("- **") or nxt.startswith("#") or not nxt.strip():
                        break
                    body.append(nxt)
                return str(spec.relative_to(REPO)), " ".join(x.strip() for x in body)
    return "", ""


def explain(findings: list, sig: str, rules: dict[str, dict]) -> dict:
    """What a user needs to judge the finding: per rule, statement, citation and the
    clause quoted; expected against observed; the model's note."""
    at = [f for f in findings if sig in signature_of([f] + [g for g in findings
                                                           if (g.file, g.index, g.op) == (f.file, f.index, f.op)])]
    if not at:
        return {"signature": sig, "rules": [], "reproduced": False}
    first = at[0]
    same_op = [f for f in findings if (f.file, f.index, f.op) == (first.file, first.index, first.op)]
    out = {"signature": sig, "scenario": first.scenario, "op": first.op, "call": first.call,
           "kind": first.kind, "class": first.finding_class, "rules": []}
    for f in same_op:
        r = rules.get(f.rule, {})
        path, clause = spec_clause(r.get("citation", ""))
        out["rules"].append({"id": f.rule, "statement": r.get("summary", ""), "citation": r.get("citation", ""),
                             "spec": path, "clause": clause, "expected": f.expected, "observed": f.observed,
                             "note": f.note})
    return out


def explanation_text(e: dict) -> list[str]:
    if not e.get("rules"):
        return [f"  {e['signature']}: not reproduced"]
    lines = [f"  at op {e['op']}: {e['call']}  ({e['kind']}, {e['class']})"]
    for r in e["rules"]:
        lines.append(f"  {r['id']}: {r['statement']}")
        if r["citation"]:
            lines.append(f"    cited: {r['citation']}")
        if r["clause"]:
            lines.append(f"    {r['spec']}: {r['clause']}")
        lines.append(f"    expected: {' | '.join(r['expected']) or '(nothing)'}")
        lines.append(f"    observed: {r['observed']}")
        if r["note"]:
            lines.append(f"    model:    {r['note']}")
    if e.get("kernel_lines"):
        lines.append(f"  lines of ffa.c the op executed ({len(e['kernel_lines'])}):")
        lines += [f"    {k['line']:>5} {k['count']:>4}x  {k['text'].strip()}" for k in e["kernel_lines"]]
    return lines


# --- Grouping -----------------------------------------------------------------

def record(index: Path, build: str, sig: str, source: str, minimised: str | None, now: str) -> dict:
    """Adds one triaged occurrence of sig on build to the index (a JSON file kept
    across runs and campaigns); returns its entry."""
    doc = {"format": 1, "signatures": {}}
    if index.exists():
        try:
            doc = json.loads(index.read_text())
        except json.JSONDecodeError as e:
            raise ToolError(f"{index}: not a triage index ({e}); move it away to start a new one") from None
        if not isinstance(doc.get("signatures"), dict):
            raise ToolError(f"{index}: field 'signatures': not an object")
    key = f"{sig} {build}"
    e = doc["signatures"].setdefault(key, {"signature": sig, "build": build, "count": 0, "first_seen": now,
                                           "last_seen": now, "sources": [], "minimised": []})
    e["count"] += 1
    e["last_seen"] = now
    if source not in e["sources"]:
        e["sources"].append(source)
    if minimised and minimised not in e["minimised"]:
        e["minimised"].append(minimised)
    index.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(index, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return e
