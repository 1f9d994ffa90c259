"""What a fuzzer found. Rule violations never stop the fuzz runner: it records
them itself (harness/fuzz/fuzz_runner.h FindingStore, under findings/, with
per-process counts in findings/.counts/; read_counts below). What reaches the
engine's crash path (a crash of the process, a timeout; or, for a fuzz runner
started without KCONFORM_FUZZ_FINDINGS, a violation) is handled here: each
input is replayed, named by its signature (crash_signature: the rule or
sanitizer report and, for a crash, the frames inside the code under test) and
stored once per signature as .kcsb/.kcs/.jsonl/.log, as the fuzz runner stores
its findings; a later input with the same signature is counted, not stored.

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
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, runner_binary
from kconform.engine import baseline
from kconform.engine.runner import Engine

KINDS = ("crash", "timeout", "oom", "leak", "slow-unit")
# A crash-path input replayed alone that has not ended after this long is a hang
# (the engines' own per-input limit is 3 s on el2, 10 s on host: engine/fuzzers.py
# HANG_SECONDS): waiting longer
# only made every stall of stock ffa.c cost two minutes at the end of a run.
REPLAY_TIMEOUT = 20


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


# A sanitizer's (or libFuzzer's deadly-signal) stack frame: "#3 0x... in func /path/file.c:12:5".
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+) (/\S+?):(\d+)", re.M)
# Frames that are not code under test: ours (the runner, models, oracles, the
# harness), the engines', the sanitizers' and the C/C++ libraries'.
_NOT_UNDER_TEST = re.compile(r"/(llvm|compiler-rt|libfuzzer|sanitizer_common|asan|ubsan)[/-]|/usr/(include|lib)/"
                             r"|/libc\b|glibc|libstdc\+\+|/bits/")


def under_test(path: str) -> bool:
    """Whether a frame's file is code under test: targets/ (the EL2 shims, our RECLAIM2,
    the faulty wrapper) or a kernel tree's source, not our runner, models or oracles."""
    if path.startswith(str(REPO) + "/"):
        return path.startswith(str(REPO / "targets") + "/")
    return not _NOT_UNDER_TEST.search(path)


def crash_signature(stderr: str, kind: str, rule: str, frames: int = 3) -> str:
    """A crash's signature: its kind, what it is (rule slug) and the first `frames` stack
    frames inside the code under test ("func file.c:line"); with none there, the first
    frames of the report. A rule violation's: rules, op kind and target, as the fuzz
    runner names it (fuzz_runner.h signature)."""
    m = re.search(r"SUMMARY: kconform: (\S+) violated by op \d+ \((\w+).*?\) on target (.+?): ", stderr)
    if m:
        return f"{m.group(1)} {m.group(2)} {m.group(3)}"
    found = [(fn, path, line) for fn, path, line in FRAME.findall(stderr)]
    mine = [f for f in found if under_test(f[1])] or found
    where = "; ".join(f"{fn} {os.path.basename(path)}:{line}" for fn, path, line in mine[:frames])
    return f"{kind} {rule}" + (f" at {where}" if where else "")


def signature_digest(signature: str) -> str:
    return hashlib.sha1(signature.encode()).hexdigest()[:12]


def read_counts(findings: Path) -> tuple[int, dict[tuple[str, bool], dict]]:
    """What the fuzz runners recorded (findings/.counts/<pid>.tsv, fuzz_runner.h
    FindingStore): executions, and per (signature, known) {"count", "stem"} (one
    signature can be met known, in a seed the baseline names, and new, in a
    mutated input)."""
    execs, sigs = 0, {}
    for f in sorted((findings / ".counts").glob("*.tsv")):
        try:
            lines = f.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split("\t")
            if parts[0] == "execs" and len(parts) == 2:
                execs += int(parts[1])
            elif len(parts) == 4 and parts[0].isdigit():
                s = sigs.setdefault((parts[3], parts[1] == "known"), {"count": 0, "stem": None})
                s["count"] += int(parts[0])
                if parts[2] != "-":
                    s["stem"] = parts[2]
    return execs, sigs


SIDES = ("allowed", "forbidden")


def sides_reached(findings: Path) -> set[tuple[str, str]]:
    """The rule sides the fuzz runners reached: the union over every process's
    findings/.counts/<pid>.tsv of its lines "side<TAB>RULE.ID<TAB>allowed|forbidden"
    (fuzz_runner.h FindingStore). A file without such lines (a runner that does not
    write them), a torn last line or an unknown side adds nothing."""
    out: set[tuple[str, str]] = set()
    for f in sorted((findings / ".counts").glob("*.tsv")):
        try:
            lines = f.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split("\t")
            if len(parts) == 3 and parts[0] == "side" and parts[1] and parts[2] in SIDES:
                out.add((parts[1], parts[2]))
    return out


RULE_LINE = re.compile(r'^KCONFORM_RULE\(\s*\w+\s*,\s*"([^"]+)"', re.M)


def abi_rules(abi: str) -> list[str]:
    """The rule IDs of an ABI (models/<abi>/rules.def)."""
    path = REPO / "models" / abi / "rules.def"
    try:
        return RULE_LINE.findall(path.read_text())
    except OSError as e:
        raise ToolError(f"{path}: cannot read the rules of ABI {abi}: {e.strerror}") from None


def sides_line(reached: set[tuple[str, str]], abi: str) -> str:
    """ "rule sides reached: N of M" (M = 2 x the ABI's rules); N counts only this ABI's rules."""
    rules = set(abi_rules(abi))
    n = sum(1 for rule, _ in reached if rule in rules)
    return f"rule sides reached: {n} of {2 * len(rules)}"


