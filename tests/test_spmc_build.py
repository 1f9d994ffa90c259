"""The TF-A tree of targets/spmc in the engine's build: engine/build.py passes
KCONFORM_TFA_TREE as it passes the kernel tree (fetched on first use), and the
default build has the SPMC's GoogleTest tests."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from kconform.engine import build as engine_build
from kconform.sources import source_trees


@pytest.fixture()
def fake(monkeypatch, tmp_path):
    """_configure_and_build with cmake and the tree look-ups recorded, not run."""
    calls: dict[str, list] = {"run": [], "spmc": []}
    tfa = tmp_path / "tfa"
    tfa.mkdir()
    monkeypatch.setattr(engine_build, "_run", lambda cmd, what: calls["run"].append(cmd))
    monkeypatch.setattr(engine_build, "_checked_tree", lambda *a, **k: None)

    def spmc(tree, offline, log, required=False):
        calls["spmc"].append(offline)
        return tfa
    monkeypatch.setattr(engine_build, "_checked_spmc_tree", spmc)

    def go(build: Path, cache: str | None = None, user_tree: str | None = None):
        build.mkdir(exist_ok=True)
        if cache is not None:
            (build / "build.ninja").write_text("")
            (build / "CMakeCache.txt").write_text(cache)
        calls["run"].clear()
        calls["spmc"].clear()
        engine_build._configure_and_build(
            build, REPO, "default", "Ninja", None, None, None, False,
            user_tree or source_trees.DEFAULT_SPMC_TREE, user_tree is not None, False, None,
            "preset default", "", lambda m: None)
        configures = [c for c in calls["run"] if c[:2] == ["cmake", "--preset"]]
        return configures, list(calls["spmc"])
    go.tfa = tfa
    return go


def test_a_fresh_build_fetches_the_tfa_tree_and_passes_it(fake, tmp_path):
    configures, lookups = fake(tmp_path / "b")
    assert lookups == [False]  # online: fetched if not cached
    assert len(configures) == 1 and f"-DKCONFORM_TFA_TREE={fake.tfa}" in configures[0]


def test_a_build_from_before_targets_spmc_is_configured_again(fake, tmp_path):
    configures, lookups = fake(tmp_path / "b", cache="KCONFORM_KERNEL_TREE:PATH=/x\n")
    assert lookups == [False]
    assert len(configures) == 1 and f"-DKCONFORM_TFA_TREE={fake.tfa}" in configures[0]


def test_a_build_with_its_tree_is_not_configured_again(fake, tmp_path):
    configures, lookups = fake(tmp_path / "b", cache=f"KCONFORM_TFA_TREE:PATH={tmp_path}\n")
    assert lookups == [] and configures == []


def test_a_build_without_a_tree_takes_one_from_the_cache_only(fake, tmp_path):
    configures, lookups = fake(tmp_path / "b", cache="KCONFORM_TFA_TREE:PATH=\n")
    assert lookups == [True]  # offline: never the network on an incremental build
    assert len(configures) == 1 and f"-DKCONFORM_TFA_TREE={fake.tfa}" in configures[0]


def test_a_tree_the_user_names_replaces_the_folders(fake, tmp_path):
    configures, lookups = fake(tmp_path / "b", cache=f"KCONFORM_TFA_TREE:PATH={tmp_path}\n",
                               user_tree=str(tmp_path / "tfa"))
    assert lookups == [False] and len(configures) == 1
    assert f"-DKCONFORM_TFA_TREE={fake.tfa}" in configures[0]
    # the same again: nothing to configure
    configures, _ = fake(tmp_path / "b", cache=f"KCONFORM_TFA_TREE:PATH={fake.tfa}\n",
                         user_tree=str(fake.tfa))
    assert configures == []


def test_build_with_a_bad_spmc_tree_exits_2_naming_it(tmp_path):
    from conftest import kconform
    r = kconform("build", "--spmc-tree", str(tmp_path / "nope"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert str(tmp_path / "nope") in r.stderr and "TF-A tree" in r.stderr


def test_checked_spmc_tree_refuses_a_bad_path_without_stopping_the_build(tmp_path):
    logged: list[str] = []
    assert engine_build._checked_spmc_tree(tmp_path / "nope", offline=True, log=logged.append) is None
    assert "no TF-A tree for the SPMC target" in logged[0] and "nope" in logged[0]


def test_the_default_build_has_the_spmc_tests(engine):
    """The engine fixture built the default preset (fetching the TF-A tree on first
    use): its ctest lists the SPMC's tests. In CI a missing tree fails here."""
    build = REPO / "build" / "default"
    tree = engine_build.cache_value(build, "KCONFORM_TFA_TREE")
    assert tree and source_trees.check_tfa(tree).version == "2.12.1", tree
    r = subprocess.run(["ctest", "-N", "-R", r"^spmc\."], cwd=build, capture_output=True, text=True)
    names = re.findall(r"Test\s+#\d+: (spmc\.\S+)", r.stdout)
    assert "spmc.StateIsInSnapshotSections" in names, r.stdout
    assert "spmc.Spmc.RestoreIsExact" in names, r.stdout
    assert len(names) >= 15, names
