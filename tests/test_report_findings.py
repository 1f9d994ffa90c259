"""Never lie, never lose (issue 11): every finding reaches every report form and
fails there; one reproducer per distinct finding with a re-run command that
reproduces it; baseline entries are "no longer occurring" only when the run
covered them; fuzz and run agree on what is known."""

import argparse
import io
import json
import os
import re
import shlex
import stat
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from conftest import (BIND_PAST_2_63, REPO, default_tree_missing, kconform, needs_host_gmem, needs_kvm,
                      skip_for_kernel)
from kconform.commands import run as run_cmd
from kconform.core.errors import ToolError
from kconform.engine import baseline, fuzz_findings, report
from kconform.engine.runner import Engine
from kconform.engine.verdicts import Finding, read_stream

RULES = [{"id": "GMEM.A", "abi": "gmem", "summary": "a", "citation": "SPEC.md A"},
         {"id": "GMEM.B", "abi": "gmem", "summary": "b", "citation": "SPEC.md B"}]


def stream(*ops, target="host", release="6.18.44", profile="gmem-base"):
    """A verdict stream; ops are (scenario, verdict, violated, expected, note)."""
    lines = [{"type": "plan", "format": 1, "scenarios": len(ops), "ops": len(ops)},
             {"type": "target", "format": 1, "target": target, "release": release, "profile": profile,
              "caps": {}}]
    for i, (scenario, verdict, violated, expected, note) in enumerate(ops):
        rec = {"type": "op", "scenario": scenario, "file": "f.kcs", "index": i, "op": 3,
               "call": "write gmem=0 len=1", "verdict": verdict, "rules": [],
               "expected": expected, "observed": "ok 1", "note": note}
        if violated:
            rec["violated"] = violated
        lines.append(rec)
    lines.append({"type": "summary", "scenarios": len(ops), "ops": len(ops), "violations": 0, "seconds": 0.1})
    return [json.dumps(x) for x in lines]


def fake_runner(tmp_path, marker, summary, rc):
    """A runner that streams one passing op, then dies as kconform-runner does on a crash."""
    recs = [{"type": "plan", "format": 1, "scenarios": 1, "ops": 2},
            {"type": "target", "format": 1, "target": "el2", "release": "7.3.4-4k", "profile": "ffa-4k",
             "caps": {}},
            {"type": "op", "scenario": marker["scenario"], "file": marker["file"], "index": 0, "op": 0,
             "call": "version", "verdict": "pass", "rules": [], "expected": [], "observed": "ok 0"}]
    script = tmp_path / "fake-runner"
    err = "\n".join([summary, "KCONFORM-CRASH " + json.dumps(marker)])
    script.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(json.dumps(r) for r in recs) +
                      f"\nEOF\ncat >&2 <<'EOF'\n{err}\nEOF\n" + (f"kill -{-rc} $$\n" if rc < 0 else f"exit {rc}\n"))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return Engine(script)


def crash_run(tmp_path, kind):
    marker = {"kind": kind, "signal": 11 if kind == "signal" else 0, "call": "mem_reclaim2 handle=0",
              "file": "r.kcs", "index": 0, "op": 5, "scenario": "ffa/reclaim2/x"}
    summary = ("SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior ffa.c:123" if kind == "sanitizer"
               else "")
    eng = fake_runner(tmp_path, marker, summary, {"sanitizer": 3, "hang": 4}.get(kind, -11))
    return eng.run("el2", ["r.kcs"], tmp_path / "verdicts.jsonl", release="debian-7.3.4-4k")


def qemu_run(rule, op, call):
    run = read_stream(stream(("gmem/write/a", "pass", None, [], "")), "t")
    run.target["target"] = "qemu"
    run.findings.append(Finding(rule=rule, target="qemu", release="6.18.44", scenario="gmem/write/a",
                                file="f.kcs", index=0, op=op, call=call,
                                expected=["the guest runs the scenario to its end"],
                                observed="Kernel panic - not syncing: oops", note="console log: c.log"))
    return run


