"""Reports of a run: the per-rule table, findings with their evidence, and
machine-readable forms (JSON, KTAP, JUnit XML).

One source of truth: what failed is the runs' findings (TargetRun.findings,
engine/verdicts.py): rule violations, broken invariants, crashes and sanitizer
reports of the code under test, guest panics, hangs and warnings. Every form is
written from them through `rows` (one row per rule of the run's ABI, then one
per other rule a finding names, e.g. CRASH.SANITIZER or QEMU.PANIC) and
`finding_lines` (kind, rule, target, scenario, op, evidence, re-run command):
a finding that is not baselined makes its row FAIL and its run fail in every
form. The scenarios the target could not run (TargetRun.unsupported: a capability
it lacks, or what the target said keeps it from one) are listed in every form with
the reason: in the JSON report's "unsupported", as KTAP `ok N <scenario> # SKIP
unsupported: <reason>` after the rules, as JUnit <skipped message="unsupported:
<reason>">, and counted in the headline; they never fail a run.
Findings are shown in two sections by class (verdicts.CLASSES):
conformance, then robustness (the op ran under a fault the scenario injected,
e.g. an EL3 that lies: pKVM trusts the SPMD, so these judge hardening, not the
ABI).
"""

from __future__ import annotations

import dataclasses
import json
from xml.sax.saxutils import escape, quoteattr

from rich.console import Console
from rich.markup import escape as markup_escape
from rich.table import Table

from kconform.engine.baseline import KINDS, covers
from kconform.engine.verdicts import CLASSES, RuleTally

SECTION_TITLES = {
    "conformance": "conformance findings",
    "robustness": "robustness findings (under an injected EL3 fault; pKVM trusts the SPMD)",
}


def new_findings(runs) -> list:
    """The findings no baseline entry accepts: they fail the run."""
    return [f for r in runs for f in r.findings if not f.baselined_by]


def baselined_by_kind(runs) -> dict[str, int]:
    """How many findings the baseline accepted, by the accepting entry's kind
    (engine/baseline.py: bug, deviation, limit, robustness), most first."""
    counts: dict[str, int] = {}
    for f in (f for r in runs for f in r.findings if f.baselined_by):
        kind = f.baselined_by.get("kind") or "unclassified"
        counts[kind] = counts.get(kind, 0) + 1
    order = {k: i for i, k in enumerate(KINDS)}
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], order.get(kv[0], len(order)))))


def baselined_summary(runs) -> str:
    """"322 baselined: 200 deviation, 100 bug, 22 limit" (or "0 baselined")."""
    kinds = baselined_by_kind(runs)
    total = sum(kinds.values())
    return f"{total} baselined" + (": " + ", ".join(f"{n} {k}" for k, n in kinds.items()) if total else "")


def rule_status(t, findings_for_rule) -> str:
    if findings_for_rule or t.violations:
        if findings_for_rule and all(f.baselined_by for f in findings_for_rule):
            return "baselined"
        return "FAIL"
    if t.allowed and t.forbidden:
        return "pass"
    if t.allowed:
        return "pass (allowed only)"
    if t.forbidden:
        return "pass (forbidden only)"
    return "not exercised"


def _findings_by_rule(run) -> dict:
    out: dict = {}
    for f in run.findings:
        out.setdefault(f.rule, []).append(f)
    return out


def run_abi(run) -> str:
    """The ABI a run's rules belong to: the model profile's prefix ("gmem-base" -> "gmem")."""
    return run.target.get("profile", "").split("-", 1)[0]


def rows(run, rules: list[dict]) -> list[dict]:
    """One row per rule of the run's ABI, then one per other rule ID a finding
    names (crashes, guest crashes, rules of no listed ABI), each with its findings."""
    by_rule = _findings_by_rule(run)
    known = {r["id"]: r for r in rules}
    out = []
    ids = [r["id"] for r in rules if r["abi"] == run_abi(run)]
    ids += sorted(rid for rid in by_rule if rid not in ids)
    for rid in ids:
        t = run.rules.get(rid) or RuleTally()
        found = by_rule.get(rid, [])
        info = known.get(rid, {})
        summary = info.get("summary") or (found[0].kind + ": " + found[0].expected[0]
                                          if found and found[0].expected else rid)
        out.append({"id": rid, "allowed": t.allowed, "forbidden": t.forbidden,
                    "violations": max(t.violations, len(found)),
                    "status": rule_status(t, found), "summary": summary,
                    "citation": info.get("citation", ""), "findings": found})
    return out


def per_rule(run, rules: list[dict]) -> list[dict]:
    """rows() without the finding objects (the JSON report's "rules")."""
    return [{k: v for k, v in r.items() if k != "findings"} for r in rows(run, rules)]


