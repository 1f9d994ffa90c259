"""`kconform bench`: the suite's benchmarks, medians of repeated runs, as JSON
(reports/bench/<time>.json) and a Markdown table (docs/benchmarks.md).

Rows: the EL2 differential (scenario executions per second on one core, plain
and ASan+UBSan builds: preset asan-opt at -O2 and asan at -O0), the SPMC differential
(TF-A's EL3 SPMC straight from the Normal world, spmc), guest_memfd scenarios per second on the host kernel
(Google Benchmark, harness/bench), Z3 generation time (kconform-gen), and, only
when selected (they take minutes): `--only mutant-ttf`, the time libFuzzer needs
to find each mutant (RECLAIM2 and stock ffa.c families, from the seeds and from an
empty corpus; by default a slice, the issue's matrix with --nightly;
selftest/mutant_ttf.py); `--only fuzz-el2`, `kconform fuzz --engine libfuzzer
--target el2` on stock 7.3 for --fuzz-time: executions per second per job and
restarts (`--only fuzz-spmc`: the same on TF-A's EL3 SPMC); `--only qemu`, boot to the first observed op and scenarios per second inside the
guest, for Debian's 7.3 kernel and for 7.3 built with our write() patch.

Selectors (`--only a,b`): el2, spmc, gmem, linearize (the interleaving search that judges
concurrent groups, harness/runner/linearize.h: interleavings explored per second), gen
(the default set), el2-tfa (the EL2 differential with TF-A's EL3 SPMC behind ffa.c, in the
default set), mutant-ttf, fuzz-el2, fuzz-el2-tfa, fuzz-spmc, qemu and qemu-arm64 (`run --target
qemu-arm64` on corpora/ffa/smoke.kcs: boot to the first observed op through TF-A and pKVM,
and scenarios per second issued from the host kernel; 4K and 16K).
"""

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

from kconform.core import deps, procs
from kconform.core.errors import ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, build_dir, runner_binary
from kconform.commands.fuzz import make_seeds, parse_duration
from kconform.engine.build import build_preset
from kconform.engine.gen import gen_binary
from kconform.engine.runner import Engine
from kconform.engine.scenarios import scenario_files
from kconform.selftest import mutant_ttf
from kconform.selftest.write import REFERENCE as WRITE_PATCH
from kconform.sources import debian_kernels, kernel_build
from kconform.targets.qemu.guest import ensure_tools, run_guest

SELECTORS = ("el2", "el2-tfa", "spmc", "gmem", "linearize", "gen", "mutant-ttf", "fuzz-el2", "fuzz-el2-tfa",
             "fuzz-spmc", "qemu", "qemu-arm64")
DEFAULT_SELECTORS = ("el2", "el2-tfa", "spmc", "gmem", "linearize", "gen")