# kind -> (a run with exactly one finding of that kind, its rule)
def make(kind, tmp_path):
    if kind == "violation":
        return read_stream(stream(("gmem/x", "violation", ["GMEM.B"], ["errno EINVAL [GMEM.B]"], "")), "t"), "GMEM.B"
    if kind == "invariant":
        return read_stream(stream(("gmem/x", "violation", ["GMEM.A"], ["errno EINVAL [GMEM.B]"],
                                   "invariant: stage-2 and EL3 disagree")), "t"), "GMEM.A"
    if kind == "sanitizer":
        return crash_run(tmp_path, "sanitizer"), "CRASH.SANITIZER"
    if kind == "crash":
        return crash_run(tmp_path, "signal"), "CRASH.SIGNAL"
    if kind == "guest-panic":
        return qemu_run("QEMU.PANIC", 2, "op 2 in flight"), "QEMU.PANIC"
    if kind == "hang":
        return qemu_run("QEMU.HANG", -1, "after the scenario"), "QEMU.HANG"
    if kind == "el2-hang":  # the runner's watchdog (kind "hang" too)
        return crash_run(tmp_path, "hang"), "CRASH.HANG"
    if kind == "guest-warning":
        return qemu_run("QEMU.WARNING", -1, "during the scenario"), "QEMU.WARNING"
    raise AssertionError(kind)


def ffa_rules():
    return RULES + [{"id": "FFA.R2.X", "abi": "ffa", "summary": "x", "citation": "SPEC.md X"}]


