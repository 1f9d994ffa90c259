"""libFuzzer run as N in-process workers on one corpus folder, the driver restarting
a worker that a crash, timeout or out-of-memory of the process ended.

Why not libFuzzer's -fork mode: a fork job starts from a small slice of the corpus,
writes a file for every input new to that slice and is merged back by its parent;
on the EL2 target that cost a third of the executions (12k/s through fork mode
against 18-20k/s in process, one core). Rule findings never end a process (the fuzz
runner records them and goes on), so a worker ends only by a crash of the process,
which stock ffa.c does a few times an hour: a restart (the corpus reloaded, well
under a second) is cheap at that rate.

Each worker writes new inputs into corpus/ and, with more than one, reloads it every
RELOAD_S seconds to pick up the others' (libFuzzer's -reload). A worker that dies on
an input of the corpus itself (a seed that crashes the code under test) would die
again on every restart while loading it: that input is moved to quarantine/ (kept,
with the crash artifact stored as a finding the usual way) before the restart; a
seed (seeds/ is remade each run) that killed this very build is left out of the
next runs of it from the start (quarantine/killers-<digest of the binary>). A
worker that keeps dying before it has loaded the corpus, with nothing to move aside,
is an error of the run, not something to retry forever.

Statistics: executions are summed over every worker process, ended ones included;
executions/s is the sum of the live workers' figures; restarts counts the processes
a crash, timeout or OOM ended.
"""

from __future__ import annotations

import hashlib
import os
import re
import selectors
import shutil
import subprocess
import time
from pathlib import Path

from kconform.core import procs
from kconform.core.errors import ToolError
from kconform.core.files import naming

LOG_LIMIT = 32 << 20  # fuzz.log is rotated to fuzz.log.1 past this many bytes (an 8-hour run stays bounded)
RELOAD_S = 5  # how often a worker of several rereads corpus/ for the others' inputs
EARLY_DEATHS = 3  # deaths in a row before the corpus was loaded, with nothing quarantined: an error
MIN_RESTART_S = 2  # no restart with less time than this left

STATUS = re.compile(r"#(\d+):?\s.*?cov: (\d+) ft: (\d+).*?exec/s:? (\d+)")
FINAL = re.compile(r"stat::number_of_executed_units: (\d+)")
ARTIFACT = re.compile(r"Test unit written to (\S+)")


class Worker:
    """One libFuzzer process slot: the process now running in it, its latest figures
    and what the ended processes of this slot ran."""

    def __init__(self, index: int):
        self.index = index
        self.proc: procs.Popen | None = None
        self.buf = b""
        self.execs = self.rate = 0
        self.cov = ""
        self.inited = False
        self.artifact: Path | None = None
        self.done_execs = 0  # ended processes of this slot
        self.early_deaths = 0


def _sha1(path: Path) -> str:
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return ""


