"""End to end on the running kernel: the directed suite, and proof that the
oracle catches a target that gives wrong answers, naming the right rule."""

import json

import pytest

from conftest import kconform, needs_kvm

pytestmark = needs_kvm


def run_json(tmp_path, *extra):
    out = tmp_path / "report.json"
    r = kconform("run", "--target", "host", "--format", "json", "--output", str(out),
                 "--report-dir", str(tmp_path / "reports"), *extra)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(out.read_text())


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return run_json(tmp_path_factory.mktemp("clean"))


def test_directed_suite_runs_and_every_finding_is_reviewed(clean):
    code, doc = clean
    (run,) = doc["runs"]
    assert run["target"]["target"] == "host"
    assert run["counts"]["pass"] > 100
    new = [f for f in run["findings"] if not f["baselined_by"]]
    assert code == (1 if new else 0)
    assert not new, "unreviewed findings on this kernel: " + json.dumps(new, indent=1)


def test_every_rule_of_the_profile_is_exercised(clean):
    _, doc = clean
    (run,) = doc["runs"]
    idle = [r["id"] for r in run["rules"] if r["status"] == "not exercised"]
    profile = run["target"]["profile"]
    # Rules of the other profile cannot be exercised here; those are named "(write ABI)".
    idle = [i for i in idle if not ("write ABI" in next(r["summary"] for r in run["rules"] if r["id"] == i)
                                    and profile != "gmem-write")]
    assert not idle, f"rules no scenario exercises on {profile}: {idle}"




def _violations(report_root):
    (raw,) = list(report_root.rglob("verdicts-host.jsonl"))
    recs = [json.loads(line) for line in raw.read_text().splitlines()]
    return {(r["scenario"], r["op"]): r for r in recs if r.get("verdict") == "violation"}


@pytest.fixture(scope="module")
def clean_violations(tmp_path_factory):
    d = tmp_path_factory.mktemp("clean-raw")
    run_json(d)
    return _violations(d / "reports")


def _rules_of(expected):
    return sorted({e.rsplit("[", 1)[1].rstrip("]") for e in expected})


def _blamed(v):
    """The rules a violation must name (oracles/oracle.h): those on whose forbidden side
    the op was that license an allowed outcome, else those licensing an outcome of the
    observed kind, else every licensing rule; plus any content rule the re-read broke."""
    sides = dict((rule, side) for rule, side in v["rules"])
    licensed = [(e.split()[0], e.rsplit("[", 1)[1].rstrip("]")) for e in v["expected"]]
    rules = sorted({r for _, r in licensed if sides.get(r) == "forbidden"})
    if not rules:
        kind = v["observed"].split()[0]
        rules = sorted({r for k, r in licensed if k == kind}) or _rules_of(v["expected"])
    content = {r for r in v["violated"] if r.startswith("GMEM.CONTENT.")}
    return sorted(set(rules) | content)


# fault, and the ops where its lie can show: a faked mmap success the model may
# allow (mmap "may fail" cases) is caught at the first access to the mapping.
@pytest.mark.parametrize("fault,ops", [
    ("wrong-errno:create_gmem", {"create_gmem"}),
    ("wrong-errno:write", {"write"}),
    ("wrong-errno:fallocate", {"fallocate"}),
    ("wrong-content:load", {"load"}),
    ("succeed:mmap", {"mmap", "load", "store", "munmap"}),
    ("fail:fallocate", {"fallocate"}),
    ("succeed:bind", {"bind"}),
])
def test_a_lying_target_is_caught_with_the_right_rule(tmp_path, clean_violations, fault, ops):
    code, doc = run_json(tmp_path, "--fault", fault)
    assert code == 1, f"{fault}: the oracle did not catch the wrong answer"
    new = {k: v for k, v in _violations(tmp_path / "reports").items() if k not in clean_violations}
    assert new, f"{fault}: no violation beyond those of the clean run"
    for v in new.values():
        assert v["call"].split()[0] in ops, f"{fault} blamed an op it did not touch: {v['call']}"
        # The rules blamed are exactly those the outcome breaks (oracles/oracle.h).
        assert sorted(v["violated"]) == _blamed(v), v
