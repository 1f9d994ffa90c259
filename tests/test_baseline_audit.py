"""`kconform baseline audit` (engine/baseline_audit.py) on report folders written here:
what each entry absorbed in the last run of each target build, and its flags (wider
than what it absorbed, never hit, scenario "*" outside kind limit, stale code quotes)."""

import json
import os

import pytest

from conftest import kconform
from kconform.engine import baseline_audit as audit
from kconform.engine import report
from kconform.engine.verdicts import Finding, TargetRun


def audit_is_clean(tmp_path, runs):
    """`kconform baseline audit` on a run's report folder exits 0 (CI, issue 38; the whole-corpus
    e2e tests call it on their own run): no scenario "*" entry outside kind limit, no code quote
    the cached trees no longer hold."""
    r = kconform("baseline", "audit", "--report-dir", str(tmp_path / "reports"), "--format", "json")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["runs"]) == runs and doc["counts"]["error"] == 0
    assert doc["counts"]["quotes"]["ok"] > 0  # the cached trees were there to check the quotes against
    return doc


def entry(**kw):
    e = {"rule": "FFA.A", "target": "spmc", "release": "tf-a-*", "scenario": "ffa/share/*", "kind": "deviation",
         "reason": "triaged", "date": "2026-12-05"}
    e.update(kw)
    return e


def run(release="tf-a-2.12.1-4k", findings=(), ran=(), forbidden=()):
    r = TargetRun(target={"target": "spmc", "release": release, "profile": "spmc-4k", "caps": {}})
    for rule, scenario in findings:
        r.findings.append(Finding(rule=rule, target="spmc", release=release, scenario=scenario, file="f.kcs",
                                  index=0, op=1, call="mem_share", expected=["ok [FFA.A]"], observed="error"))
        r.rules[rule].violations += 1
    for rule in forbidden:
        r.rules[rule].forbidden += 1
    r.ran.update(ran)
    return r


def folder(root, name, *runs, incomplete=False, mtime=None):
    d = root / name
    d.mkdir(parents=True)
    (d / "report.json").write_text(report.to_json(list(runs), [], [], 0))
    if incomplete:
        (d / "INCOMPLETE").write_text("{}")
    if mtime:
        os.utime(d / "report.json", (mtime, mtime))
    return d


@pytest.fixture
def trees(tmp_path):
    src = tmp_path / "trees" / "debian-src-fw-1.0" / "src"
    src.mkdir(parents=True)
    lines = ["/* x */"] * 60
    lines[9] = "static int check_obj(struct obj *o, int n)"
    lines[10] = "{"
    lines[12] = "\tif (o->in_use) /* 'Overlapping mem regions' */"
    lines[30] = "}"
    (src / "shmem.c").write_text("\n".join(lines) + "\n")
    return audit.Trees(tmp_path / "trees")


def audit_of(entries, root, trees):
    runs, notes = audit.last_runs(audit.report_folders([root]))
    return {r.index: r for r in audit.audit(entries, runs, trees)}, runs, notes


def codes(result):
    return [p.code for p in result.problems]


def test_absorbed_scenarios_and_the_narrowest_patterns_that_cover_them(tmp_path, trees):
    ran = ["ffa/share/a-4k", "ffa/share/b-4k", "ffa/share/c-x-4k", "ffa/share/c-y-4k", "ffa/lend/a-4k"]
    folder(tmp_path / "out", "1", run(findings=[("FFA.A", "ffa/share/a-4k"), ("FFA.A", "ffa/share/c-x-4k"),
                                                 ("FFA.A", "ffa/share/c-y-4k")], ran=ran))
    entries = [entry(), entry(scenario="ffa/share/c-*"), entry(rule="FFA.B", scenario="*", kind="limit")]
    results, runs, _ = audit_of(entries, tmp_path / "out", trees)
    assert [ar.label for ar in runs] == ["spmc tf-a-2.12.1-4k"]
    wide = results[0]
    assert wide.absorbed == {"spmc tf-a-2.12.1-4k": {"findings": 3, "scenarios": [
        "ffa/share/a-4k", "ffa/share/c-x-4k", "ffa/share/c-y-4k"]}}
    assert codes(wide) == ["wider"] and wide.proposal == ["ffa/share/a-*", "ffa/share/c-*"]
    assert "ffa/share/b-4k" in wide.problems[0].message
    # A later entry that matches what an earlier one took only shadows it; nothing else ran there.
    assert results[1].absorbed == {} and results[1].shadowed == 2 and codes(results[1]) == ["never-hit"]
    # A limit may accept every scenario; its rule never came up on its forbidden side: not covered.
    assert codes(results[2]) == [] and results[2].covered_by == []
    assert audit.exit_code(list(results.values()), strict=False) == 0
    assert audit.exit_code(list(results.values()), strict=True) == 1


def test_a_scenario_star_entry_is_an_error_unless_a_limit(tmp_path, trees):
    folder(tmp_path / "out", "1", run(findings=[("FFA.A", "ffa/share/a-4k"), ("FFA.A", "ffa/share/a-16k")],
                                      ran=["ffa/share/b-4k"]))
    results, _, _ = audit_of([entry(scenario="*"), entry(scenario="*", kind="limit")], tmp_path / "out", trees)
    assert codes(results[0]) == ["scenario-star", "wider"]
    assert results[0].problems[0].severity == "error" and "ffa/share/a-*" in results[0].problems[0].message
    assert audit.exit_code([results[0]], strict=False) == 1
    assert codes(results[1]) == ["never-hit"]  # a limit may; it absorbed nothing: the first took both


