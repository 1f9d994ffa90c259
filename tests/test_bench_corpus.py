"""The EL2 differential benchmark's corpus: issue 14's baseline files all exist (the
like-for-like row of `kconform bench` must not silently time fewer files), and the
benchmark binary refuses an entry of KCONFORM_BENCH_CORPUS that is not there, naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "harness" / "driver"))

from kconform.commands.bench import ISSUE14_BASELINE_FILES  # noqa: E402

BENCH = REPO / "build" / "default" / "harness" / "bench" / "kconform-bench-el2-4k"


def test_issue14_baseline_files_exist():
    for name in ISSUE14_BASELINE_FILES:
        assert (REPO / "corpora" / "ffa" / f"{name}.kcs").is_file(), name


def _bench(corpus: str) -> dict:
    env = dict(os.environ, KCONFORM_BENCH_CORPUS=corpus)
    r = subprocess.run([str(BENCH), "--benchmark_min_time=0.01", "--benchmark_format=json",
                        "--benchmark_filter=^BM_El2Differential/"], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["benchmarks"][0]


@pytest.mark.skipif(not BENCH.exists(), reason="the default build has no EL2 bench binary (no kernel tree)")
def test_bench_takes_files_and_names_a_missing_one():
    smoke, checks = REPO / "corpora" / "ffa" / "smoke.kcs", REPO / "corpora" / "ffa" / "checks.kcs"
    both = _bench(f"{smoke}:{checks}")
    one = _bench(str(smoke))
    assert not both.get("error_occurred") and not one.get("error_occurred")
    assert 0 < one["scenarios"] < both["scenarios"]
    missing = _bench(f"{smoke}:{REPO / 'corpora' / 'ffa' / 'no-such.kcs'}")
    assert missing.get("error_occurred")
    assert "no-such.kcs: no such file or folder" in missing["error_message"]
