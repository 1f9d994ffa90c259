"""A short bounded fuzz run (seconds) of the running kernel's guest_memfd with
libFuzzer, and the finding path: a scenario that violates a rule is stored
once, named by rule and hash, in binary and text; a baselined rule is not a
crash."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BIND_PAST_2_63, REPO, kconform, needs_host_gmem, needs_kvm, skip_for_kernel

pytestmark = needs_kvm



@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz")
    r = kconform("fuzz", "--engine", "libfuzzer", "--target", "host", "--time", "4s", "--jobs", "1",
                 "--out", str(out), "-q", timeout=900)
    return out / "host", r


def test_short_bounded_fuzz_run_resumes_and_reports(short_run):
    root, r = short_run
    assert r.returncode in (0, 1), r.stdout + r.stderr
    doc = json.loads((root / "last-run.json").read_text())
    assert doc["engine"] == "libfuzzer" and doc["target"] == "host"
    assert doc["execs"] > 100 and doc["execs_per_sec"] > 0, doc
    assert doc["corpus"] > 10  # seeded, fuzzed, merged
    assert any((root / "seeds").iterdir())
    assert "execs/s" in r.stdout


def _binary():
    return REPO / "build" / "fuzz-libfuzzer" / "harness" / "fuzz" / "kconform-fuzz-host"


def _bind_past_2_63_binary(tmp_path) -> Path:
    """BIND_PAST_2_63 in the binary scenario form the fuzz runner reads."""
    from kconform.core.paths import runner_binary
    src = tmp_path / "case.kcs"
    src.write_text(BIND_PAST_2_63)
    conv = tmp_path / "bin"
    conv.mkdir()
    subprocess.run([str(runner_binary()), "convert", "--to", "binary", "--out-dir", str(conv), str(src)], check=True)
    return next(conv.iterdir())


@pytest.fixture
def bind_bug(engine, tmp_path):
    """The 6.18 bug these two tests' input needs (a binding past 2^63 accepted): on a
    kernel without it, or whose KVM has no guest_memfd, they do not apply. The same
    machinery is tested on every machine through the el2 fuzz runner's real finding
    (tests/test_report_findings.py, FFA.VERSION.BIT31)."""
    src = tmp_path / "probe.kcs"
    src.write_text(BIND_PAST_2_63)
    run = engine.run("host", [str(src)], tmp_path / "probe.jsonl")
    if not any(f.rule == "GMEM.BIND.RANGE" for f in run.findings):
        skip_for_kernel("this kernel does not bind past 2^63 (the 6.18 bug the test input needs)")


@needs_host_gmem
def test_a_finding_is_stored_once_by_rule_and_signature(short_run, bind_bug, tmp_path):
    """A fuzz runner without KCONFORM_FUZZ_FINDINGS (a bare engine run) aborts on a
    violation: the crash path stores it under its signature (rules, op kind, target)."""
    from kconform.engine import fuzz_findings
    data = _bind_past_2_63_binary(tmp_path).read_bytes()
    env = dict(os.environ, KCONFORM_FUZZ_KNOWN_RULES="")
    env.pop("KCONFORM_FUZZ_FINDINGS", None)
    path, new = fuzz_findings.store_finding(_binary(), data, "crash", tmp_path / "findings", env)
    digest = fuzz_findings.signature_digest("GMEM.BIND.RANGE bind host")
    assert new and path.name == f"crash-GMEM.BIND.RANGE-{digest}.kcsb"
    text = path.with_name(path.name[:-1]).read_text()
    assert "SUMMARY: kconform: GMEM.BIND.RANGE violated" in text and "bind vm=0" in text
    again, new2 = fuzz_findings.store_finding(_binary(), data, "crash", tmp_path / "findings", env)
    assert again == path and not new2  # never overwritten


@needs_host_gmem
def test_a_baselined_rule_is_recorded_not_a_crash(short_run, bind_bug, tmp_path):
    case = _bind_past_2_63_binary(tmp_path)
    log = tmp_path / "known.log"
    env = dict(os.environ, KCONFORM_FUZZ_KNOWN_RULES="GMEM.BIND.RANGE", KCONFORM_FUZZ_KNOWN_LOG=str(log))
    r = subprocess.run([str(_binary()), str(case)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "KNOWN GMEM.BIND.RANGE" in log.read_text()
