"""A fault the target names (the EL2 target's hypervisor view of memory,
targets/el2/README.md "ffa.c's view of memory": the crash marker's "fault")
leads the crash finding's observed text; without one the finding is as before.
The end-to-end checks (a real runner, real faults) are the ctests
el2_4k.Stage1Planted and el2_<N>k.Stage1Corpus (targets/el2/stage1/check_stage1.py)."""

import json
import stat

from kconform.engine.runner import Engine

RECORDS = [
    {"type": "plan", "format": 1, "scenarios": 1, "ops": 3},
    {"type": "target", "format": 1, "target": "el2", "release": "7.3.4-4k", "profile": "ffa-4k", "caps": {}},
    {"type": "op", "scenario": "ffa/stage1/x", "file": "p.kcs", "index": 0, "op": 0, "call": "version",
     "verdict": "pass", "rules": [], "expected": [], "observed": "ok 0"},
]
FAULT = ("EL2 read at 0x7f0000002000 in the hypervisor's view of memory: PA 0x80002000, host page 0x80002000 "
         "not shared with the hypervisor (host-owned): EL2 maps a host page only while the host shares it with "
         "the hypervisor (__pkvm_host_share_hyp), so this is a hyp panic")


def runner(tmp_path, marker, rc, extra=()):
    script = tmp_path / "fake-runner"
    out = "\n".join(json.dumps(r) for r in RECORDS)
    err = "\n".join([*extra, "KCONFORM-CRASH " + json.dumps(marker)])
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{out}\nEOF\ncat >&2 <<'EOF'\n{err}\nEOF\nkill -{-rc} $$\n"
                      if rc < 0 else
                      f"#!/bin/sh\ncat <<'EOF'\n{out}\nEOF\ncat >&2 <<'EOF'\n{err}\nEOF\nexit {rc}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return Engine(script)


def marker(**extra):
    return {"kind": "signal", "signal": 11, **extra, "call": "raw fid=MEM_FRAG_TX x3=0x2000", "file": "p.kcs",
            "index": 0, "op": 1, "ops": 3, "scenario": "ffa/stage1/x"}


def test_a_named_fault_leads_the_observed_text(tmp_path):
    run = runner(tmp_path, marker(fault=FAULT), -11).run("el2", ["p.kcs"], tmp_path / "v.jsonl")
    (f,) = run.findings
    assert (f.rule, f.scenario, f.op) == ("CRASH.SIGNAL", "ffa/stage1/x", 1)
    assert f.observed.startswith(FAULT)
    assert f.observed.endswith("(died (exit -11, signal 11))")


def test_under_asan_the_summary_follows_it(tmp_path):
    m = dict(marker(fault=FAULT), kind="sanitizer", signal=0)
    run = runner(tmp_path, m, 3, ["SUMMARY: AddressSanitizer: SEGV (/x+0x1) in __asan_memcpy"]).run(
        "el2", ["p.kcs"], tmp_path / "v.jsonl")
    (f,) = run.findings
    assert f.rule == "CRASH.SANITIZER"
    assert f.observed == f"{FAULT} (SUMMARY: AddressSanitizer: SEGV (/x+0x1) in __asan_memcpy)"


def test_an_unnamed_fault_is_as_before(tmp_path):
    run = runner(tmp_path, marker(), -11).run("el2", ["p.kcs"], tmp_path / "v.jsonl")
    (f,) = run.findings
    assert f.observed == "died (exit -11, signal 11)"
