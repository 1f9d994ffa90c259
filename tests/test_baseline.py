"""The known-findings baseline: validation, matching, and stale entries."""

import json

import pytest

from conftest import REPO
from kconform.core.errors import ToolError
from kconform.engine import baseline
from kconform.engine.verdicts import Finding, TargetRun


def entry(**kw):
    e = {"rule": "GMEM.A", "target": "host", "release": "6.18.*", "kind": "bug", "reason": "triaged",
         "date": "2026-11-30"}
    e.update(kw)
    return e


def write(tmp_path, doc):
    p = tmp_path / "known.json"
    p.write_text(json.dumps(doc))
    return p


def finding(rule="GMEM.A", scenario="gmem/x", release="6.18.44"):
    return Finding(rule=rule, target="host", release=release, scenario=scenario, file="f.kcs",
                   index=0, op=1, call="write gmem=0 len=1", expected=["errno EINVAL [GMEM.A]"],
                   observed="ok 1")


def run_with(*findings, release="6.18.44", ran=()):
    r = TargetRun(target={"target": "host", "release": release, "profile": "gmem-base"})
    r.findings.extend(findings)
    r.ran.update(ran)
    return r


def test_missing_file_is_an_empty_baseline(tmp_path):
    assert baseline.load(tmp_path / "none.json") == []


@pytest.mark.parametrize("doc,field", [
    ({"format": 2, "findings": []}, "field 'format'"),
    ({"format": 1}, "field 'findings'"),
    ({"format": 1, "findings": [entry(reason="")]}, "findings[0]: field 'reason'"),
    ({"format": 1, "findings": [entry(date="30/11/2026")]}, "findings[0]: field 'date'"),
    ({"format": 1, "findings": [entry(colour="red")]}, "findings[0]: field 'colour'"),
    ({"format": 1, "findings": [entry(), entry(rule="NOPE")]}, "findings[1]: field 'rule'"),
    ({"format": 1, "findings": [entry(), {k: v for k, v in entry().items() if k != "kind"}]},
     "findings[1]: field 'kind': required, one of bug, deviation, limit, robustness"),
    ({"format": 1, "findings": [entry(kind="harmless")]},
     "findings[0]: field 'kind': 'harmless' is not one of bug, deviation, limit, robustness"),
    ({"format": 1, "findings": [entry(report=" ")]}, "findings[0]: field 'report'"),
])
def test_malformed_baseline_names_the_field(tmp_path, doc, field):
    with pytest.raises(ToolError) as e:
        baseline.load(write(tmp_path, doc), {"GMEM.A"})
    assert field in str(e.value)
    assert str(tmp_path / "known.json") in str(e.value)


def test_matching_finding_is_baselined_and_others_are_new():
    entries = [entry(scenario="gmem/x*")]
    f1, f2, f3 = finding(), finding(rule="GMEM.B"), finding(scenario="gmem/y")
    stale = baseline.apply(entries, [run_with(f1, f2, f3)])
    assert f1.baselined_by is entries[0]
    assert f2.baselined_by is None and f3.baselined_by is None
    assert stale == []


def test_entry_that_no_longer_occurs_is_reported():
    entries = [entry(scenario="gmem/x*")]
    stale = baseline.apply(entries, [run_with(ran={"gmem/x"})])  # a scenario it names ran, clean
    assert stale == entries


def test_an_every_scenario_entry_is_stale_only_where_its_rule_was_forbidden():
    entries = [entry()]  # scenario "*": a deviation of the rule as such
    quiet = run_with(ran={"gmem/x"})
    quiet.rules["GMEM.A"].allowed = 5  # the rule came up, never on its forbidden side
    assert baseline.apply(entries, [quiet]) == []
    refused = run_with(ran={"gmem/x"})
    refused.rules["GMEM.A"].forbidden = 1  # it did, and was not violated
    assert baseline.apply(entries, [refused]) == entries


