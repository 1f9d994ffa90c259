"""`kconform test`: the project's whole test suite (C++ unit tests in the
plain and ASan+UBSan builds and of the RECLAIM2 reference handler, then the
Python and end-to-end tests).

A run passes only when every stage passes: each test runner exits 0, writes its
JUnit file, and runs every test it collected; every test program of the tree
(each *_test.cc) is built and in some ctest stage; and, under KCONFORM_CI=1,
every skip has a reason the machine cannot change (core/skips.py), in C++ as in
Python. The last line says what failed; skips are counted by reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

from rich.console import Console

from kconform.core import deps, procs, skips
from kconform.core.errors import ToolError
from kconform.core.paths import REPO, build_dir
from kconform.engine.build import build_preset, cmake_build
from kconform.sources import patches, source_trees, tree_fetch, trees

# The ASan+UBSan run leaves out, unless KCONFORM_NIGHTLY=1, the tests that run
# whole corpora many times over (minutes each under ASan): the plain build runs
# them every time, the nightly run under ASan too.
ASAN_NIGHTLY_ONLY = r"El2Restore\.ExactAfterEveryScenario|SameBlame\.RunAndFuzzBlameTheSameRulesForEveryOp"

# Our RECLAIM2 reference handler's unit tests (targets/el2/reclaim2/reclaim2_test.cc)
# need ffa.c of a tree that carries the patch: built standalone in their own folder.
RECLAIM2_SOURCE = REPO / "targets" / "el2" / "reclaim2"
RECLAIM2_PATCH = RECLAIM2_SOURCE / "reclaim2-reference.patch"
RECLAIM2_PAGE_SIZES = "4096;16384"

# Folders never searched for test programs.
NOT_SOURCE = {"build", ".git", "reports", "node_modules", "__pycache__"}


def ctest_filters(preset: str) -> list[str]:
    """The tests a preset's ctest leaves out: the ASan run's nightly-only ones by day."""
    if preset == "asan" and os.environ.get("KCONFORM_NIGHTLY", "") in ("", "0"):
        return ["-E", ASAN_NIGHTLY_ONLY]
    return []


def ctest_parallel() -> list[str]:
    """Two tests at a time (CI machines have two cores; the tests are independent processes)."""
    return ["-j", str(min(2, os.cpu_count() or 1))]


# --- what a stage's JUnit file says -------------------------------------------

@dataclasses.dataclass
class Tally:
    """One stage's outcome: what ran, and every reason the stage fails."""
    stage: str
    passed: int = 0
    failed: int = 0
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)  # skips.ACCEPTED name -> count
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def ran(self) -> int:
        return self.passed + self.failed + sum(self.skipped.values())


_GTEST_SKIPPED = re.compile(r"^.*:\d+: Skipped\n(.*?)^\[  SKIPPED \]", re.M | re.S)


def skip_reason(case: ET.Element) -> str:
    """Why a JUnit test case was skipped. pytest puts the reason in <skipped>
    (message and text); ctest puts "SKIP_REGULAR_EXPRESSION_MATCHED" there and
    GoogleTest's own lines in <system-out>: "file:line: Skipped", the reason,
    "[  SKIPPED ] ..."."""
    out = case.findtext("system-out") or ""
    m = _GTEST_SKIPPED.search(out)
    if m:
        return m.group(1).strip()
    sk = case.find("skipped")
    if sk is None:
        return ""
    message = sk.get("message") or ""
    return message if message and message != "SKIP_REGULAR_EXPRESSION_MATCHED" else (sk.text or message)


def read_junit(stage: str, path: Path, rc: int, collected: int | None, ci: bool) -> Tally:
    """The outcome of a stage from its runner's exit status and JUnit file. The
    stage fails when the runner exits non-zero, its JUnit file is missing, empty or
    unreadable, fewer tests ran than it collected, or (ci) a skip has a reason no
    machine fact explains."""
    t = Tally(stage)
    if rc != 0:
        t.problems.append(f"{stage}: exited {rc}")
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        t.problems.append(f"{stage}: no JUnit file {path} ({e.strerror}): the runner stopped before writing it")
        return t
    if not text.strip():
        t.problems.append(f"{stage}: the JUnit file {path} is empty")
        return t
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        t.problems.append(f"{stage}: the JUnit file {path} cannot be read: {e}")
        return t
    unaccepted: list[str] = []
    seen: set[tuple[str, str]] = set()
    for case in root.iter("testcase"):
        key = (case.get("classname") or "", case.get("name") or "")
        if key in seen:  # pytest writes a teardown error as a second element of the same test
            if any(c.tag in ("failure", "error") for c in case):
                t.failed += 1
            continue
        seen.add(key)
        tags = {c.tag for c in case}
        if tags & {"failure", "error"} or case.get("status") == "fail":
            t.failed += 1
        elif "skipped" in tags or case.get("status") in ("notrun", "disabled"):
            reason = skip_reason(case)
            kind = skips.category(reason)
            if kind is None:
                if ci:
                    t.failed += 1
                    unaccepted.append(f"{key[1] or key[0]}: {reason.splitlines()[0] if reason else '(no reason)'}")
                    continue
                kind = "other"
            t.skipped[kind] = t.skipped.get(kind, 0) + 1
        else:
            t.passed += 1
    if unaccepted:
        t.problems.append(f"{stage}: {len(unaccepted)} skip(s) with a reason the machine does not explain "
                          f"(KCONFORM_CI=1; core/skips.py): " + "; ".join(unaccepted[:5])
                          + (" ..." if len(unaccepted) > 5 else ""))
    if t.ran == 0:
        t.problems.append(f"{stage}: no test ran")
    if collected is not None and t.ran < collected:
        t.problems.append(f"{stage}: {collected - t.ran} of {collected} collected tests did not run")
    return t