KINDS = ["violation", "invariant", "sanitizer", "crash", "guest-panic", "hang", "guest-warning", "el2-hang"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_finding_fails_in_every_form(tmp_path, kind):
    run, rule = make(kind, tmp_path)
    kind = kind.removeprefix("el2-")
    (f,) = run.findings
    assert (f.kind, f.rule) == (kind, rule)
    f.rerun = f"./kconform run --target {run.name} reports/x/findings/{kind}.kcs"
    rules = ffa_rules()

    buf = io.StringIO()
    report.print_table(Console(file=buf, width=400), run, rules, [])
    table = buf.getvalue()
    assert f"FAIL {kind} {rule} on {run.name}" in table and f.scenario in table and f.rerun in table
    assert any(rule in line and "FAIL" in line for line in table.splitlines() if "│" in line), table

    doc = json.loads(report.to_json([run], rules, [], 1))
    assert doc["new_findings"] == 1
    (jf,) = doc["runs"][0]["findings"]
    assert (jf["kind"], jf["rule"], jf["scenario"], jf["op"], jf["rerun"]) == (kind, rule, f.scenario, f.op, f.rerun)
    assert any(r["id"] == rule and r["status"] == "FAIL" for r in doc["runs"][0]["rules"])

    ktap = report.to_ktap([run], rules).splitlines()
    assert ktap[-1] == f"not ok 1 {run.name} {run.release}"
    assert any(line.startswith("    not ok ") and line.endswith(" " + rule) for line in ktap), ktap
    assert any(line.startswith(f"    # FAIL {kind} {rule}") and f.scenario in line for line in ktap)
    assert f"    #   re-run:   {f.rerun}" in ktap

    suite = ET.fromstring(report.to_junit([run], rules)).find("testsuite")
    assert int(suite.get("failures")) == 1
    (case,) = [tc for tc in suite if tc.get("name") == rule]
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == kind
    assert f.scenario in failure.text and f.rerun in failure.text and f.observed.split()[0] in failure.text


@pytest.mark.parametrize("kind", KINDS)
def test_a_baselined_finding_of_any_kind_is_shown_but_passes(tmp_path, kind):
    run, rule = make(kind, tmp_path)
    kind = kind.removeprefix("el2-")
    entry = {"rule": rule, "target": run.name, "release": "*", "reason": "triaged", "date": "2026-11-30"}
    assert baseline.apply([entry], [run]) == []
    rules = ffa_rules()
    ktap = report.to_ktap([run], rules)
    assert ktap.splitlines()[-1] == f"ok 1 {run.name} {run.release}"
    assert f" {rule} # SKIP known finding (baselined)" in ktap and "# baselined " + kind in ktap
    suite = ET.fromstring(report.to_junit([run], rules)).find("testsuite")
    assert suite.get("failures") == "0"
    assert json.loads(report.to_json([run], rules, [], 0))["new_findings"] == 0


def test_a_crash_fails_its_run_among_passing_rules(tmp_path):
    """The bug of issue 11: a sanitizer report with every model rule passing."""
    run = crash_run(tmp_path, "sanitizer")
    ktap = report.to_ktap([run], ffa_rules())
    assert "not ok 1 el2 debian-7.3.4-4k" in ktap and "not ok 2 CRASH.SANITIZER" in ktap
    assert "UndefinedBehaviorSanitizer" in ktap


# ---- item 2: one reproducer per distinct finding, exact re-run commands --------------------

GMEM_CASE = """kconform-scenario 1
abi gmem
name {name}
requires gmem
create_vm
create_gmem vm=0 size={size} flags=0
"""


def gmem_file(tmp_path, names_sizes):
    f = tmp_path / "cases.kcs"
    f.write_text("\n".join(GMEM_CASE.format(name=n, size=s) for n, s in names_sizes))
    return str(f)


def run_of(file, release, ops, label="host"):
    """ops: (index, scenario, [violated rules]) at op 1."""
    lines = [{"type": "plan", "format": 1, "scenarios": len(ops), "ops": len(ops)},
             {"type": "target", "format": 1, "target": label, "release": release, "profile": "gmem-base",
              "caps": {}}]
    for index, scenario, violated in ops:
        lines.append({"type": "op", "scenario": scenario, "file": file, "index": index, "op": 1,
                      "call": "create_gmem vm=0 size=0x1000 flags=0", "verdict": "violation", "rules": [],
                      "expected": [f"errno EINVAL [{r}]" for r in violated], "observed": "ok 3",
                      "violated": violated})
    lines.append({"type": "summary", "scenarios": 1, "ops": 1, "violations": 1, "seconds": 0.1})
    return read_stream([json.dumps(x) for x in lines], "t")


def test_distinct_findings_of_one_rule_in_same_named_scenarios_get_their_own_files(tmp_path, engine):
    # Three different inputs all named "fuzz", one rule: three findings, three files.
    file = gmem_file(tmp_path, [("fuzz", "0x1000"), ("fuzz", "0x2000"), ("fuzz", "0x3000")])
    run = run_of(file, "6.18.44", [(0, "fuzz", ["GMEM.A"]), (1, "fuzz", ["GMEM.A"]), (2, "fuzz", ["GMEM.A"])])
    plan = run_cmd.Plan("host", engine, "host", [file], rerun=["--target", "host"])
    out = tmp_path / "out"
    out.mkdir()
    run_cmd.save_findings(engine, [plan], [run], out)
    files = sorted((out / "findings").iterdir())
    assert len(files) == 3
    assert sorted(Path(f.saved).resolve() for f in run.findings) == [p.resolve() for p in files]
    for f in run.findings:
        saved = Path(f.saved)
        assert f"size=0x{f.index + 1}000" in saved.read_text()
        assert shlex.split(f.rerun)[-1] == f.saved and shlex.split(f.rerun)[1:4] == ["run", "--target", "host"]
        assert saved.name.startswith("violation-GMEM.A-create_gmem-host-6.18.44-")


def test_4k_and_16k_findings_have_their_own_files_and_headers(tmp_path, engine):
    file = gmem_file(tmp_path, [("ffa/x", "0x1000")])
    runs = [run_of(file, rel, [(0, "ffa/x", ["GMEM.A", "GMEM.B"])], label="el2")
            for rel in ("debian-7.3.4-4k", "debian-7.3.4-16k")]
    plans = [run_cmd.Plan(f"el2-{r.release}", engine, "el2", [file],
                          rerun=run_cmd.el2_flags("debian:7.3", None, size, False))
             for r, size in zip(runs, (4096, 16384))]
    out = tmp_path / "out"
    out.mkdir()
    run_cmd.save_findings(engine, plans, runs, out)
    files = sorted((out / "findings").iterdir())
    assert len(files) == 2  # two rules at one op: one finding per build
    for run, size in zip(runs, ("4K", "16K")):
        assert len({f.saved for f in run.findings}) == 1
        f = run.findings[0]
        text = Path(f.saved).read_text()
        assert f"on el2 {run.release} " in text.splitlines()[0] and "GMEM.A, GMEM.B" in text.splitlines()[0]
        other = "debian-7.3.4-16k" if size == "4K" else "debian-7.3.4-4k"
        assert other not in text
        assert f"--page-size {size} " in f.rerun and f"# re-run: {f.rerun}" in text
    # never overwritten: saving again leaves the files as they were
    before = {p: p.read_text() for p in files}
    run_cmd.save_findings(engine, plans, runs, out)
    assert {p: p.read_text() for p in sorted((out / "findings").iterdir())} == before


def test_stale_only_when_the_run_covered_what_the_entry_names():
    e = {"rule": "GMEM.A", "target": "host", "release": "6.18.*", "scenario": "gmem/bind/*",
         "reason": "r", "date": "2026-11-30"}
    # A subset of the corpus that never ran a gmem/bind scenario says nothing about the entry.
    other = read_stream(stream(("gmem/write/a", "pass", None, [], "")), "t")
    assert baseline.apply([e], [other]) == []
    # A bind scenario that was only reported unsupported did not run either.
    unsupported = read_stream(stream(("gmem/bind/a", "unsupported", None, [], "")), "t")
    assert baseline.apply([e], [unsupported]) == []
    # Another release: not covered.
    ran_elsewhere = read_stream(stream(("gmem/bind/a", "pass", None, [], ""), release="7.3.4"), "t")
    assert baseline.apply([e], [ran_elsewhere]) == []
    # It ran, on a matching release, and passed: no longer occurring.
    ran = read_stream(stream(("gmem/bind/a", "pass", None, [], "")), "t")
    assert baseline.apply([e], [ran]) == [e]
    ktap = report.to_ktap([other, ran], RULES, [e]).splitlines()
    stale = [i for i, line in enumerate(ktap) if "no longer occurs" in line]
    assert len(stale) == 1 and "GMEM.A" in ktap[stale[0]]  # in the run that covered it only
    buf = io.StringIO()
    report.print_table(Console(file=buf, width=300), ran, RULES, [e])
    assert "NO LONGER OCCURS baselined GMEM.A on host 6.18.* (gmem/bind/*)" in buf.getvalue()


# ---- item 4: re-run commands carry the flags that chose the build ----------------------------

def args(**kw):
    base = dict(scenarios=[str(REPO / "corpora" / "gmem")], target=None, tree=None, apply=None, page_size=None,
                asan=False, kernel=None, build=False, accel="tcg", fault="")
    base.update(kw)
    return argparse.Namespace(**base)


def test_rerun_flags_of_each_target(monkeypatch, tmp_path):
    log = lambda m: None  # noqa: E731
    (host,) = run_cmd._plan_host(args(fault="wrong-errno:write"), log)
    assert host.rerun == ["--target", "host", "--fault", "wrong-errno:write"]

    patch = tmp_path / "p.patch"
    patch.write_text("")
    monkeypatch.setattr(run_cmd.el2, "resolve_tree", lambda spec, apply, log: (tmp_path, "patched-debian-7.3.4-abc"))
    built_with = {}

    def fake_build(tree, tid, sizes, sanitize, log, spmc_tree=None):
        built_with["spmc_tree"] = spmc_tree
        return {p: Path(os.devnull) for p in sizes}

    class FakeEngine:
        def __init__(self, binary):
            self.binary = binary

        def probe(self, family):
            return {"release": "7.3.4-16k+tf-a-2.12.1"}, ""
    monkeypatch.setattr(run_cmd.el2, "build", fake_build)
    monkeypatch.setattr(run_cmd, "Engine", FakeEngine)
    plans = run_cmd._plan_el2(args(scenarios=[str(REPO / "corpora" / "ffa")], apply=str(patch),
                                   page_size=["16K"], asan=True), log)
    (p16,) = plans
    assert p16.release == "patched-debian-7.3.4-abc-16k" and p16.target == "el2"
    assert p16.rerun == ["--target", "el2", "--tree", "debian:7.3", "--apply", run_cmd.shown_path(patch),
                         "--page-size", "16K", "--asan"]
    assert built_with["spmc_tree"] is None
    # --el3 tf-a: TF-A's tree built in, family el2-tfa, the release names the EL3, the re-run says it.
    (t16,) = run_cmd._plan_el2(args(scenarios=[str(REPO / "corpora" / "ffa")], page_size=["16K"], el3="tf-a"), log)
    assert t16.target == "el2-tfa" and t16.release == "patched-debian-7.3.4-abc-16k+tf-a-2.12.1"
    assert t16.rerun[-2:] == ["--el3", "tf-a"]
    assert built_with["spmc_tree"] == "debian-src:arm-trusted-firmware"

    (q,) = run_cmd._plan_qemu(args(kernel=str(tmp_path / "bzImage"), accel="kvm", target=["qemu"]), log)
    assert q.rerun == ["--target", "qemu", "--kernel", run_cmd.shown_path(tmp_path / "bzImage"), "--accel", "kvm"]

    class Built:
        image = tmp_path / "built-bzImage"
    monkeypatch.setattr(run_cmd.kernel_build, "build", lambda tree, apply, progress: Built)
    (qb,) = run_cmd._plan_qemu(args(build=True, apply=str(patch), target=["qemu"]), log)
    assert qb.rerun == ["--target", "qemu", "--build", "--tree", "debian:7.3", "--apply",
                        run_cmd.shown_path(patch)]


@needs_kvm
@needs_host_gmem
def test_a_findings_rerun_command_reproduces_it(tmp_path):
    """End to end through the real engine: a lying host target's finding, its
    reproducer file, and its re-run command, which finds it again."""
    out = tmp_path / "report.json"
    r = kconform("run", "--target", "host", "--fault", "wrong-errno:fallocate", "--format", "json",
                 "--output", str(out), "--report-dir", str(tmp_path / "reports"),
                 str(REPO / "corpora" / "gmem" / "fallocate.kcs"))
    assert r.returncode == 1, r.stderr
    doc = json.loads(out.read_text())
    new = [f for f in doc["runs"][0]["findings"] if not f["baselined_by"]]
    assert new
    f = new[0]
    assert f["saved"] and f["rerun"].endswith(f["saved"]) and "--fault wrong-errno:fallocate" in f["rerun"]
    # every form reports it and fails
    (ktap,) = list((tmp_path / "reports").rglob("report.ktap"))
    assert "not ok 1 host" in ktap.read_text() and f["scenario"] in ktap.read_text()
    (junit,) = list((tmp_path / "reports").rglob("report.junit.xml"))
    assert ET.parse(junit).getroot().find("testsuite").get("failures") != "0"
    # the re-run command (run from the repository, as printed) finds the same rule at the same op
    cmd = shlex.split(f["rerun"])
    again = tmp_path / "again.json"
    r2 = subprocess.run(cmd + ["--format", "json", "--output", str(again), "--report-dir",
                               str(tmp_path / "reports2")], cwd=REPO, capture_output=True, text=True,
                        timeout=600)
    assert r2.returncode == 1, r2.stderr
    found = {(g["rule"], g["scenario"], g["op"]) for g in json.loads(again.read_text())["runs"][0]["findings"]}
    assert (f["rule"], f["scenario"], f["op"]) in found


# ---- item 3: one notion of known --------------------------------------------------------------

def test_fuzz_entries_follow_target_release_and_scenario_patterns():
    entries = baseline.load(REPO / "ci" / "known-findings.json")
    on_73 = baseline.fuzz_entries(entries, "el2", "debian-7.3.4-4k")
    rules_73 = {r for r, _ in on_73}
    # The 6.12-only entries are not known on 7.3 (the fuzzer once swallowed these there).
    assert "FFA.VERSION.DOWNGRADE" not in rules_73 and "FFA.PROXY.GRANULE" not in rules_73
    assert ("FFA.R2.NOT_IMPLEMENTED", "ffa/*reclaim2*") in on_73  # with its scenario pattern
    assert ("FFA.PROXY.GRANULE", "ffa/regress/range-align-*") in \
        baseline.fuzz_entries(entries, "el2", "debian-6.12.57-4k")
    # "debian-*" never covers a patched build ("*debian-*" does, by choice of the reviewer).
    patched = {r for r, _ in baseline.fuzz_entries(entries, "el2", "patched-debian-7.3.4-abcd1234-4k")}
    assert "FFA.R2.NOT_IMPLEMENTED" not in patched and "FFA.PROXY.ROLLBACK" in patched
    assert baseline.fuzz_entries(entries, "host", "7.3.4") == []
    odd = [{"rule": "GMEM.A", "target": "host", "release": "*", "scenario": "gmem/[ab]*"}]
    assert baseline.fuzz_entries(odd, "host", "6.18.44") == []  # left to the replay


# The machinery (the fuzz runner's KCONFORM_FUZZ_BASELINE, store_finding's replay
# through run, the stored re-run command) needs an input with a finding. A genuine
# one of the stock tree every EL2 fuzz runner is built from (Debian's 7.3 ffa.c, the
# default tree; reviewed in ci/known-findings.json): FFA_VERSION with bit 31 set, MBZ
# in the caller's version (models/ffa/SPEC.md VERSION:FORMAT), must answer
# NOT_SUPPORTED; 7.3 ignores the bit and answers its version (FFA.VERSION.BIT31, at
# op 0, the raw call). The handler runs in process, built from the pinned tree: the
# same finding on every host kernel, with or without /dev/kvm, and the binary is the
# kconform-fuzz-el2-4k tests/test_fuzz_record.py and test_fuzz_features.py build.
# Named "fuzz", as every mutated input is.
VERSION_BIT31 = """kconform-scenario 1
abi ffa
name fuzz
requires page_4k
raw fid=VERSION x1=0x80010002
version
"""
BIT31 = "FFA.VERSION.BIT31"


@pytest.fixture(scope="module")
def fuzz_el2():
    from kconform.engine.fuzzers import build_harness
    why = default_tree_missing()
    if why:
        pytest.skip(why)
    return build_harness("libfuzzer", "el2-4k", log=lambda m: None)


def to_binary(engine, tmp_path, text: str) -> bytes:
    src = tmp_path / "case.kcs"
    src.write_text(text)
    conv = tmp_path / "bin"
    conv.mkdir()
    engine.to_binary([str(src)], conv)
    (out,) = conv.iterdir()
    return out.read_bytes()


@pytest.fixture
def bit31_input(tmp_path, engine):
    return to_binary(engine, tmp_path, VERSION_BIT31)


def el2_replay(scenario: str, release: str = "debian-7.3.*-4k"):
    """`run`'s judgement of the el2-4k fuzz runner's build (the one `kconform fuzz --target
    el2` uses) with one reviewed entry for BIT31."""
    from kconform.commands import fuzz as fuzz_cmd
    entries = [{"rule": BIT31, "target": "el2", "release": release, "scenario": scenario, "reason": "r",
                "date": "2026-11-30"}]
    return fuzz_cmd.run_replay("el2", 4096, entries, log=lambda m: None)


@pytest.mark.parametrize("pattern,known", [("ffa/version/bit31-*", False), ("*", True), ("f?zz", True),
                                           ("fuzz*x", False)])
def test_the_fuzz_runner_knows_what_run_would_baseline(fuzz_el2, bit31_input, tmp_path, pattern, known):
    case = tmp_path / "input"
    case.write_bytes(bit31_input)
    env = dict(os.environ, KCONFORM_FUZZ_BASELINE=f"{BIT31}\t{pattern}", KCONFORM_FUZZ_KNOWN_RULES="",
               KCONFORM_FUZZ_KNOWN_LOG=str(tmp_path / "known.log"))
    r = subprocess.run([str(fuzz_el2), str(case)], capture_output=True, text=True, env=env, timeout=120)
    if known:
        assert r.returncode == 0, r.stderr[-2000:]
        assert f"KNOWN {BIT31}" in (tmp_path / "known.log").read_text()
    else:
        assert r.returncode != 0 and f"SUMMARY: kconform: {BIT31} violated by op 0 " in r.stderr, r.stderr[-2000:]


def test_a_fuzz_finding_run_would_not_baseline_is_stored_with_a_working_rerun(fuzz_el2, bit31_input, tmp_path):
    # The reviewed entry is for the corpus scenarios only: a fuzz input named "fuzz" is new.
    replay = el2_replay("ffa/version/bit31-*")
    path, new = fuzz_findings.store_finding(fuzz_el2, bit31_input, "crash", tmp_path / "findings",
                                            dict(os.environ, KCONFORM_FUZZ_BASELINE=""), replay)
    assert new and path.name.startswith(f"crash-{BIT31}-")
    text = path.with_suffix(".kcs").read_text()
    assert re.search(rf"^# run: NEW violation {re.escape(BIT31)} at op 0 .* on el2 debian-7\.3\.\d+-4k$", text,
                     re.M), text
    hint = fuzz_findings.rerun_hint(path)
    assert hint.endswith(str(path.with_suffix(".kcs"))), hint
    assert shlex.split(hint)[1:] == ["run", "--target", "el2", "--tree", "debian:7.3", "--page-size", "4K",
                                     str(path.with_suffix(".kcs"))], hint
    out = tmp_path / "again.json"
    r = subprocess.run(shlex.split(hint) + ["--format", "json", "--output", str(out),
                                            "--report-dir", str(tmp_path / "reports")],
                       cwd=REPO, capture_output=True, text=True, timeout=1800)
    # ci/known-findings.json reviews BIT31 for the corpus's ffa/version/bit31* only: new here too
    assert r.returncode == 1, r.stderr
    found = json.loads(out.read_text())["runs"][0]["findings"]
    assert [(f["rule"], f["scenario"], f["op"], f["baselined_by"]) for f in found] == [(BIT31, "fuzz", 0, None)]


def test_a_fuzz_finding_run_would_baseline_is_recorded_not_stored(fuzz_el2, bit31_input, tmp_path):
    replay = el2_replay("*")
    path, new = fuzz_findings.store_finding(fuzz_el2, bit31_input, "crash", tmp_path / "findings",
                                            dict(os.environ, KCONFORM_FUZZ_BASELINE=""), replay)
    assert (path, new) == (None, False)
    assert not list((tmp_path / "findings").glob("*.kcsb"))
    assert f"KNOWN-ON-REPLAY {BIT31} fuzz op 0" in (tmp_path / "known.log").read_text()
    # An entry for another release does not make it known.
    other = el2_replay("*", release="debian-6.12.*")
    path, new = fuzz_findings.store_finding(fuzz_el2, bit31_input, "crash", tmp_path / "findings2",
                                            dict(os.environ, KCONFORM_FUZZ_BASELINE=""), other)
    assert new and path.exists()


# ---- the same on the host, where the running kernel has a bug to find ------------------------

@pytest.fixture(scope="module")
def fuzz_host():
    from kconform.engine.fuzzers import build_harness
    return build_harness("libfuzzer", "host", log=lambda m: None)


@pytest.fixture
def bind_input(tmp_path, engine):
    data = to_binary(engine, tmp_path, BIND_PAST_2_63)
    run = engine.run("host", [str(tmp_path / "case.kcs")], tmp_path / "probe.jsonl")
    if not any(f.rule == "GMEM.BIND.RANGE" for f in run.findings):
        skip_for_kernel("this kernel does not bind past 2^63 (the 6.18 bug the test input needs)")
    return data, run.release


@needs_kvm
@needs_host_gmem
def test_the_6_18_bind_past_2_63_in_a_fuzz_input_is_new_to_the_reviewed_baseline(fuzz_host, bind_input,
                                                                                   tmp_path):
    """The host fuzz runner meets the known 6.18 bug (ci/known-findings.json GMEM.BIND.RANGE,
    reviewed for the corpus's gmem/bind/invalid-binding-* scenarios) in an input named
    "fuzz": neither the runner (the entries run applies, as `kconform fuzz` passes them)
    nor run's replay counts it as known, and `run --target host` finds it again."""
    from kconform.commands import fuzz as fuzz_cmd
    data, release = bind_input
    entries = baseline.load(REPO / "ci" / "known-findings.json")
    passed = baseline.fuzz_entries(entries, "host", release)
    assert ("GMEM.BIND.RANGE", "gmem/bind/invalid-binding-*") in passed
    case = tmp_path / "input"
    case.write_bytes(data)
    env = dict(os.environ, KCONFORM_FUZZ_BASELINE="\n".join(f"{r}\t{p}" for r, p in passed),
               KCONFORM_FUZZ_KNOWN_RULES="")
    r = subprocess.run([str(fuzz_host), str(case)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "SUMMARY: kconform: GMEM.BIND.RANGE violated by op 2 " in r.stderr, \
        r.stderr[-2000:]
    replay = fuzz_cmd.run_replay("host", 0, entries, log=lambda m: None)
    path, new = fuzz_findings.store_finding(fuzz_host, data, "crash", tmp_path / "findings",
                                            dict(os.environ, KCONFORM_FUZZ_BASELINE=""), replay)
    assert new and path.name.startswith("crash-GMEM.BIND.RANGE-")
    assert "# run: NEW violation GMEM.BIND.RANGE at op 2" in path.with_suffix(".kcs").read_text()
    hint = fuzz_findings.rerun_hint(path)
    assert shlex.split(hint)[1:] == ["run", "--target", "host", str(path.with_suffix(".kcs"))], hint
    out = tmp_path / "again.json"
    r = subprocess.run(shlex.split(hint) + ["--format", "json", "--output", str(out),
                                            "--report-dir", str(tmp_path / "reports")],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stderr
    found = json.loads(out.read_text())["runs"][0]["findings"]
    assert ("GMEM.BIND.RANGE", "fuzz", 2, None) in [(f["rule"], f["scenario"], f["op"], f["baselined_by"])
                                                    for f in found]


@needs_kvm
@needs_host_gmem
def test_the_fuzz_runner_skips_what_run_reports_unsupported(fuzz_host, engine, tmp_path):
    """A seed that requires a capability the target lacks is judged by no profile in
    run (unsupported), so the fuzz runner does not run it either."""
    if engine.probe("host")[0].get("profile") != "gmem-base":
        skip_for_kernel("this kernel has guest_memfd write()")
    src = tmp_path / "case.kcs"
    src.write_text(BIND_PAST_2_63.replace("requires gmem user_memory2", "requires gmem user_memory2 write"))
    conv = tmp_path / "bin"
    conv.mkdir()
    engine.to_binary([str(src)], conv)
    case = next(conv.iterdir())
    run = engine.run("host", [str(src)], tmp_path / "v.jsonl")
    assert not run.findings and run.counts["unsupported"] == 3
    env = dict(os.environ, KCONFORM_FUZZ_BASELINE="", KCONFORM_FUZZ_KNOWN_RULES="")
    r = subprocess.run([str(fuzz_host), str(case)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "SUMMARY" not in r.stderr, r.stderr[-2000:]


def test_robustness_findings_have_their_own_section_in_every_form():
    """A violation under an injected EL3 fault ("class": "robustness" in its record) is
    reported apart from conformance findings, in the text, JSON, KTAP and JUnit forms."""
    lines = stream(("ffa/el3/a", "violation", ["FFA.R2.X"], ["error [FFA.R2.X]"], ""),
                   ("ffa/el3/b", "violation", ["FFA.R2.X"], ["error [FFA.R2.X]"], ""),
                   target="el2", release="7.3.4-4k", profile="ffa-4k")
    recs = [json.loads(x) for x in lines]
    recs[3]["class"] = "robustness"
    run = read_stream([json.dumps(r) for r in recs], "s")
    assert [f.finding_class for f in run.findings] == ["conformance", "robustness"]
    rules = ffa_rules()
    buf = io.StringIO()
    report.print_table(Console(file=buf, width=400), run, rules, [])
    text = buf.getvalue()
    conf, rob = text.index("conformance findings (1)"), text.index("robustness findings")
    assert conf < text.index("ffa/el3/a") < rob < text.index("ffa/el3/b"), text
    doc = json.loads(report.to_json([run], rules, [], 1))
    assert [f["class"] for f in doc["runs"][0]["findings"]] == ["conformance", "robustness"]
    assert doc["runs"][0]["classes"] == {"conformance": 1, "robustness": 1}
    ktap = report.to_ktap([run], rules)
    assert "ffa/el3/b" in ktap and "[robustness]" in ktap and "# robustness findings" in ktap
    assert "== robustness findings" in report.to_junit([run], rules)
    recs[3]["class"] = "bogus"
    with pytest.raises(ToolError, match="field 'class'"):
        read_stream([json.dumps(r) for r in recs], "s")
