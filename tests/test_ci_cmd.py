"""kconform ci (commands/ci.py): on a local git tree made from Debian's 7.3 tree
(test_bisect.make_git_tree: C0 tree, C1 clean, C2 a stock ffa.c mutant, C3 clean),
the head that introduces the mutant fails naming its finding, a clean head passes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import kconform
from test_bisect import SIGNATURE, make_git_tree

from kconform.core.errors import ToolError


@pytest.fixture(scope="module")
def local_tree(tmp_path_factory):
    return make_git_tree(tmp_path_factory.mktemp("ci-tree"))


def ci(tree, base, head, out: Path, *extra):
    return kconform("ci", "--tree", str(tree), "--base", base, "--head", head, "--page-size", "4K",
                    "--fuzz-time", "0", "--out", str(out), *extra, timeout=1800)


def only(out: Path, name: str) -> Path:
    found = list(out.glob(f"*/{name}"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.network
def test_a_head_that_introduces_a_finding_fails_naming_it(local_tree, tmp_path):
    tree, (c0, c1, c2, c3) = local_tree
    summary = tmp_path / "summary.md"
    r = ci(tree, c1, c2, tmp_path / "out", "--summary", str(summary))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"INTRODUCED el2-4k ffa/checks/map-rx-unaligned-4k: {SIGNATURE}" in " ".join(r.stdout.split())
    doc = json.loads(only(tmp_path / "out", "ci.json").read_text())
    assert doc["exit"] == 1 and doc["base"] == c1 and doc["head"] == c2
    assert [(i["label"], i["scenario"], i["signature"]) for i in doc["introduced"]] == [
        ("el2-4k", "ffa/checks/map-rx-unaligned-4k", SIGNATURE)]
    assert doc["fixed"] == []
    # the base's own findings (stock 7.3's background) are there, and do not fail the check
    assert doc["targets"][0]["base_findings"] > 0
    rep = Path(doc["introduced"][0]["reproducer"])
    assert rep.is_file() and "rxtx_map" in rep.read_text()
    md = summary.read_text()
    assert "1 finding(s) introduced" in md and SIGNATURE in md and c2[:12] in md
    assert f"kconform bisect <reproducer> --tree <tree> --good {c1[:12]} --bad {c2[:12]}" in md
    assert md == only(tmp_path / "out", "ci-summary.md").read_text()
    assert "<html" in only(tmp_path / "out", "report.html").read_text().lower()


@pytest.mark.network
def test_a_clean_head_passes(local_tree, tmp_path):
    tree, (c0, c1, c2, c3) = local_tree
    r = ci(tree, c0, c1, tmp_path / "out")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(only(tmp_path / "out", "ci.json").read_text())
    assert doc["introduced"] == [] and doc["exit"] == 0
    assert "no finding introduced" in only(tmp_path / "out", "ci-summary.md").read_text()


@pytest.mark.network
def test_a_change_outside_the_el2_files_reuses_the_base_runs(local_tree, tmp_path):
    tree, (c0, c1, c2, c3) = local_tree
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(tree), str(clone)], check=True)
    (clone / "README.kconform").write_text("not an EL2 file\n")
    subprocess.run(["git", "-C", str(clone), "add", "README.kconform"], check=True)
    subprocess.run(["git", "-C", str(clone), "-c", "user.email=t@k", "-c", "user.name=t", "commit", "-qm",
                    "docs"], check=True)
    r = ci(clone, c3, "HEAD", tmp_path / "out")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "base runs stand" in r.stdout
    doc = json.loads(only(tmp_path / "out", "ci.json").read_text())
    assert doc["targets"][0]["reused"] is True


def test_bad_flags_name_the_flag(local_tree, tmp_path):
    tree, (c0, c1, c2, c3) = local_tree
    cases = [
        (["ci", "--tree", str(tree)], "flag --base"),
        (["ci", "--tree", str(tree), "--base", "nosuch"], "flag --base"),
        (["ci", "--tree", str(tree), "--base", c0, "--head", "nosuch"], "flag --head"),
        (["ci", "--tree", str(tmp_path), "--base", c0], "flag --tree"),
        (["ci", "--tree", str(tree), "--base", c0, "--fuzz-time", "soon"], "flag --fuzz-time"),
        (["ci", "--tree", str(tree), "--base", c0, "--corpus", str(tmp_path / "none")], "flag --corpus"),
        (["ci", "--tree", str(tree), "--base", c0, "--target", "host"], "flag --target"),
        (["ci", "--tree", str(tree), "--base", c0, "--page-size", "2K"], "flag --page-size"),
        (["ci", "--tree", str(tree), "--base", c0, "--watchdog", "-1"], "flag --watchdog"),
        (["ci", "--tree", str(tree), "--base", c0, "--fuzz-grace", "-1"], "flag --fuzz-grace"),
    ]
    for argv, flag in cases:
        r = kconform(*argv)
        assert r.returncode == 2 and flag in r.stderr, (argv, r.stderr)


def _repo(tmp_path, files: dict[str, str]) -> tuple[Path, str]:
    repo = tmp_path / "r"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    g = ["git", "-C", str(repo)]
    if not (repo / ".git").exists():
        subprocess.run(g + ["init", "-q"], check=True)
    subprocess.run(g + ["add", "-A"], check=True)
    subprocess.run(g + ["-c", "user.email=t@k", "-c", "user.name=t", "commit", "-qm", "x"], check=True)
    return repo, subprocess.run(g + ["rev-parse", "HEAD"], check=True, capture_output=True,
                                text=True).stdout.strip()


def test_applicable_targets_follow_the_tree_and_the_change(tmp_path):
    from kconform.commands.ci import applicable_targets
    repo, a = _repo(tmp_path, {"arch/arm64/kvm/hyp/nvhe/ffa.c": "1\n", "virt/kvm/guest_memfd.c": "1\n"})
    _, b = _repo(tmp_path, {"arch/arm64/kvm/hyp/nvhe/ffa.c": "2\n"})
    _, c = _repo(tmp_path, {"virt/kvm/guest_memfd.c": "2\n"})
    assert [t for t, _ in applicable_targets(repo, a, b, None)] == ["el2"]
    assert [t for t, _ in applicable_targets(repo, b, c, None)] == ["el2", "qemu"]
    assert [t for t, _ in applicable_targets(repo, a, b, ["qemu"])] == ["qemu"]
    other, d = _repo(tmp_path / "o", {"README": "x\n"})
    with pytest.raises(ToolError, match="no target applies"):
        applicable_targets(other, d, d, None)


def test_summary_names_each_introduced_finding():
    from kconform.commands.ci import summary_markdown
    result = {"base": "a" * 40, "head": "b" * 40, "base_subject": "base", "head_subject": "head",
              "targets": [{"target": "el2", "why": "w", "base_findings": 3, "head_findings": 4}],
              "introduced": [{"label": "el2-4k", "scenario": "s", "signature": "violation R op",
                              "reproducer": "findings/x.kcs"}],
              "fixed": [{"label": "el2-16k", "scenario": "t", "signature": "violation Q op"}],
              "fuzz": {"ran": True, "seconds": 60, "seeded": 5, "new_findings": False}}
    md = summary_markdown(result)
    assert "**1 finding(s) introduced**" in md and "| el2-4k | `s` | violation R op | `findings/x.kcs` |" in md
    assert "gone at the head" in md and "violation Q op" in md and "no new fuzz finding" in md
    result["introduced"] = []
    assert "no finding introduced" in summary_markdown(result)


@pytest.mark.network
def test_fuzz_slice_is_seeded_from_corpus_and_bounded(local_tree, tmp_path):
    """The fuzz slice (kconform fuzz as a child) starts from --corpus and is ended after
    --fuzz-time + --fuzz-grace (here 5 s + 0: it cannot finish its merge in time), which
    is said and does not change the verdict. Builds the libFuzzer preset on first use."""
    tree, (c0, c1, c2, c3) = local_tree
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "seed-a").write_bytes(b"x")
    (corpus / "seed-b").write_bytes(b"yy")
    r = kconform("ci", "--tree", str(tree), "--base", c0, "--head", c1, "--page-size", "4K", "--fuzz-time", "5s",
                 "--fuzz-grace", "0", "--corpus", str(corpus), "--out", str(tmp_path / "out"), timeout=3600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the fuzz slice did not end within 5 s" in " ".join(r.stdout.split())
    doc = json.loads(only(tmp_path / "out", "ci.json").read_text())
    fz = doc["fuzz"]
    assert fz["ran"] and fz["ended"] and fz["seeded"] == 2
    assert {"seed-a", "seed-b"} <= {p.name for p in Path(fz["corpus"]).iterdir()}
    assert "did not end in time" in only(tmp_path / "out", "ci-summary.md").read_text()
