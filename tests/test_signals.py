"""SIGTERM and SIGINT end every child kconform started (issue 11, part B): QEMU of
`run --target qemu`, afl-fuzz and its fork server of `fuzz --engine afl`, within a
few seconds; the report folder is marked interrupted; the exit status is 128 + the
signal. The end-to-end cases (marked slow; `./kconform test` runs them) take about
a minute together; the process registry (core/procs.py) is also tested on its own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import KCONFORM, REPO, needs_kvm
from kconform.core import procs
from kconform.core.errors import Interrupted

OURS = ("qemu-system", "afl-fuzz", "kconform-fuzz", "kconform-runner", "kconform", "make", "cmake", "ninja")


def processes_in(folder: Path) -> dict[int, tuple[int, str]]:
    """pid -> (process group, command line) of every process whose command line or
    working folder points into folder."""
    out = {}
    needle = str(folder)
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            try:
                cwd = os.readlink(d / "cwd")
            except OSError:
                cwd = ""
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if not cmd:
            continue  # a zombie or a kernel thread
        if needle in cmd or cwd == needle or cwd.startswith(needle + "/"):
            pgrp = int(stat.rsplit(")", 1)[1].split()[2])
            out[int(d.name)] = (pgrp, cmd)
    return out


def group_members(pgids: set[int]) -> list[str]:
    left = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) in pgids:
            left.append(f"{d.name} {stat.split(')')[0]})")
    return left


def interrupt_and_check(args: list[str], folder: Path, ready, sig: int, logs: Path,
                        ready_timeout: float = 180) -> tuple[str, dict]:
    """Starts ./kconform ARGS, waits until ready(stderr, processes) is true, sends sig, and
    checks that kconform exits 128 + sig and that within 10 s no process of the run
    (by command line, working folder or process group) is left. Returns (stderr, the
    processes seen just before the signal). ready and the text returned see stdout and
    stderr together: progress lines go where the run's console prints."""
    logs.mkdir(exist_ok=True)
    err_path, out_path = logs / "stderr", logs / "stdout"

    def output() -> str:
        return out_path.read_text(errors="replace") + err_path.read_text(errors="replace")
    with open(logs / "stdout", "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen([str(KCONFORM), *args], cwd=REPO, stdout=out, stderr=err,
                             start_new_session=True)
    seen: dict = {}
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            assert p.poll() is None, f"kconform ended before the signal ({p.returncode}):\n" + output()
            seen = processes_in(folder)
            if ready(output(), seen):
                break
            assert time.monotonic() < deadline, "not ready in time:\n" + output()
            time.sleep(0.5)
        t0 = time.monotonic()
        os.kill(p.pid, sig)
        rc = p.wait(timeout=30)
        pgids = {g for g, _ in seen.values()} | {p.pid}
        while time.monotonic() - t0 < 10:
            left = processes_in(folder)
            members = group_members(pgids)
            if not left and not members:
                break
            time.sleep(0.2)
        stderr = output()
        assert not left and not members, f"left behind {time.monotonic() - t0:.1f} s after the signal: " \
                                         f"{left} {members}\n{stderr}"
        assert rc == 128 + sig, (rc, stderr)
        assert "Traceback" not in stderr, stderr
        assert f"interrupted by {signal.Signals(sig).name}" in stderr, stderr
        return stderr, seen
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for pid in processes_in(folder):  # never leave a process behind, even when failing
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def marker(folder: Path) -> dict:
    found = list(folder.rglob("INCOMPLETE"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def _qemu_missing() -> str | None:
    from kconform.sources import debian_kernels
    from kconform.targets.qemu.boot import QEMU
    from kconform.sources.kernel_image import KernelError
    if not shutil.which(QEMU):
        return f"{QEMU} not installed (./kconform run --target qemu installs group 'qemu')"
    if os.environ.get("KCONFORM_OFFLINE"):
        return "KCONFORM_OFFLINE set"
    try:
        debian_kernels.fetch("debian:7.3", progress=lambda m: None)
    except KernelError as e:
        return f"Debian 7.3 kernel unavailable: {str(e).splitlines()[0]}"
    return None


# --- end to end ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_qemu_and_marks_the_run_interrupted(sig, tmp_path):
    why = _qemu_missing()
    if why:
        pytest.skip(why)
    reports = tmp_path / "reports"

    def ready(stderr: str, seen: dict) -> bool:
        # QEMU runs, and kconform said it is booting it (the progress ticks come every 30 s
        # in a log, too late: the whole run may be over by then)
        return any("qemu-system" in c for _, c in seen.values()) and "kconform: qemu: booting " in stderr

    stderr, seen = interrupt_and_check(["run", "--target", "qemu", "--report-dir", str(reports)],
                                       reports, ready, sig, tmp_path / "logs")
    assert any("qemu-system" in c for _, c in seen.values())
    m = marker(reports)
    assert m["status"] == "interrupted" and signal.Signals(sig).name in m["reason"]
    assert any(c.startswith("qemu/") for c in m["contents"]), m
    assert "is interrupted" in stderr and "INCOMPLETE" in stderr


@pytest.mark.slow
@needs_kvm
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_afl_fuzz_and_its_fork_server(sig, tmp_path):
    out = tmp_path / "fuzz"

    def ready(stderr: str, seen: dict) -> bool:
        cmds = [c for _, c in seen.values()]
        return any(c.startswith("afl-fuzz") for c in cmds) and any("kconform-fuzz-host" in c and
                                                                   not c.startswith("afl-fuzz") for c in cmds)

    stderr, seen = interrupt_and_check(["fuzz", "--engine", "afl", "--target", "host", "--time", "60s",
                                        "--out", str(out), "-q"], out, ready, sig, tmp_path / "logs",
                                       ready_timeout=600)  # the first run builds the AFL++ runner
    m = json.loads((out / "host" / "INCOMPLETE").read_text())
    assert m["status"] == "interrupted" and signal.Signals(sig).name in m["reason"]
    # The summary of what ran before the signal (commands/fuzz.py summarize).
    assert json.loads((out / "host" / "last-run.json").read_text())["interrupted"] is True


# --- the process registry on its own ---------------------------------------------------------

CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from kconform.core import procs
from kconform.core.errors import Interrupted
procs.install_signal_handlers()
try:
    with procs.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"]) as p:
        print(p.pid, flush=True)
        p.wait()
except Interrupted as e:
    procs.end_all()
    print("interrupted", e.name, flush=True)
    sys.exit(e.exit_code)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["TERM", "INT", "HUP"])
def test_a_signal_ends_the_whole_group_of_a_child(sig):
    # The child starts with default dispositions: under nohup (as a CI job may run)
    # SIGHUP arrives ignored, and kconform keeps an ignored SIGHUP ignored.
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(REPO / "harness" / "driver")],
                         stdout=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in procs.HANDLED])
    try:
        pgid = int(p.stdout.readline())
        assert os.getpgid(pgid) == pgid  # the child leads its own group
        time.sleep(0.3)  # sh has started its two sleeps
        assert len(group_members({pgid})) >= 2
        t0 = time.monotonic()
        p.send_signal(sig)
        assert p.wait(timeout=10) == 128 + sig
        assert time.monotonic() - t0 < procs.GRACE + 2
        assert "interrupted" in p.stdout.read()
        assert group_members({pgid}) == []
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_an_ignored_sighup_stays_ignored():
    """nohup kconform ...: a hang-up does not interrupt the run."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(REPO / "harness" / "driver")],
                         stdout=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        pgid = int(p.stdout.readline())
        time.sleep(0.3)
        p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert p.poll() is None
        assert len(group_members({pgid})) >= 2
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_run_ends_the_group_on_a_timeout():
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        procs.run(["sh", "-c", "sleep 300 & sleep 300 & wait"], timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert procs.live() == []


def test_a_signal_while_a_child_starts_waits_until_it_is_registered():
    saved = dict(procs._state)
    try:
        procs._state.update(spawning=1, pending=None, signal=None, closing=False)
        procs._on_signal(signal.SIGTERM, None)  # held, not raised
        assert procs._state["pending"] == signal.SIGTERM
        procs._state["spawning"] = 0
        with pytest.raises(Interrupted) as e:
            procs._deliver_pending()
        assert e.value.exit_code == 143
    finally:
        procs._state.clear()
        procs._state.update(saved)
