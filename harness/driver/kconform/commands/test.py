"""`kconform test`: the project's whole test suite (C++ unit tests in the
plain and ASan+UBSan builds, then the Python and end-to-end tests)."""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console

from kconform.core import deps, procs
from kconform.core.errors import ToolError
from kconform.core.paths import REPO, build_dir
from kconform.engine.build import build_preset


def _junit_counts(path: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) from a JUnit XML file."""
    if not path.exists():
        return 0, 0, 0
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests = failed = skipped = 0
    for s in suites:
        tests += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return tests - failed - skipped, failed, skipped


# The ASan+UBSan run leaves out, unless KCONFORM_NIGHTLY=1, the tests that run
# whole corpora many times over (minutes each under ASan): the plain build runs
# them every time, the nightly run under ASan too.
ASAN_NIGHTLY_ONLY = r"El2Restore\.ExactAfterEveryScenario|SameBlame\.RunAndFuzzBlameTheSameRulesForEveryOp"


def ctest_args(preset: str) -> list[str]:
    """Two tests at a time (CI machines have two cores; the tests are independent
    processes), and the ASan run's nightly-only tests left out by day."""
    args = ["-j", str(min(2, os.cpu_count() or 1))]
    if preset == "asan" and os.environ.get("KCONFORM_NIGHTLY", "") in ("", "0"):
        args += ["-E", ASAN_NIGHTLY_ONLY]
    return args


def cmd_test(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    # Every group (QEMU, AFL++, the kernel build, benchmarks), as `run` and `fuzz`
    # install theirs: the tests of each part run here, none is skipped for a package
    # that was never installed (in CI a skip is a failure: tests/conftest.py).
    deps.ensure(list(deps.read_groups()), log)
    presets = ["default"] if args.no_asan else ["default", "asan"]
    totals = [0, 0, 0]
    for preset in presets:
        log(f"kconform test: building the {preset} preset")
        build_preset(preset, log=log)
        junit = build_dir(preset) / "ctest-results.xml"
        junit.unlink(missing_ok=True)
        log(f"kconform test: C++ unit tests ({preset})")
        procs.run(["ctest", "--preset", preset, "--output-junit", str(junit), *ctest_args(preset)], cwd=REPO)
        for i, n in enumerate(_junit_counts(junit)):
            totals[i] += n
    log("kconform test: Python and end-to-end tests (pytest)")
    junit = build_dir("default") / "pytest-results.xml"
    junit.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-ra", f"--junitxml={junit}", str(REPO / "tests")]
    if args.pytest_args:
        cmd += args.pytest_args
    procs.run(cmd, cwd=REPO)  # its own process group: SIGINT/SIGTERM end every test process
    for i, n in enumerate(_junit_counts(junit)):
        totals[i] += n
    passed, failed, skipped = totals
    if passed + failed == 0:
        raise ToolError("no test ran")
    print(f"kconform: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0
