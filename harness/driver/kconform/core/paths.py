"""Where things are: the repository, build trees, the cache, report folders."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

from kconform.core.errors import ToolError, os_error_message
from kconform.core.files import atomic_write

REPO = Path(__file__).resolve().parents[4]
CORPORA = REPO / "corpora"
DEFAULT_BASELINE = REPO / "ci" / "known-findings.json"
PACKAGES_FILE = REPO / "ci" / "packages.txt"


def build_dir(preset: str = "default") -> Path:
    return REPO / "build" / preset


def runner_binary(preset: str = "default") -> Path:
    return build_dir(preset) / "harness" / "runner" / "kconform-runner"


def cache_dir() -> Path:
    env = os.environ.get("KCONFORM_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kconform"


def reports_dir() -> Path:
    return REPO / "reports" / "out"


def new_report_dir(root: Path) -> Path:
    """A fresh folder per run; an existing one is never reused or overwritten. It holds
    an INCOMPLETE marker until the command finishes (open_report_dir)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        root.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            d = root / (stamp if n == 0 else f"{stamp}-{n}")
            try:
                d.mkdir()
            except FileExistsError:
                continue
            open_report_dir(d)
            return d
    except OSError as e:
        raise ToolError(os_error_message(e, "cannot make a report folder")) from None
    raise ToolError(f"{root}: cannot make a new report folder")


# A folder being written holds this file until the command that writes it finishes:
# {"status": "running"} while it runs (and after a SIGKILL), "interrupted" (a signal)
# or "incomplete" (an error) with the reason and the files it had, once it stopped.
INCOMPLETE = "INCOMPLETE"
_open: dict[Path, str] = {}  # folder -> when it was opened


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def open_report_dir(d: Path) -> None:
    """Marks d as being written by this process until close_report_dirs()."""
    started = _now()
    atomic_write(d / INCOMPLETE, json.dumps({"status": "running", "pid": os.getpid(),
                                             "started": started}, indent=2) + "\n")
    _open[d] = started


def _contents(d: Path) -> list[str]:
    """What a folder holds, one entry per name in it: "report.json", "qemu/ (487 files)"."""
    out = []
    for p in sorted(d.iterdir()):
        if p.name == INCOMPLETE:
            continue
        if p.is_dir():
            out.append(f"{p.name}/ ({sum(1 for f in p.rglob('*') if f.is_file())} files)")
        else:
            out.append(p.name)
    return out


def close_report_dirs(status: str | None = None, reason: str = "") -> list[tuple[Path, str]]:
    """Every open report folder: finished (status None: the marker is removed), or marked
    status ("interrupted", "incomplete") with the reason and the files it holds.
    Returns (folder, what became of it) for each: "marked", or why it could not be."""
    out = []
    for d, started in list(_open.items()):
        del _open[d]
        try:
            if status is None:
                (d / INCOMPLETE).unlink(missing_ok=True)
                continue
            atomic_write(d / INCOMPLETE, json.dumps(
                {"status": status, "reason": reason, "pid": os.getpid(), "started": started,
                 "stopped": _now(), "contents": _contents(d)}, indent=2) + "\n")
            out.append((d, "marked"))
        except OSError as e:
            out.append((d, os_error_message(e)))
    return out
