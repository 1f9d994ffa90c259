"""Every long-running child of kconform (QEMU, fuzzers, kernel and engine builds,
kconform-runner) and what becomes of it when kconform stops.

Each child starts in its own session, so it is the leader of a process group whose
id is its pid, and the group holds everything it starts (make's compilers, AFL++'s
fork server, libFuzzer's jobs). The registry keeps every group until its leader is
reaped; ending a child ends its group: SIGTERM, then SIGKILL after GRACE seconds.

install_signal_handlers(): SIGINT, SIGTERM and SIGHUP raise errors.Interrupted in the
main thread, so `with` blocks end their children on the way out; the command line
then ends whatever is left (end_all) and exits 128 + the signal number. A second
signal while that happens SIGKILLs every group at once.

A signal that arrives while a child is being started is held until the child is in
the registry, so no child is ever started and then lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from kconform.core.errors import Interrupted

GRACE = 3.0  # seconds between SIGTERM and SIGKILL of a group
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_live: dict[int, "Popen"] = {}  # leader pid (= process group id) -> process
_state = {"spawning": 0, "pending": None, "signal": None, "closing": False}


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Popen(subprocess.Popen):
    """subprocess.Popen in its own session, registered until reaped. Leaving a `with`
    block by an exception (an error, a signal) ends its whole process group."""

    def __init__(self, args, **kwargs):
        kwargs["start_new_session"] = True
        _state["spawning"] += 1
        try:
            super().__init__(args, **kwargs)
            _live[self.pid] = self
        finally:
            _state["spawning"] -= 1
            _deliver_pending()

    def _reaped(self) -> None:
        if _live.pop(self.pid, None) is not None:
            _killpg(self.pid, signal.SIGKILL)  # anything the leader left behind in its group

    def wait(self, timeout=None):
        rc = super().wait(timeout)
        self._reaped()
        return rc

    def poll(self):
        rc = super().poll()
        if rc is not None:
            self._reaped()
        return rc

    def end(self, grace: float = GRACE) -> None:
        """Ends the process group: SIGTERM, SIGKILL after grace seconds; reaps the leader."""
        if self.returncode is None:
            _killpg(self.pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                super().wait(timeout=grace)
        _killpg(self.pid, signal.SIGKILL)
        if self.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                super().wait(timeout=10)
        _live.pop(self.pid, None)

    def __exit__(self, exc_type, value, traceback):
        if exc_type is not None:
            self.end()
        return super().__exit__(exc_type, value, traceback)


def run(args, *, input=None, capture_output: bool = False, timeout: float | None = None,
        check: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run through Popen above: a timeout or an exception ends the child's
    whole process group, not only the child."""
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    with Popen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            process.end(grace=0)
            exc.stdout, exc.stderr = process.communicate()
            raise
        rc = process.poll()
    if check and rc:
        raise subprocess.CalledProcessError(rc, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, rc, stdout, stderr)


def live() -> list[int]:
    """The process group ids of the children not yet reaped."""
    return list(_live)


def end_all(grace: float = GRACE) -> list[int]:
    """Ends every registered group (SIGTERM to all, SIGKILL after grace); returns their ids."""
    procs = list(_live.values())
    for p in procs:
        if p.returncode is None:
            _killpg(p.pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
    deadline = time.monotonic() + grace
    for p in procs:
        if p.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.Popen.wait(p, timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        p.end(grace=0)
    return [p.pid for p in procs]


def _kill_now() -> None:
    for pgid in list(_live):
        _killpg(pgid, signal.SIGKILL)


def _deliver_pending() -> None:
    if _state["spawning"] == 0 and _state["pending"] is not None:
        signum, _state["pending"] = _state["pending"], None
        raise Interrupted(signum)


def _on_signal(signum, frame) -> None:
    if _state["signal"] is not None or _state["closing"]:
        # a second signal, or one while kconform is already stopping: no more waiting
        if _state["signal"] is None:
            _state["signal"] = signum
        _kill_now()
        return
    _state["signal"] = signum
    if _state["spawning"]:
        _state["pending"] = signum
        return
    raise Interrupted(signum)


def closing() -> None:
    """kconform is stopping (an error or a signal is being handled): from now on a signal
    SIGKILLs every group instead of raising Interrupted into the clean-up."""
    _state["closing"] = True


def received() -> int | None:
    """The signal that interrupted this process, if any."""
    return _state["signal"]


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP raise Interrupted (main thread only; elsewhere a no-op).
    SIGHUP ignored when kconform started (nohup) stays ignored."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in HANDLED:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        signal.signal(sig, _on_signal)
