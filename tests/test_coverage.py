"""kconform coverage --target el2: coverage of the tree's ffa.c by each corpus,
measured by clang's source-based coverage (engine/coverage.py)."""

from __future__ import annotations

import json

from conftest import REPO, kconform

VERSION_ONLY = """kconform-scenario 1
abi ffa
name cov/version-only
requires page_4k
version
"""


def test_a_bigger_corpus_reaches_more_of_ffa_c_and_the_union_is_reported(tmp_path):
    small = tmp_path / "small.kcs"
    small.write_text(VERSION_ONLY)
    r = kconform("coverage", "--target", "el2", "--corpus", f"small={small}",
                 "--corpus", f"smoke={REPO / 'corpora' / 'ffa' / 'smoke.kcs'}", "--out", str(tmp_path / "out"),
                 "--format", "json", timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["file"] == "arch/arm64/kvm/hyp/nvhe/ffa.c"
    by = {c["corpus"]: c for c in doc["corpora"]}
    assert set(by) == {"small", "smoke", "all"}
    s, m, a = by["small"], by["smoke"], by["all"]
    assert 0 < s["lines"]["covered"] < m["lines"]["covered"] <= a["lines"]["covered"] <= a["lines"]["total"]
    assert s["lines"]["total"] == m["lines"]["total"] > 100
    assert m["branches"]["covered"] > s["branches"]["covered"]
    # version alone never reaches the memory-sharing path; the smoke suite does
    assert "do_ffa_mem_xfer" in s["unreached_functions"] or "do_ffa_mem_reclaim" in s["unreached_functions"]
    assert "do_ffa_mem_reclaim" not in m["unreached_functions"]
    assert list((tmp_path / "out").rglob("coverage.json"))


def test_an_unknown_corpus_is_a_clear_error(tmp_path):
    r = kconform("coverage", "--target", "el2", "--corpus", "nonsense", "--out", str(tmp_path))
    assert r.returncode == 2 and "flag --corpus: 'nonsense'" in r.stderr
    r = kconform("coverage", "--target", "el2", "--corpus", f"x={tmp_path / 'nope'}", "--out", str(tmp_path))
    assert r.returncode == 2 and "nope does not exist" in r.stderr
