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


# --- blame is exact: no FAIL row for a rule whose allowed side was met ----------------

_WRITE_IDENTITY = {"type": "identity", "target": "qemu", "release": "7.3.4", "seconds": 0.1,
                   "profile": {"write_abi": True, "page_size": 4096, "supported_flags": [7, 0],
                               "vm_types": 1, "user_memory2": True, "gmem_on_vm_type": [True, False]},
                   "caps": [["KVM_CAP_GUEST_MEMFD_FLAGS", 7]], "cap_bits": 31}

_BLAME_SCENARIOS = """kconform-scenario 1
abi gmem
name t/blame/unaligned-across-eof
create_vm
create_gmem vm=0 size=0x4000 flags=MMAP|INIT_SHARED|WRITE
pwrite gmem=0 offset=0x3000 len=0x1001 pattern=7

kconform-scenario 1
abi gmem
name t/blame/unknown-flag-large-size
create_vm
create_gmem vm=0 size=0x20000000000 flags=0x100
"""


def test_per_rule_table_has_no_fail_row_for_a_rule_whose_allowed_side_was_met(engine, rules, tmp_path):
    """The write breaks only ALIGN (EOF would allow cutting it short at EOF: its allowed side),
    and the create breaks only FLAGS (2^41 bytes is inside SIZE_LIMIT's allowed range). The
    target says ok to both: only ALIGN and FLAGS may FAIL."""
    scen = tmp_path / "blame.kcs"
    scen.write_text(_BLAME_SCENARIOS)
    obs = tmp_path / "obs.jsonl"
    obs.write_text("\n".join(json.dumps(r) for r in [
        _WRITE_IDENTITY,
        {"type": "scenario", "s": 0, "ops": [[0, 0, 0], [0, 0, 0], [0, 4096, 0]]},
        {"type": "scenario", "s": 1, "ops": [[0, 0, 0], [0, 0, 0]]}]) + "\n")
    run = engine.replay(obs, [str(scen)], tmp_path / "raw.jsonl", "qemu")
    records = [json.loads(line) for line in (tmp_path / "raw.jsonl").read_text().splitlines()]
    violations = [r for r in records if r.get("verdict") == "violation"]
    assert [r["violated"] for r in violations] == [["GMEM.WRITE.ALIGN"], ["GMEM.CREATE.FLAGS"]]
    # Every violated rule was on its forbidden side of that op.
    for r in violations:
        sides = dict((rule, side) for rule, side in r["rules"])
        assert all(sides.get(v) == "forbidden" for v in r["violated"]), r
    status = {row["id"]: row["status"] for row in report.per_rule(run, rules)}
    assert status["GMEM.WRITE.ALIGN"] == "FAIL" and status["GMEM.CREATE.FLAGS"] == "FAIL"
    assert status["GMEM.WRITE.EOF"] != "FAIL", status["GMEM.WRITE.EOF"]
    assert status["GMEM.CREATE.SIZE_LIMIT"] != "FAIL", status["GMEM.CREATE.SIZE_LIMIT"]
    assert sorted(r for r, s in status.items() if s == "FAIL") == ["GMEM.CREATE.FLAGS", "GMEM.WRITE.ALIGN"]
