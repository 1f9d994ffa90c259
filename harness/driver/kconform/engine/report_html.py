"""The HTML report of a run: one self-contained file (inline CSS, no external
assets, usable offline) written from the same findings and rows as every other
form (engine/report.py). Per target: the per-rule table (allowed/forbidden
counts, status, statement, citation); each finding with the rule's statement
and its SPEC.md clause quoted, expected against observed with the differing
words marked, the model's note, the baseline's reason, the re-run command, its
scenario and, when triage minimised it, the minimised scenario; the coverage of
the code under test when a coverage report is given. Template:
engine/templates/report.html.j2 (jinja2, autoescaped).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from kconform import __version__
from kconform.engine import report
from kconform.engine.triage import spec_clause

TEMPLATES = Path(__file__).resolve().parent / "templates"
_TAG = re.compile(r"\s*\[[^\[\]]+\]\s*$")


def _words(text: str) -> list[str]:
    return re.split(r"(\s+)", text)


def mark_diff(expected: list[str], observed: str) -> tuple[list[Markup], Markup]:
    """Each expected outcome and the observed one as HTML, the words that differ
    from the closest expected outcome marked (<del> in expected, <ins> in observed)."""
    obs = _words(observed)
    out_exp: list[Markup] = []
    best, best_ratio = None, -1.0
    for e in expected:
        ew = _words(_TAG.sub("", e))
        sm = difflib.SequenceMatcher(a=ew, b=obs, autojunk=False)
        if sm.ratio() > best_ratio:
            best, best_ratio = sm, sm.ratio()
        html = []
        for tag, i1, i2, _, _ in sm.get_opcodes():
            chunk = escape("".join(ew[i1:i2]))
            html.append(chunk if tag == "equal" else Markup(f"<del>{chunk}</del>"))
        tag_m = _TAG.search(e)
        if tag_m:
            html.append(escape(tag_m.group(0)))
        out_exp.append(Markup("").join(html))
    if best is None:
        return out_exp, escape(observed)
    html = []
    for tag, _, _, j1, j2 in best.get_opcodes():
        chunk = escape("".join(obs[j1:j2]))
        html.append(chunk if tag == "equal" else Markup(f"<ins>{chunk}</ins>"))
    return out_exp, Markup("").join(html)


def _scenario_text(path: str) -> str:
    try:
        return Path(path).read_text() if path and os.path.isfile(path) and not path.endswith(".kcsb") else ""
    except (OSError, UnicodeDecodeError):
        return ""


def _finding_view(f, info: dict, minimised: dict) -> dict:
    exp, obs = mark_diff(f.expected, f.observed)
    spec, clause = spec_clause(info.get("citation", ""))
    m = minimised.get(f.saved) if f.saved else None
    return {"rule": f.rule, "kind": f.kind, "scenario": f.scenario, "file": f.file, "index": f.index,
            "where": f"op {f.op}: {f.call}" if f.op >= 0 else f.call,
            "statement": info.get("summary", ""), "citation": info.get("citation", ""),
            "spec": spec, "clause": clause, "expected": [{"html": e} for e in exp], "observed_html": obs,
            "note": f.note, "baselined": bool(f.baselined_by),
            "baseline_reason": (f.baselined_by or {}).get("reason", ""),
            "baseline_date": (f.baselined_by or {}).get("date", ""), "rerun": f.rerun, "saved": f.saved,
            "scenario_text": _scenario_text(f.saved),
            "minimised": m["text"] if m else "", "minimised_note": m["note"] if m else ""}


def to_html(runs, rules: list[dict], stale: list[dict] | None, exit_code: int, title: str = "",
            minimised: dict | None = None, coverage: dict | None = None) -> str:
    """The report as one HTML document. minimised: reproducer path -> {"text", "note"}
    (triage's); coverage: run name -> [{"file", "corpus", "lines", "branches", "unreached"}]."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    known = {r["id"]: r for r in rules}
    views = []
    for n, run in enumerate(runs, 1):
        sections = [{"title": report.SECTION_TITLES[c],
                     "findings": [_finding_view(f, known.get(f.rule, {}), minimised or {}) for f in fs]}
                    for c, fs in report.by_class(run.findings)]
        views.append({"name": run.name, "release": run.release, "headline": report.headline(run),
                      "anchor": f"r{n}", "rows": report.per_rule(run, rules), "sections": sections,
                      "unsupported": report.unsupported_rows(run),
                      "coverage": (coverage or {}).get(run.name, [])})
    return env.get_template("report.html.j2").render(
        title=title, runs=views, stale=stale or [], exit_code=exit_code,
        new_findings=len(report.new_findings(runs)), version=__version__)
