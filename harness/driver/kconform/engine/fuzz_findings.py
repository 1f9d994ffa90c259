"""What a fuzzer found: each crash/timeout input replayed, named by the rule (or
sanitizer report) it trips and its hash, and stored once as .kcsb/.kcs/.log.

What is known is decided once, as `kconform run` decides it (RunReplay): each
crashing input is replayed through the engine `run` would use for this target
build (same runner, same release naming: host's kernel release, el2's
debian-7.3.4-4k), the baseline is applied with engine/baseline.py exactly as
run applies it, and the input is stored unless run would baseline every finding
it reports. An input run baselines is recorded in known.log, not stored. An
input whose crash run does not reproduce (a sanitizer report in our own code on
host, which run does not sanitize) is stored, with the fuzz runner's replay as
its re-run command. Timeouts, OOMs and leaks are stored as they are: run has no
notion of them, so no baseline entry can accept one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import runner_binary
from kconform.engine import baseline
from kconform.engine.runner import Engine

KINDS = ("crash", "timeout", "oom", "leak", "slow-unit")


def classify(stderr: str, kind: str) -> str:
    """The rule (or sanitizer report) a replay names, as a file-name slug."""
    m = re.search(r"SUMMARY: kconform: (\S+) violated", stderr)
    if m:
        return m.group(1).replace(",", "+")
    m = re.search(r"SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer): (\S+)", stderr)
    if m:
        return {"AddressSanitizer": "asan", "UndefinedBehaviorSanitizer": "ubsan",
                "LeakSanitizer": "lsan"}[m.group(1)] + "." + re.sub(r"[^A-Za-z0-9_.-]", "_", m.group(2))
    m = re.search(r"KCONFORM-CRASH (\{.*\})", stderr)
    return "signal" if m else kind


@dataclasses.dataclass
class RunReplay:
    """How `kconform run` would judge an input on this fuzz target's build."""
    target: str                            # kconform-runner --target: host, el2
    engine: Callable[[bool], Engine]       # the runner run uses (True: run's --asan build, where run has one)
    release: str | None                    # what run calls the build (None: the runner's kernel release)
    entries: list[dict]                    # the baseline run applies (plus fuzz --known entries)
    command: Callable[[bool], list[str]]   # the run command line selecting this build (True: with --asan)
    sanitizable: bool = False              # whether run has a sanitized build of this target (el2 --asan)


@dataclasses.dataclass
class Replayed:
    findings: list       # run's findings on the input, baseline applied
    known: bool          # run would baseline every one of them (and there is one)
    command: list[str]   # the run command (less the file) that reproduces them ([]: run reproduces nothing)
    error: str = ""      # run could not replay the input


def replay_with_run(replay: RunReplay, path: Path, work: Path, sanitizer: bool) -> Replayed:
    """Runs the input file with run's logic in work/ and applies the baseline as run does."""
    sanitized = sanitizer and replay.sanitizable
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        run = replay.engine(sanitized).run(replay.target, [str(path)], work / "verdicts.jsonl",
                                           release=replay.release)
    except ToolError as e:
        return Replayed([], False, [], error=str(e).splitlines()[0] if str(e) else "failed")
    baseline.apply(replay.entries, [run])
    known = bool(run.findings) and all(f.baselined_by for f in run.findings)
    return Replayed(run.findings, known, replay.command(sanitized) if run.findings else [])


