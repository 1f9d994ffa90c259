"""Talking to kconform-runner, the C++ engine: rules, probes, scenario files, runs,
and the replay of observations recorded elsewhere (inside a QEMU guest)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Callable

from kconform.core import procs
from kconform.core.errors import ToolError
from kconform.core.files import naming
from kconform.engine.verdicts import Collector, Finding, TargetRun, parse_line

# The runner's subcommand that replays recorded observations through the model.
REPLAY_SUBCOMMAND = "replay"
EXIT_SANITIZER = 3  # kconform-runner: a sanitizer report inside the code under test
CRASH_PREFIX = "KCONFORM-CRASH "

Progress = Callable[[int, int], None]


class Engine:
    def __init__(self, binary: Path):
        if not binary.exists():
            raise ToolError(f"{binary}: the engine is not built (run ./kconform build)")
        self.binary = binary

    def _call(self, args: list[str]) -> subprocess.CompletedProcess:
        return procs.run([str(self.binary), *args], capture_output=True, text=True)

    def rules(self) -> list[dict]:
        r = self._call(["rules"])
        if r.returncode != 0:
            raise ToolError(f"kconform-runner rules failed: {r.stderr.strip()}")
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def probe(self, target: str) -> tuple[dict | None, str]:
        """Returns (identity record, "") or (None, why the target cannot run)."""
        r = self._call(["probe", "--target", target])
        if r.returncode != 0:
            return None, r.stderr.strip().removeprefix("kconform-runner: ")
        return json.loads(r.stdout.splitlines()[-1]), ""

    def check(self, files: list[str]) -> None:
        r = self._call(["check", *files])
        if r.returncode != 0:
            raise ToolError(r.stderr.strip().removeprefix("kconform-runner: "))

    def to_text(self, file: str | Path) -> str:
        """Every scenario of a file (text or binary) in the text form."""
        r = self._call(["convert", "--to", "text", str(file)])
        if r.returncode != 0:
            raise ToolError(r.stderr.strip())
        return r.stdout

    def to_binary(self, files: list[str], out_dir: Path) -> None:
        """Each scenario of files in the binary form, one file each in out_dir."""
        r = self._call(["convert", "--to", "binary", "--out-dir", str(out_dir), *files])
        if r.returncode != 0:
            raise ToolError(r.stderr.strip())

    def scenario_text(self, file: str, index: int) -> str:
        chunks = ["kconform-scenario" + c for c in self.to_text(file).split("kconform-scenario")[1:]]
        return chunks[index] if index < len(chunks) else ""

    def scenario_names(self, file: str) -> list[str]:
        """The names of a file's scenarios, in order ([] if it does not convert)."""
        r = self._call(["convert", "--to", "text", file])
        return re.findall(r"^name (\S+)", r.stdout, re.M)

    def pack(self, files: list[str], out_dir: Path) -> int:
        """Every scenario of files as one numbered binary file in out_dir; returns how many."""
        r = self._call(["pack", "--out-dir", str(out_dir), *files])
        if r.returncode != 0:
            raise ToolError(f"kconform-runner pack failed: {r.stderr.strip()}")
        return int(r.stdout.strip() or 0)

    def run(self, target: str, files: list[str], raw_out: Path, fault: str = "",
            on_progress: Progress | None = None, release: str | None = None) -> TargetRun:
        """Runs the scenario files on a target; keeps the raw verdict stream in raw_out."""
        args = [str(self.binary), "run", "--target", target]
        if fault:
            args += ["--fault", fault]
        collector, rc, err = self._stream(args + files, raw_out, release, on_progress)
        crash = crash_marker(err)
        if (rc == EXIT_SANITIZER or rc < 0) and crash and collector.run is not None:
            return _record_crash(collector.run, crash, rc, err, raw_out)
        if rc not in (0, 1) or collector.run is None or not collector.run.summary:
            raise ToolError(f"kconform-runner on target {target} failed (exit {rc}): {err.strip()}")
        return collector.run

    def replay(self, observations: Path, files: list[str], raw_out: Path, target: str) -> TargetRun:
        """Replays observations recorded on target (one identity record, then per scenario
        the outcome of each op) through the model; keeps the verdict stream in raw_out."""
        args = [str(self.binary), REPLAY_SUBCOMMAND, "--observations", str(observations), *files]
        collector, rc, err = self._stream(args, raw_out)
        if rc not in (0, 1) or collector.run is None or not collector.run.summary:
            raise ToolError(f"kconform-runner {REPLAY_SUBCOMMAND} for target {target} failed "
                            f"(exit {rc}): {err.strip()}")
        return collector.run

    @staticmethod
    def _stream(args: list[str], raw_out: Path, release: str | None = None,
                on_progress: Progress | None = None) -> tuple[Collector, int, str]:
        """Runs args, folding its verdict stream (a copy in raw_out) into a Collector."""
        collector = Collector(release)
        done = total = 0
        with naming(raw_out), open(raw_out, "x") as raw, procs.Popen(
                args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            for n, line in enumerate(proc.stdout, 1):
                raw.write(line)
                rec = parse_line(line, f"{raw_out}:{n}")
                collector.add(rec, f"{raw_out}:{n}")
                if rec["type"] == "plan":
                    total = rec["ops"]
                elif rec["type"] == "op":
                    done += 1
                    if on_progress and (done % 50 == 0 or done == total):
                        on_progress(done, total)
            err = proc.stderr.read() if proc.stderr else ""
            rc = proc.wait()
        return collector, rc, err


def crash_marker(stderr: str) -> dict | None:
    """The last KCONFORM-CRASH line the runner printed before it died, if any."""
    for line in reversed(stderr.splitlines()):
        if line.startswith(CRASH_PREFIX):
            try:
                return json.loads(line[len(CRASH_PREFIX):])
            except json.JSONDecodeError:
                return None
    return None


def _record_crash(run: TargetRun, crash: dict, rc: int, stderr: str, raw_out: Path) -> TargetRun:
    """A sanitizer report or fatal signal in the code under test is a finding at
    the op in flight; the rest of that run's scenarios did not run."""
    log = raw_out.with_name(raw_out.stem + ".crash.log")
    with open(log, "x") as f:
        f.write(stderr)
    summary = next((l.strip() for l in stderr.splitlines() if l.startswith("SUMMARY:")), "")
    kind = crash.get("kind", "signal")
    rule = "CRASH.SANITIZER" if kind == "sanitizer" else "CRASH.SIGNAL"
    observed = summary or f"died (exit {rc}, signal {crash.get('signal', -rc)})"
    run.findings.append(Finding(
        rule=rule, target=run.name, release=run.release, scenario=crash.get("scenario", "?"),
        file=crash.get("file", "?"), index=int(crash.get("index", 0)), op=int(crash.get("op", 0)),
        call=crash.get("call", "?"), expected=["no crash in the code under test"],
        observed=observed, note=f"full report: {log}"))
    run.counts["violation"] += 1
    run.summary = {"seconds": 0.0, "crashed": True}
    return run
