"""End to end on OP-TEE's S-EL1 SPMC (Debian's optee-os source, compiled for this
machine by ./kconform build, behind a stand-in of TF-A's SPMD), called from the
Normal world: every FF-A corpus runs at 4K and 16K, judged by the SPMC-side model
configured as OP-TEE, and every finding is reviewed (ci/known-findings.json: an
OP-TEE deviation with its source line, a limit of the stand-ins, or a limit of the
model)."""

import json

import pytest

from conftest import run_report

pytestmark = pytest.mark.network  # the build fetches Debian's optee-os source (sid)


def run_json(tmp_path, *extra):
    return run_report(tmp_path, "--target", "spmc", "--spmc", "op-tee", "--triage-budget", "0", *extra, timeout=900)


def test_optee_runs_every_ffa_corpus_at_4k_and_16k_and_every_finding_is_reviewed(tmp_path):
    code, doc = run_json(tmp_path)
    releases = sorted(run["target"]["release"] for run in doc["runs"])
    assert [r.split("-")[0:2] for r in releases] == [["op", "tee"]] * 2
    assert [r.rsplit("-", 1)[1] for r in releases] == ["16k", "4k"]
    for run in doc["runs"]:
        assert run["target"]["target"] == "spmc"
        assert run["target"]["caps"]["sp_id"] == 0x8001 and run["target"]["caps"]["ffa_version"] == 0x10002
        assert run["counts"]["pass"] > 1000
        new = [f for f in run["findings"] if not f["baselined_by"]]
        assert not new, "unreviewed findings: " + json.dumps(new, indent=1)
        # OP-TEE 4.10.0's refusal of every fragmented send is reported (thread_spmc.c:1326).
        assert any(f["rule"] == "FFA.SPMC.ANSWER" and f["scenario"].startswith("ffa/frag/two-")
                   for f in run["findings"])
    assert code == 0
    assert not doc["stale_baseline"]


def test_a_page_size_is_a_flag(tmp_path):
    code, doc = run_json(tmp_path, "--page-size", "16K", "corpora/ffa/smoke.kcs")
    assert [run["target"]["release"].rsplit("-", 1)[1] for run in doc["runs"]] == ["16k"]
    assert code == 0
