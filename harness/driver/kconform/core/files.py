"""Writing reports and findings so that a reader (or a run that dies half-way) never
sees half a file, and checking before a run that the places it will write to exist
and take files.

atomic_write: a temporary file in the same folder, flushed and fsynced, then
os.replace onto the name (exclusive=True: os.link, which never overwrites). A name
that is not a regular file (/dev/null, /dev/stdout, a FIFO) is written to in place,
never replaced. Every OSError names the file the caller asked for, not the
temporary one.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from kconform.core.errors import ToolError, os_error_message, strerror, with_path


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def _in_place(path: Path) -> bool:
    """True for an existing name that is not a regular file or folder (a device, a FIFO)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def atomic_write(path: str | os.PathLike, data: str | bytes, *, exclusive: bool = False) -> Path:
    """Writes data (str: UTF-8) to path atomically; returns path.

    exclusive: fail with FileExistsError if path exists (findings are never overwritten).
    """
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if os.path.islink(path) and not exclusive:
        path = Path(os.path.realpath(path))  # write the file the link names, keep the link
    if _in_place(path):
        if exclusive:
            raise FileExistsError(17, os.strerror(17), str(path))
        try:
            with open(path, "wb") as f:
                f.write(raw)
        except OSError as e:
            raise with_path(e, path) from e
        return path
    if path.is_dir():
        raise IsADirectoryError(21, os.strerror(21), str(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise OSError(e.errno, strerror(e), str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            try:
                os.link(tmp, path)
            finally:
                os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise OSError(e.errno, strerror(e), str(path)) from None
        raise
    return path


@contextlib.contextmanager
def naming(path: str | os.PathLike):
    """Inside the block, an OSError that names no file (a write() on an open file, a
    full disk) names path."""
    try:
        yield
    except OSError as e:
        raise with_path(e, path) from e


def _kind(path: Path) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "missing"
    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a file"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def _probe_create(folder: Path, flag: str, shown: Path) -> None:
    """A file can be made in folder (made and removed again); else a ToolError."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kconform-probe-")
    except OSError as e:
        raise ToolError(f"flag {flag}: {shown}: cannot create a file in {folder}: {strerror(e)}") from None
    os.close(fd)
    os.unlink(tmp)


def check_writable_dir(path: str | os.PathLike, flag: str) -> Path:
    """flag's folder exists (made with its parents if missing) and takes new files; else a
    ToolError naming the path and the reason. Returns the path."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ToolError(f"flag {flag}: {path}: not a folder (it is {_kind(path)})")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ToolError(os_error_message(e, f"flag {flag}")) from None
    _probe_create(path, flag, path)
    return path


def check_output_file(path: str | os.PathLike, flag: str) -> Path:
    """flag's file can be written: not a folder, in an existing folder that takes new files
    (a device such as /dev/null or /dev/stdout is written in place). Returns the path."""
    path = Path(path)
    if path.is_dir():
        raise ToolError(f"flag {flag}: {path}: is a folder, not a file")
    if _in_place(path):
        if not os.access(path, os.W_OK):
            raise ToolError(f"flag {flag}: {path}: {os.strerror(13)}")
        return path
    parent = path.parent
    if not parent.exists():
        raise ToolError(f"flag {flag}: {path}: no such folder {parent}")
    if not parent.is_dir():
        raise ToolError(f"flag {flag}: {path}: {parent} is not a folder (it is {_kind(parent)})")
    _probe_create(parent, flag, path)
    return path
