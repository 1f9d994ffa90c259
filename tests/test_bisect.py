"""kconform bisect (commands/bisect.py, engine/bisect.py): the pure parts with fakes,
and end to end on a local git tree made from Debian's 7.3 tree with a stock ffa.c
mutant committed between clean commits (issue 15: the bisect names that commit)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, kconform

from kconform.core.errors import ToolError
from kconform.engine import bisect as bis
from kconform.engine.verdicts import Finding

MUTANT = REPO / "targets" / "el2" / "stock-mutants" / "02-map-rx-alignment-unchecked.patch"
FFA = "arch/arm64/kvm/hyp/nvhe/ffa.c"
# The stock mutant 02's first kill (targets/el2/stock-mutants/README.md), as a finding file.
FINDING = """\
kconform-scenario 1
abi ffa
name ffa/checks/map-rx-unaligned-4k
requires page_4k
version version=V1_1
rxtx_map tx=0x80000000 rx=0x80001800 pages=1
"""
SIGNATURE = "violation FFA.MBOX.MAP_ARGS rxtx_map"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_git_tree(root: Path) -> tuple[Path, list[str]]:
    """A git tree from the cached Debian 7.3 tree: C0 the tree, C1 a comment in ffa.c
    (clean), C2 the stock mutant 02 (the bug), C3 another comment (clean).
    Returns (tree, [C0, C1, C2, C3])."""
    from kconform.sources import tree_fetch
    src = tree_fetch.fetch("debian:7.3", progress=lambda m: None)
    tree = root / "linux"
    subprocess.run(["cp", "-r", str(src), str(tree)], check=True)
    (tree / ".kconform-tree.json").unlink(missing_ok=True)
    git(tree, "init", "-q")
    git(tree, "config", "user.email", "test@kconform")
    git(tree, "config", "user.name", "kconform test")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "C0: Debian 7.3 tree")
    with open(tree / FFA, "a") as fh:
        fh.write("/* kconform test: a comment only */\n")
    git(tree, "commit", "-qam", "C1: ffa: a comment")
    subprocess.run(["patch", "-s", "-p1", "-i", str(MUTANT)], cwd=tree, check=True)
    git(tree, "commit", "-qam", "C2: ffa: check only the TX buffer's alignment")
    text = (tree / FFA).read_text()
    (tree / FFA).write_text("/* another comment */\n" + text)
    git(tree, "commit", "-qam", "C3: ffa: another comment")
    revs = git(tree, "rev-list", "--reverse", "HEAD").split()
    assert len(revs) == 4
    return tree, revs


@pytest.fixture(scope="module")
def local_tree(tmp_path_factory):
    return make_git_tree(tmp_path_factory.mktemp("bisect-tree"))


# --- pure parts ------------------------------------------------------------------------

def test_debian_range_lists_the_known_series_in_order_either_way():
    assert bis.debian_range("debian:6.12..debian:7.3") == ["debian:6.12", "debian:7.2", "debian:7.3"]
    assert bis.debian_range("debian:7.3..debian:6.12") == ["debian:7.3", "debian:7.2", "debian:6.12"]
    assert bis.debian_range("debian:7.2..debian:7.3") == ["debian:7.2", "debian:7.3"]
    assert bis.debian_range("/some/path") is None
    assert bis.debian_range("debian:7.3") is None


@pytest.mark.parametrize("text,word", [("debian:6.12..debian:9.9", "debian:9.9"),
                                       ("debian:7.3..7.2", "7.2"),
                                       ("debian:7.3..debian:7.3", "both ends")])
def test_debian_range_errors_name_the_flag_and_the_end(text, word):
    with pytest.raises(ToolError) as e:
        bis.debian_range(text)
    assert "flag --tree" in str(e.value) and word in str(e.value)


def test_first_change():
    assert bis.first_change([False, False, True, True]) == 2
    assert bis.first_change([True, False, False]) == 1
    assert bis.first_change([True, True]) is None


def finding(scenario, op, rule, call="rxtx_map tx=0x1", kind="violation"):
    return Finding(rule=rule, target="el2", release="r", scenario=scenario, file="f.kcs", index=0, op=op,
                   call=call, expected=[], observed="x", kind=kind)


def test_run_keys_group_rules_of_one_op_and_leave_out_the_op_index():
    keys = bis.run_keys("el2-4k", [finding("s1", 1, "B"), finding("s1", 1, "A"), finding("s2", 5, "A")])
    assert keys == {("el2-4k", "s1", "violation A,B rxtx_map"), ("el2-4k", "s2", "violation A rxtx_map")}
    # the same finding at another op index is the same key (ci compares across commits)
    assert bis.run_keys("el2-4k", [finding("s2", 7, "A")]) < keys


def test_wanted_direction_and_signature_filter():
    from kconform.commands.bisect import _wanted
    a, b = ("el2-4k", "s", "violation A op"), ("el2-4k", "s", "violation B op")
    assert _wanted({a}, {a, b}, None) == ({b}, "introduced")
    assert _wanted({a, b}, {a}, None) == ({b}, "fixed")
    assert _wanted({a}, {a, b}, "B") == ({b}, "introduced")
    with pytest.raises(ToolError, match="same signatures at both ends"):
        _wanted({a}, {a}, None)
    with pytest.raises(ToolError, match="--signature 'C'"):
        _wanted({a}, {a, b}, "C")


def test_export_writes_each_revision_and_leaves_the_checkout_alone(local_tree, tmp_path):
    tree, (c0, c1, c2, c3) = local_tree
    dest = tmp_path / "el2-tree"
    bis.export_el2_tree(tree, c1, dest)
    assert "kconform test: a comment only" in (dest / FFA).read_text()
    assert "!PAGE_ALIGNED(tx) || !PAGE_ALIGNED(rx)" in (dest / FFA).read_text()
    bis.export_el2_tree(tree, c2, dest)
    assert "!PAGE_ALIGNED(tx) || !PAGE_ALIGNED(rx)" not in (dest / FFA).read_text()
    assert (dest / "Makefile").read_bytes() == (tree / "Makefile").read_bytes()
    assert git(tree, "rev-parse", "HEAD") == c3 and git(tree, "status", "--porcelain") == ""
    assert bis.content_at(tree, c1) != bis.content_at(tree, c2)
    assert bis.paths_differ(tree, c1, c2, [FFA]) and not bis.paths_differ(tree, c0, c3, ["Makefile"])


# --- the command -----------------------------------------------------------------------

def test_bad_flags_name_the_flag(local_tree, tmp_path):
    tree, (c0, _, _, c3) = local_tree
    f = tmp_path / "finding.kcs"
    f.write_text(FINDING)
    r = kconform("bisect", str(f), "--tree", str(tree), "--good", "nosuchrev", "--bad", c3)
    assert r.returncode == 2 and "flag --good" in r.stderr and "nosuchrev" in r.stderr
    r = kconform("bisect", str(f), "--tree", str(tree), "--good", c0)
    assert r.returncode == 2 and "--good/--bad" in r.stderr
    r = kconform("bisect", str(f), "--tree", str(tmp_path), "--good", c0, "--bad", c3)
    assert r.returncode == 2 and "flag --tree" in r.stderr and "not a git tree" in r.stderr
    r = kconform("bisect", str(f), "--tree", "debian:7.3..debian:7.3")
    assert r.returncode == 2 and "flag --tree" in r.stderr
    r = kconform("bisect", str(f), "--tree", str(tree), "--good", c0, "--bad", c3, "--page-size", "3K")
    assert r.returncode == 2 and "flag --page-size" in r.stderr
    r = kconform("bisect", str(f), "--tree", str(tree), "--good", c0, "--bad", c3, "--target", "host")
    assert r.returncode == 2 and "flag --target" in r.stderr


@pytest.mark.network
def test_bisect_names_the_commit_that_introduced_the_finding(local_tree, tmp_path):
    tree, (c0, c1, c2, c3) = local_tree
    f = tmp_path / "finding.kcs"
    f.write_text(FINDING)
    worktrees_before = git(tree, "worktree", "list")
    r = kconform("bisect", str(f), "--tree", str(tree), "--good", c0, "--bad", c3, "--page-size", "4K",
                 "--out", str(tmp_path / "out"), timeout=1800)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"first bad commit: {c2[:12]} C2: ffa: check only the TX buffer's alignment" in r.stdout
    assert SIGNATURE in r.stdout
    doc = json.loads(next((tmp_path / "out").glob("*/bisect.json")).read_text())
    assert doc["first"] == c2 and doc["direction"] == "introduced" and doc["form"] == "git"
    assert [k[2] for k in doc["wanted"]] == [SIGNATURE]
    # git bisect ran in a private worktree, since removed; the user's checkout untouched
    assert {s["commit"] for s in doc["steps"]} <= {c1, c2}
    assert git(tree, "worktree", "list") == worktrees_before
    assert git(tree, "rev-parse", "HEAD") == c3 and git(tree, "status", "--porcelain") == ""


@pytest.mark.network
def test_bisect_names_the_fixing_commit_when_the_finding_is_at_the_old_end(local_tree, tmp_path):
    """Reversed: a tree whose newest commit reverts the mutant."""
    tree, (c0, c1, c2, c3) = local_tree
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(tree), str(clone)], check=True)
    git(clone, "config", "user.email", "t@k")
    git(clone, "config", "user.name", "t")
    git(clone, "revert", "--no-edit", c2)
    fix = git(clone, "rev-parse", "HEAD")
    f = tmp_path / "finding.kcs"
    f.write_text(FINDING)
    r = kconform("bisect", str(f), "--tree", str(clone), "--good", c2, "--bad", fix, "--page-size", "4K",
                 "--out", str(tmp_path / "out"), timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"first fixed commit: {fix[:12]} Revert" in r.stdout


@pytest.mark.network
def test_bisect_over_debian_series_names_the_first_that_fixed_a_finding(tmp_path):
    """FFA.VERSION.DOWNGRADE on ffa/regress/version-downgrade-4k: 6.12 has it, fixed
    upstream before 7.2 (ci/known-findings.json); 7.3 does not have it either."""
    f = tmp_path / "downgrade.kcs"
    f.write_text("kconform-scenario 1\nabi ffa\nname ffa/regress/version-downgrade-4k\nrequires page_4k\n"
                 "version version=V1_1\nversion version=V1_0\n")
    r = kconform("bisect", str(f), "--tree", "debian:6.12..debian:7.3", "--out", str(tmp_path / "out"),
                 timeout=3600)
    assert r.returncode == 0, r.stdout + r.stderr
    text = " ".join(r.stdout.split())
    assert "violation FFA.VERSION.DOWNGRADE version first disappears in debian:7.2 (after debian:6.12)" in text
    doc = json.loads(next((tmp_path / "out").glob("*/bisect.json")).read_text())
    assert [(t["tree"], t["present"]) for t in doc["tried"]] == [
        ("debian:6.12", True), ("debian:7.2", False), ("debian:7.3", False)]
    assert doc["first"] == "debian:7.2" and doc["direction"] == "fixed"


def test_step_answers_git_bisect_run(local_tree, tmp_path, monkeypatch):
    """The step's exit codes: 1 new, 0 old (by direction), 125 a commit that could not be
    built or run (skipped), 128 (abort) when the step itself cannot work; never 2."""
    from kconform.commands import bisect as cmd
    tree, (c0, c1, c2, c3) = local_tree
    wt = tmp_path / "wt"
    subprocess.run(["git", "-C", str(tree), "worktree", "add", "--detach", "--no-checkout", str(wt), c2],
                   check=True, capture_output=True)
    try:
        git(wt, "update-ref", "BISECT_HEAD", c2)
        key = ["el2-4k", "ffa/checks/map-rx-unaligned-4k", SIGNATURE]
        plan = {"repo": str(tree), "worktree": str(wt), "out": str(tmp_path), "files": [], "target": "el2",
                "page_sizes": ["4K"], "apply": None, "watchdog": 2.0, "wanted": [key], "new_when": "present"}
        path = tmp_path / "plan.json"

        def answer(keys=None, error=None, new_when="present"):
            def fake(*a, **k):
                if error:
                    raise ToolError(error)
                return type("Evaluated", (), {"keys": lambda self: keys})()
            monkeypatch.setattr(cmd, "evaluate_rev", fake)
            path.write_text(json.dumps(dict(plan, new_when=new_when)))
            return cmd.step(path, lambda m: None)

        assert answer({tuple(key)}) == 1
        assert answer(set()) == 0
        assert answer({tuple(key)}, new_when="absent") == 0
        assert answer(set(), new_when="absent") == 1
        assert answer(error="building the EL2 handler failed") == 125
        steps = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
        assert [s["state"] for s in steps] == ["present", "absent", "present", "absent", "skipped"]
        assert steps[0]["commit"] == c2 and steps[0]["subject"].startswith("C2:")

        class Args:
            step = str(tmp_path / "missing-plan.json")
        assert cmd.cmd_bisect(Args(), type("C", (), {"print": lambda *a, **k: None})()) == 128
    finally:
        subprocess.run(["git", "-C", str(tree), "worktree", "remove", "--force", str(wt)], check=False)
