"""Coverage of the code under test on the EL2 target: which lines, branches and
functions of the tree's ffa.c (with a patch applied, e.g. our RECLAIM2
implementation, when given) each corpus reaches.

The EL2 runner is built with clang's source-based coverage on the C compiled
from the tree (targets/el2.py COVERAGE_FLAGS, its own build folder
build/el2/<tree>-cov); each corpus runs through it as `run` runs it (crashes and
hangs resume with the next scenario, and a dying runner still writes its counters:
harness/runner/crash_marker.cc), with LLVM_PROFILE_FILE per process; the raw
profiles are merged with llvm-profdata and read back with `llvm-cov export`,
keeping only the file under test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

from kconform.core import procs
from kconform.core.errors import ToolError
from kconform.engine.runner import Engine

FFA_C = "arch/arm64/kvm/hyp/nvhe/ffa.c"


def llvm_tool(name: str) -> str:
    for cand in (name, f"{name}-14", f"/usr/lib/llvm-14/bin/{name}"):
        path = shutil.which(cand)
        if path:
            return path
    raise ToolError(f"{name} not found (Debian package llvm-14, which clang pulls in)")


@dataclasses.dataclass
class FileCoverage:
    corpus: str
    scenarios: int
    lines: tuple[int, int]       # (covered, total)
    branches: tuple[int, int]
    functions: tuple[int, int]
    regions: tuple[int, int]
    unreached_functions: list[str]
    untaken_branches: list[dict]  # {"line", "true", "false"}: a side never taken
    unreached_lines: list[int]

    @staticmethod
    def pct(pair: tuple[int, int]) -> str:
        return f"{100.0 * pair[0] / pair[1]:.1f}%" if pair[1] else "-"

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("lines", "branches", "functions", "regions"):
            c, t = getattr(self, k)
            d[k] = {"covered": c, "total": t, "percent": round(100.0 * c / t, 2) if t else None}
        return d


def run_corpus(engine: Engine, files: list[str], work: Path, label: str) -> Path:
    """Runs files on the el2 target with profiling on; returns the merged .profdata."""
    raw_dir = work / label
    raw_dir.mkdir(parents=True)
    old = os.environ.get("LLVM_PROFILE_FILE")
    os.environ["LLVM_PROFILE_FILE"] = str(raw_dir / "%p-%m.profraw")
    try:
        engine.run("el2", files, raw_dir / "verdicts.jsonl")
    finally:
        if old is None:
            os.environ.pop("LLVM_PROFILE_FILE", None)
        else:
            os.environ["LLVM_PROFILE_FILE"] = old
    raws = sorted(str(p) for p in raw_dir.glob("*.profraw"))
    if not raws:
        raise ToolError(f"corpus {label}: the runner wrote no profile (is it built with coverage?)")
    out = work / f"{label}.profdata"
    r = procs.run([llvm_tool("llvm-profdata"), "merge", "-sparse", "-o", str(out), *raws],
                  capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"llvm-profdata merge failed for corpus {label}: {r.stderr.strip()[-1000:]}")
    return out


def merge(profiles: list[Path], out: Path) -> Path:
    r = procs.run([llvm_tool("llvm-profdata"), "merge", "-sparse", "-o", str(out), *map(str, profiles)],
                  capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"llvm-profdata merge failed: {r.stderr.strip()[-1000:]}")
    return out


def file_coverage(binary: Path, profdata: Path, corpus: str, scenarios: int, suffix: str = FFA_C) -> FileCoverage:
    """The coverage of the file whose path ends with suffix, from llvm-cov export."""
    r = subprocess.run([llvm_tool("llvm-cov"), "export", "-format=text", f"-instr-profile={profdata}", str(binary)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"llvm-cov export failed: {r.stderr.strip()[-1000:]}")
    doc = json.loads(r.stdout)
    files = [f for d in doc.get("data", []) for f in d.get("files", []) if f["filename"].endswith(suffix)]
    if not files:
        raise ToolError(f"{binary}: no coverage of {suffix} (built without coverage, or it was not compiled)")
    f = files[0]
    s = f["summary"]
    pair = lambda k: (int(s[k]["covered"]), int(s[k]["count"]))  # noqa: E731
    funcs = [fn for d in doc["data"] for fn in d.get("functions", [])
             if any(name.endswith(suffix) for name in fn.get("filenames", []))]
    unreached = sorted({fn["name"].split(":")[-1] for fn in funcs if fn.get("count", 0) == 0})
    untaken = []
    for b in f.get("branches", []):
        line, true_n, false_n = b[0], b[4], b[5]
        if true_n == 0 or false_n == 0:
            untaken.append({"line": line, "true": true_n, "false": false_n})
    # Segments: [line, col, count, has_count, is_region_entry, is_gap]; a line is
    # unreached when a counted region starting on it has count 0 and none > 0.
    seen: dict[int, bool] = {}
    for seg in f.get("segments", []):
        line, count, has_count, is_gap = seg[0], seg[2], seg[3], seg[5] if len(seg) > 5 else False
        if has_count and not is_gap:
            seen[line] = seen.get(line, False) or count > 0
    unreached_lines = sorted(line for line, hit in seen.items() if not hit)
    return FileCoverage(corpus, scenarios, pair("lines"), pair("branches"), pair("functions"), pair("regions"),
                        unreached, untaken, unreached_lines)


def line_counts(binary: Path, profdata: Path, suffix: str = FFA_C) -> dict[int, int]:
    """Execution count of each line of the file as llvm-cov shows it: the largest
    count of the regions entered on the line, else the count of the region the line
    lies in (segments: [line, col, count, has_count, is_region_entry, is_gap])."""
    r = subprocess.run([llvm_tool("llvm-cov"), "export", "-format=text", f"-instr-profile={profdata}", str(binary)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"llvm-cov export failed: {r.stderr.strip()[-1000:]}")
    doc = json.loads(r.stdout)
    out: dict[int, int] = {}
    for d in doc.get("data", []):
        for f in d.get("files", []):
            if not f["filename"].endswith(suffix):
                continue
            segs = f.get("segments", [])
            by_line: dict[int, list] = {}
            for seg in segs:
                by_line.setdefault(seg[0], []).append(seg)
            wrapped = None
            last = segs[-1][0] if segs else 0
            for line in range(segs[0][0] if segs else 1, last + 1):
                starts = by_line.get(line, [])
                counts = [int(sg[2]) for sg in starts
                          if sg[3] and sg[4] and not (len(sg) > 5 and sg[5])]
                if wrapped is not None and wrapped[3] and not (len(wrapped) > 5 and wrapped[5]):
                    counts.append(int(wrapped[2]))
                if counts:
                    out[line] = max(counts)
                if starts:
                    wrapped = starts[-1]
    return out


def lines_of_op(engine: Engine, binary: Path, head: list[str], ops: list[str], op: int, work: Path,
                source: Path, limit: int = 80) -> list[dict]:
    """The lines of the file under test that op `op` of a scenario executed: the
    line counts of the scenario cut after that op, less those of it cut before it
    (the same deterministic run up to there). Each {"line", "count", "text"}."""
    counts = []
    for n, k in (("before", op), ("after", op + 1)):
        d = work / f"op-lines-{n}"
        d.mkdir(parents=True, exist_ok=True)
        f = d / "prefix.kcs"
        f.write_text("\n".join(head + ops[:k]) + "\n")
        try:
            counts.append(line_counts(binary, run_corpus(engine, [str(f)], d, "p")))
        except ToolError:
            if k:
                raise
            counts.append({})  # a scenario of no ops does not run: nothing before op 0
    before, after = counts
    try:
        text = source.read_text(errors="replace").splitlines()
    except OSError:
        text = []
    out = []
    for line in sorted(after):
        extra = after[line] - before.get(line, 0)
        if extra > 0:
            out.append({"line": line, "count": extra,
                        "text": text[line - 1].rstrip() if 0 < line <= len(text) else ""})
    return out[:limit]
