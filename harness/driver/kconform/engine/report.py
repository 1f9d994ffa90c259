"""Reports of a run: the per-rule table, findings with their evidence, and
machine-readable forms (JSON, KTAP, JUnit XML)."""

from __future__ import annotations

import dataclasses
import json
from xml.sax.saxutils import escape, quoteattr

from rich.console import Console
from rich.table import Table

from kconform.engine.verdicts import RuleTally


def rule_status(t, findings_for_rule) -> str:
    if t.violations:
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


def per_rule(run, rules: list[dict]) -> list[dict]:
    by_rule = _findings_by_rule(run)
    rows = []
    for r in rules:
        if r["abi"] != run_abi(run):
            continue
        t = run.rules.get(r["id"])
        if t is None:
            t = RuleTally()
        rows.append({"id": r["id"], "allowed": t.allowed, "forbidden": t.forbidden,
                     "violations": t.violations,
                     "status": rule_status(t, by_rule.get(r["id"], [])),
                     "summary": r["summary"], "citation": r["citation"]})
    return rows


def headline(run) -> str:
    c = run.counts
    secs = run.summary.get("seconds", 0.0)
    return (f"{run.name} ({run.release}, {run.target.get('profile', '?')}): "
            f"{len(run.scenarios)} scenarios, {sum(c.values())} ops: {c['pass']} pass, "
            f"{c['violation']} violations, {c['unsupported']} unsupported, "
            f"{c['unchecked']} unchecked, {secs:.2f} s")


def print_table(console: Console, run, rules: list[dict], saved: dict, stale: list[dict]) -> None:
    table = Table(title=f"kconform: {headline(run)}", title_justify="left")
    for col, just in (("rule", "left"), ("allowed", "right"), ("forbidden", "right"),
                      ("violations", "right"), ("status", "left")):
        table.add_column(col, justify=just, no_wrap=True)
    for row in per_rule(run, rules):
        style = {"FAIL": "bold red", "baselined": "yellow", "not exercised": "dim"}.get(row["status"])
        table.add_row(row["id"], str(row["allowed"]), str(row["forbidden"]),
                      str(row["violations"]), row["status"], style=style)
    console.print(table)
    for f in run.findings:
        tag = "BASELINED" if f.baselined_by else "VIOLATION"
        console.print(f"[bold]{tag}[/bold] {f.rule} in {f.scenario} ({f.file} #{f.index}) op {f.op}: {f.call}",
                      highlight=False, markup=True)
        console.print(f"    expected: {' | '.join(f.expected) or '(nothing)'}", highlight=False, markup=False)
        console.print(f"    observed: {f.observed}", highlight=False, markup=False)
        if f.note:
            console.print(f"    model:    {f.note}", highlight=False, markup=False)
        if f.baselined_by:
            b = f.baselined_by
            console.print(f"    accepted: {b['reason']} ({b['date']})", highlight=False, markup=False)
        path = saved.get(f.key())
        if path:
            console.print(f"    scenario: {path}  (re-run: ./kconform run {path})",
                          highlight=False, markup=False)
    for e in stale:
        console.print(f"[yellow]NO LONGER OCCURS[/yellow] baselined {e['rule']} on {e['target']} "
                      f"{e['release']} ({e.get('scenario', '*')}): {e['reason']}", highlight=False)


def to_json(runs, rules, stale, exit_code: int) -> str:
    doc = {"format": 1, "exit": exit_code, "stale_baseline": stale, "runs": []}
    for run in runs:
        doc["runs"].append({
            "target": run.target, "counts": run.counts, "summary": run.summary,
            "rules": per_rule(run, rules),
            "findings": [dataclasses.asdict(f) for f in run.findings]})
    return json.dumps(doc, indent=2)


def to_ktap(runs, rules) -> str:
    out = ["KTAP version 1", f"1..{len(runs)}"]
    for n, run in enumerate(runs, 1):
        rows = per_rule(run, rules)
        by_rule = _findings_by_rule(run)
        out += ["    KTAP version 1", f"    # Subtest: {run.name}", f"    1..{len(rows)}"]
        failed = False
        for i, row in enumerate(rows, 1):
            if row["status"] == "FAIL":
                failed = True
                for f in by_rule.get(row["id"], []):
                    out.append(f"    # {f.scenario} op {f.op}: {f.call}: expected "
                               f"{' | '.join(f.expected)}; observed {f.observed}")
                out.append(f"    not ok {i} {row['id']}")
            elif row["status"] == "not exercised":
                out.append(f"    ok {i} {row['id']} # SKIP not exercised")
            elif row["status"] == "baselined":
                out.append(f"    ok {i} {row['id']} # SKIP known finding (baselined)")
            else:
                out.append(f"    ok {i} {row['id']}")
        out.append(f"{'not ok' if failed else 'ok'} {n} {run.name}")
    return "\n".join(out) + "\n"


def to_junit(runs, rules) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    for run in runs:
        rows = per_rule(run, rules)
        by_rule = _findings_by_rule(run)
        fails = sum(r["status"] == "FAIL" for r in rows)
        skips = sum(r["status"] in ("not exercised", "baselined") for r in rows)
        out.append(f"  <testsuite name={quoteattr(run.name + ' ' + run.release)} tests=\"{len(rows)}\" "
                   f"failures=\"{fails}\" skipped=\"{skips}\" time=\"{run.summary.get('seconds', 0):.3f}\">")
        for row in rows:
            out.append(f"    <testcase classname={quoteattr(run.name)} name={quoteattr(row['id'])}>")
            if row["status"] == "FAIL":
                text = "\n".join(f"{f.scenario} op {f.op}: {f.call}\nexpected: {' | '.join(f.expected)}\n"
                                 f"observed: {f.observed}" for f in by_rule.get(row["id"], []))
                out.append(f"      <failure message={quoteattr(row['summary'])}>{escape(text)}</failure>")
            elif row["status"] in ("not exercised", "baselined"):
                out.append(f"      <skipped message={quoteattr(row['status'])}/>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
