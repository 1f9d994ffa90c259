"""Talking to kconform-runner, the C++ engine: rules, probes, runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

from kconform.errors import ToolError
from kconform.verdicts import Collector, TargetRun, parse_line


class Engine:
    def __init__(self, binary: Path):
        if not binary.exists():
            raise ToolError(f"{binary}: the engine is not built (run ./kconform build)")
        self.binary = binary

    def _call(self, args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.binary), *args], capture_output=True, text=True)

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

    def scenario_text(self, file: str, index: int) -> str:
        r = self._call(["convert", "--to", "text", file])
        if r.returncode != 0:
            raise ToolError(r.stderr.strip())
        chunks = ["kconform-scenario" + c for c in r.stdout.split("kconform-scenario")[1:]]
        return chunks[index] if index < len(chunks) else ""

    def run(self, target: str, files: list[str], raw_out: Path, fault: str = "",
            on_progress: Callable[[int, int], None] | None = None) -> TargetRun:
        """Runs the scenario files on a target; keeps the raw verdict stream in raw_out."""
        args = [str(self.binary), "run", "--target", target]
        if fault:
            args += ["--fault", fault]
        args += files
        collector = Collector()
        done = total = 0
        with open(raw_out, "x") as raw, subprocess.Popen(
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
        if rc not in (0, 1) or collector.run is None or not collector.run.summary:
            raise ToolError(f"kconform-runner on target {target} failed (exit {rc}): {err.strip()}")
        return collector.run
