"""The OP-TEE tree of targets/optee (debian-src:optee-os): the spec, checking a
tree, and the engine's build passing KCONFORM_OPTEE_TREE without ever failing
because of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO
from kconform.engine import build as engine_build
from kconform.sources import source_trees
from kconform.sources.source_trees import OPTEE_NEEDED_PATHS
from kconform.sources.trees import TreeError

CONFIG_MK = "CFG_OPTEE_REVISION_MAJOR ?= 4\nCFG_OPTEE_REVISION_MINOR ?= 10\nCFG_OPTEE_REVISION_EXTRA ?=\n"


def make_optee_tree(root: Path, skip: tuple[str, ...] = ()) -> Path:
    for rel in OPTEE_NEEDED_PATHS:
        if rel in skip:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(CONFIG_MK if rel == "mk/config.mk" else "/* */\n")
    return root


def test_the_spec_is_pinned_to_sid():
    s = source_trees.parse_spec("debian-src:optee-os")
    assert (s.package, s.version, s.suites, s.target) == ("optee-os", "4.10.0-2", ("sid",), "targets/optee")
    assert source_trees.DEFAULT_OPTEE_TREE == "debian-src:optee-os"


def test_check_optee_reads_the_version(tmp_path):
    info = source_trees.check_optee(make_optee_tree(tmp_path))
    assert info.version == "4.10" and info.path == tmp_path


def test_check_optee_names_what_is_missing(tmp_path):
    make_optee_tree(tmp_path, skip=("core/arch/arm/kernel/thread_spmc.c",))
    with pytest.raises(TreeError) as e:
        source_trees.check_optee(tmp_path)
    assert "core/arch/arm/kernel/thread_spmc.c" in str(e.value) and "debian-src:optee-os" in str(e.value)


def test_a_tfa_tree_is_not_an_optee_tree(tmp_path):
    (tmp_path / "mk").mkdir()
    for rel in OPTEE_NEEDED_PATHS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    with pytest.raises(TreeError, match="OP-TEE"):
        source_trees.check_optee(tmp_path)


@pytest.fixture()
def fake(monkeypatch, tmp_path):
    """_configure_and_build with cmake recorded, the kernel and TF-A trees absent, and
    the OP-TEE tree look-up replaced by `optee` (a path, or an exception to raise)."""
    calls: dict[str, list] = {"run": [], "optee": []}
    monkeypatch.setattr(engine_build, "_run", lambda cmd, what: calls["run"].append(cmd))
    monkeypatch.setattr(engine_build, "_checked_tree", lambda *a, **k: None)
    monkeypatch.setattr(engine_build, "_checked_spmc_tree", lambda *a, **k: None)

    def go(build: Path, optee, cache: str | None = None):
        def look(kind, tree, required, offline, log):
            calls["optee"].append((kind.what, required, offline))
            if isinstance(optee, Exception):
                raise optee
            return optee
        monkeypatch.setattr(engine_build, "_checked", look)
        build.mkdir(exist_ok=True)
        if cache is not None:
            (build / "build.ninja").write_text("")
            (build / "CMakeCache.txt").write_text(cache)
        calls["run"].clear()
        calls["optee"].clear()
        logged: list[str] = []
        engine_build._configure_and_build(
            build, REPO, "default", "Ninja", None, None, None, False, None, False, False, None,
            "preset default", "", logged.append, optee_tree=source_trees.DEFAULT_OPTEE_TREE)
        configures = [c for c in calls["run"] if c[:2] == ["cmake", "--preset"]]
        return configures, list(calls["optee"]), logged
    return go


def test_a_fresh_build_passes_the_optee_tree(fake, tmp_path):
    configures, lookups, _ = fake(tmp_path / "b", tmp_path)
    assert lookups == [(engine_build.OPTEE_TREE.what, False, False)]  # never required, online
    assert len(configures) == 1 and f"-DKCONFORM_OPTEE_TREE={tmp_path}" in configures[0]


def test_a_failed_fetch_is_a_warning_and_the_build_goes_on(fake, tmp_path):
    from kconform.core.errors import ToolError
    configures, _, logged = fake(tmp_path / "b", ToolError("disk full"))
    assert len(configures) == 1 and not any("KCONFORM_OPTEE_TREE" in a for a in configures[0])
    assert any("no OP-TEE tree" in m and "disk full" in m for m in logged)


def test_a_build_with_its_optee_tree_is_not_configured_again(fake, tmp_path):
    configures, lookups, _ = fake(tmp_path / "b", tmp_path, cache=f"KCONFORM_OPTEE_TREE:PATH={tmp_path}\n")
    assert configures == [] and lookups == []


def test_a_build_without_an_optee_tree_looks_in_the_cache_only(fake, tmp_path):
    configures, lookups, _ = fake(tmp_path / "b", None, cache="KCONFORM_OPTEE_TREE:PATH=\n")
    assert lookups == [(engine_build.OPTEE_TREE.what, False, True)] and configures == []
