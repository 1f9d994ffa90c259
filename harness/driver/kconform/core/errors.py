"""The driver's error type: anything that stops kconform from running (exit 2),
and the one way an operating-system error becomes a message."""

from __future__ import annotations

import os
import signal


class ToolError(Exception):
    """kconform itself could not run: bad input, missing dependency, build failure.

    The message names the file and field (or the command) and, where there is
    one, the fix.
    """


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (core/procs.py raises it in the main thread).

    A BaseException like KeyboardInterrupt, so that no `except Exception` swallows it;
    `finally` blocks and context managers still end their children on the way out.
    """

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


EXIT_CLEAN = 0
EXIT_VIOLATIONS = 1
EXIT_TOOL_ERROR = 2


def printable(text: str, keep_newlines: bool = True) -> str:
    """text with every non-printable character escaped (\\x00, \\x1b, \\u200b...), so a
    NUL byte or a terminal escape never cuts or hides part of a message."""
    out = []
    for ch in text:
        if ch.isprintable() or (keep_newlines and ch in "\n\t"):
            out.append(ch)
        else:
            out.append(ascii(ch)[1:-1] if ord(ch) > 0x7f else f"\\x{ord(ch):02x}")
    return "".join(out)


def strerror(e: OSError) -> str:
    """The reason of an OSError as the C library words it ("No such file or directory")."""
    if e.strerror:
        return e.strerror
    if e.errno:
        return os.strerror(e.errno)
    return str(e) or type(e).__name__


def os_error_message(e: OSError, what: str = "") -> str:
    """One line: '[what: ]PATH: reason' (or 'PATH -> PATH2: reason')."""
    where = ""
    if e.filename is not None:
        where = os.fsdecode(e.filename)
        if e.filename2 is not None:
            where += f" -> {os.fsdecode(e.filename2)}"
        where += ": "
    return printable(f"{what + ': ' if what else ''}{where}{strerror(e)}", keep_newlines=False)


def with_path(e: OSError, path) -> OSError:
    """e naming path when the call that failed did not (a write() or flush() on an
    open file): the same errno and type, filename set."""
    if e.filename is not None or path is None:
        return e
    return OSError(e.errno, strerror(e), os.fspath(path))  # OSError picks the subclass by errno
