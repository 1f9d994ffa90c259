"""The CI templates in ci/templates (GitHub Actions, GitLab CI, the KernelCI KTAP
script) run the commands tested here: their PR scripts are taken from the YAML and
run against a local git tree made from Debian's 7.3 (test_bisect.make_git_tree),
and the nightly commands parse with kconform's own parser."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from test_bisect import SIGNATURE, make_git_tree

TEMPLATES = REPO / "ci" / "templates"

try:
    import yaml  # Debian python3-yaml
except ImportError:  # pragma: no cover - then the simple extraction below
    yaml = None


def load_yaml(path: Path) -> dict:
    if yaml is None:
        pytest.skip("python3-yaml is not installed (Debian package python3-yaml)")
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def local_tree(tmp_path_factory):
    return make_git_tree(tmp_path_factory.mktemp("templates-tree"))


def github_pr_script() -> tuple[str, dict]:
    doc = load_yaml(TEMPLATES / "github-actions.yml")
    steps = [s for s in doc["jobs"]["pr"]["steps"] if s.get("name") == "kconform ci"]
    assert len(steps) == 1
    return steps[0]["run"], {**doc["env"], **steps[0].get("env", {})}


def gitlab_jobs() -> dict:
    return load_yaml(TEMPLATES / "gitlab-ci.yml")


def kconform_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if '/kconform" ' in line]


def parse_kconform(line: str, env: dict) -> list[str]:
    """The argv a kconform line of a template runs, with env's variables put in and
    checked by kconform's own parser (a flag it does not know fails here)."""
    from kconform.commands.cli import build_parser
    expanded = subprocess.run(["bash", "-c", f"printf '%s\\n' {line.split(' || ')[0]}"],
                              env={**os.environ, **{k: str(v) for k, v in env.items()}},
                              capture_output=True, text=True, check=True).stdout.splitlines()
    argv = expanded[1:]
    build_parser().parse_args(argv)
    return argv


def test_templates_exist_and_parse():
    assert (TEMPLATES / "README.md").is_file()
    script, env = github_pr_script()
    assert "kconform ci" not in env
    gl = gitlab_jobs()
    assert gl["kconform-mr"]["rules"][0]["if"].endswith('"merge_request_event"')
    assert gl["kconform-nightly"]["rules"][0]["if"].endswith('"schedule"')
    assert os.access(TEMPLATES / "kernelci-ktap.sh", os.X_OK)


def test_pr_commands_are_kconform_ci_with_the_flags_tested():
    script, env = github_pr_script()
    (line,) = kconform_lines(script)
    argv = parse_kconform(line, {**env, "BASE_SHA": "B", "HEAD_SHA": "H", "GITHUB_STEP_SUMMARY": "/tmp/s"})
    assert argv[:1] == ["ci"] and argv[argv.index("--base") + 1] == "B" and argv[argv.index("--head") + 1] == "H"
    assert argv[argv.index("--fuzz-time") + 1] == "60s" and "--corpus" in argv and "--summary" in argv
    gl = gitlab_jobs()
    (line,) = kconform_lines("\n".join(gl["kconform-mr"]["script"]))
    argv = parse_kconform(line, {**gl["variables"], "CI_MERGE_REQUEST_DIFF_BASE_SHA": "B", "CI_COMMIT_SHA": "H"})
    assert argv[:1] == ["ci"] and argv[argv.index("--base") + 1] == "B" and argv[argv.index("--head") + 1] == "H"
    # PR mode and nightly share the corpus: the PR seeds from where the nightly fuzz leaves it
    assert env["KCONFORM_CORPUS"] == env["KCONFORM_FUZZ_OUT"] + "/el2-4k/corpus"
    assert gl["variables"]["KCONFORM_CORPUS"] == gl["variables"]["KCONFORM_FUZZ_OUT"] + "/el2-4k/corpus"