# --- every test program of the tree, in some ctest stage ------------------------

def test_sources(root: Path = REPO) -> list[Path]:
    """Every C++ test program source of the tree (*_test.cc), build folders aside."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in NOT_SOURCE and not d.startswith(".")]
        found += [Path(dirpath) / f for f in filenames if f.endswith("_test.cc")]
    return sorted(found)


_OBJECT_OF = re.compile(r"(?:^|\s)-o\s+(\S+)")
_TARGET_OF = re.compile(r"CMakeFiles/([^/]+)\.dir/")


def targets_by_source(build: Path) -> dict[Path, set[str]]:
    """Which CMake targets of a build folder compile each source (its
    compile_commands.json: the object file lies under CMakeFiles/<target>.dir/)."""
    try:
        entries = json.loads((build / "compile_commands.json").read_text())
    except (OSError, ValueError):
        return {}
    out: dict[Path, set[str]] = {}
    for e in entries:
        m = _OBJECT_OF.search(e.get("command") or " ".join(e.get("arguments") or []))
        t = _TARGET_OF.search(e.get("output") or (m.group(1) if m else ""))
        if t:
            src = Path(e["file"])
            src = (Path(e.get("directory", "")) / src).resolve() if not src.is_absolute() else src.resolve()
            out.setdefault(src, set()).add(t.group(1))
    return out


def ctest_programs(build: Path) -> set[str]:
    """The names of the executables ctest runs in a build folder."""
    r = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True)
    if r.returncode != 0:
        return set()
    tests = json.loads(r.stdout).get("tests", [])
    return {Path(t["command"][0]).name for t in tests if t.get("command")}


def programs_not_run(builds: list[Path], root: Path = REPO) -> list[str]:
    """Each *_test.cc of the tree that no executable in these builds' ctest runs:
    never compiled (its folder not added, its tree not fetched) or compiled into a
    program ctest does not list. Paths relative to root."""
    compiled: dict[Path, set[str]] = {}
    listed: set[str] = set()
    for b in builds:
        for src, names in targets_by_source(b).items():
            compiled.setdefault(src, set()).update(names)
        listed |= ctest_programs(b)
    missing = []
    for src in test_sources(root):
        names = compiled.get(src.resolve(), set())
        if not names:
            missing.append(f"{src.relative_to(root)}: not built")
        elif not names & listed:
            missing.append(f"{src.relative_to(root)}: built into {', '.join(sorted(names))}, which ctest does not run")
    return missing


# --- the stages ----------------------------------------------------------------

def ctest_collected(cwd: Path, base: list[str], filters: list[str]) -> int | None:
    """How many tests ctest would run (`ctest -N` with the same filters)."""
    r = subprocess.run([*base, "-N", *filters], cwd=cwd, capture_output=True, text=True)
    m = re.search(r"^Total Tests: (\d+)", r.stdout, re.M)
    return int(m.group(1)) if m else None


def run_ctest(stage: str, build: Path, base: list[str], filters: list[str], ci: bool) -> Tally:
    """ctest in build (base: ["ctest", "--preset", P] or ["ctest", "--test-dir", B])."""
    junit = build / "ctest-results.xml"
    junit.unlink(missing_ok=True)
    collected = ctest_collected(REPO, base, filters)
    rc = procs.run([*base, "--output-junit", str(junit), *ctest_parallel(), *filters], cwd=REPO).returncode
    return read_junit(stage, junit, rc, collected, ci)


def run_pytest(stage: str, junit: Path, args: list[str], ci: bool, cwd: Path = REPO) -> Tally:
    """pytest with a JUnit file; the number it collected comes back through
    KCONFORM_TEST_COLLECTED (tests/conftest.py)."""
    junit.unlink(missing_ok=True)
    count = junit.with_suffix(".collected")
    count.unlink(missing_ok=True)
    env = dict(os.environ, KCONFORM_TEST_COLLECTED=str(count))
    cmd = [sys.executable, "-m", "pytest", "-q", "-ra", f"--junitxml={junit}", *args]
    rc = procs.run(cmd, cwd=cwd, env=env).returncode  # its own process group: SIGINT/SIGTERM end every test
    try:
        collected: int | None = int(count.read_text())
    except (OSError, ValueError):
        collected = None
    return read_junit(stage, junit, rc, collected, ci)


def reclaim2_build(log: Callable[[str], None]) -> Path:
    """Builds reclaim2_test_<4k|16k> against Debian 7.3 with our reference patch
    (the standalone recipe of targets/el2/reclaim2/CMakeLists.txt)."""
    from kconform.targets.el2 import compiler_launcher
    try:
        tree = patches.apply(tree_fetch.resolve(trees.DEFAULT_TREE, progress=log).path, RECLAIM2_PATCH)
    except (trees.TreeError, patches.PatchError) as e:
        raise ToolError(f"reclaim2 tests: the patched tree cannot be made: {e}") from e
    return cmake_build(build_dir("reclaim2"), source=RECLAIM2_SOURCE,
                       definitions={"CMAKE_C_COMPILER": "clang", "CMAKE_CXX_COMPILER": "clang++",
                                    "CMAKE_BUILD_TYPE": "RelWithDebInfo",
                                    "KCONFORM_PAGE_SIZE": RECLAIM2_PAGE_SIZES, **compiler_launcher()},
                       tree=tree, tree_required=True, what="the RECLAIM2 reference handler's tests", log=log)


def summary(tallies: list[Tally], missing: list[str]) -> tuple[str, bool]:
    """The closing line and whether the run failed."""
    passed = sum(t.passed for t in tallies)
    failed = sum(t.failed for t in tallies)
    by_kind: dict[str, int] = {}
    for t in tallies:
        for k, n in t.skipped.items():
            by_kind[k] = by_kind.get(k, 0) + n
    n_skipped = sum(by_kind.values())
    skipped = f"{n_skipped} skipped"
    if n_skipped:
        skipped += ": " + ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items(), key=lambda kv: -kv[1]))
    problems = [p for t in tallies for p in t.problems] + missing
    line = f"kconform: {passed} passed, {failed} failed, {skipped}"
    bad = bool(failed or problems)
    if problems:
        line += f"; FAILED: {len(problems)} problem(s) above" if len(problems) > 1 else f"; FAILED: {problems[0]}"
    return line, bad


def cmd_test(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    ci = skips.ci_mode()
    # Every group (QEMU, AFL++, the kernel build, benchmarks), as `run` and `fuzz`
    # install theirs: the tests of each part run here, none is skipped for a package
    # that was never installed (in CI a skip is a failure: core/skips.py).
    deps.ensure(list(deps.read_groups()), log)
    presets = ["default"] if args.no_asan else ["default", "asan"]
    tallies: list[Tally] = []
    builds: list[Path] = []
    for preset in presets:
        log(f"kconform test: building the {preset} preset")
        # The TF-A and OP-TEE trees are required here: without them whole test
        # programs (spmc_test, optee_test, their runners) would not exist.
        build_preset(preset, log=log, spmc_tree=source_trees.DEFAULT_SPMC_TREE, optee_required=True)
        log(f"kconform test: C++ unit tests ({preset})")
        tallies.append(run_ctest(f"ctest {preset}", build_dir(preset), ["ctest", "--preset", preset],
                                 ctest_filters(preset), ci))
        builds.append(build_dir(preset))
    log("kconform test: building the RECLAIM2 reference handler's tests (Debian 7.3 + reclaim2-reference.patch)")
    r2 = reclaim2_build(log)
    log("kconform test: C++ unit tests (reclaim2)")
    tallies.append(run_ctest("ctest reclaim2", r2, ["ctest", "--test-dir", str(r2)], ctest_filters("default"), ci))
    builds.append(r2)
    missing = [f"test program {m}" for m in programs_not_run(builds)]
    log("kconform test: Python and end-to-end tests (pytest)")
    tallies.append(run_pytest("pytest", build_dir("default") / "pytest-results.xml",
                              [str(REPO / "tests"), *(args.pytest_args or [])], ci))
    return finish(tallies, missing, log)


def finish(tallies: list[Tally], missing: list[str], log: Callable[[str], None]) -> int:
    """Prints every problem, then the closing line; 1 when anything failed."""
    for p in [p for t in tallies for p in t.problems] + missing:
        log(f"kconform test: {p}")
    line, bad = summary(tallies, missing)
    print(line)
    return 1 if bad else 0
