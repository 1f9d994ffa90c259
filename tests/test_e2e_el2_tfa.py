"""End to end on pKVM's real ffa.c (Debian's 7.3 tree) with TF-A's real EL3 SPMC behind
it (`run --target el2 --el3 tf-a`): every FF-A corpus runs at 4K and 16K, the model
judges the whole path with a real EL3 (DIGEST:TABLE-VIEW: the host stage-2 views and
TF-A's own table), and every finding is reviewed (ci/known-findings.json, release
*+tf-a-2.12.1)."""

import json

import pytest

from conftest import kconform, run_report
from test_baseline_audit import audit_is_clean

pytestmark = pytest.mark.network  # the builds fetch Debian's 7.3 tree and arm-trusted-firmware source


def run_json(tmp_path, *extra):
    return run_report(tmp_path, "--target", "el2", "--el3", "tf-a", "--triage-budget", "0", *extra, timeout=1800)


def test_el2_with_tfa_runs_every_ffa_corpus_at_4k_and_16k_and_every_finding_is_reviewed(tmp_path):
    code, doc = run_json(tmp_path)
    releases = sorted(run["target"]["release"] for run in doc["runs"])
    assert releases == ["debian-7.3.4-16k+tf-a-2.12.1", "debian-7.3.4-4k+tf-a-2.12.1"]
    for run in doc["runs"]:
        assert run["target"]["target"] == "el2"
        assert run["target"]["caps"]["real_el3"] == 1
        assert run["target"]["profile"].endswith("-real-el3")
        assert run["counts"]["pass"] > 1000
        new = [f for f in run["findings"] if not f["baselined_by"]]
        assert not new, "unreviewed findings: " + json.dumps(new, indent=1)
        # Reviewed for a real EL3 only: no entry of the model-EL3 el2 runs applies here.
        assert all("+" in f["baselined_by"]["release"] for f in run["findings"])
        # The interoperability finding: no reclaim through pKVM 7.3 works on TF-A 2.12.1.
        assert any(f["rule"] == "FFA.PROXY.RECLAIM_OK" for f in run["findings"])
        # As on the real stack (qemu-arm64): BL31 routes FF-A numbers 0x60-0x8E only
        # (kc_spmc_glue.c, the tree's is_ffa_fid()), so stock pKVM's pass-through of
        # FFA_MEM_RECLAIM2 comes back SMC_UNK (x0 = -1), not FFA_ERROR(NOT_SUPPORTED).
        r2 = [f for f in run["findings"] if f["rule"] == "FFA.R2.NOT_IMPLEMENTED"]
        assert {f["scenario"].rsplit("-", 1)[0] for f in r2} == {
            "ffa/reclaim2/not-implemented-valid", "ffa/reclaim2/not-implemented-bad-args",
            "ffa/smoke/reclaim2-unsupported", "ffa/smoke/reclaim2-stale-tx"}
        assert all(f["observed"].startswith("ok 0 x0=0xffffffffffffffff ") for f in r2)
        # After such a refusal the model goes on (FfaModel::adopt): few ops go unchecked.
        assert run["counts"]["unchecked"] < 20
    assert code == 0
    audit_is_clean(tmp_path, 2)


def test_el3_is_an_el2_flag(tmp_path):
    r = kconform("run", "--target", "spmc", "--el3", "tf-a", "corpora/ffa/smoke.kcs")
    assert r.returncode == 2 and "--el3" in r.stderr
    r = kconform("run", "--target", "el2", "--el3", "op-tee", "corpora/ffa/smoke.kcs")
    assert r.returncode == 2 and "--el3" in r.stderr
    r = kconform("fuzz", "--target", "spmc", "--el3", "tf-a", "--time", "1s")
    assert r.returncode == 2 and "--el3" in r.stderr


def test_asan_runs_the_whole_path_and_finds_nothing_new(tmp_path):
    """ffa.c and TF-A both built with ASan and the kernel's arm64 UBSan set (el2 --asan):
    every FF-A corpus at 4K, every finding reviewed, no sanitizer report (this run
    caught our own SMC-boundary wrapper writing a whole 18-register reply into TF-A's 8)."""
    code, doc = run_json(tmp_path, "--asan", "--page-size", "4K")
    (run,) = doc["runs"]
    assert run["target"]["caps"]["sanitized"] == 1 and run["target"]["caps"]["real_el3"] == 1
    assert run["counts"]["pass"] > 1000
    assert not [f for f in run["findings"] if not f["baselined_by"]]
    assert not [f for f in run["findings"] if f["rule"] == "CRASH.SANITIZER"]
    assert code == 0
