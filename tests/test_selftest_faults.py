"""The oracle's self-test (`kconform selftest faults`, `kconform run --fault`): a lie is
judged by what it did, not by the run's exit status; the matrix of every fault kind x
every op it applies to, on host and el2 (4K), is detected or a listed blind spot."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import REPO, is_nightly, kconform, needs_host_gmem, needs_kvm

from kconform.core.errors import EXIT_CLEAN, EXIT_TOOL_ERROR, EXIT_VIOLATIONS
from kconform.engine.verdicts import read_stream
from kconform.selftest import faults

BLIND_SPOTS_MD = REPO / "targets" / "faulty" / "BLIND_SPOTS.md"


# ---- the judgement, on made-up verdict streams -----------------------------------------

def _stream(violations: list[tuple[str, int, list[str]]], fired: int | None) -> list[str]:
    lines = [json.dumps({"type": "plan", "format": 1, "scenarios": 1, "ops": 3}),
             json.dumps({"type": "target", "target": "host", "release": "r", "profile": "gmem-base", "caps": {}})]
    for scenario, op, rules in violations:
        lines.append(json.dumps({"type": "op", "scenario": scenario, "file": "f.kcs", "index": 0, "op": op,
                                 "call": "write", "verdict": "violation", "rules": [], "expected": [],
                                 "observed": "errno EIO", "violated": rules}))
    summary = {"type": "summary", "scenarios": 1, "ops": 3, "violations": len(violations), "seconds": 0.1}
    if fired is not None:
        summary["fault"] = {"spec": "fail:write", "fired": fired, "scenarios": 1 if fired else 0}
    lines.append(json.dumps(summary))
    return lines


def test_a_fault_is_judged_by_its_lie():
    clean = read_stream(_stream([("s", 2, ["GMEM.A"])], None), "clean")
    # the clean run's own finding is not the lie's
    j = faults.judge("fail:write", clean, read_stream(_stream([("s", 2, ["GMEM.A"])], 3), "f"))
    assert (j.outcome, j.fired, j.new) == (faults.NOT_DETECTED, 3, 0)
    j = faults.judge("fail:write", clean, read_stream(_stream([("s", 1, ["GMEM.B"]), ("s", 2, ["GMEM.A"])], 1), "f"))
    assert (j.outcome, j.new, j.rules) == (faults.DETECTED, 1, ["GMEM.B"])
    # the same op blaming other rules is a new violation
    j = faults.judge("fail:write", clean, read_stream(_stream([("s", 2, ["GMEM.A", "GMEM.C"])], 1), "f"))
    assert j.outcome == faults.DETECTED
    j = faults.judge("fail:write", clean, read_stream(_stream([], 0), "f"))
    assert j.outcome == faults.NEVER_FIRED
    assert faults.judge("fail:write", clean, None).outcome == faults.NEVER_FIRED  # no file has the op


def test_the_blind_spot_table_is_well_formed_and_explained():
    spots = faults.load_blind_spots()
    assert spots
    md = BLIND_SPOTS_MD.read_text()
    seen = set()
    for s in spots:
        key = (s["target"], s.get("profile"), s["fault"])
        assert key not in seen, f"listed twice: {key}"
        seen.add(key)
        assert s["target"] in faults.TARGETS
        kind, op = s["fault"].split(":")
        assert f"`{s['fault']}`" in md or (f"`{kind}:" in md and f"{op}`" in md), \
            f"{s['fault']}: in blind_spots.json but not explained in BLIND_SPOTS.md"
        assert len(s["reason"]) > 40


# ---- refusals ----------------------------------------------------------------------------

def _one_error_line(r: subprocess.CompletedProcess) -> str:
    errors = [line for line in r.stderr.splitlines() if line.startswith("kconform: error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.mark.parametrize("target,fault,needle", [
    ("host", "wrong-reg:write", "wrong-reg does not apply to gmem op 'write'"),
    ("host", "wrong-state:fallocate", "wrong-state does not apply to gmem op 'fallocate'"),
    ("host", "wrong-errno:mem_share", "'mem_share' is not an op of the gmem ABI"),
    ("host", "wrong-count:fallocate", "wrong-count does not apply to gmem op 'fallocate'"),
    ("el2", "wrong-content:mem_share", "wrong-content does not apply to ffa op 'mem_share'"),
    ("el2", "wrong-count:mem_reclaim2", "wrong-count does not apply to ffa op 'mem_reclaim2'"),
    ("el2", "fail:tx_write", "harness op"),
    ("el2", "succeed:write", "'write' is not an op of the ffa ABI"),
])
def test_a_kind_that_does_not_apply_to_the_abi_exits_2(tmp_path, target, fault, needle):
    r = kconform("run", "--target", target, "--page-size", "4K", "--fault", fault, "-q",
                 "--report-dir", str(tmp_path))
    assert r.returncode == EXIT_TOOL_ERROR, r.stdout + r.stderr
    assert needle in _one_error_line(r)
    assert not list(tmp_path.rglob("verdicts-*.jsonl")), "refused before anything ran"


@needs_kvm
def test_the_runner_refuses_it_when_the_target_opens(engine):
    """The host target must open for the runner to get this far (else it says /dev/kvm)."""
    r = subprocess.run([str(engine.binary), "run", "--target", "host", "--fault", "wrong-state:load",
                        str(REPO / "corpora" / "gmem" / "fault.kcs")], capture_output=True, text=True)
    assert r.returncode == EXIT_TOOL_ERROR and not r.stdout
    assert r.stderr.count("\n") == 1 and "wrong-state does not apply to gmem op 'load'" in r.stderr


def test_which_faults_apply_to_which_abi(engine):
    table = faults.applicable(engine)
    assert "wrong-state:load" not in table["gmem"] and "wrong-state:mem_share" in table["ffa"]
    why = faults.check(engine, "fail:version")
    assert why["ffa"] == "" and "'version' is not an op of the gmem ABI" in why["gmem"]


def test_fault_with_qemu_names_the_targets_it_works_with(tmp_path):
    r = kconform("run", "--target", "qemu", "--fault", "fail:write", "-q", "--report-dir", str(tmp_path))
    assert r.returncode == EXIT_TOOL_ERROR
    assert _one_error_line(r) == "kconform: error: --fault works with targets host and el2"


def test_selftest_only_refuses_a_fault_of_no_target(tmp_path):
    r = kconform("selftest", "faults", "--target", "el2", "--only", "wrong-count:mem_share",
                 "--report-dir", str(tmp_path))
    assert r.returncode == EXIT_TOOL_ERROR
    assert "wrong-count does not apply to ffa op 'mem_share'" in _one_error_line(r)


# ---- the three outcomes through the real engine (el2: in process, no /dev/kvm) ---------

def _run_fault(tmp_path, fault):
    r = kconform("run", "--target", "el2", "--page-size", "4K", "--fault", fault, "-q",
                 "--report-dir", str(tmp_path))
    (doc,) = [json.loads(p.read_text()) for p in tmp_path.rglob("fault.json")]
    (judged,) = doc["runs"].values()
    return r, judged


def test_run_fault_says_which_of_the_three_it_was(tmp_path):
    r, j = _run_fault(tmp_path / "detected", "wrong-state:mem_share")
    assert r.returncode == EXIT_VIOLATIONS, r.stderr
    assert j["outcome"] == faults.DETECTED and j["fired"] > 0 and j["new"] > 0
    assert re.search(r"fault wrong-state:mem_share on el2-\S+: fired \d+ time\(s\) .*DETECTED", r.stdout)

    r, j = _run_fault(tmp_path / "missed", "succeed:id_get")  # a listed blind spot
    assert r.returncode == EXIT_CLEAN, r.stderr
    assert j["outcome"] == faults.NOT_DETECTED and j["fired"] > 0
    assert "NOT DETECTED" in r.stdout


def test_a_fault_that_never_fires_is_reported_as_never_fired(tmp_path):
    # Never a 999th FFA_VERSION in one scenario: the lie changes nothing.
    r, j = _run_fault(tmp_path / "run", "fail:version:999")
    assert r.returncode == EXIT_TOOL_ERROR, r.stderr
    assert j["outcome"] == faults.NEVER_FIRED and j["fired"] == 0
    assert "NEVER FIRED" in r.stdout and "exit 2 (never fired" in r.stdout
    # The faulted run's files: a crash or hang of stock ffa.c (el3_reclaim.kcs) ends a
    # runner process, and the run resumes in verdicts-*.from-N.jsonl beside the first;
    # each process that finished ends its file with a summary.
    raws = [p for p in (tmp_path / "run").rglob("verdicts-el2-*.jsonl") if "clean" not in p.name]
    summaries = [json.loads(p.read_text().splitlines()[-1]) for p in raws]
    summaries = [x["fault"] for x in summaries if "fault" in x]
    assert summaries and all(x == {"spec": "fail:version:999", "fired": 0, "scenarios": 0} for x in summaries)

    r = kconform("selftest", "faults", "--target", "el2", "--only", "fail:version:999", "--format", "json",
                 "--report-dir", str(tmp_path / "selftest"))
    assert r.returncode == EXIT_VIOLATIONS, r.stderr
    (m,) = json.loads(r.stdout)["targets"].values()
    (cell,) = m["cells"]
    assert (cell["fault"], cell["outcome"], cell["fired"], cell["ok"]) == \
        ("fail:version:999", faults.NEVER_FIRED, 0, False)


# ---- the matrix ----------------------------------------------------------------------------

# One test per target, so that the host half without /dev/kvm (or on a kernel whose KVM
# has no guest_memfd) is a skip the summary counts (needs_kvm, needs_host_gmem: accepted
# in CI), never a half silently left out of one test.
@pytest.mark.parametrize("target", ["el2", pytest.param("host", marks=[needs_kvm, needs_host_gmem])])
def test_every_cell_of_the_matrix_is_detected_or_a_known_blind_spot(tmp_path, engine, target):
    args = ["selftest", "faults", "--target", target, "--format", "json", "--report-dir", str(tmp_path)]
    table = faults.applicable(engine)
    abi = faults.TARGETS[target]
    # Without KCONFORM_NIGHTLY, every third cell of the target's ABI's matrix (a fixed
    # slice); the whole matrix is the nightly run's.
    want = {abi: (table[abi] if is_nightly() else table[abi][::3])}
    if not is_nightly():
        args += ["--only", ",".join(want[abi])]
    r = kconform(*args, timeout=900)
    assert r.returncode in (EXIT_CLEAN, EXIT_VIOLATIONS), r.stderr
    doc = json.loads(r.stdout)
    spots = faults.load_blind_spots()
    failing, stale = [], []
    assert [m["target"] for m in doc["targets"].values()] == [target]
    for label, m in doc["targets"].items():
        abi = faults.TARGETS[m["target"]]
        profile = m["identity"]["profile"]
        cells = {c["fault"]: c for c in m["cells"]}
        assert list(cells) == want[abi], f"{label}: the matrix is not every fault asked for"
        for fault, c in cells.items():
            assert c["outcome"] in faults.OUTCOMES
            assert (c["outcome"] == faults.NEVER_FIRED) == (c["fired"] == 0), c
            if not c["ok"]:
                failing.append(f"{label} {fault}: {c['outcome']} (fired {c['fired']})"
                               + (f", listed as {c['listed_as']}" if c["listed_as"] else ", not listed"))
            if c["stale"]:
                stale.append(f"{label} {fault}")
        # every entry for this target and profile names a cell of the matrix
        for s in spots:
            if s["target"] == m["target"] and s.get("profile", profile) == profile:
                assert s["fault"] in table[abi], f"blind spot {s['fault']} is no cell of {label}'s matrix"
    assert not failing, ("cells neither detected nor a known blind spot (targets/faulty/blind_spots.json):\n"
                         + "\n".join(failing))
    assert not stale, "detected, yet listed as blind spots (remove them): " + ", ".join(stale)
    assert r.returncode == EXIT_CLEAN