def _gbench(binary: Path, reps: int, corpus: list[Path] | None = None, only: str | None = None) -> dict:
    """Runs one Google Benchmark binary (its benchmarks matching the regex only, if given);
    returns the first median aggregate's counters."""
    env = dict(os.environ)
    if corpus:
        env["KCONFORM_BENCH_CORPUS"] = ":".join(str(c) for c in corpus)
    r = subprocess.run([str(binary), f"--benchmark_repetitions={reps}", "--benchmark_report_aggregates_only=true",
                        "--benchmark_format=json", "--benchmark_min_time=1"]
                       + ([f"--benchmark_filter={only}"] if only else []),
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


def run_benchmarks(reps: int, log, only: list[str] | None = None, mutant_opts: dict | None = None,
                   fuzz_opts: dict | None = None) -> list[dict]:
    sel = set(only or DEFAULT_SELECTORS)
    bad = sel - set(SELECTORS)
    if bad:
        raise ToolError(f"flag --only: no benchmark {', '.join(sorted(bad))} (known: {', '.join(SELECTORS)})")
    rows = []
    if sel & {"el2", "gmem", "linearize"}:
        deps.ensure(["bench"], log)
    # The EL2 differential, plain and ASan+UBSan.
    # ASan+UBSan twice: the asan preset (Debug, -O0) and asan-opt (-O2, as fuzzers run).
    # The directed suite only (as the figures in docs/benchmarks.md were measured; with all of
    # UBSan, some Z3 descriptor cases made stock ffa.c's misaligned reads end the
    # process: kernel code now gets the kernel's arm64 UBSan set, targets/el2/README.md).
    el2_builds = (("default", "plain"), ("asan-opt", "ASan+UBSan -O2"), ("asan", "ASan+UBSan"))
    for preset, label in el2_builds if "el2" in sel else ():
        rows.append(_differential_row(
            reps, log, f"EL2 differential, 4K, {label}", preset, "kconform-bench-el2-4k", "^BM_El2Differential/",
            "left out: they hang or crash the in-process ffa.c), model+ffa.c+judge", "EL2 target"))
        if preset == "default":  # like for like with the figure issue 14 started from
            rows.append(_differential_row(
                reps, log, f"EL2 differential, 4K, {label}, issue 14's baseline files", preset,
                "kconform-bench-el2-4k", "^BM_El2Differential/",
                "left out), model+ffa.c+judge", "EL2 target",
                corpus=[REPO / "corpora" / "ffa" / f"{f}.kcs" for f in ISSUE14_BASELINE_FILES],
                corpus_name=f"the {len(ISSUE14_BASELINE_FILES)} files of corpora/ffa at a4e7f4a"))
    if "spmc" in sel:  # TF-A's EL3 SPMC straight from the Normal world (default build)
        rows.append(_differential_row(
            reps, log, "SPMC differential (TF-A EL3 SPMC), 4K, plain", "default", "kconform-bench-spmc", None,
            "left out), SPMC-side model+TF-A+judge incl. the table read each op", "spmc target"))
    if "el2-tfa" in sel:  # pKVM's ffa.c with TF-A's EL3 SPMC behind it (run --target el2 --el3 tf-a)
        rows.append(_differential_row(
            reps, log, "EL2 differential with TF-A's EL3 SPMC (--el3 tf-a), 4K, plain", "default",
            "kconform-bench-el2-4k", "BM_El2TfaDifferential",
            "left out: they hang or crash), model+ffa.c+TF-A+judge incl. TF-A's table read each op",
            "el2 --el3 tf-a"))
    if "gmem" in sel:
        rows.append(_gmem_row(reps, log))
    if "linearize" in sel:
        rows.append(_linearize_row(reps, log))
    if "gen" in sel:
        rows.append(_gen_row(reps, log))
    if "mutant-ttf" in sel:
        rows += _mutant_ttf_rows(log, **(mutant_opts or {}))
    if "fuzz-el2" in sel:
        rows += _fuzz_el2_rows(log, **(fuzz_opts or {}))
    if "fuzz-el2-tfa" in sel:
        rows += _fuzz_el2_rows(log, **(fuzz_opts or {}), el3="tf-a")
    if "fuzz-spmc" in sel:
        rows += _fuzz_el2_rows(log, **(fuzz_opts or {}), target="spmc")
    if "qemu" in sel:
        rows += _qemu_rows(reps, log)
    if "qemu-arm64" in sel:
        rows += _qemu_arm64_rows(reps, log)
    return rows


# The corpora/ffa files there were when issue 14 measured the EL2 differential at
# 5,860 scenario executions/s (a4e7f4a, 170 scenarios at 4K). The folder has since
# gained checks, el3_reclaim, el3_send, large (7 scenarios of 600-2,299
# constituents: a quarter of a pass), permissive, tfa and zero; the files below
# gained scenarios too.
ISSUE14_BASELINE_FILES = ("el3_misbehave", "fragments", "invariants", "mailbox", "reclaim", "reclaim2-16k",
                          "reclaim2-4k", "regressions", "share_lend", "smoke", "version")


def _differential_row(reps: int, log, name: str, preset: str, binary: str, only: str | None, what: str,
                      target: str, corpus: list[Path] | None = None, corpus_name: str = "corpora/ffa") -> dict:
    """One differential benchmark of harness/bench over corpora/ffa (or the given files;
    4K): scenario executions per second on one core, or the row skipped with why."""
    unit = "scenario executions/s/core"
    try:
        build_preset(preset, targets=[binary], log=log)
        m = _gbench(build_dir(preset) / "harness" / "bench" / binary, reps, corpus or [REPO / "corpora" / "ffa"],
                    only=only)
    except ToolError as e:
        return _row(name, None, unit, "", f"{target} unavailable: {str(e)[:200]}")
    return _row(name, round(m["items_per_second"], 1), unit,
                f"{corpus_name} runnable on 4K ({int(m['scenarios'])} scenarios, {m['ops_per_s']:.0f} ops/s; "
                f"{int(m.get('crashed', 0))} {what}, {reps} repetitions")


def _qemu_rows(reps: int, log) -> list[dict]:
    """Per kernel: boots running the guest_memfd suite; medians of boot to the first
    observed op (QEMU start to the first op outcome reaching the host, i.e. the first
    verdict's input) and of scenarios per second inside the guest (the agent's clock)."""
    build_preset("default", log=log)
    ensure_tools(log)
    files = scenario_files([], "gmem")
    engine = Engine(runner_binary("default"))
    rows = []
    for label, get in (("Debian 7.3 kernel (modules)", lambda: debian_kernels.fetch("debian:7.3", progress=log)),
                       ("7.3 + our write() patch (built, KVM built in)",
                        lambda: kernel_build.build("debian:7.3", str(WRITE_PATCH), progress=log))):
        try:
            kernel = get()
        except ToolError as e:
            for what, unit in (("boot to first observed op", "s"), ("scenarios inside the guest", "scenarios/s")):
                rows.append(_row(f"QEMU {what}, {label}", None, unit, "", f"kernel unavailable: {str(e)[:200]}"))
            continue
        boots, rates, counts = [], [], set()
        for _ in range(reps):
            with tempfile.TemporaryDirectory() as d:
                g = run_guest(engine, files, kernel, Path(d), "tcg", lambda m: None)
            b = g.boots[0]
            if b.first_op is None or not g.agent_seconds or g.crashes:
                raise ToolError(f"bench qemu: {label}: the guest did not run the suite cleanly "
                                f"({[c.kind for c in g.crashes]})")
            boots.append(b.first_op - b.started)
            rates.append(g.agent_scenarios / g.agent_seconds)
            counts.add((g.agent_scenarios, g.agent_ops))
        sc, ops = sorted(counts)[-1]
        how = (f"qemu-system-x86_64 -accel tcg -cpu EPYC,+svm,+npt, 1 vCPU; {len(boots)} boots running "
               f"corpora/gmem + corpora/z3/gmem ({sc} scenarios, {ops} ops run in the guest; range "
               f"{min(boots):.1f}-{max(boots):.1f} s, {min(rates):.0f}-{max(rates):.0f} scenarios/s)")
        rows.append(_row(f"QEMU boot to first observed op, {label}", round(statistics.median(boots), 2), "s", how))
        rows.append(_row(f"QEMU scenarios inside the guest, {label}", round(statistics.median(rates), 1),
                         "scenarios/s", how))
    return rows


RECLAIM2_PATCH = REPO / "targets" / "el2" / "reclaim2" / "reclaim2-reference.patch"


def _qemu_arm64_rows(reps: int, log, page_sizes: tuple[int, ...] = (4096, 16384), built: bool = True) -> list[dict]:
    """Per page size: `run --target qemu-arm64` on corpora/ffa/smoke.kcs (one boot each);
    medians of boot to the first observed op (QEMU start, TF-A, the kernel in pKVM
    protected mode, our module loaded, to the first op's outcome reaching the host) and of
    scenarios per second issued from the host kernel (the agent's clock). built: the same
    for a 4K kernel built from debian:7.3 with our RECLAIM2 patch (`--build --apply`; the
    first bench builds it, about 30 min here) on corpora/ffa/reclaim2-4k.kcs."""
    from kconform.targets.qemu_arm64.run import built_kernel, run_target
    build_preset("default", log=log)
    engine = Engine(runner_binary("default"))
    variants = [(f"{ps // 1024}K, Debian 7.3 -arm64{'-16k' if ps == 16384 else ''} + TF-A 2.12.1", ps, None,
                 "corpora/ffa/smoke.kcs", f"--page-size {ps // 1024}K") for ps in page_sizes]
    if built:
        variants.append(("4K, debian:7.3 + RECLAIM2 patch built (targets/qemu_arm64/kernel.config) + TF-A 2.12.1",
                         4096, lambda: built_kernel("debian:7.3", str(RECLAIM2_PATCH), 4096, log),
                         "corpora/ffa/reclaim2-4k.kcs",
                         "--build --apply targets/el2/reclaim2/reclaim2-reference.patch"))
    rows = []
    for label, ps, make_kernel, corpus, flags in variants:
        files = [str(REPO / corpus)]
        boots, rates, counts = [], [], set()
        try:
            kernel = make_kernel() if make_kernel else None
            for _ in range(reps):
                with tempfile.TemporaryDirectory() as d:
                    run = run_target(engine, files, Path(d) / "verdicts.jsonl", Path(d), lambda m: None, ps, kernel)
                first, rate = run.summary.get("boot_to_first_op_seconds"), run.summary.get("guest_scenarios_per_second")
                crashed = [f.rule for f in run.findings if f.rule.startswith("QEMU.")]
                if first is None or not rate or crashed:
                    raise ToolError(f"the {corpus} scenarios did not run cleanly ({crashed or 'no op observed'})")
                boots.append(first)
                rates.append(rate)
                counts.add(run.target.get("timing", "").split("; ")[1] if "; " in run.target.get("timing", "") else "")
        except ToolError as e:
            for what, unit in (("boot to first observed op", "s"), ("scenarios issued from the host", "scenarios/s")):
                rows.append(_row(f"QEMU arm64 {what}, {label}", None, unit, "", f"unavailable: {str(e)[:200]}"))
            continue
        how = (f"`./kconform bench --only qemu-arm64`: run --target qemu-arm64 {flags} "
               f"{corpus}, qemu-system-aarch64 TCG, 2 vCPUs; {len(boots)} runs "
               f"({'; '.join(sorted(c for c in counts if c))}; range {min(boots):.1f}-{max(boots):.1f} s, "
               f"{min(rates):.0f}-{max(rates):.0f} scenarios/s)")
        rows.append(_row(f"QEMU arm64 boot to first observed op, {label}", round(statistics.median(boots), 2), "s", how))
        rows.append(_row(f"QEMU arm64 scenarios issued from the host, {label}", round(statistics.median(rates), 1),
                         "scenarios/s", how))
    return rows


def _gmem_row(reps: int, log) -> dict:
    """guest_memfd on the host kernel."""
    name = "guest_memfd scenarios on the host kernel"
    build_preset("default", targets=["kconform-bench"], log=log)
    try:
        m = _gbench(build_dir("default") / "harness" / "bench" / "kconform-bench", reps, only="BM_HostGmemScenarios")
        return _row(name, round(m["items_per_second"], 1), "scenarios/s",
                    f"corpora/gmem + corpora/z3/gmem runnable here ({int(m['scenarios'])} scenarios, "
                    f"{m['ops_per_s']:.0f} ops/s), {reps} repetitions")
    except ToolError as e:
        return _row(name, None, "scenarios/s", "", f"host target unavailable: {str(e)[:200]}")


def _linearize_row(reps: int, log) -> dict:
    """The linearizability checker alone (bench_main.cc BM_LinearizeSearch)."""
    name = "linearizability check of a concurrent group"
    build_preset("default", targets=["kconform-bench"], log=log)
    m = _gbench(build_dir("default") / "harness" / "bench" / "kconform-bench", reps, only="BM_LinearizeSearch")
    return _row(name, round(m["items_per_second"]), "interleavings/s",
                f"harness/runner/linearize.h on a history no interleaving explains (3 threads: four 3-page "
                f"pwrites, two 2-page punches; then a load), searched in full: "
                f"{m['interleavings_per_search']:.0f} complete interleavings and {m['states_per_s']:.0f} "
                f"search states/s (memoised); {reps} repetitions")


def _gen_row(reps: int, log) -> dict:
    """Z3 generation."""
    build_preset("default", targets=["kconform-gen"], log=log)
    times, cases = [], 0
    for _ in range(max(1, min(reps, 3))):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.monotonic()
            r = subprocess.run([str(gen_binary()), "--out", d], capture_output=True, text=True)
            times.append(time.monotonic() - t0)
            if r.returncode != 0:
                raise ToolError(f"kconform-gen failed: {r.stderr.strip()}")
            cases = json.loads(r.stdout.splitlines()[-1])["cases"]
    return _row("Z3 generation (all ABIs)", round(statistics.median(times), 2), "s",
                f"{cases} cases, {len(times)} runs")


def _mutant_ttf_rows(log, **opts) -> list[dict]:
    """Per mutant and start corpus, the median time libFuzzer needs to find it (or "not
    found within the budget"), then per family and start corpus the fraction found and
    the median over every run (selftest/mutant_ttf.py); the details go into the rows."""
    # The seeds as `kconform fuzz` makes them (its FF-A seeds of the page size the harness runs).
    doc = mutant_ttf.measure(log, **opts, make_seeds=lambda d, ps: make_seeds("ffa", d, ps,
                                                                               build_targets=["kconform-runner"]))
    rows = []
    for m in doc["results"]:
        times, rules, runs, budget = m["times_s"], m["rules"], m["runs"], m["budget_s"]
        excluded = sum(len(t["excluded"]) for t in m["tries"])
        how = (f"libFuzzer el2-{m.get('page_size', 4096) // 1024}k from {m['corpus']}, {m['found_runs']}/{runs} runs found it "
               f"({', '.join(f'{x:g}' for x in sorted(times)) or 'none'} s) naming {', '.join(rules) or '-'}; "
               f"budget {budget} s per run; executions per run {', '.join(str(x) for x in m['execs'])}; "
               f"{excluded} finding(s) excluded (a seed's input or on the unmutated build)")
        skipped = "" if m["median"] is not None else (
            f"not found within {budget} s in {runs - len(times)}/{runs} runs from {m['corpus']} "
            f"({len(times)} found: {', '.join(f'{x:g} s' for x in sorted(times)) or 'none'}"
            f"{'; ' + ', '.join(rules) if rules else ''}); {excluded} finding(s) excluded")
        row = _row(f"fuzzer time to find {m['family']} mutant {m['mutant']} from {m['corpus']}", m["median"], "s",
                   how, skipped)
        row.update({k: v for k, v in m.items() if k != "median"})
        rows.append(row)
    for f in doc["fractions"]:
        which = "both families" if f["family"] == "all" else f"{f['family']} mutants"
        how = (f"{f['mutants_found']}/{f['mutants']} mutants found in most runs, {f['runs_found']}/{f['runs']} "
               f"runs found theirs; median over every run "
               f"{'%g s' % f['median_s'] if f['median_s'] is not None else 'not found (most runs missed)'}; "
               f"budget {f['budget_s']} s per run")
        row = _row(f"fuzzer mutants found, {which} from {f['corpus']}",
                   round(f["runs_found"] / f["runs"], 3) if f["runs"] else None, "fraction of runs", how)
        row.update(f)
        rows.append(row)
    if rows:
        rows[-1]["ttf"] = {"plan": doc["plan"], "wall_s": doc["wall_s"]}
    return rows


def _fuzz_el2_rows(log, seconds: int = 60, jobs: int = 1, sanitizers: str = "none",
                   target: str = "el2", el3: str = "model") -> list[dict]:
    """`kconform fuzz --engine libfuzzer --target el2` on stock 7.3 (or `--target spmc`,
    TF-A's EL3 SPMC) for seconds, from its seeds in a scratch folder (not reports/fuzz):
    executions per second per job (every execution over the whole run, start-up and the
    seeds' crashes included) and restarts after a crash of the process (last-run.json)."""
    from kconform.commands.run import kconform_command
    with tempfile.TemporaryDirectory(prefix="kconform-bench-fuzz-") as d:
        cmd = [kconform_command(), "fuzz", "--engine", "libfuzzer", "--target", target, "--time", f"{seconds}s",
               "--jobs", str(jobs), "--sanitizers", sanitizers, "--out", d, "--no-merge", "--quiet"]
        cmd += ["--el3", el3] if el3 != "model" else []
        label = f"{target}{'-tfa' if el3 == 'tf-a' else ''}-4k"
        log(f"kconform bench: fuzz-{label}: {' '.join(cmd)}")
        r = procs.run(cmd, capture_output=True, text=True, timeout=seconds + 1800)
        doc_path = Path(d) / label / "last-run.json"
        if not doc_path.exists():
            raise ToolError(f"bench fuzz-{target}: kconform fuzz wrote no last-run.json (exit {r.returncode}): "
                            f"{(r.stderr or r.stdout).strip()[-1000:]}")
        doc = json.loads(doc_path.read_text())
    per_job = doc["execs"] / doc["seconds"] / jobs if doc["seconds"] else 0.0
    rule_findings = [f for f in doc["findings"] if f["signature"].split()[0].startswith(("FFA", "GMEM"))]
    what = ("stock" if el3 == "model" else "stock ffa.c + TF-A's EL3 SPMC,") if target == "el2" else "TF-A's EL3 SPMC,"
    el3_flag = f" --el3 {el3}" if el3 != "model" else ""
    how = (f"`kconform fuzz --engine libfuzzer --target {target}{el3_flag} --time {seconds}s --jobs {jobs} --sanitizers "
           f"{sanitizers}` on {what} "
           f"{doc['release']} from its seeds: {doc['execs']} executions in {doc['seconds']} s, "
           f"{doc['restarts']} restart(s) after a crash of the process, {len(doc['findings'])} signature(s) "
           f"({len(rule_findings)} rule findings, recorded without a restart), coverage {doc['coverage']}")
    build = "no sanitizers" if sanitizers == "none" else "ASan+UBSan"
    subject = (("el2 (libFuzzer, stock 7.3" if el3 == "model" else f"el2 --el3 {el3} (libFuzzer, {doc['release']}")
               if target == "el2" else f"spmc (libFuzzer, {doc['release']}")
    row = _row(f"fuzz {subject}, {build}) executions per job", round(per_job, 1), "executions/s/job", how)
    row.update({"execs": doc["execs"], "seconds": doc["seconds"], "restarts": doc["restarts"], "jobs": jobs,
                "sanitizers": sanitizers, "exit": r.returncode})
    row2 = _row(f"fuzz {subject}, {build}) restarts", doc["restarts"], "restarts", how)
    return [row, row2]


def ttf_markdown(rows: list[dict]) -> str:
    """The mutant-ttf rows as docs/benchmarks.md's table: per mutant, family and start corpus the
    median seconds over the runs and the runs that found it; then the fractions."""
    per = [r for r in rows if "tries" in r and "family" in r]
    if not per:
        return ""
    out = ["| family | mutant | start corpus | median (s) | runs found | times (s) | rules of the finding |",
           "|---|---|---|---|---|---|---|"]
    for r in per:
        med = "not found" if r["median"] is None else f"{r['median']:g}"
        name = r["mutant"] + (f" ({r['page_size'] // 1024}K)" if r.get("page_size", 4096) != 4096 else "")
        out.append(f"| {r['family']} | {name} | {r['corpus']} | {med} | {r['found_runs']}/{r['runs']} | "
                   f"{', '.join(f'{x:g}' for x in r['times_s']) or '-'} | {', '.join(r['rules']) or '-'} |")
    out += ["", "| family | start corpus | mutants found (most runs) | runs found | median over every run (s) | budget (s) |",
            "|---|---|---|---|---|---|"]
    for r in rows:
        if "runs_found" in r and "mutants_found" in r:
            med = "not found" if r["median_s"] is None else f"{r['median_s']:g}"
            out.append(f"| {r['family']} | {r['corpus']} | {r['mutants_found']}/{r['mutants']} | "
                       f"{r['runs_found']}/{r['runs']} ({100 * r['runs_found'] / r['runs']:.0f}%) | {med} | "
                       f"{r['budget_s']} |")
    return "\n".join(out)


def markdown(rows: list[dict]) -> str:
    out = ["| benchmark | median | unit | how |", "|---|---|---|---|"]
    for r in rows:
        value = "skipped" if r["median"] is None else f"{r['median']:g}"
        out.append(f"| {r['benchmark']} | {value} | {r['unit']} | {r['skipped'] or r['how']} |")
    return "\n".join(out)


def cmd_bench(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    t0 = time.monotonic()
    opts = {"mutants": args.mutants, "families": args.mutant_family, "corpora": args.mutant_corpus,
            "budget": args.mutant_budget, "runs": args.mutant_runs, "nightly": args.nightly}
    mutant_ttf.plan(**opts)  # bad flags fail before anything runs
    fuzz_time = parse_duration(args.fuzz_time)
    if fuzz_time < 1 or args.fuzz_jobs < 1:
        raise ToolError("flags --fuzz-time and --fuzz-jobs: at least 1 (second, job)")
    rows = run_benchmarks(args.repetitions, log, args.only, opts,
                          {"seconds": fuzz_time, "jobs": args.fuzz_jobs, "sanitizers": args.fuzz_sanitizers})
    doc = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.node(),
           "cpus": os.cpu_count(), "kernel": platform.release(), "only": sorted(args.only or DEFAULT_SELECTORS),
           "wall_s": round(time.monotonic() - t0, 1), "rows": rows}
    out = Path(args.output) if args.output else REPO / "reports" / "bench" / (
        datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, json.dumps(doc, indent=2, default=str) + "\n")
    print(markdown(rows))
    ttf = ttf_markdown(rows)
    if ttf:
        print("\n" + ttf)
    log(f"kconform bench: {doc['wall_s']:.0f} s; written to {out}")
    return 0
