"""Patched trees: kconform.sources.patches.apply on synthetic trees, and the real reference patch."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness" / "driver"))

from kconform.sources import patches, tree_fetch, trees  # noqa: E402
from kconform.sources.patches import PatchError  # noqa: E402
from kconform.sources.trees import NEEDED_PATHS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FFA_C = "arch/arm64/kvm/hyp/nvhe/ffa.c"
MAKEFILE = "VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 4\nEXTRAVERSION =\n"
FFA_BODY = "".join(f"line {i}\n" for i in range(1, 21))


def make_tree(root: Path) -> Path:
    for rel in NEEDED_PATHS:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(MAKEFILE if rel == "Makefile" else FFA_BODY if rel == FFA_C else "/* */\n")
    return root


def write_patch(path: Path, rel: str, hunk: str) -> Path:
    path.write_text(f"--- a/{rel}\n+++ b/{rel}\n{hunk}")
    return path


# Replaces "line 10" with "line ten".
GOOD_HUNK = "@@ -9,3 +9,3 @@\n line 9\n-line 10\n+line ten\n line 11\n"


@pytest.fixture
def tree(tmp_path):
    return make_tree(tmp_path / "tree")


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_apply_patches_a_copy(tree, cache, tmp_path):
    p = write_patch(tmp_path / "ten.patch", FFA_C, GOOD_HUNK)
    out = patches.apply(tree, p, cache)
    assert out.parent == cache / "patched" and out.name.endswith("-ten")
    assert "line ten\n" in (out / FFA_C).read_text()
    assert (tree / FFA_C).read_text() == FFA_BODY  # the original is untouched
    info = trees.check(out)  # a complete tree again
    assert info.version == "7.3.4"
    assert json.loads((out / trees.STAMP_NAME).read_text())["patches"][0]["name"] == "ten.patch"
    assert not list(out.rglob("*.orig")) and not list(out.rglob("*.rej"))


def test_apply_is_idempotent(tree, cache, tmp_path):
    p = write_patch(tmp_path / "ten.patch", FFA_C, GOOD_HUNK)
    first = patches.apply(tree, p, cache)
    marker = first / "marker"
    marker.write_text("x")  # a second apply must not rebuild the folder
    assert patches.apply(tree, p, cache) == first
    assert marker.exists()
    assert len(list((cache / "patched").iterdir())) == 1


@pytest.mark.parametrize("in_place", [True, False], ids=["cp-p", "rsync-t"])
def test_a_patched_copy_changed_since_is_made_again(tree, cache, tmp_path, in_place):
    """A file of the copy restored with other content and an older mtime: the copy no longer
    holds what the patch made, so apply() makes it again instead of serving it."""
    p = write_patch(tmp_path / "ten.patch", FFA_C, GOOD_HUNK)
    out = patches.apply(tree, p, cache)
    good = (out / FFA_C).read_bytes()
    target = out / FFA_C
    if in_place:
        target.write_text(FFA_BODY.replace("line 10", "line TEN"))
    else:
        (out / "tmp").write_text(FFA_BODY.replace("line 10", "line TEN"))
        os.replace(out / "tmp", target)
    os.utime(target, (1_000_000_000, 1_000_000_000))
    assert patches.apply(tree, p, cache) == out
    assert (out / FFA_C).read_bytes() == good
    assert [d.name for d in (cache / "patched").iterdir()] == [out.name]


def test_key_follows_tree_and_patch_content(tree, cache, tmp_path):
    p = write_patch(tmp_path / "ten.patch", FFA_C, GOOD_HUNK)
    a = patches.apply(tree, p, cache)
    (tmp_path / "other").mkdir()
    other = write_patch(tmp_path / "other" / "ten.patch", FFA_C, GOOD_HUNK.replace("line ten", "line TEN"))
    b = patches.apply(tree, other, cache)
    assert a != b and "line TEN" in (b / FFA_C).read_text()
    (tree / "include/linux/arm_ffa.h").write_text("/* changed */\n")
    c = patches.apply(tree, p, cache)
    assert c not in (a, b)


def test_read_only_tree(tree, cache, tmp_path):
    p = write_patch(tmp_path / "ten.patch", FFA_C, GOOD_HUNK)
    for f in tree.rglob("*"):
        f.chmod(f.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        out = patches.apply(tree, p, cache)
        assert "line ten\n" in (out / FFA_C).read_text()
        assert os.access(out / FFA_C, os.W_OK)
    finally:
        for f in tree.rglob("*"):
            f.chmod(f.stat().st_mode | stat.S_IWUSR)


def test_failing_hunk_names_patch_tree_and_hunk(tree, cache, tmp_path):
    bad = write_patch(tmp_path / "bad.patch", FFA_C,
                      GOOD_HUNK + "@@ -15,3 +15,3 @@\n line 15\n-line sixteen\n+line 16!\n line 17\n")
    with pytest.raises(PatchError) as e:
        patches.apply(tree, bad, cache)
    msg = str(e.value)
    assert str(bad) in msg and str(tree) in msg
    assert f"{FFA_C}: hunk #2 FAILED" in msg
    # The dry run failed: nothing half-applied is left in the cache.
    assert not [d for d in (cache / "patched").iterdir() if not d.name.startswith(".")]
    assert not list((cache / "patched").glob(".*"))


def test_context_drift_is_not_fuzzed(tree, cache, tmp_path):
    # The first context line differs: GNU patch's default fuzz would apply it.
    drift = write_patch(tmp_path / "drift.patch", FFA_C,
                        "@@ -9,3 +9,3 @@\n line nine\n-line 10\n+line ten\n line 11\n")
    with pytest.raises(PatchError, match="hunk #1 FAILED"):
        patches.apply(tree, drift, cache)
    assert "line ten" in (patches.apply(tree, drift, cache, fuzz=1) / FFA_C).read_text()


def test_already_applied(tree, cache, tmp_path):
    p = write_patch(tmp_path / "ten.patch", FFA_C, GOOD_HUNK)
    once = patches.apply(tree, p, cache)
    with pytest.raises(PatchError, match="already applied"):
        patches.apply(once, p, cache)


def test_missing_file_in_tree(tree, cache, tmp_path):
    p = write_patch(tmp_path / "nofile.patch", "drivers/firmware/arm_ffa/driver.c",
                    "@@ -1,1 +1,1 @@\n-a\n+b\n")
    with pytest.raises(PatchError, match="not in the tree"):
        patches.apply(tree, p, cache)


def test_missing_file_after_a_present_one_is_the_one_named(tree, cache, tmp_path):
    """patch's "can't find file" follows the last file it checked: name the missing one."""
    ffa = (tree / FFA_C).read_text().splitlines()[0]
    p = tmp_path / "two.patch"
    p.write_text(f"--- a/{FFA_C}\n+++ b/{FFA_C}\n@@ -1,1 +1,1 @@\n-{ffa}\n+{ffa} /* x */\n"
                 "--- a/virt/kvm/missing.c\n+++ b/virt/kvm/missing.c\n@@ -1,1 +1,1 @@\n-a\n+b\n")
    with pytest.raises(PatchError) as e:
        patches.apply(tree, p, cache)
    assert "virt/kvm/missing.c: not in the tree" in str(e.value)
    assert f"{FFA_C}: not in the tree" not in str(e.value)


