"""`kconform selftest mutants --abi ffa`: the RECLAIM2 and stock ffa.c mutation self-tests, end to end.

Needs debian:7.3 in the cache (or the network) and clang; skips otherwise.
The full matrices run too (RECLAIM2: 28 mutants, about 3 minutes on 2 cores, see
targets/el2/reclaim2/mutants/MUTANTS.md; stock: 25 single-line mutants of 7.3's
ffa.c, about 5 minutes, targets/el2/stock-mutants/README.md): they fit CI's
budget, and a mutant that survives is a hole in the suite that CI must show.
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
    r = kconform("selftest", "mutants", "--abi", "ffa", "--family", "reclaim2", "--only", "09,21", "--format", "json",
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
    r = kconform("selftest", "mutants", "--abi", "ffa", "--family", "reclaim2", "--only", "99",
                 "--report-dir", str(tmp_path), timeout=1200)
    assert r.returncode == 2
    assert "no mutant 99" in r.stderr


def test_only_needs_an_abi(tmp_path):
    r = kconform("selftest", "mutants", "--only", "01", "--report-dir", str(tmp_path), timeout=60)
    assert r.returncode == 2
    assert "give --abi ffa or --abi gmem" in r.stderr
    assert not list(tmp_path.iterdir())  # refused before any report folder was made


def test_only_needs_a_family_for_ffa(tmp_path):
    r = kconform("selftest", "mutants", "--abi", "ffa", "--only", "01", "--report-dir", str(tmp_path), timeout=60)
    assert r.returncode == 2
    assert "give --family reclaim2 or --family stock" in r.stderr
    assert not list(tmp_path.iterdir())


def test_family_must_belong_to_the_abi(tmp_path):
    r = kconform("selftest", "mutants", "--abi", "gmem", "--family", "stock", "--report-dir", str(tmp_path), timeout=60)
    assert r.returncode == 2
    assert "flag --family: stock is not a family of --abi gmem" in r.stderr


def test_two_stock_mutants_are_killed_by_the_corpora(tmp_path):
    """11 crashes on a share with no TX mapped (mailbox.kcs); 08 succeeds a share with only w3 set
    (checks.kcs, MEM:ARGS): a new finding against the stock tree's own."""
    r = kconform("selftest", "mutants", "--abi", "ffa", "--family", "stock", "--only", "08,11", "--format", "json",
                 "--report-dir", str(tmp_path), timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = kill_matrix(tmp_path, "ffa", "ffa-stock")
    assert m["controls"]["stock-background"]["ok"]
    by = {x["mutant"][:2]: x for x in m["mutants"]}
    assert by["11"]["status"] == "killed" and by["11"]["kind"] == "CRASH"
    assert by["08"]["status"] == "killed" and "FFA.PROXY.MEM_ARGS" in by["08"]["rules"], by["08"]
    assert "ffa/checks/share-address-only" in by["08"]["first"]


def test_every_mutant_is_killed(tmp_path):
    r = kconform("selftest", "mutants", "--abi", "ffa", "--format", "json", "--report-dir", str(tmp_path), timeout=3000)
    m = _matrix(tmp_path)
    survivors = [x["mutant"] for x in m["mutants"] if x["status"] != "killed"]
    assert r.returncode == 0 and not survivors, f"survivors: {survivors}\n{r.stderr[-2000:]}"
    assert m["total"] == len(list((REPO / "targets/el2/reclaim2/mutants").glob("[0-9][0-9]-*.patch")))
    s = kill_matrix(tmp_path, "ffa", "ffa-stock")
    stock_survivors = [x["mutant"] for x in s["mutants"] if x["status"] not in ("killed", "waiting")]
    assert not stock_survivors and not s["stale_waiting"], (stock_survivors, s["stale_waiting"])
    assert s["total"] == len(list((REPO / "targets/el2/stock-mutants").glob("[0-9][0-9]-*.patch")))
    assert s["killed"] >= 15
