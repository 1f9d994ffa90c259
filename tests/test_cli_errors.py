"""Operating-system errors and bad flags end as one line naming the path and the
reason, exit 2, never a traceback (issue 11, part A); the helpers behind that
(core/errors.py, core/files.py) on their own."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import KCONFORM, REPO, kconform, needs_kvm
from kconform.core.errors import os_error_message, printable
from kconform.core.files import atomic_write, check_output_file, check_writable_dir
from kconform.core.errors import ToolError

ROOT = os.geteuid() == 0


def one_error(r: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, exactly one 'kconform: error:' line holding every word, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("kconform: error:")]
    assert len(errors) == 1, r.stderr
    for w in words:
        assert w in errors[0], (w, errors[0])
    return errors[0]


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder no file can be made in: /sys as root (sysfs refuses), else mode 0o500."""
    if ROOT:
        return Path("/sys")
    d = tmp_path / "ro"
    d.mkdir(mode=0o500)
    return d


# --- --output ---------------------------------------------------------------------------

def test_output_into_a_missing_folder(tmp_path):
    out = tmp_path / "nope" / "r.json"
    r = kconform("run", "--target", "host", "--format", "json", "--output", str(out),
                 "--report-dir", str(tmp_path / "r"))
    one_error(r, "flag --output", str(out), "no such folder")


def test_output_onto_a_folder(tmp_path):
    r = kconform("run", "--target", "host", "--format", "json", "--output", str(tmp_path),
                 "--report-dir", str(tmp_path / "r"))
    one_error(r, "flag --output", str(tmp_path), "is a folder")


def test_output_where_no_file_can_be_made(tmp_path):
    folder = unwritable_folder(tmp_path)
    out = folder / "kconform-report.json"
    r = kconform("run", "--target", "host", "--format", "json", "--output", str(out),
                 "--report-dir", str(tmp_path / "r"))
    one_error(r, "flag --output", str(out), "cannot create a file in")
    assert not out.exists()


def test_output_into_proc():
    r = kconform("run", "--target", "host", "--format", "json", "--output", "/proc/version")
    one_error(r, "flag --output", "/proc/version", "No such file or directory")


def test_output_with_the_table_format_is_refused(tmp_path):
    r = kconform("run", "--target", "host", "--output", str(tmp_path / "t.txt"),
                 "--report-dir", str(tmp_path / "r"))
    one_error(r, "flag --output", "--format table")
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


# --- --report-dir -------------------------------------------------------------------------

def test_report_dir_on_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    r = kconform("run", "--target", "host", "--report-dir", str(f))
    one_error(r, "flag --report-dir", str(f), "not a folder")


def test_report_dir_where_nothing_can_be_made(tmp_path):
    d = unwritable_folder(tmp_path) / "kconform-reports"
    r = kconform("run", "--target", "host", "--report-dir", str(d))
    one_error(r, "flag --report-dir", str(d))
    assert not d.exists()


def test_report_dir_below_a_file_in_proc():
    r = kconform("run", "--target", "host", "--report-dir", "/proc/version/reports")
    one_error(r, "flag --report-dir", "/proc/version/reports", "Not a directory")


# --- --baseline ---------------------------------------------------------------------------

def test_a_baseline_that_does_not_exist_is_an_error(tmp_path):
    missing = tmp_path / "known-findngs.json"
    r = kconform("run", "--target", "host", "--baseline", str(missing), "--report-dir", str(tmp_path / "r"))
    one_error(r, "flag --baseline", str(missing), "no such file")


def test_a_baseline_that_is_a_folder(tmp_path):
    r = kconform("run", "--target", "host", "--baseline", str(tmp_path), "--report-dir", str(tmp_path / "r"))
    one_error(r, "flag --baseline", str(tmp_path), "is a folder")


def test_a_binary_baseline(tmp_path):
    b = tmp_path / "b.json"
    b.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff")
    r = kconform("run", "--target", "host", "--baseline", str(b), "--report-dir", str(tmp_path / "r"))
    one_error(r, "flag --baseline", str(b), "not a text file")


def test_a_corrupt_baseline_stops_fuzz_before_it_builds(tmp_path):
    b = tmp_path / "b.json"
    b.write_text('{"format": 1, "findings": [\n')
    r = kconform("fuzz", "--engine", "afl", "--target", "host", "--time", "5s", "--baseline", str(b),
                 "--out", str(tmp_path / "f"), timeout=60)
    one_error(r, "flag --baseline", str(b), "not valid JSON")
    assert "building" not in r.stdout + r.stderr
    assert not (tmp_path / "f" / "host").exists()