def test_patch_touching_extra_file_copies_it(tree, cache, tmp_path):
    extra = tree / "drivers/x.c"
    extra.parent.mkdir(parents=True)
    extra.write_text("a\n")
    p = write_patch(tmp_path / "x.patch", "drivers/x.c", "@@ -1,1 +1,1 @@\n-a\n+b\n")
    assert (patches.apply(tree, p, cache) / "drivers/x.c").read_text() == "b\n"


def test_not_a_diff(tree, cache, tmp_path):
    p = tmp_path / "notes.patch"
    p.write_text("just words\n")
    with pytest.raises(PatchError, match="not a unified diff"):
        patches.apply(tree, p, cache)


def test_missing_patch_and_incomplete_tree(tree, cache, tmp_path):
    with pytest.raises(PatchError, match="cannot read patch"):
        patches.apply(tree, tmp_path / "nope.patch", cache)
    (tree / "Makefile").unlink()
    p = write_patch(tmp_path / "ten.patch", FFA_C, GOOD_HUNK)
    with pytest.raises(PatchError, match="lacks 1 needed file"):
        patches.apply(tree, p, cache)


def test_chain_and_cli(tree, cache, tmp_path, capsys):
    p1 = write_patch(tmp_path / "one.patch", FFA_C, GOOD_HUNK)
    p2 = write_patch(tmp_path / "two.patch", FFA_C,
                     "@@ -9,3 +9,3 @@\n line 9\n-line ten\n+line 10 again\n line 11\n")
    assert patches.main(["apply", str(tree), str(p1), str(p2), "--cache", str(cache)]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert "line 10 again\n" in (out / FFA_C).read_text()
    names = [x["name"] for x in json.loads((out / trees.STAMP_NAME).read_text())["patches"]]
    assert names == ["one.patch", "two.patch"]
    assert patches.main(["apply", str(tree), str(p2), "--cache", str(cache)]) == 2
    assert "two.patch does not apply" in capsys.readouterr().err


# --- the real reference patch and its mutants on Debian's 7.3 tree ------------

def _debian_tree() -> Path | None:
    try:
        return tree_fetch.fetch("debian:7.3", progress=lambda m: None) if _cached("7.3") else None
    except trees.TreeError:
        return None


def _cached(series: str) -> bool:
    from kconform.core.paths import cache_dir
    return any((cache_dir() / "trees").glob(f"debian-{series}.*/Makefile"))


REFERENCE = REPO / "targets/el2/reclaim2/reclaim2-reference.patch"
MUTANTS = sorted((REPO / "targets/el2/reclaim2/mutants").glob("[0-9]*.patch"))


@pytest.fixture(scope="module")
def reference_tree(tmp_path_factory):
    base = _debian_tree()
    if base is None:
        pytest.skip("no cached debian:7.3 tree (./kconform tree fetch debian:7.3)")
    return patches.apply(base, REFERENCE, tmp_path_factory.mktemp("cache"))


def test_reference_patch_applies_to_debian_73(reference_tree):
    text = (reference_tree / FFA_C).read_text()
    assert "do_ffa_mem_reclaim2" in text
    assert "FFA_MEM_RECLAIM2" in (reference_tree / "include/linux/arm_ffa.h").read_text()


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.stem for m in MUTANTS])
def test_mutant_applies_on_reference(reference_tree, mutant, tmp_path):
    out = patches.apply(reference_tree, mutant, tmp_path)
    assert (out / FFA_C).read_text() != (reference_tree / FFA_C).read_text()


def test_at_least_twenty_mutants():
    assert len(MUTANTS) >= 20


def test_a_copy_with_an_older_stamp_is_kept_when_it_holds_what_the_patch_makes(tree, cache, tmp_path):
    p = write_patch(tmp_path / "ten.patch", FFA_C, GOOD_HUNK)
    out = patches.apply(tree, p, cache)
    stamp = out / patches.PATCH_STAMP
    doc = json.loads(stamp.read_text())
    stamp.write_text(json.dumps({k: v for k, v in doc.items() if not k.startswith("result_")} | {"format": 1}))
    ino = (out / FFA_C).stat().st_ino
    assert patches.apply(tree, p, cache) == out
    assert (out / FFA_C).stat().st_ino == ino                  # the same files: a build may be reading them
    assert json.loads(stamp.read_text())["format"] == patches.STAMP_FORMAT
