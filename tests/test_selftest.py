"""`kconform selftest mutants`: the RECLAIM2 mutation self-test, end to end.

Needs debian:7.3 in the cache (or the network) and clang; skips otherwise.
The full matrix (28 mutants, about 3 minutes on 2 cores, see
targets/el2/reclaim2/MUTANTS.md) runs too: it fits CI's budget, and a mutant
that survives is a hole in the suite that CI must show.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import REPO, kconform, kill_matrix


def _tree_available() -> bool:
    from kconform.sources import tree_fetch
    try:
        tree_fetch.fetch("debian:7.3", progress=lambda m: None)
        return bool(shutil.which("clang"))
    except Exception:  # noqa: BLE001 - no network, no cache: skip
        return False


pytestmark = pytest.mark.skipif(not _tree_available(), reason="debian:7.3 tree or clang not available")


def _matrix(tmp_path):
    return kill_matrix(tmp_path, "ffa")


def test_two_mutants_are_killed_with_their_rules(tmp_path):
    r = kconform("selftest", "mutants", "--abi", "ffa", "--only", "09,21", "--format", "json",
                 "--report-dir", str(tmp_path),
                 timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = _matrix(tmp_path)
    assert m["controls"]["stock"]["ok"] and m["controls"]["reference"]["ok"]
    by = {x["mutant"][:2]: x for x in m["mutants"]}
    assert set(by) == {"09", "21"}
    assert by["09"]["status"] == "killed" and "FFA.R2.TOTAL" in by["09"]["rules"]  # hook H1
    assert by["21"]["status"] == "killed" and "FFA.R2.UNSHARE" in by["21"]["rules"]
    assert all(x["time_to_kill"] is not None for x in m["mutants"])


def test_unknown_mutant_is_a_tool_error(tmp_path):
    r = kconform("selftest", "mutants", "--abi", "ffa", "--only", "99", "--report-dir", str(tmp_path), timeout=1200)
    assert r.returncode == 2
    assert "no mutant 99" in r.stderr


def test_only_needs_an_abi(tmp_path):
    r = kconform("selftest", "mutants", "--only", "01", "--report-dir", str(tmp_path), timeout=60)
    assert r.returncode == 2
    assert "give --abi ffa or --abi gmem" in r.stderr
    assert not list(tmp_path.iterdir())  # refused before any report folder was made


def test_every_mutant_is_killed(tmp_path):
    r = kconform("selftest", "mutants", "--abi", "ffa", "--format", "json", "--report-dir", str(tmp_path), timeout=3000)
    m = _matrix(tmp_path)
    survivors = [x["mutant"] for x in m["mutants"] if x["status"] != "killed"]
    assert r.returncode == 0 and not survivors, f"survivors: {survivors}\n{r.stderr[-2000:]}"
    assert m["total"] == len(list((REPO / "targets/el2/reclaim2/mutants").glob("[0-9][0-9]-*.patch")))
