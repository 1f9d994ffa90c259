"""The stock ffa.c mutant family (targets/el2/stock-mutants, selftest/stock.py), without builds:
the patches are single-line and say what they weaken, the table and the files agree,
waiting.json is checked, a waiting mutant does not fail the matrix but a survivor does.
The family's end-to-end run is in test_selftest.py."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO

STOCK = REPO / "targets" / "el2" / "stock-mutants"


def _patches():
    return sorted(STOCK.glob("[0-9][0-9]-*.patch"))


def test_at_least_fifteen_mutants_each_one_line_with_what_it_weakens():
    found = _patches()
    assert len(found) >= 15
    areas = set()
    for p in found:
        text = p.read_text()
        head = text.splitlines()[0]
        m = re.match(rf"kconform stock-ffa\.c mutant {re.escape(p.stem)} \((\w+)\): weakens .+", head)
        assert m, f"{p.name}: first line must say what it weakens: {head!r}"
        areas.add(m.group(1))
        body = text[text.index("\n--- a/"):].splitlines()
        minus = [x for x in body if x.startswith("-") and not x.startswith("---")]
        plus = [x for x in body if x.startswith("+") and not x.startswith("+++")]
        assert len(minus) == 1 and len(plus) <= 1, f"{p.name}: not a single-line change"
        assert "+++ b/arch/arm64/kvm/hyp/nvhe/ffa.c" in text
    assert {"send", "fragment", "reclaim", "mailbox", "version"} <= areas


def test_the_table_and_the_patch_files_agree():
    import importlib.util
    spec = importlib.util.spec_from_file_location("stock_mutants", STOCK / "mutants.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert [m[0] for m in mod.MUTANTS] == [p.stem for p in _patches()]
    with pytest.raises(SystemExit, match="exactly one line"):
        mod.mutate("a\nb\n", "x", "a\nb\n", "A\nB\n")
    with pytest.raises(SystemExit, match="occurs 0 times"):
        mod.mutate("a\n", "x", "z\n", "y\n")


def test_waiting_names_real_mutants_with_reasons(tmp_path, monkeypatch):
    from kconform.core.errors import ToolError
    from kconform.selftest import stock
    listed = stock.waiting()
    assert all(reason for reason in listed.values())
    bad = tmp_path / "waiting.json"
    monkeypatch.setattr(stock, "WAITING", bad)
    bad.write_text(json.dumps({"mutants": {"99-nothing": "someone"}}))
    with pytest.raises(ToolError, match="no mutant 99-nothing"):
        stock.waiting()
    bad.write_text(json.dumps({"mutants": {_patches()[0].stem: ""}}))
    with pytest.raises(ToolError, match="field 'mutants'"):
        stock.waiting()


def test_a_waiting_mutant_passes_a_survivor_fails():
    from kconform.selftest.mutants import exit_code
    ok = {"controls": {"c": {"ok": True}}, "killed": 1, "waiting": 1, "total": 2,
          "mutants": [{"status": "killed"}, {"status": "waiting"}]}
    assert exit_code({"ffa-stock": ok}) == 0
    bad = dict(ok, waiting=0, mutants=[{"status": "killed"}, {"status": "survived"}])
    assert exit_code({"ffa-stock": bad}) == 1


def test_the_suite_is_the_directed_and_z3_corpora():
    from kconform.selftest import stock
    files = stock.suite_files()
    assert any("/corpora/ffa/checks.kcs" in f for f in files)
    assert any("/corpora/z3/ffa/" in f for f in files)
    assert all("/corpora/ffa/" in f or "/corpora/z3/ffa/" in f for f in files)


FAKE_RUNNER = r'''#!/usr/bin/python3
# A stand-in kconform-runner: scenario 0 hangs at op 1 (the watchdog's marker,
# exit 4); run --from 1 runs scenario 1, whose op 0 is a violation of RULE.
import json, os, sys
args = sys.argv[1:]
start = int(args[args.index("--from") + 1]) if "--from" in args else 0
print(json.dumps({"type": "plan", "format": 1, "scenarios": 2, "ops": 3}))
print(json.dumps({"type": "target", "target": "el2", "release": "fake", "format": 1}))
if start == 0:
    print(json.dumps({"type": "op", "verdict": "pass", "file": "f.kcs", "index": 0, "scenario": "s0", "op": 0,
                      "call": "version", "rules": []}), flush=True)
    sys.stderr.write("KCONFORM-CRASH " + json.dumps({"kind": "hang", "signal": 0, "scenario": "s0", "file": "f.kcs",
                     "index": 0, "op": 1, "call": "mem_reclaim", "at": 0, "ops": 2}) + "\n")
    sys.exit(4)
print(json.dumps({"type": "op", "verdict": "violation", "file": "f.kcs", "index": 1, "scenario": "s1", "op": 0,
                  "call": "mem_share", "violated": [os.environ["RULE"]]}))
print(json.dumps({"type": "summary", "scenarios": 1, "ops": 1, "violations": 1, "seconds": 0.0}))
sys.exit(1)
'''


def test_a_crash_or_hang_is_a_finding_and_the_run_resumes(tmp_path, monkeypatch):
    """The stock tree itself hangs on some EL3 reply faults (el3_reclaim.kcs): run_suite
    records the hang as (scenario, op, CRASH.HANG), resumes with the next scenario
    (`--from`), and judges against the control's findings, the hang included."""
    from kconform.selftest import stock
    fake = tmp_path / "runner"
    fake.write_text(FAKE_RUNNER)
    fake.chmod(0o755)
    monkeypatch.setenv("RULE", "FFA.X")
    control = stock.run_suite(fake, ["f.kcs"], 4096, None)
    assert control.verdict == "clean"
    assert set(control.findings) == {("s0", 1, "CRASH.HANG"), ("s1", 0, "FFA.X")}
    # The same findings: nothing new (the resumed scenario ran: its violation is seen).
    same = stock.run_suite(fake, ["f.kcs"], 4096, set(control.findings))
    assert same.verdict == "clean" and not same.rules
    # A new violation after the hang is a kill; so is the hang when the control had none.
    monkeypatch.setenv("RULE", "FFA.Y")
    new = stock.run_suite(fake, ["f.kcs"], 4096, set(control.findings))
    assert new.verdict == "violation" and new.rules == ["FFA.Y"] and new.first == "s1 op 0 (FFA.Y)"
    hang = stock.run_suite(fake, ["f.kcs"], 4096, {("s1", 0, "FFA.Y")})
    assert hang.verdict == "CRASH" and hang.rules == ["CRASH.HANG"]


def test_record_kill_takes_the_first_dead_run_and_counts_the_runs_before_it():
    from types import SimpleNamespace as R
    from kconform.selftest.mutants import MutantResult, record_kill
    runs = [R(verdict="clean", page_size=4096, first="", seconds=2.0, seconds_to_kill=None, rules=[]),
            R(verdict="violation", page_size=16384, first="s op 3", seconds=5.0, seconds_to_kill=1.5,
              rules=["FFA.A", "FFA.B"])]
    m = MutantResult("01-x")
    record_kill(m, runs)
    assert (m.status, m.kind, m.first, m.time_to_kill, m.rules) == \
        ("killed", "violation", "16K s op 3", 3.5, ["FFA.A", "FFA.B"])
    survivor = MutantResult("02-y")
    record_kill(survivor, runs[:1])
    assert survivor.status == "survived" and survivor.time_to_kill is None
