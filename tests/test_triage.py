"""kconform triage: signatures, the structural minimiser (with a fake target whose
finding needs exactly some ops and argument values), the index, and end to end on
the EL2 target (stock Debian 7.3 ffa.c relays FFA_MEM_RECLAIM2: FFA.R2.NOT_IMPLEMENTED)."""

from __future__ import annotations

import json

import pytest

from conftest import kconform, reclaim2_on_stock
from kconform.core.errors import ToolError
from kconform.engine import triage
from kconform.engine.verdicts import Finding

HEAD = "kconform-scenario 1\nabi gmem\nname t\nrequires gmem\n"


def _finding(rule: str, call: str, op: int = 3) -> Finding:
    return Finding(rule=rule, target="host", release="x", scenario="t", file="f", index=0, op=op, call=call,
                   expected=[f"ok [{rule}]"], observed="err")


def fake_target(text: str) -> list:
    """A bug that needs a create_vm, a create_gmem of size >= 0x1000 and a pwrite with
    len > 0 after them; everything else is noise."""
    _, ops = triage.split_scenario(text)
    if not ops or ops[0] != "create_vm":
        raise ToolError("slot 0 is not a VM")  # as an invalid scenario would
    sizes = [int(o.split("size=")[1].split()[0], 0) if "size=" in o else 0 for o in ops
             if o.startswith("create_gmem")]
    lens = [o for o in ops if o.startswith("pwrite") and "len=" in o
            and int(o.split("len=")[1].split()[0], 0) > 0]
    if sizes and sizes[0] >= 0x1000 and lens:
        return [_finding("GMEM.WRITE.ALIGN", lens[0]), _finding("GMEM.WRITE.EOF", lens[0])]
    return []


NOISY = HEAD + """create_vm
create_gmem vm=0 size=0x200000 flags=MMAP
fallocate gmem=0 mode=KEEP_SIZE offset=0 len=0x1000
load map=0 offset=0 len=0x10
pwrite gmem=0 offset=0x800 len=0x3000 pattern=7
close gmem=0
"""


def test_signature_is_kind_rules_and_op_kind_not_the_index():
    fs = [_finding("B.RULE", "pwrite gmem=0", op=4), _finding("A.RULE", "pwrite gmem=0", op=4),
          _finding("C.RULE", "close gmem=0", op=7)]
    assert triage.signature_of(fs) == ["violation A.RULE,B.RULE pwrite", "violation C.RULE close"]
    moved = [dataclass_replace(f, op=f.op - 2) for f in fs]
    assert triage.signature_of(moved) == triage.signature_of(fs)


def dataclass_replace(f, **kw):
    import dataclasses
    return dataclasses.replace(f, **kw)


def test_minimise_keeps_only_what_the_signature_needs():
    sig = "violation GMEM.WRITE.ALIGN,GMEM.WRITE.EOF pwrite"
    assert triage.signature_of(fake_target(NOISY)) == [sig]
    m = triage.minimise(NOISY, sig, fake_target, budget_s=30)
    _, ops = triage.split_scenario(m.text)
    assert [o.split()[0] for o in ops] == ["create_vm", "create_gmem", "pwrite"], m.text
    # Arguments: the optional ones dropped, numbers as small as the bug allows.
    assert ops[1] == "create_gmem size=0x1000", ops
    assert ops[2] == "pwrite len=1", ops
    assert (m.ops_before, m.ops_after) == (6, 3) and m.size_after < m.size_before and m.complete
    assert triage.signature_of(fake_target(m.text)) == [sig]


def test_minimise_refuses_a_finding_that_does_not_reproduce():
    with pytest.raises(ToolError, match="does not reproduce"):
        triage.minimise(HEAD + "create_vm\n", "violation X pwrite", fake_target)


def test_minimise_stops_at_its_budget_with_what_it_has():
    calls = []

    def slow(text):
        calls.append(text)
        return fake_target(text)
    sig = triage.signature_of(fake_target(NOISY))[0]
    m = triage.minimise(NOISY, sig, slow, budget_s=30, max_runs=3)
    assert m.runs == 3 and not m.complete
    assert triage.signature_of(fake_target(m.text)) == [sig]  # whatever it kept still shows it


def test_reproduce_counts_each_run():
    flip = iter([True, False, True])
    sig = triage.signature_of(fake_target(NOISY))[0]
    got = triage.reproduce(NOISY, sig, lambda t: fake_target(t) if next(flip) else [], 3)
    assert got == [True, False, True]


