"""The HTML report: one self-contained file from the same findings as every form."""

from __future__ import annotations

import re

from kconform.engine import report_html
from kconform.engine.verdicts import Finding, RuleTally, TargetRun

RULES = [{"id": "FFA.R2.NOT_IMPLEMENTED", "abi": "ffa", "summary": "A proxy that does not implement it says so",
          "citation": "SPEC.md R2:OPTIONAL"},
         {"id": "FFA.OTHER", "abi": "ffa", "summary": "never exercised", "citation": "ours"}]


def _run(baselined: bool) -> TargetRun:
    run = TargetRun(target={"target": "el2", "release": "debian-7.3.4-4k", "profile": "ffa-proxy"})
    run.rules["FFA.R2.NOT_IMPLEMENTED"] = RuleTally(allowed=2, forbidden=1, violations=1)
    run.scenarios.add(("a.kcs", 0))
    f = Finding(rule="FFA.R2.NOT_IMPLEMENTED", target="el2", release="debian-7.3.4-4k", scenario="s<1>",
                file="a.kcs", index=0, op=5, call="mem_reclaim2 handle=0",
                expected=["ok 0 x0=0x84000060 x2=0xffffffff(-1) [FFA.R2.NOT_IMPLEMENTED]"],
                observed="ok 0 x0=0x84000060 x2=0xfffffffe(-2) <script>", note="0xc4000091 is not relayed")
    if baselined:
        f.baselined_by = {"reason": "Genuine: stock predates RECLAIM2", "date": "2026-11-30"}
    run.findings.append(f)
    return run


def test_html_has_the_rule_table_the_finding_its_clause_and_the_marked_difference():
    html = report_html.to_html([_run(False)], RULES, [], 1, title="t")
    assert "<table>" in html and "FFA.OTHER" in html and "not exercised" in html
    assert 'class="FAIL"' in html and "1 new finding(s)" in html
    assert "R2:OPTIONAL" in html and "NOT_SUPPORTED" in html          # the SPEC.md clause, quoted
    assert "<ins>x2=0xfffffffe(-2) &lt;script&gt;</ins>" in html      # observed words that differ, escaped
    assert "<del>x2=0xffffffff(-1)</del>" in html
    assert "<script>" not in html                                      # autoescaped
    assert "0xc4000091 is not relayed" in html


def test_a_baselined_finding_shows_its_reason_and_the_run_is_clean():
    html = report_html.to_html([_run(True)], RULES, [], 0)
    assert "CLEAN" in html and "Genuine: stock predates RECLAIM2" in html and 'class="baselined"' in html


def test_the_report_is_self_contained():
    html = report_html.to_html([_run(False)], RULES, [], 1)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "<script" not in html and "@import" not in html


def test_minimised_and_coverage_sections_appear_when_given():
    run = _run(False)
    run.findings[0].saved = "x.kcs"
    html = report_html.to_html([run], RULES, [], 1, minimised={"x.kcs": {"text": "version\nmem_reclaim2\n",
                                                                         "note": "7 -> 2 ops"}},
                               coverage={"el2": [{"file": "ffa.c", "corpus": "directed", "lines": "80.1%",
                                                  "branches": "61.0%", "unreached": ["do_ffa_mem_xfer"]}]})
    assert "minimised scenario (7 -&gt; 2 ops)" in html and "mem_reclaim2\n" in html
    assert "do_ffa_mem_xfer" in html and "80.1%" in html
