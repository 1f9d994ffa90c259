"""End to end on the running kernel: the directed suite, and proof that the
oracle catches a target that gives wrong answers, naming the right rule."""

import json

import pytest

from conftest import REPO, kconform, needs_kvm

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




def _verdict_records(tmp_path):
    (raw,) = list((tmp_path / "reports").rglob("verdicts-host.jsonl"))
    return [json.loads(line) for line in raw.read_text().splitlines()]


def _rules_of(expected):
    return sorted({e.rsplit("[", 1)[1].rstrip("]") for e in expected})


@pytest.mark.parametrize("fault,op", [
    ("wrong-errno:create_gmem", "create_gmem"),
    ("wrong-errno:write", "write"),
    ("wrong-errno:fallocate", "fallocate"),
    ("wrong-content:load", "load"),
    ("succeed:mmap", "mmap"),
    ("fail:fallocate", "fallocate"),
])
def test_a_lying_target_is_caught_with_the_right_rule(tmp_path, fault, op):
    code, doc = run_json(tmp_path, "--fault", fault)
    assert code == 1, f"{fault}: the oracle did not catch the wrong answer"
    records = _verdict_records(tmp_path)
    violations = [r for r in records if r.get("verdict") == "violation"]
    assert violations
    for v in violations:
        assert v["call"].split()[0] == op, f"{fault} blamed an op it did not touch: {v['call']}"
        # The rules blamed are exactly those that licensed the outcomes the model allowed.
        assert sorted(v["violated"]) == _rules_of(v["expected"])
