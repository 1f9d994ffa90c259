"""Every dependency of the C++ engine points one way (ci/layers.toml, ci/check_layers.py).

The repository passes; a copy of it with one deliberate upward #include, one
upward CMake link, one CMake call of the driver or one upward `uses` in the
table fails, naming the file, the line and both rooms.
"""

from __future__ import annotations

import re

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECKER = REPO / "ci" / "check_layers.py"


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_layers", CHECKER)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_layers"] = mod
    spec.loader.exec_module(mod)
    return mod


check_layers = _load_checker()


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A copy of the repository's tracked sources and CMake files."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split()
    for f in files:
        src = REPO / f
        if not src.is_file() or src.suffix not in {".h", ".cc", ".c", ".txt", ".toml", ".def", ".py"}:
            continue
        dst = tmp_path / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return tmp_path


def offences(root: Path) -> list[str]:
    errors, found = check_layers.check(root)
    return [str(o) for o in errors + found]


def test_the_repository_points_one_way():
    assert offences(REPO) == []


def test_command_line_exit_status():
    r = subprocess.run([sys.executable, str(CHECKER), str(REPO)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_upward_include_fails(tree: Path):
    outcome = tree / "models" / "common" / "outcome.h"
    outcome.write_text(outcome.read_text().replace("#pragma once", '#pragma once\n#include "harness/runner/runner.h"', 1))
    found = offences(tree)
    assert len(found) == 1, found
    assert found[0].startswith("models/common/outcome.h:")
    assert "models/common (ground) must not include harness/runner/runner.h (harness/runner, engine)" in found[0]
    r = subprocess.run([sys.executable, str(CHECKER), str(tree)], capture_output=True, text=True)
    assert r.returncode == 1 and "models/common/outcome.h" in r.stdout


def test_a_sideways_include_between_models_fails(tree: Path):
    spmc = tree / "models" / "ffa" / "spmc.h"
    spmc.write_text(spmc.read_text().replace("#pragma once", '#pragma once\n#include "models/gmem/state.h"', 1))
    assert any("models/ffa (models) must not include models/gmem/state.h" in o for o in offences(tree))


def test_an_upward_cmake_link_fails(tree: Path):
    cm = tree / "models" / "CMakeLists.txt"
    cm.write_text(cm.read_text() + "\ntarget_link_libraries(kc_outcome PUBLIC kc_runner)\n")
    found = offences(tree)
    assert any(o.startswith("models/CMakeLists.txt:") and "kc_outcome (models/common) must not link kc_runner "
               "(harness/runner)" in o for o in found), found


def test_cmake_calling_the_driver_fails(tree: Path):
    cm = tree / "targets" / "el2" / "CMakeLists.txt"
    cm.write_text(cm.read_text() + "\nexecute_process(COMMAND python3 -m kconform.trees fetch debian:7.3)\n")
    assert any("CMake calls the Python driver (kconform.trees)" in o for o in offences(tree))


def test_an_upward_uses_in_the_table_is_refused(tree: Path):
    table = tree / "ci" / "layers.toml"
    # models/common (ground) gets a room of the engine floor in its uses.
    text = re.sub(r'(\[rooms\."models/common"\][^\[]*?uses = \[)', r'\1"harness/runner", ', table.read_text(), count=1)
    assert text != table.read_text()
    table.write_text(text)
    errors, _ = check_layers.check(tree)
    assert [str(e) for e in errors] == [
        "ci/layers.toml: room models/common (ground) uses harness/runner (engine): an upward edge"]
    r = subprocess.run([sys.executable, str(CHECKER), str(tree)], capture_output=True, text=True)
    assert r.returncode == 2


def test_a_data_file_may_not_include(tree: Path):
    d = tree / "models" / "gmem" / "rules.def"
    d.write_text('#include "harness/runner/runner.h"\n' + d.read_text())
    assert any("models/gmem/rules.def: a data file" in o for o in offences(tree))


def test_a_leftward_import_in_the_driver_fails(tree: Path):
    errors = tree / "harness" / "driver" / "kconform" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom kconform.commands import cli  # noqa\n")
    found = offences(tree)
    assert len(found) == 1 and found[0].startswith("harness/driver/kconform/core/errors.py:"), found
    assert "driver core must not import kconform.commands" in found[0]