def by_class(findings) -> list[tuple[str, list]]:
    """The findings in report order, one (class, findings) section per class that has any."""
    return [(c, fs) for c in CLASSES if (fs := [f for f in findings if f.finding_class == c])]


def finding_dict(f) -> dict:
    """A finding as the JSON report writes it (its class under "class", as in the records)."""
    d = dataclasses.asdict(f)
    d["class"] = d.pop("finding_class")
    return d


def unsupported_rows(run) -> list[dict]:
    """One row per scenario the target could not run: scenario, file, index, reason."""
    return [dataclasses.asdict(u) for u in run.unsupported.values()]


def _unsupported_summary(run) -> dict:
    """How many scenarios were unsupported, by reason."""
    out: dict = {}
    for u in run.unsupported.values():
        out[u.reason] = out.get(u.reason, 0) + 1
    return out


def finding_title(f) -> str:
    where = f"op {f.op}: {f.call}" if f.op >= 0 else f.call
    return (f"{f.kind} {f.rule} on {f.target} {f.release} in {f.scenario} "
            f"({f.file} #{f.index}) {where}")


def finding_lines(f) -> list[str]:
    """A finding's evidence and how to reproduce it, one line each."""
    out = [f"expected: {' | '.join(f.expected) or '(nothing)'}", f"observed: {f.observed}"]
    if f.note:
        out.append(f"note:     {f.note}")
    if f.baselined_by:
        kind = f"[{f.baselined_by['kind']}] " if f.baselined_by.get("kind") else ""
        out.append(f"accepted: {kind}{f.baselined_by['reason']} ({f.baselined_by['date']})")
    if f.saved:
        out.append(f"scenario: {f.saved}")
    if f.minimised:
        out.append(f"minimal:  {f.minimised}")
    if f.rerun:
        out.append(f"re-run:   {f.rerun}")
    return out


def headline(run) -> str:
    c = run.counts
    secs = run.summary.get("seconds", 0.0)
    n = run.summary.get("crashes", 1)
    crashed = (f", {n} crash{'es' if n != 1 else ''} (each ended its scenario)"
               if run.summary.get("crashed") else "")
    unsupported = f" ({len(run.unsupported)} unsupported)" if run.unsupported else ""
    return (f"{run.name} ({run.release}, {run.target.get('profile', '?')}): "
            f"{len(run.scenarios)} scenarios{unsupported}, {sum(c.values())} ops: {c['pass']} pass, "
            f"{c['violation']} violations, {c['unsupported']} unsupported, "
            f"{c['unchecked']} unchecked, {len(run.findings)} findings{crashed}, {secs:.2f} s")


def _stale_line(e: dict) -> str:
    return (f"baselined {e['rule']} on {e['target']} {e['release']} ({e.get('scenario', '*')}) "
            f"no longer occurs: {e['reason']}")


def print_table(console: Console, run, rules: list[dict], stale: list[dict] | None = None) -> None:
    table = Table(title=f"kconform: {headline(run)}", title_justify="left")
    for col, just in (("rule", "left"), ("allowed", "right"), ("forbidden", "right"),
                      ("violations", "right"), ("status", "left")):
        table.add_column(col, justify=just, no_wrap=True)
    for row in rows(run, rules):
        style = {"FAIL": "bold red", "baselined": "yellow", "not exercised": "dim"}.get(row["status"])
        table.add_row(row["id"], str(row["allowed"]), str(row["forbidden"]),
                      str(row["violations"]), row["status"], style=style)
    console.print(table)
    if run.unsupported:
        console.print(f"[bold]unsupported scenarios[/bold] ({len(run.unsupported)}; every one in "
                      f"report.json, report.ktap, report.junit.xml)", highlight=False)
        for reason, n in _unsupported_summary(run).items():
            console.print(f"    {n} x {reason}", highlight=False, markup=False)
    for cls, found in by_class(run.findings):
        console.print(f"[bold]{SECTION_TITLES[cls]}[/bold] ({len(found)})", highlight=False)
        for f in found:
            tag = "BASELINED" if f.baselined_by else "FAIL"
            console.print(f"[bold]{tag}[/bold] {markup_escape(finding_title(f))}", highlight=False)
            for line in finding_lines(f):
                console.print("    " + line, highlight=False, markup=False)
    for e in stale or []:
        if covers(e, run):
            console.print("[yellow]NO LONGER OCCURS[/yellow] " + markup_escape(_stale_line(e)),
                          highlight=False)