class LibFuzzerWorkers:
    def __init__(self, base_cmd: list[str], root: Path, seconds: int, jobs: int, env: dict, progress, stop_requested):
        self.base, self.root, self.jobs, self.env = base_cmd, root, jobs, env
        self.progress, self.stop_requested = progress, stop_requested
        self.deadline = time.monotonic() + seconds
        self.restarts = 0
        self.closing = False
        self.sel = selectors.DefaultSelector()
        self.workers = [Worker(j) for j in range(jobs)]
        # The seeds that killed this very build while it loaded them (another build of
        # the code under test may not die): named by the fuzz binary's digest.
        self.killers = root / "quarantine" / f"killers-{_sha1(Path(base_cmd[0]))[:16]}"

    def _start(self, w: Worker) -> None:
        left = round(self.deadline - time.monotonic())
        cmd = self.base + [f"-max_total_time={max(1, left)}",
                           f"-reload={RELOAD_S if self.jobs > 1 else 0}"]
        w.proc = procs.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env, cwd=self.root)
        w.buf, w.execs, w.rate, w.inited, w.artifact = b"", 0, 0, False, None
        os.set_blocking(w.proc.stderr.fileno(), False)
        self.sel.register(w.proc.stderr, selectors.EVENT_READ, w)

    def _log(self, text: str) -> None:
        self.logf.write(text)
        if self.logf.tell() > LOG_LIMIT:
            self.logf.close()
            os.replace(self.root / "fuzz.log", self.root / "fuzz.log.1")
            self.logf = open(self.root / "fuzz.log", "w", buffering=1)

    def _line(self, w: Worker, line: str) -> None:
        self._log(f"[{w.index}] {line}\n" if self.jobs > 1 else line + "\n")
        m = STATUS.search(line)
        if m:
            w.execs, w.rate, w.cov = int(m.group(1)), int(m.group(4)), f"{m.group(2)} edges/{m.group(3)} features"
        f = FINAL.search(line)
        if f:
            w.execs = int(f.group(1))
        if "INITED" in line:
            w.inited = True
        a = ARTIFACT.search(line)
        if a:
            w.artifact = Path(a.group(1))

    def _read(self, w: Worker) -> bool | None:
        """Reads what the worker wrote: True if it read some, None if nothing is there
        now, False at the end of its output."""
        try:
            chunk = os.read(w.proc.stderr.fileno(), 1 << 16)
        except BlockingIOError:
            return None
        if not chunk:
            return False
        w.buf += chunk
        *lines, w.buf = w.buf.split(b"\n")
        for line in lines:
            self._line(w, line.decode(errors="replace"))
        return True

    def _quarantine(self, artifact: Path | None) -> Path | None:
        """Moves the corpus or seed file holding the artifact's input to quarantine/;
        returns where it is now (also when another worker, loading the same corpus,
        moved it first), or None when the input is not one of the corpus."""
        if artifact is None:
            return None
        digest = _sha1(artifact if artifact.is_absolute() else self.root / artifact)
        if not digest:
            return None
        q = self.root / "quarantine"
        dirs = [self.root / d for d in ("corpus", "seeds", "quarantine") if (self.root / d).is_dir()]
        # libFuzzer and make_seeds name inputs by their SHA-1: by name first, then by content.
        match = next((f for d in dirs for f in sorted(d.iterdir()) if f.name.endswith(digest)), None) or \
            next((f for d in dirs for f in sorted(d.iterdir()) if _sha1(f) == digest), None)
        if match is None or match.parent == q:
            return match
        q.mkdir(exist_ok=True)
        dest = q / f"{match.parent.name}-{match.name}"
        shutil.move(str(match), dest)
        if match.parent.name == "seeds":  # remade every run: left out of the next ones of this binary
            with open(self.killers, "a") as f:
                f.write(match.name + "\n")
        return dest

    def _leave_out_known_killers(self) -> None:
        """Removes from seeds/ (remade from the corpora each run; a copy of each is in
        quarantine/) the seeds that killed this build in an earlier run: each would cost
        a timeout or a crash and a restart at every start."""
        try:
            names = self.killers.read_text().split()
        except OSError:
            return
        left_out = [n for n in names if (self.root / "seeds" / n).is_file()]
        for n in left_out:
            (self.root / "seeds" / n).unlink()
        if left_out:
            self._log(f"kconform: {len(left_out)} seed(s) that killed this build before left out "
                      f"(listed in {self.killers})\n")

    def _ended(self, w: Worker) -> None:
        rc = w.proc.wait()  # reaps it and ends what is left of its process group (core/procs.py)
        while self._read(w):  # what it wrote last: up to the end of the pipe, or what is there now
            pass
        if w.buf:  # a last line without its newline
            self._line(w, w.buf.decode(errors="replace"))
        w.buf = b""
        self.sel.unregister(w.proc.stderr)
        w.proc.stderr.close()
        w.done_execs += w.execs
        w.execs = w.rate = 0
        w.proc = None
        left = self.deadline - time.monotonic()
        if self.closing or rc == 0 or left < MIN_RESTART_S or self.stop_requested(self.progress):
            return
        self.restarts += 1
        moved = None if w.inited else self._quarantine(w.artifact)  # after loading: a mutated input
        if moved:
            self._log(f"kconform: worker {w.index} died on an input of the corpus; it is now {moved}\n")
            w.early_deaths = 0
        elif not w.inited:
            w.early_deaths += 1
            if w.early_deaths >= EARLY_DEATHS:
                raise ToolError(f"libFuzzer died {w.early_deaths} times before loading the corpus "
                                f"(exit {rc}; see {self.root / 'fuzz.log'})")
        else:
            w.early_deaths = 0
        self._start(w)

    def _update(self) -> None:
        live = [w for w in self.workers if w.proc is not None]
        execs = sum(w.done_execs + w.execs for w in self.workers)
        cov = max((w.cov for w in self.workers if w.cov), default="0", key=lambda c: int(c.split()[0]))
        self.progress.stats.update(execs=execs, execs_per_sec=float(sum(w.rate for w in live)), coverage=cov,
                                   restarts=self.restarts, findings=self.restarts)
        self.progress.show()

    def run(self) -> None:
        with naming(self.root / "fuzz.log"):
            self.logf = open(self.root / "fuzz.log", "w", buffering=1)
            try:
                self._leave_out_known_killers()
                for w in self.workers:
                    self._start(w)
                while any(w.proc is not None for w in self.workers):
                    for key, _ in self.sel.select(timeout=0.5):
                        w = key.data
                        if self._read(w) is False:
                            self._ended(w)
                    for w in self.workers:  # a process that ended with its pipe still open (a child holding it)
                        if w.proc is not None and w.proc.poll() is not None:
                            self._ended(w)
                    self._update()
                    if self.stop_requested(self.progress):
                        break
            finally:
                self.closing = True
                for w in self.workers:
                    if w.proc is not None:
                        w.proc.end()
                        self._ended(w)
                self.sel.close()
                self.logf.close()
            self._update()