def test_fuzz_out_where_nothing_can_be_made(tmp_path):
    d = unwritable_folder(tmp_path) / "kconform-fuzz"
    r = kconform("fuzz", "--engine", "afl", "--target", "host", "--time", "5s", "--out", str(d), timeout=60)
    one_error(r, "flag --out", str(d))
    assert "building" not in r.stdout + r.stderr


# --- repeated flags -------------------------------------------------------------------------

@needs_kvm
def test_a_repeated_target_runs_once_and_says_so(tmp_path):
    r = kconform("run", "--target", "host", "--target", "host", str(REPO / "corpora/gmem/create.kcs"),
                 "--report-dir", str(tmp_path))
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    assert "flag --target: 'host' given more than once; running it once" in r.stderr + r.stdout
    (run,) = list(tmp_path.iterdir())
    assert [p.name for p in run.glob("verdicts-*.jsonl")] == ["verdicts-host.jsonl"]
    assert not (run / "INCOMPLETE").exists()


def test_the_same_page_size_twice_is_built_once():
    from kconform.commands import cli
    args = cli.build_parser().parse_args(["run", "--page-size", "4K", "--page-size", "4096",
                                          "--page-size", "16k"])
    cli._validate(args)
    assert args.page_size == ["4K", "16k"]


def test_a_bad_page_size_is_refused_before_building(tmp_path):
    r = kconform("run", "--target", "el2", "--page-size", "4K", "--page-size", "3K",
                 "--report-dir", str(tmp_path))
    one_error(r, "flag --page-size", "'3K'")
    assert "building" not in r.stdout + r.stderr


# --- scenario files -------------------------------------------------------------------------

def test_dev_null_as_a_scenario_says_what_it_is(tmp_path):
    r = kconform("run", "/dev/null", "--report-dir", str(tmp_path))
    line = one_error(r, "/dev/null", "character device", "not a regular file")
    assert "no such" not in line


def test_an_empty_scenario_file_says_empty(tmp_path):
    f = tmp_path / "e.kcs"
    f.write_text("")
    one_error(kconform("run", str(f), "--report-dir", str(tmp_path / "r")), str(f), "empty")


