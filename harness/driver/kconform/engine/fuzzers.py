"""The fuzz runners (harness/fuzz) and the two fuzzers that drive them: building
kconform-fuzz-<target> for libFuzzer or AFL++, running the fuzzer on a corpus
folder with live statistics, and minimising the corpus afterwards.

A fuzz run's folder (reports/fuzz/<target>/) holds corpus/, seeds/, artifacts/,
afl/ and the logs; `progress` is any object with a `stats` dict (execs,
execs_per_sec, coverage, findings) and a `show()` method, and `stop()` (optional)
says when to end the fuzzer early (the corpus passed --max-corpus): the runner
then ends it and returns as at the end of its time.

Bounded memory: each fuzzing process is limited to rss_limit MB. libFuzzer:
-rss_limit_mb and -malloc_limit_mb. AFL++: its -m is an address-space limit,
which an ASan build (both presets are sanitized) cannot live under (ASan reserves
terabytes of address space), so -m none and the sanitizer's own limits instead
(ASAN_OPTIONS hard_rss_limit_mb and max_allocation_size_mb, with the
abort_on_error=1 and symbolize=0 AFL++ requires of a custom ASAN_OPTIONS).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from kconform.core import deps, procs
from kconform.core.errors import ToolError
from kconform.core.paths import REPO, build_dir
from kconform.engine.build import build_preset
from kconform.engine.libfuzzer_workers import LibFuzzerWorkers

FUZZ_DIR = REPO / "harness" / "fuzz"
ENGINES = ("libfuzzer", "afl")
DEFAULT_RSS_LIMIT_MB = 2048


def _stop_requested(progress) -> bool:
    stop = getattr(progress, "stop", None)
    return bool(stop and stop())


def fuzz_preset(engine: str, plain: bool = False) -> str:
    """The CMake preset of an engine's fuzz targets: ASan+UBSan (fuzz-<engine>), or
    without sanitizers (fuzz-<engine>-plain: the oracle is the only crash condition,
    several times the executions)."""
    return f"fuzz-{engine}" + ("-plain" if plain else "")


def fuzz_binary(engine: str, label: str, plain: bool = False) -> Path:
    return build_dir(fuzz_preset(engine, plain)) / "harness" / "fuzz" / f"kconform-fuzz-{label}"


def build_harness(engine: str, label: str, log, plain: bool = False) -> Path:
    if engine == "afl":
        deps.ensure(["fuzz"], log)
        build_preset("default", targets=["kconform-afl-mutator"], log=log)
    preset = fuzz_preset(engine, plain)
    log(f"kconform fuzz: building kconform-fuzz-{label} ({preset})")
    build_preset(preset, targets=[f"kconform-fuzz-{label}"], log=log)
    binary = fuzz_binary(engine, label, plain)
    if not binary.exists():
        raise ToolError(f"{binary} was not built (for el2: is a kernel tree available? ./kconform tree fetch debian:7.3)")
    return binary


# How long one input may run before the engine calls it a hang (seconds), by ABI. The
# EL2 target runs an input in well under a millisecond (ASan: a few), so a stall of
# the code under test (stock ffa.c's FRAG_RX loop, CRASH.HANG) costs 3 s of fuzzing,
# not 10; the host target makes real KVM calls and keeps 10. A hang's input is
# replayed alone (fuzz_findings.REPLAY_TIMEOUT, 20 s) for its signature and stored as
# a timeout even when that replay ends: a machine stalled for 3 s can store a false one.
HANG_SECONDS = {"ffa": 3, "gmem": 10}


def run_libfuzzer(binary: Path, root: Path, abi: str, seconds: int, jobs: int, max_len: int, env: dict,
                  progress, rss_limit: int = DEFAULT_RSS_LIMIT_MB) -> None:
    """`jobs` in-process libFuzzer workers on corpus/ (and the seeds), each restarted
    after a crash of its process (engine/libfuzzer_workers.py)."""
    cmd = [str(binary), str(root / "corpus"), str(root / "seeds"),
           f"-artifact_prefix={root / 'artifacts'}/",
           f"-dict={FUZZ_DIR / (abi + '.dict')}", f"-max_len={max_len}", f"-timeout={HANG_SECONDS[abi]}",
           f"-rss_limit_mb={rss_limit}", f"-malloc_limit_mb={rss_limit}", "-print_final_stats=1"]
    LibFuzzerWorkers(cmd, root, seconds, jobs, env, progress, _stop_requested).run()


def afl_stats(out: Path, since: float = 0.0) -> dict:
    """The summed fuzzer_stats of every AFL++ instance under out that started at or
    after `since` (epoch seconds): a resumed run's old stats file is not this run's.
    The rate is execs_done over the instance's own run_time (AFL++'s execs_per_sec
    is computed over its first seconds and reads hundreds of thousands at start)."""
    total = {"execs_done": 0, "execs_per_sec": 0.0, "bitmap_cvg": "0%", "saved_crashes": 0, "saved_hangs": 0}
    for f in out.glob("*/fuzzer_stats"):
        kv = dict(line.split(":", 1) for line in f.read_text().splitlines() if ":" in line)
        kv = {k.strip(): v.strip() for k, v in kv.items()}
        if int(kv.get("start_time", 0) or 0) < int(since):
            continue
        execs, run_time = int(kv.get("execs_done", 0)), int(kv.get("run_time", 0) or 0)
        total["execs_done"] += execs
        total["execs_per_sec"] += execs / run_time if run_time >= 5 else 0.0
        total["bitmap_cvg"] = kv.get("bitmap_cvg", total["bitmap_cvg"])
        total["saved_crashes"] += int(kv.get("saved_crashes", kv.get("unique_crashes", 0)))
        total["saved_hangs"] += int(kv.get("saved_hangs", kv.get("unique_hangs", 0)))
    return total


def asan_options(env: dict, rss_limit: int) -> str:
    """ASAN_OPTIONS for an AFL++ run: AFL++'s own defaults (which it applies only when
    ASAN_OPTIONS is unset), the caller's, then what AFL++ requires and the memory limits."""
    ours = {"abort_on_error": "1", "symbolize": "0", "hard_rss_limit_mb": str(rss_limit),
            "max_allocation_size_mb": str(rss_limit), "allocator_may_return_null": "1"}
    opts = dict(o.split("=", 1) for o in AFL_ASAN_DEFAULTS.split(":"))
    opts.update(o.split("=", 1) for o in env.get("ASAN_OPTIONS", "").split(":") if "=" in o)
    opts.update(ours)
    return ":".join(f"{k}={v}" for k, v in opts.items())