def test_never_hit_only_in_a_run_that_could_have_hit_it(tmp_path, trees):
    folder(tmp_path / "out", "1", run(ran=["ffa/share/a-4k"]), run(release="tf-a-2.12.1-16k"))
    results, _, _ = audit_of([entry(), entry(release="op-tee-*"), entry(scenario="ffa/lend/*")],
                             tmp_path / "out", trees)
    assert codes(results[0]) == ["never-hit"] and results[0].covered_by == ["spmc tf-a-2.12.1-4k"]
    assert codes(results[1]) == [] and codes(results[2]) == []  # no such run; no such scenario ran


def test_only_the_last_finished_run_of_each_target_build_counts(tmp_path, trees):
    old = run(findings=[("FFA.A", "ffa/share/a-4k")])
    folder(tmp_path / "out", "20261201-000000", old, mtime=1_000_000)
    folder(tmp_path / "out", "20261202-000000", run(ran=["ffa/share/a-4k"]), mtime=2_000_000)
    folder(tmp_path / "out", "20261203-000000", old, incomplete=True, mtime=3_000_000)
    results, runs, notes = audit_of([entry()], tmp_path / "out", trees)
    assert [ar.folder.name for ar in runs] == ["20261202-000000"]
    assert codes(results[0]) == ["never-hit"]
    assert any("20261203-000000" in n and "INCOMPLETE" in n for n in notes)


@pytest.mark.parametrize("reason,status", [
    ("check_obj() refuses it (src/shmem.c:13)", "ok"),                   # near the line
    ("check_obj() (src/shmem.c:25-26)", "ok"),                           # in that function
    ("refused ('Overlapping mem regions', shmem.c:12)", "ok"),           # a bare file name, a string
    ("check_obj() (src/shmem.c:13, and :14)", "ok"),                     # a second line of the same file
    ("check_obj() refuses it (src/shmem.c:45)", "stale"),                # moved: no longer there
    ("o->in_use is tested (src/shmem.c:50)", "stale"),
    ("check_obj() (src/shmem.c:70-72)", "stale"),                        # past the end of the file
    ("nothing of the file named (src/shmem.c:40)", "ok"),                # cannot say: not stale
    ("check_obj() (src/other.c:13)", "unchecked"),                       # no cached tree holds it
])
def test_code_quotes_are_checked_against_the_cached_trees(trees, reason, status):
    qs = audit.quotes(reason)
    assert qs
    assert {audit.check_quote(trees, reason, q, qs, "tf-a-*")["status"] for q in qs} == {status}


def test_a_version_beside_a_quote_picks_that_kernel_tree(tmp_path):
    for version, line in (("6.12.117", 3), ("7.3.4", 30)):
        f = tmp_path / "trees" / f"debian-{version}" / "arch" / "ffa.c"
        f.parent.mkdir(parents=True)
        body = ["x"] * 40
        body[line - 1] = "static void do_ffa_mem_reclaim(int x)"
        f.write_text("\n".join(body))
    trees = audit.Trees(tmp_path / "trees")
    for reason, release, status in (("do_ffa_mem_reclaim() (6.12 arch/ffa.c:4)", "*", "ok"),
                                    ("do_ffa_mem_reclaim() (arch/ffa.c:4)", "debian-6.12.*", "ok"),
                                    ("do_ffa_mem_reclaim() (ffa.c:31 in 7.3)", "*", "ok"),
                                    ("do_ffa_mem_reclaim() (ffa.c:4 in 7.3)", "*", "stale"),
                                    ("do_ffa_mem_reclaim() (7.2 arch/ffa.c:4)", "*", "unchecked")):
        qs = audit.quotes(reason)
        assert audit.check_quote(trees, reason, qs[0], qs, release)["status"] == status, reason


def test_the_command_exits_1_on_an_error_and_names_every_entry(tmp_path, trees):
    out = tmp_path / "out"
    folder(out, "1", run(findings=[("FFA.A", "ffa/share/a-4k")], ran=["ffa/share/b-4k"]))
    b = tmp_path / "known.json"
    rules = "FFA.A"
    good = [entry(rule=rules, scenario="ffa/share/a-*", reason="check_obj() (src/shmem.c:12)")]
    b.write_text(json.dumps({"format": 1, "findings": good}))
    args = ["baseline", "audit", "--report-dir", str(out), "--baseline", str(b), "--trees", str(tmp_path / "trees")]
    r = kconform(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[0] FFA.A on spmc tf-a-* (ffa/share/a-*), deviation" in r.stdout
    assert "spmc tf-a-2.12.1-4k: 1 finding(s) in 1 scenario(s): ffa/share/a-4k" in r.stdout
    assert r.stdout.splitlines()[-1].startswith("kconform: baseline audit passes: 0 error(s)")
    b.write_text(json.dumps({"format": 1, "findings": good + [entry(scenario="*", reason="x (src/shmem.c:55)")]}))
    r = kconform(*args, "--format", "json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["exit"] == 1 and doc["counts"]["scenario-star"] == 1
    assert [p["code"] for p in doc["entries"][1]["problems"]] == ["scenario-star", "never-hit"]  # the first took it
    assert doc["entries"][0]["absorbed"]["spmc tf-a-2.12.1-4k"]["scenarios"] == ["ffa/share/a-4k"]


def test_an_entry_without_a_kind_is_named_with_its_file_and_index(tmp_path):
    b = tmp_path / "known.json"
    e = entry()
    del e["kind"]
    b.write_text(json.dumps({"format": 1, "findings": [entry(), e]}))
    for args in (["baseline", "audit", "--report-dir", str(tmp_path)],
                 ["run", "--target", "host", "--report-dir", str(tmp_path / "r")]):
        r = kconform(*args, "--baseline", str(b))
        assert r.returncode == 2, r.stderr
        assert f"{b}: findings[1]: field 'kind': required, one of bug, deviation, limit, robustness" in r.stderr