def test_the_runner_gives_the_reason_it_cannot_open_a_file(tmp_path):
    r = subprocess.run([str(KCONFORM), "scenario", "check", str(tmp_path / "nope.kcs"), "/dev/null",
                        str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2
    assert f"{tmp_path / 'nope.kcs'}: cannot open: No such file or directory" in r.stderr
    for one in ("/dev/null", str(tmp_path)):
        r = subprocess.run([str(KCONFORM), "scenario", "check", one], capture_output=True, text=True)
        assert r.returncode == 2 and "cannot open\n" not in r.stderr, r.stderr
    r = subprocess.run([str(KCONFORM), "scenario", "check", "/dev/null"], capture_output=True, text=True)
    assert "not a regular file" in r.stderr
    r = subprocess.run([str(KCONFORM), "scenario", "check", str(tmp_path)], capture_output=True, text=True)
    assert "is a folder" in r.stderr


def test_a_nul_byte_does_not_cut_the_message(tmp_path):
    f = tmp_path / "nul.kcs"
    f.write_bytes(b"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=lo\x00ts flags=0\n")
    r = kconform("run", str(f), "--report-dir", str(tmp_path / "r"))
    line = one_error(r, str(f), "field 'size'")
    assert "\x00" not in r.stderr
    assert "lo\\x00ts'" in line  # the whole token, the NUL escaped


@needs_kvm
def test_ffa_files_skipped_by_a_host_run_are_named(tmp_path):
    gmem, ffa = REPO / "corpora/gmem/create.kcs", REPO / "corpora/ffa/smoke.kcs"
    r = kconform("run", "--target", "host", str(gmem), str(ffa), "--report-dir", str(tmp_path))
    assert r.returncode in (0, 1), r.stderr
    said = [line for line in (r.stderr + r.stdout).splitlines() if "file(s) skipped" in line]
    assert len(said) == 1 and "1 ffa scenario file(s) skipped" in said[0] and str(ffa) in said[0], said


# --- a full disk during a run (RLIMIT_FSIZE: writes fail with EFBIG) ------------------------

def _file_size_limit(limit: int):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


@needs_kvm
def test_a_full_disk_during_a_run_is_one_line_and_leaves_the_folder_marked(tmp_path):
    r = subprocess.run([str(KCONFORM), "run", "--target", "host", "--report-dir", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=600,
                       preexec_fn=_file_size_limit(64 * 1024))
    (run,) = list(tmp_path.iterdir())
    one_error(r, str(run / "verdicts-host.jsonl"), "File too large")
    marker = json.loads((run / "INCOMPLETE").read_text())
    assert marker["status"] == "incomplete" and "File too large" in marker["reason"]
    assert "verdicts-host.jsonl" in marker["contents"]
    assert f"{run}/INCOMPLETE" in r.stderr


# --- a finished run leaves no marker; the top-level handler ----------------------------------

@needs_kvm
def test_a_finished_run_has_no_incomplete_marker_and_writes_output(tmp_path):
    out = tmp_path / "report.json"
    r = kconform("run", "--target", "host", str(REPO / "corpora/gmem/create.kcs"), "--format", "json",
                 "--output", str(out), "--report-dir", str(tmp_path / "r"))
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(out.read_text())["runs"]
    (run,) = list((tmp_path / "r").iterdir())
    assert not (run / "INCOMPLETE").exists()
    assert not [p for p in run.rglob(".*.tmp")], "a temporary file was left behind"


def _main_in_child(tmp_path: Path, raise_line: str, debug: bool) -> subprocess.CompletedProcess:
    """cli.main with one command replaced by a function that raises."""
    script = tmp_path / "boom.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'harness' / 'driver')!r})\n"
        "from kconform.commands import cli\n"
        "def boom(args, console):\n"
        f"    {raise_line}\n"
        "import types; sys.modules['boom'] = types.SimpleNamespace(boom=boom)\n"
        "cli.COMMANDS['rules'] = ('boom', 'boom')\n"
        "sys.exit(cli.main(['rules']))\n")
    env = dict(os.environ)
    env.pop("KCONFORM_DEBUG", None)
    if debug:
        env["KCONFORM_DEBUG"] = "1"
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)


def test_an_unexpected_exception_is_one_line_and_exit_2(tmp_path):
    r = _main_in_child(tmp_path, "raise KeyError('no such key')", debug=False)
    one_error(r, "internal error", "KeyError", "KCONFORM_DEBUG=1")
    r = _main_in_child(tmp_path, "raise KeyError('no such key')", debug=True)
    assert r.returncode == 2 and "Traceback" in r.stderr


def test_an_os_error_is_one_line_with_path_and_strerror(tmp_path):
    r = _main_in_child(tmp_path, "open('/nonexistent/dir/file')", debug=False)
    one_error(r, "/nonexistent/dir/file: No such file or directory")


# --- the helpers ----------------------------------------------------------------------------

def test_printable_escapes_what_a_terminal_would_eat():
    assert printable("a\x00b\x1b[31mc\nd\u200b") == "a\\x00b\\x1b[31mc\nd\\u200b"
    assert printable("x\ny", keep_newlines=False) == "x\\x0ay"


def test_os_error_message_names_path_and_reason():
    e = OSError(28, os.strerror(28), "/var/out/report.json")
    assert os_error_message(e) == "/var/out/report.json: No space left on device"
    e = OSError(18, os.strerror(18), "/a", None, "/b")
    assert os_error_message(e, "rename") == "rename: /a -> /b: Invalid cross-device link"


def test_atomic_write_replaces_whole_and_never_overwrites_when_exclusive(tmp_path):
    p = tmp_path / "r.json"
    atomic_write(p, "one")
    atomic_write(p, "two")
    assert p.read_text() == "two"
    with pytest.raises(FileExistsError):
        atomic_write(p, "three", exclusive=True)
    assert p.read_text() == "two"
    assert [x.name for x in tmp_path.iterdir()] == ["r.json"]
    atomic_write("/dev/null", "into a device, in place")  # never replaced by a regular file
    assert Path("/dev/null").is_char_device()


def test_atomic_write_on_a_full_disk_keeps_the_old_file_and_names_it(tmp_path):
    p = tmp_path / "report.json"
    p.write_text("old")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from kconform.core.files import atomic_write\n"
            "try:\n    atomic_write(sys.argv[2], 'x' * 100000)\n"
            "except OSError as e:\n    print(e.errno, e.filename)\n")
    r = subprocess.run([sys.executable, "-c", code, str(REPO / "harness" / "driver"), str(p)],
                       capture_output=True, text=True, preexec_fn=_file_size_limit(4096))
    assert r.stdout.split() == ["27", str(p)], r.stdout + r.stderr  # EFBIG, the name asked for
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["report.json"], "the temporary file was left"


def test_check_helpers(tmp_path):
    assert check_writable_dir(tmp_path / "a" / "b", "--x").is_dir()
    with pytest.raises(ToolError, match="not a folder"):
        check_writable_dir(Path("/proc/version"), "--x")
    with pytest.raises(ToolError, match="is a folder"):
        check_output_file(tmp_path, "--x")
    assert check_output_file(Path("/dev/null"), "--x") == Path("/dev/null")