AFL_ASAN_DEFAULTS = ("detect_leaks=0:malloc_context_size=0:detect_odr_violation=0:handle_segv=0:"
                     "handle_sigbus=0:handle_abort=0:handle_sigfpe=0:handle_sigill=0")


def run_afl(binary: Path, root: Path, abi: str, seconds: int, jobs: int, max_len: int, env: dict,
            progress, rss_limit: int = DEFAULT_RSS_LIMIT_MB) -> None:
    mutator = build_dir("default") / "harness" / "fuzz" / "libkconform-afl-mutator.so"
    inp = root / "afl-in"
    shutil.rmtree(inp, ignore_errors=True)
    inp.mkdir()
    for d in (root / "corpus", root / "seeds"):
        for f in d.iterdir():
            if f.stat().st_size <= max_len:
                shutil.copy(f, inp / f.name)
    env = dict(env, AFL_CUSTOM_MUTATOR_LIBRARY=str(mutator), AFL_CUSTOM_MUTATOR_ONLY="1",
               KCONFORM_FUZZ_ABI=abi, AFL_NO_UI="1", AFL_SKIP_CPUFREQ="1", AFL_AUTORESUME="1",
               AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES="1", AFL_NO_AFFINITY="1", AFL_SKIP_CRASHES="1",
               AFL_IGNORE_SEED_PROBLEMS="1", AFL_FAST_CAL="1", AFL_CMPLOG_ONLY_NEW="1",
               ASAN_OPTIONS=asan_options(env, rss_limit))
    out = root / "afl"
    started = time.time()
    fuzzers: list[tuple[procs.Popen, object]] = []
    try:
        for j in range(jobs):
            role = ["-M", "main"] if j == 0 else ["-S", f"s{j}"]
            cmd = ["afl-fuzz", "-i", str(inp), "-o", str(out), "-m", "none", "-t", f"{HANG_SECONDS[abi] * 1000}+",
                   "-V", str(seconds), "-x", str(FUZZ_DIR / (abi + ".dict"))] + role + ["--", str(binary)]
            logf = open(root / f"afl-{j}.log", "w")
            try:
                fuzzers.append((procs.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=root),
                                logf))
            except BaseException:
                logf.close()
                raise
        # -V is AFL++'s own limit, counted from after calibration; past it and a grace for
        # the calibration, the instances are ended (below) with their fork servers.
        deadline = time.monotonic() + seconds + max(60, seconds // 20)
        while any(p.poll() is None for p, _ in fuzzers) and time.monotonic() < deadline:
            time.sleep(1)
            s = afl_stats(out, since=started)
            progress.stats.update(execs=s["execs_done"], execs_per_sec=s["execs_per_sec"],
                                  coverage=f"{s['bitmap_cvg']} of the map",
                                  findings=s["saved_crashes"] + s["saved_hangs"],
                                  restarts=s["saved_crashes"] + s["saved_hangs"])
            progress.show()
            if _stop_requested(progress):
                break
    finally:
        for p, logf in fuzzers:
            p.end()  # the afl-fuzz instance and its fork server: its whole process group
            logf.close()
    bad = [(j, p.returncode) for j, (p, _) in enumerate(fuzzers) if p.returncode not in (0, None)]
    if bad and not any(out.glob("*/fuzzer_stats")):
        tail = (root / "afl-0.log").read_text()[-2000:]
        raise ToolError(f"afl-fuzz failed (exit {bad[0][1]}):\n{tail}")
    # The queue becomes part of the persistent corpus (merged below).
    for f in out.glob("*/queue/id:*"):
        data = f.read_bytes()
        (root / "corpus" / hashlib.sha1(data).hexdigest()).write_bytes(data)


RUNNERS = {"libfuzzer": run_libfuzzer, "afl": run_afl}


def recover_corpus(root: Path) -> None:
    """Finishes or undoes a corpus swap a killed run left half done (merge_corpus):
    corpus.old without corpus is the corpus; corpus.old beside corpus is the replaced one."""
    corpus, old = root / "corpus", root / "corpus.old"
    if old.exists():
        if corpus.exists():
            shutil.rmtree(old)
        else:
            old.rename(corpus)
    shutil.rmtree(root / "corpus.merge", ignore_errors=True)


def merge_corpus(engine: str, binary: Path, root: Path, env: dict, log) -> tuple[int, int]:
    """Minimises the corpus (libFuzzer -merge=1, or afl-cmin) into a fresh folder and
    swaps it in only after the minimiser succeeded (corpus -> corpus.old, the new one ->
    corpus, corpus.old removed; recover_corpus finishes a swap a kill interrupted): a
    failed or interrupted minimisation leaves the corpus as it was. Returns (before, after)."""
    corpus = root / "corpus"
    recover_corpus(root)
    before = sum(1 for _ in corpus.iterdir())
    new = root / "corpus.merge"
    if engine == "libfuzzer":
        new.mkdir()
        cmd = [str(binary), "-merge=1", str(new), str(corpus), f"-artifact_prefix={root / 'artifacts'}/"]
    else:
        cmd = ["afl-cmin", "-i", str(corpus), "-o", str(new), "-m", "none", "-t", "10000", "--", str(binary)]
        # AFL_ALLOW_TMP: afl-cmin refuses folders under /tmp (shared with other users);
        # ours are private to the run (a clone or --out under /tmp is a normal choice).
        env = dict(env, AFL_SKIP_CPUFREQ="1", AFL_NO_AFFINITY="1", AFL_ALLOW_TMP="1")
    try:
        r = procs.run(cmd, capture_output=True, text=True, env=env, cwd=root, timeout=1800)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    after = sum(1 for _ in new.iterdir()) if new.exists() else 0
    if r.returncode != 0 or (before and not after):
        (root / "merge.log").write_text(r.stdout + r.stderr)
        shutil.rmtree(new, ignore_errors=True)
        log(f"kconform fuzz: corpus minimisation failed (exit {r.returncode}, see {root / 'merge.log'}); "
            "the corpus is kept as it was")
        return before, before
    old = root / "corpus.old"
    corpus.rename(old)
    new.rename(corpus)
    shutil.rmtree(old)
    return before, after