@dataclasses.dataclass
class RunReplay:
    """How `kconform run` would judge an input on this fuzz target's build."""
    target: str                            # the target findings and the baseline name: host, el2, spmc
    engine: Callable[[bool], Engine]       # the runner run uses (True: run's --asan build, where run has one)
    release: str | None                    # what run calls the build (None: the runner's kernel release)
    entries: list[dict]                    # the baseline run applies (plus fuzz --known entries)
    command: Callable[[bool], list[str]]   # the run command line selecting this build (True: with --asan)
    sanitizable: bool = False              # whether run has a sanitized build of this target (el2 --asan)
    runner_target: str | None = None       # kconform-runner --target when it is not `target` (spmc-4k)

    def runner_name(self) -> str:
        return self.runner_target or self.target


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
        run = replay.engine(sanitized).run(replay.runner_name(), [str(path)], work / "verdicts.jsonl",
                                           release=replay.release)
    except ToolError as e:
        return Replayed([], False, [], error=str(e).splitlines()[0] if str(e) else "failed")
    baseline.apply(replay.entries, [run])
    known = bool(run.findings) and all(f.baselined_by for f in run.findings)
    return Replayed(run.findings, known, replay.command(sanitized) if run.findings else [])


def store_finding(binary: Path, data: bytes, kind: str, findings: Path, env: dict,
                  replay: RunReplay | None = None) -> tuple[Path | None, bool]:
    """store_crash without the signature."""
    path, new, _ = store_crash(binary, data, kind, findings, env, replay)
    return path, new


def store_crash(binary: Path, data: bytes, kind: str, findings: Path, env: dict,
                replay: RunReplay | None = None) -> tuple[Path | None, bool, str]:
    """Replays one input from the crash path, names it by its signature
    (crash_signature) and stores .kcsb/.kcs/.jsonl/.log unless that signature is
    stored already. Returns (path, new, signature): (stored path, False) for a
    duplicate; (None, False) when run would baseline it (recorded in known.log).
    Without replay, every new signature is stored (no run to ask)."""
    findings.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:12]
    # An input replayed before (findings/.inputs/<sha1>: its signature) is not replayed again.
    seen = findings / ".inputs" / digest
    if seen.exists():
        sig = seen.read_text().strip()
        old = next(findings.glob(f"*-{signature_digest(sig)}.kcsb"), None)
        return old, False, sig
    tmp = findings / f".replay-{digest}"
    tmp.write_bytes(data)
    # The replay records the violations it meets in a scratch folder (not the
    # run's findings, not counted): what is left is the crash itself.
    scratch = findings / f".replay-findings-{digest}"
    if env.get("KCONFORM_FUZZ_FINDINGS"):
        env = dict(env, KCONFORM_FUZZ_FINDINGS=str(scratch))
    replay_note = ""
    try:
        t0 = time.monotonic()
        r = subprocess.run([str(binary), str(tmp)], capture_output=True, text=True, timeout=REPLAY_TIMEOUT,
                           env=env)
        stderr = r.stderr
        if kind == "timeout":  # the engine's hang, not confirmed alone: a stalled machine, or order-dependent
            replay_note = (f"# replay: NOT CONFIRMED: alone, the input ran to its end in "
                           f"{time.monotonic() - t0:.1f} s (exit {r.returncode}); the engine called it a hang")
    except subprocess.TimeoutExpired as e:
        stderr = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        kind = "timeout"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rule = classify(stderr, kind)
    sig = crash_signature(stderr, kind, rule)
    sig_digest = signature_digest(sig)
    seen.parent.mkdir(exist_ok=True)
    atomic_write(seen, sig + "\n")
    for old in findings.glob(f"*-{sig_digest}.kcsb"):
        tmp.unlink()
        return old, False, sig  # this signature is stored: counted, never stored twice
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
            return None, False, sig
    stem = f"{kind}-{rule}-{sig_digest}"
    path = findings / (stem + ".kcsb")
    tmp.rename(path)
    try:
        text = Engine(runner_binary()).to_text(path)
    except ToolError:
        text = "# (does not decode)\n"
    summary = [line for line in stderr.splitlines() if line.startswith("SUMMARY:")]
    kcs = findings / (stem + ".kcs")
    head = [f"# {kind} found by kconform fuzz: {summary[0] if summary else rule}",
            f"# signature: {sig}", f"# replay: {binary} {path}"] + ([replay_note] if replay_note else [])
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
    # Its verdict records: run's on this input, where run replayed it.
    verdicts = findings.parent / "replays" / digest / "verdicts.jsonl"
    if judged is not None and verdicts.exists():
        shutil.copyfile(verdicts, findings / (stem + ".jsonl"))
    return path, True, sig


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


def collect(binary: Path, root: Path, env: dict, replay: RunReplay | None = None,
            since: float = 0.0) -> list[tuple[Path | None, bool, str]]:
    """Stores what libFuzzer (root/artifacts) and AFL++ (root/afl) left; empties artifacts.
    Returns (path, new, signature) per input (store_crash). With replay, an input
    run would baseline is recorded in known.log: (None, False, signature). AFL++'s
    files older than `since` (epoch seconds) are an earlier run's and left out."""
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
                if f.stat().st_mtime >= since:
                    sources.append((f, kind))
    for f, kind in sources:
        out.append(store_crash(binary, f.read_bytes(), kind, root / "findings", env, replay))
        if f.parent == art:
            f.unlink()
    return out
