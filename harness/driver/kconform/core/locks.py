"""Advisory locks (fcntl.flock) on build folders and caches, so that kconform processes
running at once in one clone or on one cache never build into the same folder together
nor serve a half-built result.

    with locks.locked(folder / LOCK_NAME, "the EL2 build of debian-7.3.4", log):
        ... configure, build, copy out ...

A process that finds the lock taken says so once (which lock, which pid holds it and
what it runs) and waits, polling, for at most KCONFORM_LOCK_TIMEOUT seconds (default one
hour, longer than a cold kernel build); then a LockTimeout (a ToolError: exit 2) names
the holder. The lock file holds the holder's pid, command and start time; it is never
deleted (deleting a lock file another process waits on would split the lock in two).

The kernel releases a flock when the last descriptor of its open file is closed, so a
process that dies (even by SIGKILL) releases its locks. held_fds() lists the descriptors
of the locks this process holds: a build command started with pass_fds=held_fds() keeps
the lock held until it has exited too, so a `make` left running by a killed kconform
still keeps the next build out of its folder.

Locks are re-entrant within one process (a second `locked()` on a path this process
holds is a no-op), never across processes.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from kconform.core.errors import ToolError, os_error_message

LOCK_NAME = ".kconform.lock"
TIMEOUT_ENV = "KCONFORM_LOCK_TIMEOUT"
DEFAULT_TIMEOUT = 3600.0   # seconds; a cold kernel build is ~5-10 min on 2 cores
POLL = 0.25                # seconds between attempts
NOTE_EVERY = 60.0          # seconds between "still waiting" lines

_held: dict[str, int] = {}  # real path of the lock file -> its descriptor


class LockTimeout(ToolError):
    """The lock stayed taken longer than the timeout; the message names the holder."""


def timeout_seconds() -> float:
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise ToolError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None
    if value < 0:
        raise ToolError(f"{TIMEOUT_ENV}={text!r} is negative")
    return value


def held_fds() -> tuple[int, ...]:
    """The descriptors of the locks this process holds (for pass_fds of a build command)."""
    return tuple(_held.values())


def holds(path: str | os.PathLike) -> bool:
    return os.path.realpath(path) in _held


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def describe_holder(fd: int) -> str:
    """Who holds the lock, from what the holder wrote into the lock file."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode(errors="replace") or "{}")
    except (OSError, ValueError):
        info = {}
    pid = info.get("pid")
    if not isinstance(pid, int):
        return "another process (it has not written its pid yet)"
    text = f"pid {pid}"
    if info.get("command"):
        text += f" ({info['command']}"
        text += f", since {info['since']})" if info.get("since") else ")"
    if not pid_alive(pid):
        text += ": that process has exited, a command it started may still hold the lock"
    return text


def _write_holder(fd: int, what: str) -> None:
    info = {"pid": os.getpid(), "what": what,
            "command": " ".join([os.path.basename(sys.argv[0] or "python3"), *sys.argv[1:]])[:300],
            "since": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    data = (json.dumps(info) + "\n").encode()
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)


@contextlib.contextmanager
def locked(path: str | os.PathLike, what: str, log: Callable[[str], None] = print,
           timeout: float | None = None) -> Iterator[Path]:
    """Holds an exclusive flock on path (created with its folder if missing) for the block.

    what names the thing locked in messages ("the kernel build of debian-7.3.4"). Waits
    at most timeout seconds (None: KCONFORM_LOCK_TIMEOUT, default an hour), saying once
    that it waits and for whom; then LockTimeout."""
    path = Path(path)
    real = os.path.realpath(path)
    if real in _held:                      # re-entrant within this process
        yield path
        return
    limit = timeout_seconds() if timeout is None else timeout
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise ToolError(os_error_message(e, f"cannot open the lock file of {what}")) from None
    try:
        if not _try_lock(fd):
            holder = describe_holder(fd)
            log(f"kconform: waiting for the lock on {what} ({path}), held by {holder} "
                f"(timeout {limit:.0f} s, {TIMEOUT_ENV})")
            t0 = time.monotonic()
            next_note = t0 + NOTE_EVERY
            while not _try_lock(fd):
                now = time.monotonic()
                if now - t0 >= limit:
                    raise LockTimeout(
                        f"gave up after {now - t0:.0f} s waiting for the lock on {what} ({path}): "
                        f"held by {describe_holder(fd)}. Wait for that run to finish (or end it), "
                        f"or set {TIMEOUT_ENV} to wait longer")
                if now >= next_note:
                    log(f"kconform: still waiting for the lock on {what} ({now - t0:.0f} s), "
                        f"held by {describe_holder(fd)}")
                    next_note = now + NOTE_EVERY
                time.sleep(min(POLL, max(0.01, limit - (now - t0))))
            log(f"kconform: got the lock on {what} after {time.monotonic() - t0:.0f} s")
        _write_holder(fd, what)
        _held[real] = fd
        try:
            yield path
        finally:
            del _held[real]
    finally:
        os.close(fd)                        # releases the flock (unless a child still has it)
