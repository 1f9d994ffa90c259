"""`kconform bench`: the suite's benchmarks, medians of repeated runs, as JSON
(reports/bench/<time>.json) and a Markdown table (the README's "Benchmarks").

Rows: the EL2 differential (scenario executions per second on one core, plain
and ASan+UBSan builds), guest_memfd scenarios per second on the host kernel
(Google Benchmark, harness/bench), Z3 generation time (kconform-gen), and time
for the fuzzer to find a RECLAIM2 mutant (targets/el2/reclaim2/mutants/)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console

from kconform import build, deps
from kconform.errors import ToolError
from kconform.paths import REPO, build_dir

MUTANTS = REPO / "targets" / "el2" / "reclaim2" / "mutants"


def _gbench(binary: Path, reps: int, corpus: list[Path] | None = None) -> dict:
    """Runs one Google Benchmark binary; returns the median aggregate's counters."""
    env = dict(os.environ)
    if corpus:
        env["KCONFORM_BENCH_CORPUS"] = ":".join(str(c) for c in corpus)
    r = subprocess.run([str(binary), f"--benchmark_repetitions={reps}", "--benchmark_report_aggregates_only=true",
                        "--benchmark_format=json", "--benchmark_min_time=1"],
                       capture_output=True, text=True, timeout=1800, env=env)
    if r.returncode != 0:
        raise ToolError(f"{binary.name} failed: {r.stderr.strip()[-1000:]}")
    doc = json.loads(r.stdout)
    med = [b for b in doc["benchmarks"] if b.get("aggregate_name") == "median"]
    if not med:
        raise ToolError(f"{binary.name}: no median in its output")
    if med[0].get("error_occurred"):
        raise ToolError(f"{binary.name}: {med[0].get('error_message')}")
    return med[0]


def _row(name: str, value, unit: str, how: str, skipped: str = "") -> dict:
    return {"benchmark": name, "median": value, "unit": unit, "how": how, "skipped": skipped}


def run_benchmarks(reps: int, log) -> list[dict]:
    deps.ensure(["bench"], log)
    rows = []
    # The EL2 differential, plain and ASan+UBSan.
    for preset, label in (("default", "plain"), ("asan", "ASan+UBSan")):
        name = f"EL2 differential, 4K, {label}"
        try:
            build.build(preset, targets=["kconform-bench-el2-4k"], log=log)
            # The directed suite only: some Z3 descriptor cases make stock ffa.c
            # read misaligned structs, which UBSan (no recovery) ends.
            m = _gbench(build_dir(preset) / "harness" / "bench" / "kconform-bench-el2-4k", reps,
                        [REPO / "corpora" / "ffa"])
            rows.append(_row(name, round(m["items_per_second"], 1), "scenario executions/s/core",
                             f"corpora/ffa runnable on 4K ({int(m['scenarios'])} scenarios, "
                             f"{m['ops_per_s']:.0f} ops/s), model+ffa.c+judge, {reps} repetitions"))
        except ToolError as e:
            rows.append(_row(name, None, "scenario executions/s/core", "", f"EL2 target unavailable: {str(e)[:200]}"))
    # guest_memfd on the host kernel.
    name = "guest_memfd scenarios on the host kernel"
    build.build("default", targets=["kconform-bench"], log=log)
    try:
        m = _gbench(build_dir("default") / "harness" / "bench" / "kconform-bench", reps)
        rows.append(_row(name, round(m["items_per_second"], 1), "scenarios/s",
                         f"corpora/gmem + corpora/z3/gmem runnable here ({int(m['scenarios'])} scenarios, "
                         f"{m['ops_per_s']:.0f} ops/s), {reps} repetitions"))
    except ToolError as e:
        rows.append(_row(name, None, "scenarios/s", "", f"host target unavailable: {str(e)[:200]}"))
    # Z3 generation.
    from kconform.gen import gen_binary
    build.build("default", targets=["kconform-gen"], log=log)
    times, cases = [], 0
    for _ in range(max(1, min(reps, 3))):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.monotonic()
            r = subprocess.run([str(gen_binary()), "--out", d], capture_output=True, text=True)
            times.append(time.monotonic() - t0)
            if r.returncode != 0:
                raise ToolError(f"kconform-gen failed: {r.stderr.strip()}")
            cases = json.loads(r.stdout.splitlines()[-1])["cases"]
    rows.append(_row("Z3 generation (all ABIs)", round(statistics.median(times), 2), "s",
                     f"{cases} cases, {len(times)} runs"))
    # Time for the fuzzer to find a RECLAIM2 mutant.
    mutants = sorted(p for p in MUTANTS.glob("*.patch")) if MUTANTS.exists() else []
    name = "fuzzer time to find a RECLAIM2 mutant"
    if not mutants:
        rows.append(_row(name, None, "s", "", f"no mutants yet in {MUTANTS.relative_to(REPO)}/"))
    else:
        rows.append(_row(name, None, "s", "", f"{len(mutants)} mutants present; building each mutant's fuzz "
                                                "target is not wired into kconform bench yet"))
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| benchmark | median | unit | how |", "|---|---|---|---|"]
    for r in rows:
        value = "skipped" if r["median"] is None else f"{r['median']:g}"
        out.append(f"| {r['benchmark']} | {value} | {r['unit']} | {r['skipped'] or r['how']} |")
    return "\n".join(out)


def cmd_bench(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    rows = run_benchmarks(args.repetitions, log)
    doc = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.node(),
           "cpus": __import__("os").cpu_count(), "kernel": platform.release(), "rows": rows}
    out = Path(args.output) if args.output else REPO / "reports" / "bench" / (
        datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(markdown(rows))
    log(f"kconform bench: written to {out}")
    return 0