def to_json(runs, rules, stale, exit_code: int) -> str:
    kinds = baselined_by_kind(runs)
    doc = {"format": 1, "exit": exit_code, "new_findings": len(new_findings(runs)),
           "baselined": sum(kinds.values()), "baselined_by_kind": kinds,
           "stale_baseline": stale, "runs": []}
    for run in runs:
        doc["runs"].append({
            "target": run.target, "counts": run.counts, "summary": run.summary,
            "rules": per_rule(run, rules),
            "unsupported": unsupported_rows(run),
            "findings": [finding_dict(f) for _, fs in by_class(run.findings) for f in fs],
            "baselined_by_kind": baselined_by_kind([run]),
            "classes": {c: sum(f.finding_class == c for f in run.findings) for c in CLASSES},
            # the scenarios that ran (what `baseline audit` matches entries against: baseline.covers)
            "ran": sorted(set(run.ran) | {f.scenario for f in run.findings})})
    return json.dumps(doc, indent=2)


def _ktap_comment(text: str) -> str:
    return " ".join(text.splitlines())


def to_ktap(runs, rules, stale: list[dict] | None = None) -> str:
    out = ["KTAP version 1", f"1..{len(runs)}"]
    for n, run in enumerate(runs, 1):
        rs = rows(run, rules)
        us = unsupported_rows(run)
        out += ["    KTAP version 1", f"    # Subtest: {run.name} {run.release}", f"    1..{len(rs) + len(us)}"]
        for i, row in enumerate(rs, 1):
            if row["status"] in ("FAIL", "baselined"):
                for cls, found in by_class(row["findings"]):
                    for f in found:
                        state = "baselined" if f.baselined_by else "FAIL"
                        tag = f" [{cls}]" if cls != "conformance" else ""
                        out.append(f"    # {state} {_ktap_comment(finding_title(f))}{tag}")
                        out += [f"    #   {_ktap_comment(line)}" for line in finding_lines(f)]
            if row["status"] == "FAIL":
                out.append(f"    not ok {i} {row['id']}")
            elif row["status"] == "not exercised":
                out.append(f"    ok {i} {row['id']} # SKIP not exercised")
            elif row["status"] == "baselined":
                out.append(f"    ok {i} {row['id']} # SKIP known finding (baselined)")
            else:
                out.append(f"    ok {i} {row['id']}")
        for i, u in enumerate(us, len(rs) + 1):
            out.append(f"    ok {i} {u['scenario']} # SKIP unsupported: {_ktap_comment(u['reason'])}")
        for cls, found in by_class(run.findings):
            out.append(f"    # {SECTION_TITLES[cls]}: {len(found)}, "
                       f"{sum(not f.baselined_by for f in found)} not baselined")
        for e in stale or []:
            if covers(e, run):
                out.append(f"    # {_ktap_comment(_stale_line(e))}")
        failed = any(not f.baselined_by for f in run.findings)
        out.append(f"{'not ok' if failed else 'ok'} {n} {run.name} {run.release}")
    return "\n".join(out) + "\n"


def to_junit(runs, rules) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    for run in runs:
        rs = rows(run, rules)
        us = unsupported_rows(run)
        fails = sum(r["status"] == "FAIL" for r in rs)
        skips = sum(r["status"] in ("not exercised", "baselined") for r in rs) + len(us)
        out.append(f"  <testsuite name={quoteattr(run.name + ' ' + run.release)} tests=\"{len(rs) + len(us)}\" "
                   f"failures=\"{fails}\" skipped=\"{skips}\" time=\"{run.summary.get('seconds', 0):.3f}\">")
        for row in rs:
            out.append(f"    <testcase classname={quoteattr(run.name + ' ' + run.release)} "
                       f"name={quoteattr(row['id'])}>")
            text = "\n\n".join(
                f"== {SECTION_TITLES[cls]} ==\n" + "\n\n".join(
                    "\n".join([("" if not f.baselined_by else "(baselined) ") + finding_title(f)]
                              + finding_lines(f)) for f in found)
                for cls, found in by_class(row["findings"]))
            if row["status"] == "FAIL":
                new = [f for f in row["findings"] if not f.baselined_by]
                kinds = ", ".join(sorted({f.kind for f in new}))
                out.append(f"      <failure type={quoteattr(kinds)} "
                           f"message={quoteattr(f'{len(new)} finding(s): ' + row['summary'])}>"
                           f"{escape(text)}</failure>")
            elif row["status"] in ("not exercised", "baselined"):
                out.append(f"      <skipped message={quoteattr(row['status'])}/>")
                if text:
                    out.append(f"      <system-out>{escape(text)}</system-out>")
            out.append("    </testcase>")
        for u in us:
            out.append(f"    <testcase classname={quoteattr(run.name + ' ' + run.release)} "
                       f"name={quoteattr(u['scenario'])}>")
            out.append(f"      <skipped message={quoteattr('unsupported: ' + u['reason'])}/>")
            out.append(f"      <system-out>{escape(u['file'] + ' #' + str(u['index']))}</system-out>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
