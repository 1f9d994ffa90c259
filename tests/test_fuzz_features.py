"""Rule sides as coverage features (harness/fuzz/rule_features.h), seen by both
engines: the EL2 fuzz target run over the FF-A smoke seeds reaches more
features with them than with KCONFORM_FUZZ_NO_RULE_FEATURES=1, for libFuzzer
("INITED ... ft:") and for AFL++ (afl-showmap's edge map)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, default_tree_missing

LABEL = "el2-4k"


def _seeds(tmp_path: Path) -> Path:
    """The 4K FF-A smoke scenarios in the binary form the fuzz runner reads."""
    from kconform.core.paths import runner_binary
    from kconform.engine.build import build_preset
    from kconform.engine.runner import Engine
    build_preset("default", targets=["kconform-runner"], log=lambda m: None)
    out = tmp_path / "seeds"
    out.mkdir()
    Engine(runner_binary()).to_binary([str(REPO / "corpora" / "ffa" / "smoke.kcs")], out)
    for f in list(out.iterdir()):
        if not f.name.endswith("4k.kcsb"):
            f.unlink()
    assert len(list(out.iterdir())) >= 5, sorted(p.name for p in out.iterdir())
    return out


def _binary(engine: str) -> Path:
    """kconform-fuzz-el2-4k for engine: skipped without the kernel tree to build it from
    (not cached, no network); a build that fails is a failure."""
    from kconform.engine import fuzzers
    why = default_tree_missing()
    if why:
        pytest.skip(why)
    return fuzzers.build_harness(engine, LABEL, log=lambda m: None)


def _env(tmp_path: Path, off: bool) -> dict:
    env = dict(os.environ, KCONFORM_FUZZ_FINDINGS=str(tmp_path / ("find-off" if off else "find-on")),
               KCONFORM_FUZZ_KNOWN_RULES="")
    env.pop("KCONFORM_FUZZ_NO_RULE_FEATURES", None)
    if off:
        env["KCONFORM_FUZZ_NO_RULE_FEATURES"] = "1"
    return env


def test_libfuzzer_counts_rule_sides_as_features(tmp_path):
    if not shutil.which("clang++"):
        pytest.skip("clang (libFuzzer) is not installed")
    binary = _binary("libfuzzer")
    seeds = _seeds(tmp_path)
    got = {}
    for off in (False, True):
        r = subprocess.run([str(binary), "-runs=0", str(seeds)], capture_output=True, text=True,
                           env=_env(tmp_path, off), timeout=600)
        m = re.search(r"INITED cov: (\d+) ft: (\d+)", r.stderr)
        assert m, r.stderr[-3000:]
        got[off] = (int(m.group(1)), int(m.group(2)))
    (cov_on, ft_on), (cov_off, ft_off) = got[False], got[True]
    assert ft_on > ft_off and cov_on > cov_off, got
    # The sides reached are also counted (FindingStore: one line per side).
    sides = [line for f in (tmp_path / "find-on" / ".counts").glob("*.tsv")
             for line in f.read_text().splitlines() if line.startswith("side\t")]
    assert any(line.endswith("\tallowed") for line in sides), sides
    assert all(re.fullmatch(r"side\t[A-Z0-9_.]+\t(allowed|forbidden)", line) for line in sides), sides


def test_afl_map_grows_with_rule_sides(tmp_path):
    if not shutil.which("afl-showmap") or not shutil.which("afl-clang-fast++"):
        pytest.skip("AFL++ (afl-showmap, afl-clang-fast++) is not installed")
    binary = _binary("afl")
    seeds = _seeds(tmp_path)
    edges = {}
    for off in (False, True):
        out = tmp_path / f"map-{'off' if off else 'on'}"
        # Input through AFL++'s shared memory (libAFLDriver's persistent mode), not @@.
        r = subprocess.run(["afl-showmap", "-q", "-e", "-t", "20000", "-i", str(seeds), "-C", "-o", str(out),
                            "--", str(binary)], capture_output=True, text=True, env=_env(tmp_path, off),
                           timeout=600)
        assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
        edges[off] = len([line for line in out.read_text().splitlines() if line.strip()])
    assert edges[False] > edges[True], edges
