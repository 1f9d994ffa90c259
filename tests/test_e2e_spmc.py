"""End to end on TF-A's EL3 SPMC (Debian's arm-trusted-firmware source, compiled for
this machine by ./kconform build), called straight from the Normal world: every FF-A
corpus runs at 4K and 16K, judged by the SPMC-side model, and every finding is
reviewed (ci/known-findings.json: a TF-A deviation with its source line, a limit of the
stand-ins, or a limit of the model)."""

import json

import pytest

from conftest import kconform, run_report
from test_baseline_audit import audit_is_clean

pytestmark = pytest.mark.network  # the build fetches Debian's arm-trusted-firmware source


def run_json(tmp_path, *extra):
    return run_report(tmp_path, "--target", "spmc", "--spmc", "tf-a", "--triage-budget", "0", *extra, timeout=900)


def test_tfa_runs_every_ffa_corpus_at_4k_and_16k_and_every_finding_is_reviewed(tmp_path):
    code, doc = run_json(tmp_path)  # the directed corpora and the Z3 cases
    releases = sorted(run["target"]["release"] for run in doc["runs"])
    assert [r.split("-")[0:2] for r in releases] == [["tf", "a"]] * 2
    assert [r.rsplit("-", 1)[1] for r in releases] == ["16k", "4k"]
    for run in doc["runs"]:
        assert run["target"]["target"] == "spmc"
        assert run["counts"]["pass"] > 1000
        new = [f for f in run["findings"] if not f["baselined_by"]]
        assert not new, "unreviewed findings: " + json.dumps(new, indent=1)
        # TF-A 2.12 predates FF-A v1.3: no RECLAIM2 (the scenarios needing it are unsupported).
        assert run["target"]["caps"]["reclaim2"] == 0
        # The known TF-A deviation that makes pKVM's reclaim path fail on it is reported.
        assert any(f["rule"] == "FFA.SPMC.ANSWER" and "negotiate-v1_2-share" in f["scenario"]
                   for f in run["findings"])
    assert code == 0
    audit_is_clean(tmp_path, 2)


def test_a_page_size_and_an_unknown_spmc_are_flags(tmp_path):
    code, doc = run_json(tmp_path, "--page-size", "4K", "corpora/ffa/smoke.kcs")
    assert [run["target"]["release"].rsplit("-", 1)[1] for run in doc["runs"]] == ["4k"]
    r = kconform("run", "--target", "spmc", "--spmc", "hafnium", "corpora/ffa/smoke.kcs")
    assert r.returncode == 2 and "--spmc" in r.stderr
