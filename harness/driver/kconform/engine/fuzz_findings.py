"""What a fuzzer found: each crash/timeout input replayed, named by the rule (or
sanitizer report) it trips and its hash, and stored once as .kcsb/.kcs/.log."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import runner_binary
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


def store_finding(binary: Path, data: bytes, kind: str, findings: Path, env: dict) -> tuple[Path, bool]:
    """Replays one input, names it by rule and hash, stores .kcsb/.kcs/.log. Returns (path, new)."""
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
    stem = f"{kind}-{rule}-{digest}"
    path = findings / (stem + ".kcsb")
    tmp.rename(path)
    try:
        text = Engine(runner_binary()).to_text(path)
    except ToolError:
        text = "# (does not decode)\n"
    summary = [line for line in stderr.splitlines() if line.startswith("SUMMARY:")]
    (findings / (stem + ".kcs")).write_text(
        f"# {kind} found by kconform fuzz: {summary[0] if summary else rule}\n"
        f"# replay: {binary} {path}\n" + text)
    (findings / (stem + ".log")).write_text("\n".join(stderr.splitlines()[-200:]) + "\n")
    return path, True


def collect(binary: Path, root: Path, env: dict) -> list[tuple[Path, bool]]:
    """Stores what libFuzzer (root/artifacts) and AFL++ (root/afl) left; empties artifacts."""
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
        out.append(store_finding(binary, f.read_bytes(), kind, root / "findings", env))
        if f.parent == art:
            f.unlink()
    return out