def test_the_index_groups_a_signature_across_runs(tmp_path):
    idx = tmp_path / "index.json"
    e1 = triage.record(idx, "host-6.18", "violation A pwrite", "a.kcs#0", "a.min.kcs", "2026-01-01T00:00:00")
    e2 = triage.record(idx, "host-6.18", "violation A pwrite", "b.kcs#0", None, "2026-01-02T00:00:00")
    other = triage.record(idx, "el2-x", "violation A pwrite", "c.kcs#0", None, "2026-01-03T00:00:00")
    assert e1["count"] == 1 and e2["count"] == 2 and other["count"] == 1
    doc = json.loads(idx.read_text())
    e = doc["signatures"]["violation A pwrite host-6.18"]
    assert (e["first_seen"], e["last_seen"]) == ("2026-01-01T00:00:00", "2026-01-02T00:00:00")
    assert e["sources"] == ["a.kcs#0", "b.kcs#0"] and e["minimised"] == ["a.min.kcs"]


def test_a_corrupt_index_is_an_error_naming_it(tmp_path):
    idx = tmp_path / "index.json"
    idx.write_text("{not json")
    with pytest.raises(ToolError, match="index.json: not a triage index"):
        triage.record(idx, "b", "s", "src", None, "now")
    assert idx.read_text() == "{not json"  # nothing lost


def test_spec_clause_is_quoted_from_the_models_spec():
    path, clause = triage.spec_clause("SPEC.md R2:OPTIONAL")
    assert path == "models/ffa/SPEC.md" and clause.startswith("- **R2:OPTIONAL**") and "NOT_SUPPORTED" in clause
    assert triage.spec_clause("ours") == ("", "")


RECLAIM2_ON_STOCK = reclaim2_on_stock("triage/reclaim2-on-stock")


def test_triage_end_to_end_on_stock_ffa_c(tmp_path):
    f = tmp_path / "finding.kcs"
    f.write_text(RECLAIM2_ON_STOCK)
    idx = tmp_path / "index.json"
    r = kconform("triage", "--target", "el2", "--out", str(tmp_path / "out"), "--index", str(idx),
                 "--format", "json", str(f), timeout=1200)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-3000:]
    doc = json.loads(r.stdout)
    (entry,) = doc["triage"]
    (s,) = entry["signatures"]
    assert s["signature"] == "violation FFA.R2.NOT_IMPLEMENTED mem_reclaim2"
    assert s["reproduced"] == 3 and s["deterministic"]
    assert s["minimised"]["ops_after"] < s["minimised"]["ops_before"] == 7
    (rule,) = s["explanation"]["rules"]
    assert rule["id"] == "FFA.R2.NOT_IMPLEMENTED" and "R2:OPTIONAL" in rule["clause"]
    # The lines of ffa.c the diverging op ran: stock ffa.c passes 0xC4000091 through to EL3.
    lines = s["explanation"]["kernel_lines"]
    assert any("ffa_call_supported(func_id)" in k["text"] for k in lines), lines
    assert any("Pass through" in k["text"] for k in lines), lines
    assert not any("do_ffa_mem_reclaim" in k["text"] for k in lines), lines
    saved = tmp_path / "out"
    mins = list(saved.rglob("*.min.kcs"))
    assert len(mins) == 1 and "mem_reclaim2" in mins[0].read_text()
    assert f.read_text() == RECLAIM2_ON_STOCK  # the input is never changed
    # The minimised reproducer shows the same signature when run, and grouping counts it.
    r2 = kconform("triage", "--target", "el2", "--out", str(tmp_path / "out"), "--index", str(idx),
                  "--runs", "1", "--format", "json", str(mins[0]), timeout=600)
    assert r2.returncode == 1, r2.stderr[-2000:]
    (s2,) = json.loads(r2.stdout)["triage"][0]["signatures"]
    assert s2["signature"] == s["signature"] and s2["group"]["count"] == 2


def test_a_missing_finding_file_is_a_clear_error(tmp_path):
    r = kconform("triage", str(tmp_path / "nope.kcs"))
    assert r.returncode == 2 and "nope.kcs: no such finding file" in r.stderr


def test_run_minimises_its_new_findings_within_its_budget(tmp_path):
    """`run` on stock 7.3 with an empty baseline: the RECLAIM2 finding is new, so run
    minimises it beside its reproducer and every report form names the minimised file."""
    f = tmp_path / "finding.kcs"
    f.write_text(RECLAIM2_ON_STOCK)
    empty = tmp_path / "baseline.json"
    empty.write_text('{"format": 1, "findings": []}\n')
    r = kconform("run", "--target", "el2", "--page-size", "4K", "--baseline", str(empty), "--triage-budget", "60",
                 "--report-dir", str(tmp_path / "out"), "--format", "json", str(f), timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    fs = [x for x in doc["runs"][0]["findings"] if x["rule"] == "FFA.R2.NOT_IMPLEMENTED"]
    assert fs and fs[0]["minimised"].endswith(".min.kcs"), fs
    mini = (tmp_path / "out").rglob("*.min.kcs")
    (m,) = list(mini)
    assert len([ln for ln in m.read_text().splitlines() if ln and not ln.startswith("#")]) < 11
    html = next((tmp_path / "out").rglob("report.html")).read_text()
    assert "minimised scenario" in html and "FFA.R2.NOT_IMPLEMENTED" in html
