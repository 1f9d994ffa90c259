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


# ---- a crash or hang ends its scenario, not the run ----------------------------------------

RESUMING = r'''#!/usr/bin/python3
# A kconform-runner stand-in: 4 scenarios of 3 ops; scenario 1 dies of a sanitizer
# report at op 1, scenario 2 hangs at op 0 (the watchdog's exit 4), the rest pass.
import json, sys
args = sys.argv[1:]
with open(__file__ + ".calls", "a") as f:
    f.write(json.dumps(args) + "\n")
start = int(args[args.index("--from") + 1]) if "--from" in args else 0
CRASH = {1: (1, "sanitizer", 3), 2: (0, "hang", 4)}
out = lambda r: print(json.dumps(r), flush=True)
out({"type": "plan", "format": 1, "scenarios": 4 - start, "ops": 3 * (4 - start)})
out({"type": "target", "format": 1, "target": "el2", "release": "7.3.4-4k", "profile": "ffa-4k", "caps": {}})
for s in range(start, 4):
    for op in range(3):
        if s in CRASH and CRASH[s][0] == op:
            _, kind, rc = CRASH[s]
            marker = {"kind": kind, "signal": 0, "call": "mem_reclaim", "file": "f.kcs", "index": s,
                      "op": op, "scenario": f"ffa/s{s}", "at": s, "ops": 3}
            if kind == "sanitizer":
                print("SUMMARY: AddressSanitizer: heap-buffer-overflow ffa.c:600", file=sys.stderr)
            print("KCONFORM-CRASH " + json.dumps(marker), file=sys.stderr)
            sys.exit(rc)
        out({"type": "op", "scenario": f"ffa/s{s}", "file": "f.kcs", "index": s, "op": op,
             "call": "version", "verdict": "pass", "rules": [["FFA.A", "allowed"]], "expected": [],
             "observed": "ok"})
out({"type": "summary", "scenarios": 4 - start, "ops": 3 * (4 - start), "violations": 0, "seconds": 0.5})
'''


def test_a_crash_and_a_hang_end_their_scenarios_and_the_run_resumes(tmp_path):
    script = tmp_path / "fake-runner"
    script.write_text(RESUMING)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    raw = tmp_path / "verdicts-el2.jsonl"
    seen = []
    run = Engine(script).run("el2", ["f.kcs"], raw, watchdog=2.5, release="debian-7.3.4-4k",
                             on_progress=lambda d, t: seen.append((d, t)))
    calls = [json.loads(l) for l in (tmp_path / "fake-runner.calls").read_text().splitlines()]
    assert [c[c.index("--from") + 1] if "--from" in c else None for c in calls] == [None, "2", "3"]
    assert all(c[c.index("--watchdog") + 1] == "2.5" for c in calls)
    # As many ops as a run without crashes: the crashed op a finding, the rest of its scenario unchecked.
    assert sum(run.counts.values()) == 12
    assert (run.counts["pass"], run.counts["violation"], run.counts["unchecked"]) == (7, 2, 3)
    assert [(f.rule, f.kind, f.scenario, f.op) for f in run.findings] == [
        ("CRASH.SANITIZER", "sanitizer", "ffa/s1", 1), ("CRASH.HANG", "hang", "ffa/s2", 0)]
    assert "heap-buffer-overflow ffa.c:600" in run.findings[0].observed
    assert all(f.release == "debian-7.3.4-4k" for f in run.findings)
    assert run.rules["FFA.A"].allowed == 7
    assert len(run.scenarios) == 4 and run.ran == {"ffa/s0", "ffa/s1", "ffa/s2", "ffa/s3"}
    assert run.summary["crashed"] and run.summary["crashes"] == 2 and run.summary["ops"] == 12
    for name in ("verdicts-el2.jsonl", "verdicts-el2.crash.log", "verdicts-el2.from-2.jsonl",
                 "verdicts-el2.from-2.crash.log", "verdicts-el2.from-3.jsonl"):
        assert (tmp_path / name).exists(), name
    assert seen[-1] == (12, 12)  # progress counts on across the resumed runners


def test_a_crash_in_the_last_scenario_ends_the_run(tmp_path):
    script = tmp_path / "fake-runner"
    script.write_text(RESUMING.replace("CRASH = {1: (1, \"sanitizer\", 3), 2: (0, \"hang\", 4)}",
                                       "CRASH = {3: (2, \"hang\", 4)}"))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    run = Engine(script).run("el2", ["f.kcs"], tmp_path / "v.jsonl")
    assert len((tmp_path / "fake-runner.calls").read_text().splitlines()) == 1
    assert sum(run.counts.values()) == 12 and [f.rule for f in run.findings] == ["CRASH.HANG"]
