"""`kconform test` cannot pass by accident (commands/test.py): a test runner that
dies before its JUnit file, a failing C++ test, a test program that is not built,
fewer tests run than collected, and (in CI) a skip no machine fact explains each
make it exit 1, and its last line says so. Real pytest and ctest runs on small
projects made here."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from kconform.commands import test as kt

GTEST_PROJECT = """cmake_minimum_required(VERSION 3.25)
project(p CXX)
find_package(GTest REQUIRED)
enable_testing()
include(GoogleTest)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
add_executable(probe_test probe_test.cc)
target_link_libraries(probe_test GTest::gtest GTest::gtest_main)
gtest_discover_tests(probe_test)
"""

GTESTS = """#include <gtest/gtest.h>
TEST(Probe, Passes) {}
TEST(Probe, SkipsForTheMachine) { GTEST_SKIP() << "no /dev/kvm: absent here"; }
TEST(Probe, SkipsForAPackage) { GTEST_SKIP() << "qemu is not installed"; }
"""


@pytest.fixture(scope="module")
def ctest_project(tmp_path_factory):
    """A built CMake project: probe_test.cc (pass, machine skip, package skip) in
    ctest, and orphan_test.cc, a test program no CMake file adds."""
    root = tmp_path_factory.mktemp("ctest-project")
    (root / "CMakeLists.txt").write_text(GTEST_PROJECT)
    (root / "probe_test.cc").write_text(GTESTS)
    (root / "orphan_test.cc").write_text("int main() { return 0; }\n")
    build = root / "build"
    for cmd in (["cmake", "-S", str(root), "-B", str(build), "-G", "Ninja", "-DCMAKE_CXX_COMPILER=clang++"],
                ["cmake", "--build", str(build)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    return root, build


def _closing(tallies, missing, capsys) -> tuple[int, str]:
    rc = kt.finish(tallies, missing, log=lambda m: None)
    return rc, capsys.readouterr().out.strip().splitlines()[-1]


def test_a_pytest_crash_before_its_junit_file_fails_the_run(tmp_path, capsys):
    (tmp_path / "test_dies.py").write_text("import os\nos._exit(3)\n")
    t = kt.run_pytest("pytest", tmp_path / "junit.xml", ["-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                                                          str(tmp_path / "test_dies.py")], ci=False, cwd=tmp_path)
    assert any("exited 3" in p for p in t.problems), t
    assert any("no JUnit file" in p for p in t.problems), t
    rc, last = _closing([t], [], capsys)
    assert rc == 1 and "FAILED" in last, last


def test_a_pytest_usage_error_fails_the_run(tmp_path, capsys):
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    pass\n")
    t = kt.run_pytest("pytest", tmp_path / "junit.xml", ["--no-such-option", str(tmp_path)], ci=False, cwd=tmp_path)
    rc, last = _closing([t], [], capsys)
    assert rc == 1 and "exited 4" in " ".join(t.problems), t


def test_fewer_tests_run_than_collected_fails_the_stage(tmp_path):
    junit = tmp_path / "j.xml"
    junit.write_text('<testsuite tests="1"><testcase classname="a" name="b"/></testsuite>')
    t = kt.read_junit("pytest", junit, 0, 3, ci=False)
    assert t.passed == 1 and t.problems == ["pytest: 2 of 3 collected tests did not run"], t
    assert kt.read_junit("pytest", junit, 0, 1, ci=False).problems == []


def test_an_empty_junit_file_fails_the_stage(tmp_path):
    (tmp_path / "j.xml").write_text("")
    assert kt.read_junit("pytest", tmp_path / "j.xml", 0, None, ci=False).problems == [
        f"pytest: the JUnit file {tmp_path / 'j.xml'} is empty"]


def test_a_failing_ctest_fails_the_run(ctest_project, tmp_path, capsys):
    root, build = ctest_project
    (root / "probe_test.cc").write_text(GTESTS + "TEST(Probe, Fails) { EXPECT_EQ(1, 2); }\n")
    try:
        r = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        t = kt.run_ctest("ctest probe", build, ["ctest", "--test-dir", str(build)], [], ci=False)
    finally:
        (root / "probe_test.cc").write_text(GTESTS)
        subprocess.run(["cmake", "--build", str(build)], capture_output=True)
    assert t.failed == 1 and t.passed == 1 and any("exited" in p for p in t.problems), t
    rc, last = _closing([t], [], capsys)
    assert rc == 1 and last.startswith("kconform: 1 passed, 1 failed"), last


def test_gtest_skips_are_counted_by_reason_and_in_ci_only_the_machine_s_pass(ctest_project, capsys):
    _, build = ctest_project
    t = kt.run_ctest("ctest probe", build, ["ctest", "--test-dir", str(build)], [], ci=False)
    assert (t.passed, t.failed, t.skipped, t.problems) == (1, 0, {"no /dev/kvm": 1, "other": 1}, []), t
    rc, last = _closing([t], [], capsys)
    assert rc == 0 and last == "kconform: 1 passed, 0 failed, 2 skipped: 1 no /dev/kvm, 1 other", last
    t = kt.run_ctest("ctest probe", build, ["ctest", "--test-dir", str(build)], [], ci=True)
    assert (t.passed, t.failed, t.skipped) == (1, 1, {"no /dev/kvm": 1}), t
    assert "SkipsForAPackage: qemu is not installed" in t.problems[0], t.problems
    rc, last = _closing([t], [], capsys)
    assert rc == 1 and "1 skipped: 1 no /dev/kvm" in last and "FAILED" in last, last


def test_a_test_program_not_in_ctest_fails_the_run(ctest_project, capsys):
    root, build = ctest_project
    missing = kt.programs_not_run([build], root)
    assert missing == ["orphan_test.cc: not built"], missing
    t = kt.run_ctest("ctest probe", build, ["ctest", "--test-dir", str(build)], [], ci=False)
    rc, last = _closing([t], [f"test program {m}" for m in missing], capsys)
    assert rc == 1 and last.endswith("FAILED: test program orphan_test.cc: not built"), last


def test_a_program_built_but_not_in_ctest_is_named(ctest_project, tmp_path):
    root, build = ctest_project
    alt = tmp_path / "proj"
    shutil.copytree(root, alt, ignore=shutil.ignore_patterns("build"))
    (alt / "CMakeLists.txt").write_text(GTEST_PROJECT.replace("gtest_discover_tests(probe_test)\n", ""))
    b = alt / "build"
    for cmd in (["cmake", "-S", str(alt), "-B", str(b), "-G", "Ninja", "-DCMAKE_CXX_COMPILER=clang++"],
                ["cmake", "--build", str(b)]):
        assert subprocess.run(cmd, capture_output=True).returncode == 0
    assert kt.programs_not_run([b], alt) == ["orphan_test.cc: not built",
                                             "probe_test.cc: built into probe_test, which ctest does not run"]


def test_the_gtest_skip_reason_is_read_from_ctest_s_output():
    import xml.etree.ElementTree as ET
    case = ET.fromstring(textwrap.dedent("""\
        <testcase name="A.B" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
        <system-out>[ RUN      ] A.B
        /x/y_test.cc:12: Skipped
        not for this kernel: no write()
        [  SKIPPED ] A.B (0 ms)
        </system-out></testcase>"""))
    assert kt.skip_reason(case) == "not for this kernel: no write()"