def store_finding(binary: Path, data: bytes, kind: str, findings: Path, env: dict,
                  replay: RunReplay | None = None) -> tuple[Path | None, bool]:
    """Replays one input, names it by rule and hash, stores .kcsb/.kcs/.log. Returns
    (path, new); (None, False) when run would baseline it (recorded in known.log).
    Without replay, every input is stored (no run to ask)."""
    findings.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:12]
    for old in findings.glob(f"*-{digest}.kcsb"):
        return old, False  # the same input was stored before: never overwritten
    tmp = findings / f".replay-{digest}"
    tmp.write_bytes(data)
    try:
        r = subprocess.run([str(binary), str(tmp)], capture_output=True, text=True, timeout=120, env=env)
        stderr = r.stderr
    except subprocess.TimeoutExpired as e:
        stderr = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        kind = "timeout"
    rule = classify(stderr, kind)
    judged: Replayed | None = None
    if replay is not None and kind == "crash":
        work = findings.parent / "replays" / digest
        judged = replay_with_run(replay, tmp, work, rule.startswith(("asan.", "ubsan.", "lsan.", "signal")))
        if judged.known:
            tmp.unlink()
            shutil.rmtree(work, ignore_errors=True)
            with open(findings.parent / "known.log", "a") as log:
                for f in judged.findings:
                    log.write(f"KNOWN-ON-REPLAY {f.rule} {f.scenario} op {f.op} ({f.call}) input {digest}: "
                              f"baselined by {f.baselined_by['rule']} {f.baselined_by['release']} "
                              f"{f.baselined_by.get('scenario', '*')}\n")
            return None, False
    stem = f"{kind}-{rule}-{digest}"
    path = findings / (stem + ".kcsb")
    tmp.rename(path)
    try:
        text = Engine(runner_binary()).to_text(path)
    except ToolError:
        text = "# (does not decode)\n"
    summary = [line for line in stderr.splitlines() if line.startswith("SUMMARY:")]
    kcs = findings / (stem + ".kcs")
    head = [f"# {kind} found by kconform fuzz: {summary[0] if summary else rule}",
            f"# replay: {binary} {path}"]
    if judged is not None:
        if judged.error:
            head.append(f"# run: could not replay it: {judged.error}")
        elif not judged.findings:
            head.append("# run: reproduces nothing on this input (the fuzz runner's replay above does)")
        for f in judged.findings:
            state = "baselined" if f.baselined_by else "NEW"
            head.append(f"# run: {state} {f.kind} {f.rule} at op {f.op} ({f.call}) on {f.target} {f.release}")
    # A command that reproduces it: run's, where run does; else the fuzz runner's own replay.
    rerun = (judged.command + [str(kcs)]) if judged is not None and judged.command else [str(binary), str(path)]
    head.append("# re-run: " + shlex.join(rerun))
    atomic_write(kcs, "\n".join(" ".join(h.splitlines()) for h in head) + "\n" + text)
    atomic_write(findings / (stem + ".log"), "\n".join(stderr.splitlines()[-200:]) + "\n")
    return path, True


def rerun_hint(path: Path) -> str:
    """The re-run command a stored finding's .kcs names ("" if none)."""
    try:
        with open(path.with_suffix(".kcs")) as f:
            for line in f:
                if not line.startswith("#"):
                    break
                if line.startswith("# re-run: "):
                    return line[len("# re-run: "):].strip()
    except OSError:
        pass
    return ""


def collect(binary: Path, root: Path, env: dict,
            replay: RunReplay | None = None) -> list[tuple[Path | None, bool]]:
    """Stores what libFuzzer (root/artifacts) and AFL++ (root/afl) left; empties artifacts.
    With replay, an input run would baseline is recorded in known.log: (None, False)."""
    out = []
    sources: list[tuple[Path, str]] = []
    art = root / "artifacts"
    if art.exists():
        for f in sorted(art.iterdir()):
            kind = next((k for k in KINDS if f.name.startswith(k + "-")), None)
            if kind:
                sources.append((f, kind))
    afl = root / "afl"
    if afl.exists():
        for sub, kind in (("crashes", "crash"), ("hangs", "timeout")):
            for f in sorted(afl.glob(f"*/{sub}/id:*")):
                sources.append((f, kind))
    for f, kind in sources:
        out.append(store_finding(binary, f.read_bytes(), kind, root / "findings", env, replay))
        if f.parent == art:
            f.unlink()
    return out
