"""The stock ffa.c mutant family (targets/el2/stock-mutants, selftest/stock.py), without builds:
the patches are single-line and say what they weaken, the table and the files agree,
waiting.json is checked, a waiting mutant does not fail the matrix but a survivor does.
The family's end-to-end run is in test_selftest.py."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO

STOCK = REPO / "targets" / "el2" / "stock-mutants"


def _patches():
    return sorted(STOCK.glob("[0-9][0-9]-*.patch"))


def test_at_least_fifteen_mutants_each_one_line_with_what_it_weakens():
    found = _patches()
    assert len(found) >= 15
    areas = set()
    for p in found:
        text = p.read_text()
        head = text.splitlines()[0]
        m = re.match(rf"kconform stock-ffa\.c mutant {re.escape(p.stem)} \((\w+)\): weakens .+", head)
        assert m, f"{p.name}: first line must say what it weakens: {head!r}"
        areas.add(m.group(1))
        body = text[text.index("\n--- a/"):].splitlines()
        minus = [x for x in body if x.startswith("-") and not x.startswith("---")]
        plus = [x for x in body if x.startswith("+") and not x.startswith("+++")]
        assert len(minus) == 1 and len(plus) <= 1, f"{p.name}: not a single-line change"
        assert "+++ b/arch/arm64/kvm/hyp/nvhe/ffa.c" in text
    assert {"send", "fragment", "reclaim", "mailbox", "version"} <= areas


def test_the_table_and_the_patch_files_agree():
    import importlib.util
    spec = importlib.util.spec_from_file_location("stock_mutants", STOCK / "mutants.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert [m[0] for m in mod.MUTANTS] == [p.stem for p in _patches()]
    with pytest.raises(SystemExit, match="exactly one line"):
        mod.mutate("a\nb\n", "x", "a\nb\n", "A\nB\n")
    with pytest.raises(SystemExit, match="occurs 0 times"):
        mod.mutate("a\n", "x", "z\n", "y\n")


def test_waiting_names_real_mutants_with_reasons(tmp_path, monkeypatch):
    from kconform.core.errors import ToolError
    from kconform.selftest import stock
    listed = stock.waiting()
    assert all(reason for reason in listed.values())
    bad = tmp_path / "waiting.json"
    monkeypatch.setattr(stock, "WAITING", bad)
    bad.write_text(json.dumps({"mutants": {"99-nothing": "someone"}}))
    with pytest.raises(ToolError, match="no mutant 99-nothing"):
        stock.waiting()
    bad.write_text(json.dumps({"mutants": {_patches()[0].stem: ""}}))
    with pytest.raises(ToolError, match="field 'mutants'"):
        stock.waiting()


def test_a_waiting_mutant_passes_a_survivor_fails():
    from kconform.selftest.mutants import exit_code
    ok = {"controls": {"c": {"ok": True}}, "killed": 1, "waiting": 1, "total": 2,
          "mutants": [{"status": "killed"}, {"status": "waiting"}]}
    assert exit_code({"ffa-stock": ok}) == 0
    bad = dict(ok, waiting=0, mutants=[{"status": "killed"}, {"status": "survived"}])
    assert exit_code({"ffa-stock": bad}) == 1


def test_the_suite_is_the_directed_and_z3_corpora():
    from kconform.selftest import stock
    files = stock.suite_files()
    assert any("/corpora/ffa/checks.kcs" in f for f in files)
    assert any("/corpora/z3/ffa/" in f for f in files)
    assert all("/corpora/ffa/" in f or "/corpora/z3/ffa/" in f for f in files)
