"""Talking to kconform-runner, the C++ engine: rules, probes, scenario files, runs,
and the replay of observations recorded elsewhere (inside a QEMU guest)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Callable

from kconform.core import procs
from kconform.core.errors import ToolError
from kconform.core.files import naming
from kconform.engine.verdicts import VERDICTS, Collector, Finding, TargetRun, parse_line

# The runner's subcommand that replays recorded observations through the model.
REPLAY_SUBCOMMAND = "replay"
EXIT_SANITIZER = 3  # kconform-runner: a sanitizer report inside the code under test
EXIT_HANG = 4       # kconform-runner: its watchdog saw one op in flight too long
CRASH_PREFIX = "KCONFORM-CRASH "
# The finding's rule for each kind of KCONFORM-CRASH marker (harness/runner/crash_marker.h).
CRASH_RULES = {"sanitizer": "CRASH.SANITIZER", "signal": "CRASH.SIGNAL", "hang": "CRASH.HANG"}

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
            on_progress: Progress | None = None, release: str | None = None,
            watchdog: float | None = None) -> TargetRun:
        """Runs the scenario files on a target; keeps the raw verdict stream in raw_out.

        A crash of the code under test (a sanitizer report, a fatal signal, or an op
        the runner's watchdog saw hang: `watchdog` seconds, None for the runner's
        default) ends only its scenario: it is a finding at the op in flight, the
        rest of that scenario's ops count as unchecked, and a fresh runner resumes
        with the next scenario (`run --from N`, its stream in raw_out's name plus
        `.from-N`), so every scenario runs."""
        base = [str(self.binary), "run", "--target", target]
        if fault:
            base += ["--fault", fault]
        if watchdog is not None:
            base += ["--watchdog", f"{watchdog:g}"]
        run: TargetRun | None = None
        start = crashes = 0
        seconds = 0.0
        total = {"scenarios": 0, "ops": 0}
        raw = raw_out
        while True:
            done_before = sum(run.counts.values()) if run else 0
            progress = on_progress and (lambda d, t: on_progress(done_before + d, total["ops"] or t))
            t0 = time.monotonic()
            args = base + (["--from", str(start)] if start else []) + files
            collector, rc, err = self._stream(args, raw, release, progress)
            part = collector.run
            if part is not None and not start:
                total.update(scenarios=part.plan.get("scenarios", 0), ops=part.plan.get("ops", 0))
            crash = crash_marker(err)
            if (rc in (EXIT_SANITIZER, EXIT_HANG) or rc < 0) and crash and part is not None:
                _record_crash(part, crash, rc, err, raw)
                seconds += time.monotonic() - t0
                crashes += 1
                run = part if run is None else _merge(run, part)
                at = crash.get("at")
                if not isinstance(at, int) or at + 1 >= total["scenarios"] or at + 1 <= start:
                    break  # the last scenario crashed (or no position to resume from)
                start = at + 1
                raw = raw_out.with_name(f"{raw_out.stem}.from-{start}{raw_out.suffix}")
                continue
            if rc not in (0, 1) or part is None or not part.summary:
                raise ToolError(f"kconform-runner on target {target} failed (exit {rc}): {err.strip()}")
            seconds += float(part.summary.get("seconds", 0.0))
            run = part if run is None else _merge(run, part)
            break
        if crashes:
            # (a --fault count covers only the last runner: the crashed ones wrote no summary)
            fault = {"fault": run.summary["fault"]} if "fault" in run.summary else {}
            run.summary = {"scenarios": total["scenarios"], "ops": total["ops"],
                           "violations": run.counts["violation"], "seconds": round(seconds, 3),
                           "crashed": True, "crashes": crashes, **fault}
        return run

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
    """A sanitizer report, fatal signal or hang in the code under test is a finding
    at the op in flight; the ops of that scenario after it count as unchecked (the
    runner resumes with the next scenario: Engine.run)."""
    log = raw_out.with_name(raw_out.stem + ".crash.log")
    with open(log, "x") as f:
        f.write(stderr)
    summary = next((l.strip() for l in stderr.splitlines() if l.startswith("SUMMARY:")), "")
    kind = crash.get("kind", "signal")
    rule = CRASH_RULES.get(kind, "CRASH.SIGNAL")
    if kind == "hang":
        observed = summary or "no return: the runner's watchdog ended the op (exit 4)"
        expected = ["the op returns (no infinite loop in the code under test)"]
    else:
        observed = summary or f"died (exit {rc}, signal {crash.get('signal', -rc)})"
        expected = ["no crash in the code under test"]
        # The target's name for the fault address (crash_marker.h set_fault_describer:
        # the EL2 target says which region of the hypervisor's view it missed).
        if isinstance(crash.get("fault"), str) and crash["fault"]:
            observed = f"{crash['fault']} ({observed})"
    file, index, op = crash.get("file", "?"), int(crash.get("index", 0)), int(crash.get("op", 0))
    run.findings.append(Finding(
        rule=rule, target=run.name, release=run.release, scenario=crash.get("scenario", "?"),
        file=file, index=index, op=op, call=crash.get("call", "?"), expected=expected,
        observed=observed, note=f"full report: {log}"))
    run.rules[rule].violations += 1
    run.counts["violation"] += 1
    run.scenarios.add((file, index))
    run.ran.add(crash.get("scenario", "?"))
    # The crashed op is counted above; the rest of its scenario did not run.
    if isinstance(crash.get("ops"), int):
        emitted = _ops_written(raw_out, file, index)
        run.counts["unchecked"] += max(0, crash["ops"] - emitted - 1)
    run.summary = {"seconds": 0.0, "crashed": True}
    return run


def _ops_written(raw_out: Path, file: str, index: int) -> int:
    """How many op records of scenario (file, index) the stream in raw_out ends with."""
    n = 0
    try:
        lines = raw_out.read_text().splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if rec.get("type") != "op" or (rec.get("file"), rec.get("index")) != (file, index):
            break
        n += 1
    return n


def _merge(run: TargetRun, part: TargetRun) -> TargetRun:
    """Adds the verdicts of a resumed runner (the same target, later scenarios) to run."""
    for v in VERDICTS:
        run.counts[v] += part.counts.get(v, 0)
    for rule, t in part.rules.items():
        mine = run.rules[rule]
        mine.allowed += t.allowed
        mine.forbidden += t.forbidden
        mine.violations += t.violations
        mine.unsupported += t.unsupported
    run.findings.extend(part.findings)
    run.scenarios |= part.scenarios
    run.ran |= part.ran
    run.unsupported.update(part.unsupported)
    run.summary = part.summary
    return run
