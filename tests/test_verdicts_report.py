"""Folding the verdict stream, and the machine-readable report forms."""

import json
import xml.etree.ElementTree as ET

import pytest

from kconform.core.errors import ToolError
from kconform.engine import report
from kconform.engine.verdicts import read_stream

RULES = [{"id": "GMEM.A", "abi": "gmem", "summary": "a", "citation": "SPEC.md A"},
         {"id": "GMEM.B", "abi": "gmem", "summary": "b", "citation": "SPEC.md B"},
         {"id": "GMEM.C", "abi": "gmem", "summary": "c", "citation": "SPEC.md C"}]


def stream(*ops):
    lines = [{"type": "plan", "format": 1, "scenarios": 1, "ops": len(ops)},
             {"type": "target", "format": 1, "target": "host", "release": "6.18.44",
              "profile": "gmem-base", "caps": {}}]
    for i, (verdict, rules, violated) in enumerate(ops):
        rec = {"type": "op", "scenario": "s", "file": "f.kcs", "index": 0, "op": i,
               "call": "write gmem=0 len=1", "verdict": verdict, "rules": rules,
               "expected": ["errno EINVAL [GMEM.A]"], "observed": "ok 1"}
        if violated:
            rec["violated"] = violated
        lines.append(rec)
    lines.append({"type": "summary", "scenarios": 1, "ops": len(ops), "violations": 0, "seconds": 0.1})
    return [json.dumps(x) for x in lines]


def test_tallies_sides_and_findings():
    run = read_stream(stream(("pass", [["GMEM.A", "allowed"], ["GMEM.B", "forbidden"]], None),
                             ("pass", [["GMEM.A", "forbidden"]], None),
                             ("violation", [["GMEM.B", "allowed"]], ["GMEM.B"])), "t")
    assert (run.rules["GMEM.A"].allowed, run.rules["GMEM.A"].forbidden) == (1, 1)
    assert run.rules["GMEM.B"].violations == 1
    assert [f.rule for f in run.findings] == ["GMEM.B"]
    rows = {r["id"]: r["status"] for r in report.per_rule(run, RULES)}
    assert rows == {"GMEM.A": "pass", "GMEM.B": "FAIL", "GMEM.C": "not exercised"}


def test_ktap_and_junit_say_which_rule_failed():
    run = read_stream(stream(("violation", [], ["GMEM.B"])), "t")
    ktap = report.to_ktap([run], RULES)
    assert ktap.startswith("KTAP version 1\n1..1\n")
    assert "    not ok 2 GMEM.B" in ktap and "not ok 1 host" in ktap
    assert "ok 3 GMEM.C # SKIP not exercised" in ktap
    suite = ET.fromstring(report.to_junit([run], RULES)).find("testsuite")
    assert suite.get("failures") == "1"
    failed = [tc.get("name") for tc in suite if tc.find("failure") is not None]
    assert failed == ["GMEM.B"]


@pytest.mark.parametrize("line,field", [
    ("{not json", "not a JSON verdict record"),
    ('{"x": 1}', "field 'type' missing"),
    ('{"type": "op"}', "before the 'target' record"),
])
def test_bad_records_are_named(line, field):
    with pytest.raises(ToolError) as e:
        read_stream([line], "verdicts.jsonl")
    assert "verdicts.jsonl:1" in str(e.value) and field in str(e.value)
