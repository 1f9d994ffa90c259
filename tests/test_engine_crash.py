"""A runner that dies of a sanitizer report or a signal yields a crash finding
at the op in flight, with the report kept beside the verdicts."""

import json
import stat

import pytest

from kconform.core.errors import ToolError
from kconform.engine.runner import Engine

RECORDS = [
    {"type": "plan", "format": 1, "scenarios": 2, "ops": 4},
    {"type": "target", "format": 1, "target": "el2", "release": "7.3.4-4k", "profile": "ffa-4k", "caps": {}},
    {"type": "op", "scenario": "s1", "file": "f.kcs", "index": 0, "op": 0, "call": "version",
     "verdict": "pass", "rules": [], "expected": [], "observed": "ok 0"},
]


def fake_runner(tmp_path, stderr_lines, rc):
    script = tmp_path / "fake-runner"
    out = "\n".join(json.dumps(r) for r in RECORDS)
    err = "\n".join(stderr_lines)
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{out}\nEOF\ncat >&2 <<'EOF'\n{err}\nEOF\nexit {rc}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return Engine(script)


def test_sanitizer_report_becomes_a_crash_finding(tmp_path):
    marker = {"kind": "sanitizer", "signal": 0, "call": "mem_reclaim2 handle=0", "file": "r.kcs",
              "index": 3, "op": 5, "scenario": "ffa/reclaim2/x"}
    eng = fake_runner(tmp_path, ["==1==ERROR: AddressSanitizer: heap-buffer-overflow",
                                 "SUMMARY: AddressSanitizer: heap-buffer-overflow ffa.c:123",
                                 "KCONFORM-CRASH " + json.dumps(marker)], 3)
    raw = tmp_path / "verdicts-el2.jsonl"
    run = eng.run("el2", ["r.kcs"], raw)
    (f,) = run.findings
    assert f.rule == "CRASH.SANITIZER"
    assert (f.scenario, f.op, f.index) == ("ffa/reclaim2/x", 5, 3)
    assert "heap-buffer-overflow ffa.c:123" in f.observed
    log = tmp_path / "verdicts-el2.crash.log"
    assert "AddressSanitizer" in log.read_text()


def test_failure_without_a_marker_is_a_tool_error(tmp_path):
    eng = fake_runner(tmp_path, ["kconform-runner: something broke"], 2)
    with pytest.raises(ToolError) as e:
        eng.run("el2", ["r.kcs"], tmp_path / "v.jsonl")
    assert "something broke" in str(e.value)