def test_a_release_with_a_real_el3_needs_a_pattern_that_names_one():
    model_el3 = entry(rule="FFA.A", target="el2", release="debian-*", scenario="ffa/x")
    real_el3 = entry(rule="FFA.A", target="el2", release="*+tf-a-2.12.1", scenario="ffa/x")
    f = Finding(rule="FFA.A", target="el2", release="debian-7.3.4-4k+tf-a-2.12.1", scenario="ffa/x", file="f.kcs",
                index=0, op=1, call="mem_share", expected=[], observed="ok 0")
    assert not baseline.matches(model_el3, f) and baseline.matches(real_el3, f)
    f.release = "debian-7.3.4-4k"
    assert baseline.matches(model_el3, f) and not baseline.matches(real_el3, f)
    # the host target's kernel releases may hold a "+" (a local build): unaffected
    assert baseline.release_matches("host", "6.18.0+", "6.18.*")


def test_entry_for_another_release_is_not_stale():
    entries = [entry(release="7.3.*")]
    assert baseline.apply(entries, [run_with()]) == []


def test_a_sanitizer_entry_is_stale_only_after_a_sanitized_run():
    entries = [entry(rule="CRASH.SANITIZER", target="el2", release="*", scenario="ffa/x")]
    plain = TargetRun(target={"target": "el2", "release": "7.3.4-4k", "caps": {"sanitized": 0}})
    plain.ran.add("ffa/x")
    assert baseline.apply(entries, [plain]) == []  # a plain build cannot report one
    asan = TargetRun(target={"target": "el2", "release": "7.3.4-4k", "caps": {"sanitized": 1}})
    asan.ran.add("ffa/x")
    assert baseline.apply(entries, [asan]) == entries


def test_a_signal_entry_is_stale_only_after_a_plain_run():
    entries = [entry(rule="CRASH.SIGNAL", target="el2", release="*", scenario="ffa/x")]
    runs = {}
    for sanitized in (0, 1):
        r = TargetRun(target={"target": "el2", "release": "7.3.4-4k", "caps": {"sanitized": sanitized}})
        r.ran.add("ffa/x")
        runs[sanitized] = r
    assert baseline.apply(entries, [runs[1]]) == []  # under ASan the signal is the sanitizer's report
    assert baseline.apply(entries, [runs[0]]) == entries


def test_an_upstream_report_is_an_optional_field(tmp_path):
    p = write(tmp_path, {"format": 1, "findings": [entry(report="https://lore.kernel.org/kvmarm/x"), entry()]})
    loaded = baseline.load(p, {"GMEM.A"})
    assert loaded[0]["report"].startswith("https://") and "report" not in loaded[1]


def test_the_repository_baseline_has_a_kind_per_entry_and_no_every_scenario_entry_but_limits():
    """Issue 38: a scenario "*" entry accepts every future finding of its rule on its target
    (a regression there would print "baselined"): only a platform limit may."""
    entries = baseline.load(REPO / "ci" / "known-findings.json")
    assert entries and all(e["kind"] in baseline.KINDS for e in entries)
    star = [(i, e["rule"], e["target"], e["kind"]) for i, e in enumerate(entries)
            if e.get("scenario", "*") == "*" and e["kind"] != "limit"]
    assert not star, f"scenario '*' entries not of kind limit (narrow them: kconform baseline audit): {star}"


def test_baselined_findings_are_counted_by_kind():
    from kconform.engine import report
    entries = [entry(scenario="gmem/x*", kind="deviation"), entry(rule="GMEM.B", kind="bug")]
    run = run_with(finding(), finding(scenario="gmem/x2"), finding(rule="GMEM.B"), finding(rule="GMEM.C"))
    baseline.apply(entries, [run])
    assert report.baselined_by_kind([run]) == {"deviation": 2, "bug": 1}
    assert report.baselined_summary([run]) == "3 baselined: 2 deviation, 1 bug"
    assert report.baselined_summary([run_with()]) == "0 baselined"
    doc = json.loads(report.to_json([run], [], [], 1))
    assert doc["baselined"] == 3 and doc["baselined_by_kind"] == {"deviation": 2, "bug": 1}
    assert doc["runs"][0]["baselined_by_kind"] == {"deviation": 2, "bug": 1}
    assert doc["runs"][0]["ran"] == ["gmem/x", "gmem/x2"]
