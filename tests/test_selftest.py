"""`kconform selftest mutants --abi ffa`: the RECLAIM2 and stock ffa.c mutation self-tests, end to end.

Needs debian:7.3 in the cache (or the network) and clang; skips otherwise.
CI runs a slice of each family (R2_SLICE, STOCK_SLICE), once for every test here
(kill_runs); KCONFORM_NIGHTLY=1 the full matrices (RECLAIM2: 28 mutants, see
targets/el2/reclaim2/mutants/MUTANTS.md; stock: 26 single-line mutants of 7.3's
ffa.c, targets/el2/stock-mutants/README.md). A mutant that survives is a hole in
the suite that CI must show.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import REPO, default_tree_missing, is_nightly, kconform, kill_matrix


def _missing() -> str | None:
    """Why the mutants cannot be built here: the tree cannot be fetched (TreeError) or
    clang is not installed; a build that fails is the run's failure, not this."""
    return default_tree_missing() or (None if shutil.which("clang") else "clang is not installed")


_WHY = _missing()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


def _matrix(tmp_path):
    return kill_matrix(tmp_path, "ffa")


def test_two_mutants_are_killed_with_their_rules(kill_runs):
    r, m = kill_runs["r2"], kill_runs["r2_matrix"]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert m["controls"]["stock"]["ok"] and m["controls"]["reference"]["ok"]
    by = {x["mutant"][:2]: x for x in m["mutants"]}
    assert {"09", "21"} <= set(by)
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


def test_two_stock_mutants_are_killed_by_the_corpora(kill_runs):
    """11 crashes on a share with no TX mapped (mailbox.kcs); 08 succeeds a share with only w3 set
    (checks.kcs, MEM:ARGS): a new finding against the stock tree's own."""
    r, m = kill_runs["stock"], kill_runs["stock_matrix"]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert m["controls"]["stock-background"]["ok"]
    by = {x["mutant"][:2]: x for x in m["mutants"]}
    assert by["11"]["status"] == "killed" and by["11"]["kind"] == "CRASH"
    assert by["08"]["status"] == "killed" and "FFA.PROXY.MEM_ARGS" in by["08"]["rules"], by["08"]
    assert "ffa/checks/share-address-only" in by["08"]["first"]


# Without KCONFORM_NIGHTLY, a fixed slice of each family (every fourth mutant, and the
# stock 08 and 11 that test_two_stock_mutants_are_killed_by_the_corpora names; the
# RECLAIM2 09 and 21 of test_two_mutants_are_killed_with_their_rules are in the slice):
# the whole matrix takes minutes of builds and runs and is the nightly run's. One run
# per family serves every test of this file (each run builds and runs its controls once).
R2_SLICE = ("01", "05", "09", "13", "17", "21", "25")
STOCK_SLICE = ("02", "06", "08", "10", "11", "14", "18", "22")


@pytest.fixture(scope="module")
def kill_runs(tmp_path_factory):
    """The kill matrix, once for this file: RECLAIM2 and stock, the slices (CI) or every
    mutant (KCONFORM_NIGHTLY=1, one run of both families)."""
    root = tmp_path_factory.mktemp("selftest")
    if is_nightly():
        r = kconform("selftest", "mutants", "--abi", "ffa", "--format", "json", "--report-dir", str(root),
                     timeout=3000)
        return {"r2": r, "stock": r, "r2_matrix": _matrix(root),
                "stock_matrix": kill_matrix(root, "ffa", "ffa-stock")}
    r = kconform("selftest", "mutants", "--abi", "ffa", "--family", "reclaim2", "--only", ",".join(R2_SLICE),
                 "--format", "json", "--report-dir", str(root / "r2"), timeout=3000)
    r_s = kconform("selftest", "mutants", "--abi", "ffa", "--family", "stock", "--only", ",".join(STOCK_SLICE),
                   "--format", "json", "--report-dir", str(root / "stock"), timeout=3000)
    return {"r2": r, "stock": r_s, "r2_matrix": _matrix(root / "r2"),
            "stock_matrix": kill_matrix(root / "stock", "ffa", "ffa-stock")}


def test_every_mutant_is_killed(kill_runs):
    r2_patches = sorted((REPO / "targets/el2/reclaim2/mutants").glob("[0-9][0-9]-*.patch"))
    stock_patches = sorted((REPO / "targets/el2/stock-mutants").glob("[0-9][0-9]-*.patch"))
    if is_nightly():
        want_r2, want_stock = len(r2_patches), len(stock_patches)
    else:
        assert all(any(p.name.startswith(n + "-") for p in r2_patches) for n in R2_SLICE)
        assert all(any(p.name.startswith(n + "-") for p in stock_patches) for n in STOCK_SLICE)
        want_r2, want_stock = len(R2_SLICE), len(STOCK_SLICE)
    m, s = kill_runs["r2_matrix"], kill_runs["stock_matrix"]
    rc = kill_runs["r2"].returncode or kill_runs["stock"].returncode
    err = kill_runs["r2"].stderr + ("" if kill_runs["stock"] is kill_runs["r2"] else kill_runs["stock"].stderr)
    survivors = [x["mutant"] for x in m["mutants"] if x["status"] != "killed"]
    assert rc == 0 and not survivors, f"survivors: {survivors}\n{err[-2000:]}"
    assert m["total"] == want_r2
    stock_survivors = [x["mutant"] for x in s["mutants"] if x["status"] not in ("killed", "waiting")]
    assert not stock_survivors and not s["stale_waiting"], (stock_survivors, s["stale_waiting"])
    assert s["total"] == want_stock
    assert s["killed"] >= (15 if is_nightly() else len(STOCK_SLICE) - 1)