def test_nightly_commands_run_every_page_size_and_a_long_fuzz():
    doc = load_yaml(TEMPLATES / "github-actions.yml")
    gh = "\n".join(s.get("run", "") for s in doc["jobs"]["nightly"]["steps"])
    gl = gitlab_jobs()
    for script, env in ((gh, doc["env"]), ("\n".join(gl["kconform-nightly"]["script"]), gl["variables"])):
        run, fuzz = kconform_lines(script)
        argv = parse_kconform(run, env)
        assert argv[0] == "run" and [argv[i + 1] for i, a in enumerate(argv) if a == "--page-size"] == \
            ["4K", "16K", "64K"]
        argv = parse_kconform(fuzz, env)
        assert argv[0] == "fuzz" and argv[argv.index("--time") + 1] == "8h"
        assert argv[argv.index("--out") + 1] == "kconform-fuzz"
    # the nightly caches what it fuzzed; the PR job restores the same key family
    caches = [s for s in doc["jobs"]["nightly"]["steps"] if s.get("uses", "").startswith("actions/cache/save")]
    assert caches and "kconform-fuzz" in caches[0]["with"]["path"]
    assert gl["kconform-mr"]["cache"]["policy"] == "pull" and "kconform-fuzz" in gl[".kconform"]["cache"]["paths"]


def _run_script(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    from kconform.core.paths import cache_dir
    full = {**os.environ, **{k: str(v) for k, v in env.items()},
            "KCONFORM_CACHE": str(cache_dir()),            # the trees already fetched
            "GIT_CONFIG_GLOBAL": str(cwd / "gitconfig")}   # `git config --global` stays here
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=1800)


@pytest.mark.network
def test_github_pr_script_fails_a_head_that_introduces_a_finding(local_tree, tmp_path):
    tree, (c0, c1, c2, c3) = local_tree
    script, env = github_pr_script()
    env.update(KCONFORM_DIR=str(REPO), KCONFORM_TREE=str(tree), BASE_SHA=c1, HEAD_SHA=c2,
               GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
               KCONFORM_FUZZ_TIME="0",            # the fuzz slice: see ci/templates/README.md
               KCONFORM_FLAGS="--page-size 4K")
    r = _run_script(script, env, tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert SIGNATURE in (tmp_path / "summary.md").read_text()
    doc = json.loads(next((tmp_path / "kconform-ci").glob("*/ci.json")).read_text())
    assert [i["signature"] for i in doc["introduced"]] == [SIGNATURE]


@pytest.mark.network
def test_gitlab_mr_script_passes_a_clean_head(local_tree, tmp_path):
    tree, (c0, c1, c2, c3) = local_tree
    gl = gitlab_jobs()
    env = {k: v for k, v in gl["variables"].items() if k != "XDG_CACHE_HOME"}
    env.update(KCONFORM_DIR=str(REPO), KCONFORM_TREE=str(tree), CI_MERGE_REQUEST_DIFF_BASE_SHA=c0,
               CI_COMMIT_SHA=c1, KCONFORM_FUZZ_TIME="0", KCONFORM_FLAGS="--page-size 4K")
    r = _run_script("\n".join(gl["kconform-mr"]["script"]), env, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 finding(s) introduced" in " ".join(r.stdout.split())


@pytest.mark.network
def test_kernelci_script_prints_ktap_naming_the_mutant(local_tree, tmp_path):
    """At C3 (the mutant is in). The tree given is the one folder bisect and ci write
    revisions into (engine/bisect.py el2_tree_dir, under its lock): its EL2 build folder
    is theirs, so only ffa.c is rebuilt. The script itself only needs a tree."""
    from kconform.core import locks
    from kconform.engine import bisect as bis
    tree, (c0, c1, c2, c3) = local_tree
    with locks.locked(bis.el2_tree_dir().parent / "el2-tree.lock", "the bisect tree (el2)"):
        ktap_tree = bis.export_el2_tree(tree, c3)
        r = subprocess.run([str(TEMPLATES / "kernelci-ktap.sh")], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "KCONFORM_DIR": str(REPO), "KCONFORM_TREE": str(ktap_tree),
                                "KCONFORM_PAGE_SIZES": "4K", "KCONFORM_OUT": str(tmp_path / "k")},
                           timeout=3600)
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("KTAP version 1\n")
    assert re.search(r"^    not ok \d+ FFA\.MBOX\.MAP_ARGS$", r.stdout, re.M)
    assert "map-rx-unaligned-4k" in r.stdout
