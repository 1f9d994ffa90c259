"""`kconform bench`: the suite's benchmarks, medians of repeated runs, as JSON
(reports/bench/<time>.json) and a Markdown table (the README's "Benchmarks").

Rows: the EL2 differential (scenario executions per second on one core, plain
and ASan+UBSan builds), guest_memfd scenarios per second on the host kernel
(Google Benchmark, harness/bench), Z3 generation time (kconform-gen), and, only
when selected (they take minutes): `--only mutant-ttf`, the time libFuzzer needs
from an empty corpus to find a RECLAIM2 mutant (targets/el2/reclaim2/mutants/);
`--only qemu`, boot to the first observed op and scenarios per second inside the
guest, for Debian's 7.3 kernel and for 7.3 built with our write() patch.

Selectors (`--only a,b`): el2, gmem, gen (the default set), mutant-ttf and qemu.

    python3 -m kconform.bench --only mutant-ttf [--mutants 09,21] [--mutant-budget 60] [--mutant-runs 3]
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console

from kconform import build, deps
from kconform.errors import ToolError
from kconform.paths import REPO, build_dir
from kconform.selftest import mutant_patches
from kconform.selftest_reclaim2 import MUTANTS_DIR, REFERENCE

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


SELECTORS = ("el2", "gmem", "gen", "mutant-ttf", "qemu")
DEFAULT_SELECTORS = ("el2", "gmem", "gen")


def run_benchmarks(reps: int, log, only: list[str] | None = None, mutant_opts: dict | None = None) -> list[dict]:
    sel = set(only or DEFAULT_SELECTORS)
    bad = sel - set(SELECTORS)
    if bad:
        raise ToolError(f"flag --only: no benchmark {', '.join(sorted(bad))} (known: {', '.join(SELECTORS)})")
    rows = []
    if sel & {"el2", "gmem"}:
        deps.ensure(["bench"], log)
    # The EL2 differential, plain and ASan+UBSan.
    for preset, label in (("default", "plain"), ("asan", "ASan+UBSan")) if "el2" in sel else ():
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
    if "gmem" in sel:
        rows.append(_gmem_row(reps, log))
    if "gen" in sel:
        rows.append(_gen_row(reps, log))
    if "mutant-ttf" in sel:
        rows += mutant_ttf(log=log, **(mutant_opts or {}))
    if "qemu" in sel:
        rows += _qemu_rows(reps, log)
    return rows


def _qemu_rows(reps: int, log) -> list[dict]:
    """Per kernel: boots running the guest_memfd suite; medians of boot to the first
    observed op (QEMU start to the first op outcome reaching the host, i.e. the first
    verdict's input) and of scenarios per second inside the guest (the agent's clock)."""
    from kconform import kernels, qemu
    from kconform.paths import runner_binary
    from kconform.run import scenario_files
    build.build("default", log=log)
    qemu.ensure_tools(log)
    files = scenario_files([], "gmem")
    from kconform.selftest_write import REFERENCE as write_patch
    rows = []
    for label, get in (("Debian 7.3 kernel (modules)", lambda: kernels.fetch("debian:7.3", progress=log)),
                       ("7.3 + our write() patch (built, KVM built in)",
                        lambda: kernels.build("debian:7.3", str(write_patch), progress=log))):
        try:
            kernel = get()
        except ToolError as e:
            for what, unit in (("boot to first observed op", "s"), ("scenarios inside the guest", "scenarios/s")):
                rows.append(_row(f"QEMU {what}, {label}", None, unit, "", f"kernel unavailable: {str(e)[:200]}"))
            continue
        boots, rates, counts = [], [], set()
        for _ in range(reps):
            with tempfile.TemporaryDirectory() as d:
                g = qemu.run_guest(runner_binary("default"), files, kernel, Path(d), "tcg", lambda m: None)
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


def _gmem_row(reps: int, log) -> dict:
    """guest_memfd on the host kernel."""
    name = "guest_memfd scenarios on the host kernel"
    build.build("default", targets=["kconform-bench"], log=log)
    try:
        m = _gbench(build_dir("default") / "harness" / "bench" / "kconform-bench", reps)
        return _row(name, round(m["items_per_second"], 1), "scenarios/s",
                    f"corpora/gmem + corpora/z3/gmem runnable here ({int(m['scenarios'])} scenarios, "
                    f"{m['ops_per_s']:.0f} ops/s), {reps} repetitions")
    except ToolError as e:
        return _row(name, None, "scenarios/s", "", f"host target unavailable: {str(e)[:200]}")


def _gen_row(reps: int, log) -> dict:
    """Z3 generation."""
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
    return _row("Z3 generation (all ABIs)", round(statistics.median(times), 2), "s",
                f"{cases} cases, {len(times)} runs")


# --- time for the fuzzer to find a RECLAIM2 mutant ("mutant-ttf") ---------------
#
# One reused build folder (build/el2/bench-mutant-fuzz: only the tree changes, so
# only ffa.c and what names it recompile) holds kconform-fuzz-el2-4k built for
# libFuzzer against debian:7.3 + the reference patch (+ one mutant). The build is
# plain (coverage, no ASan/UBSan): the crash condition is the oracle, and UBSan
# (no recovery) stops every empty-corpus run within a second on a pointer
# overflow in our own model (models/ffa/model.cc tx_op, a clipped TX write at a
# huge offset), which would leave nothing to measure.
#
# Background: the reference handler is fuzzed first for the same budget; each
# rule it violates is made "known" (KCONFORM_FUZZ_KNOWN_RULES: recorded, not a
# crash) and fuzzing resumes, so the background is every rule one budget finds on
# the reference. A mutant run then starts from an empty corpus (the dictionary
# only, no seeds) with the background known. Each finding's input is replayed on
# the reference binary: if the reference fails it too, the finding is background
# (its rules are added for this run and fuzzing resumes, the clock running on),
# else the time since the run began is the time to find the mutant.

TTF_DEFAULT_MUTANTS = ("01", "09", "13", "21")
TTF_BUILD = REPO / "build" / "el2" / "bench-mutant-fuzz"
TTF_BINARY = "kconform-fuzz-el2-4k"


def _build_fuzz_el2(tree: Path, log) -> Path:
    """Configures (once) and builds the libFuzzer el2-4k harness against tree."""
    deps.ensure(["build"], log)
    cmd = ["cmake", "-S", str(REPO), "-B", str(TTF_BUILD), "-G", "Ninja",
           "-DCMAKE_C_COMPILER=clang", "-DCMAKE_CXX_COMPILER=clang++", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
           "-DKCONFORM_SANITIZE=OFF", "-DKCONFORM_TESTS=OFF", "-DKCONFORM_FUZZ_ENGINE=libfuzzer",
           "-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link", "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link",
           f"-DKCONFORM_KERNEL_TREE={tree}", "-DKCONFORM_PAGE_SIZE=4096", "-DKCONFORM_EL2_REQUIRED=ON"]
    for step in (cmd, ["cmake", "--build", str(TTF_BUILD), "--target", TTF_BINARY]):
        r = subprocess.run(step, capture_output=True, text=True)
        if r.returncode != 0:
            raise ToolError(f"building the el2 fuzz harness for {tree} failed:\n" +
                            "\n".join((r.stdout + r.stderr).splitlines()[-30:]))
    return TTF_BUILD / "harness" / "fuzz" / TTF_BINARY


def _libfuzzer_until_finding(binary: Path, work: Path, seconds: float, seed: int, known: list[str]) -> dict:
    """One libFuzzer process on work/corpus until its first finding or the time is up.
    Returns {seconds, kind: rule|crash|none, rules, input, execs}."""
    art = work / "artifacts"
    art.mkdir(parents=True, exist_ok=True)
    (work / "corpus").mkdir(exist_ok=True)
    for f in art.iterdir():
        f.unlink()
    cmd = [str(binary), str(work / "corpus"), f"-max_total_time={max(1, int(seconds))}", f"-seed={seed}",
           f"-dict={REPO / 'harness' / 'fuzz' / 'ffa.dict'}", "-max_len=8192", "-timeout=10",
           "-rss_limit_mb=4096", f"-artifact_prefix={art}/"]
    env = dict(os.environ, KCONFORM_FUZZ_KNOWN_RULES=",".join(known))
    t0 = time.monotonic()
    res = {"seconds": None, "kind": "none", "rules": [], "input": None, "execs": 0}
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
                         env=env, cwd=work)
    assert p.stderr is not None
    tail: list[str] = []
    for line in p.stderr:
        tail = (tail + [line])[-20:]
        m = re.match(r"#(\d+)", line)
        if m:
            res["execs"] = int(m.group(1))
        m = re.match(r"SUMMARY: kconform: (\S+) violated", line)
        if m and res["seconds"] is None:
            res.update(seconds=time.monotonic() - t0, kind="rule", rules=m.group(1).split(","))
        elif re.match(r"SUMMARY: (libFuzzer|\w+Sanitizer)", line) and res["seconds"] is None:
            res.update(seconds=time.monotonic() - t0, kind="crash", rules=[line.split(":", 2)[-1].strip()])
    p.wait()
    crashes = sorted(art.glob("crash-*"))
    if res["kind"] == "none" and p.returncode != 0:
        res.update(seconds=time.monotonic() - t0, kind="crash", rules=[f"exit {p.returncode}"],
                   tail="".join(tail)[-2000:])
    if res["kind"] != "none" and crashes:
        res["input"] = crashes[0]
    return res


def _fails_on(binary: Path, data: Path, known: list[str]) -> bool:
    env = dict(os.environ, KCONFORM_FUZZ_KNOWN_RULES=",".join(known))
    r = subprocess.run([str(binary), str(data)], capture_output=True, text=True, errors="replace",
                       env=env, timeout=120)
    return r.returncode != 0


def _hunt(binary: Path, ref_binary: Path | None, budget: float, seed: int, known: list[str], log,
          what: str) -> dict:
    """Fuzzes from an empty corpus for budget seconds. With ref_binary (a mutant):
    stops at the first finding the reference does not share. Without (the
    reference): collects every rule found, each made known in turn."""
    import shutil
    work = Path(tempfile.mkdtemp(prefix="kconform-ttf-"))
    known = list(known)
    found, background, restarts = None, [], 0
    t0 = time.monotonic()
    try:
        while (left := budget - (time.monotonic() - t0)) >= 1:
            r = _libfuzzer_until_finding(binary, work, left, seed + restarts, known)
            if r["kind"] == "none":
                break
            restarts += 1
            at = round((budget - left) + r["seconds"], 2)
            shared = ref_binary is None or (r["input"] is not None and _fails_on(ref_binary, r["input"], known))
            if r["kind"] == "rule" and shared:
                background.append({"rules": r["rules"], "at_s": at,
                                   "how": "on the reference" if ref_binary is None else "replayed: the reference fails too"})
                known += [x for x in r["rules"] if x not in known]
                log(f"kconform bench: {what}: background {','.join(r['rules'])} at {at} s")
                continue
            if r["kind"] == "crash" and (ref_binary is None or shared):
                # Not a rule, cannot be made known: noted, and fuzzing resumes (a crashing
                # input never enters the corpus).
                background.append({"rules": r["rules"], "at_s": at, "how": "crash (not a rule), fuzzing resumed"})
                log(f"kconform bench: {what}: background crash at {at} s ({r['rules'][0]})")
                continue
            found = {"seconds": at, "kind": r["kind"], "rules": r["rules"], "execs_last_process": r["execs"]}
            log(f"kconform bench: {what}: found {','.join(r['rules'])} at {at} s")
            break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"seed": seed, "found": found, "background": background, "restarts": restarts,
            "wall_s": round(time.monotonic() - t0, 1)}


def mutant_ttf(log, mutants: list[str] | None = None, budget: int = 60, runs: int = 3) -> list[dict]:
    """Rows: per mutant, the median time libFuzzer needs from an empty corpus to
    find it (or "not found within the budget"); the details go into the rows."""
    from kconform import patches, trees
    import shutil
    t_all = time.monotonic()
    chosen = mutant_patches(MUTANTS_DIR, list(mutants or TTF_DEFAULT_MUTANTS), flag="--mutants")
    base = trees.fetch("debian:7.3", progress=log)
    ref_tree = patches.apply(base, REFERENCE)
    log("kconform bench: mutant-ttf: building the libFuzzer el2-4k harness on debian:7.3 + reference")
    ref_binary = TTF_BUILD / ("reference-" + TTF_BINARY)
    shutil.copy2(_build_fuzz_el2(ref_tree, log), ref_binary)
    log(f"kconform bench: mutant-ttf: background: the reference for {budget} s from an empty corpus")
    bg = _hunt(ref_binary, None, budget, 1, [], log, "reference")
    known = [x for b in bg["background"] for x in b["rules"] if not b["how"].startswith("crash")]
    crashes = sorted({x for b in bg["background"] if b["how"].startswith("crash") for x in b["rules"]})
    bg_note = (f"background on the reference ({budget} s, excluded): {len(known)} rules"
               + (f" and crashes ({'; '.join(crashes)})" if crashes else ""))
    rows = []
    for patch in chosen:
        t0 = time.monotonic()
        binary = _build_fuzz_el2(patches.apply_all(base, [REFERENCE, patch]), log)
        built = round(time.monotonic() - t0, 1)
        tries = []
        for i in range(runs):
            log(f"kconform bench: mutant-ttf: {patch.stem}, run {i + 1}/{runs} (seed {101 + i}), {budget} s budget")
            tries.append(_hunt(binary, ref_binary, budget, 101 + i, known, log, patch.stem))
        hits = [t["found"] for t in tries if t["found"]]
        times = [h["seconds"] for h in hits]
        rules = sorted({x for h in hits for x in h["rules"]})
        name = f"fuzzer time to find RECLAIM2 mutant {patch.stem}"
        # The median over all runs, a miss counting as > budget: a median only when most runs found it.
        ordered = sorted(times) + [float("inf")] * (runs - len(times))
        med = statistics.median(ordered) if runs else float("inf")
        how = (f"libFuzzer el2-4k, empty corpus + ffa.dict, {len(times)}/{runs} runs found it "
               f"({', '.join(f'{x:g}' for x in sorted(times)) or 'none'} s) naming {', '.join(rules) or '-'}; "
               f"budget {budget} s per run; {bg_note}")
        row = _row(name, round(med, 1) if med != float("inf") else None, "s", how,
                   "" if med != float("inf") else f"not found within {budget} s in {runs - len(times)}/{runs} runs "
                   f"({len(times)} found: {', '.join(f'{x:g} s' for x in sorted(times)) or 'none'}"
                   f"{'; ' + ', '.join(rules) if rules else ''}); {bg_note}")
        row.update(mutant=patch.stem, found_runs=len(times), runs=runs, budget_s=budget, times_s=times,
                   rules=rules, build_s=built, tries=tries, background=bg)
        rows.append(row)
    for r in rows:
        r["ttf_total_wall_s"] = round(time.monotonic() - t_all, 1)
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| benchmark | median | unit | how |", "|---|---|---|---|"]
    for r in rows:
        value = "skipped" if r["median"] is None else f"{r['median']:g}"
        out.append(f"| {r['benchmark']} | {value} | {r['unit']} | {r['skipped'] or r['how']} |")
    return "\n".join(out)


def add_arguments(p) -> None:
    """The bench flags (cli.py's `bench` parser and `python3 -m kconform.bench`)."""
    p.add_argument("--repetitions", type=int, default=5, metavar="N", help="runs per benchmark (median; default 5)")
    p.add_argument("--output", metavar="FILE", help="JSON file (default: reports/bench/<time>.json)")
    p.add_argument("--only", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], metavar="NAME,NAME",
                   help=f"only these benchmarks ({', '.join(SELECTORS)}; default: {', '.join(DEFAULT_SELECTORS)})")
    p.add_argument("--mutants", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], metavar="NN,NN",
                   help=f"mutant-ttf: these mutants (default {','.join(TTF_DEFAULT_MUTANTS)})")
    p.add_argument("--mutant-budget", type=int, default=60, metavar="S",
                   help="mutant-ttf: seconds of fuzzing per run (and for the reference's background; default 60)")
    p.add_argument("--mutant-runs", type=int, default=3, metavar="N",
                   help="mutant-ttf: runs per mutant, seeds 101.. (median; default 3)")


def cmd_bench(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    t0 = time.monotonic()
    only = getattr(args, "only", None)
    opts = {"mutants": getattr(args, "mutants", None), "budget": getattr(args, "mutant_budget", 60),
            "runs": getattr(args, "mutant_runs", 3)}
    if opts["budget"] < 1 or opts["runs"] < 1:
        raise ToolError("flags --mutant-budget and --mutant-runs: at least 1")
    rows = run_benchmarks(args.repetitions, log, only, opts)
    doc = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.node(),
           "cpus": os.cpu_count(), "kernel": platform.release(), "only": sorted(only or DEFAULT_SELECTORS),
           "wall_s": round(time.monotonic() - t0, 1), "rows": rows}
    out = Path(args.output) if args.output else REPO / "reports" / "bench" / (
        datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(markdown(rows))
    log(f"kconform bench: {doc['wall_s']:.0f} s; written to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog="kconform.bench", description=__doc__.split("\n")[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    try:
        return cmd_bench(args, Console(width=132))
    except ToolError as e:
        print(f"kconform: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
