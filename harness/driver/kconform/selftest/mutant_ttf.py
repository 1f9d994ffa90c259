"""The fuzzer's time to find a RECLAIM2 mutant (`kconform bench --only mutant-ttf`).

One reused build folder (build/el2/bench-mutant-fuzz: only the tree changes, so
only ffa.c and what names it recompile) holds kconform-fuzz-el2-4k built for
libFuzzer against debian:7.3 + the reference patch (+ one mutant). The build is
plain (coverage, no ASan/UBSan): the crash condition is the oracle, and UBSan
(no recovery) stops every empty-corpus run within a second on a pointer
overflow in our own model (models/ffa/model.cc tx_op, a clipped TX write at a
huge offset), which would leave nothing to measure.

Background: the reference handler is fuzzed first for the same budget; each
rule it violates is made "known" (KCONFORM_FUZZ_KNOWN_RULES: recorded, not a
crash) and fuzzing resumes, so the background is every rule one budget finds on
the reference. A mutant run then starts from an empty corpus (the dictionary
only, no seeds) with the background known. Each finding's input is replayed on
the reference binary: if the reference fails it too, the finding is background
(its rules are added for this run and fuzzing resumes, the clock running on),
else the time since the run began is the time to find the mutant.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from kconform.core import procs
from kconform.core.paths import REPO
from kconform.engine.build import cmake_build
from kconform.selftest.mutants import mutant_patches
from kconform.selftest.reclaim2 import MUTANTS_DIR, REFERENCE
from kconform.sources import patches, tree_fetch
from kconform.sources.trees import DEFAULT_TREE

TTF_DEFAULT_MUTANTS = ("01", "09", "13", "21")
TTF_BUILD = REPO / "build" / "el2" / "bench-mutant-fuzz"
TTF_BINARY = "kconform-fuzz-el2-4k"


def _build_fuzz_el2(tree: Path, log) -> Path:
    """Configures and builds the libFuzzer el2-4k harness against tree."""
    cmake_build(TTF_BUILD, definitions={
                    "CMAKE_C_COMPILER": "clang", "CMAKE_CXX_COMPILER": "clang++",
                    "CMAKE_BUILD_TYPE": "RelWithDebInfo", "KCONFORM_SANITIZE": "OFF",
                    "KCONFORM_TESTS": "OFF", "KCONFORM_FUZZ_ENGINE": "libfuzzer",
                    "CMAKE_C_FLAGS": "-fsanitize=fuzzer-no-link", "CMAKE_CXX_FLAGS": "-fsanitize=fuzzer-no-link",
                    "KCONFORM_PAGE_SIZE": "4096", "KCONFORM_EL2_REQUIRED": "ON"},
                targets=[TTF_BINARY], tree=tree, tree_required=True,
                what=f"the el2 fuzz runner for {tree}", log=log)
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
    tail: list[str] = []
    with procs.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
                     env=env, cwd=work) as p:
        assert p.stderr is not None
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


def measure(log, mutants: list[str] | None = None, budget: int = 60, runs: int = 3) -> list[dict]:
    """Per mutant: the times libFuzzer needed from an empty corpus to find it in each run
    and their median (None unless most runs found it), with every run's details."""
    t_all = time.monotonic()
    chosen = mutant_patches(MUTANTS_DIR, list(mutants or TTF_DEFAULT_MUTANTS), flag="--mutants")
    base = tree_fetch.fetch(DEFAULT_TREE, progress=log)
    ref_tree = patches.apply(base, REFERENCE)
    log(f"kconform bench: mutant-ttf: building the libFuzzer el2-4k harness on {DEFAULT_TREE} + reference")
    ref_binary = TTF_BUILD / ("reference-" + TTF_BINARY)
    shutil.copy2(_build_fuzz_el2(ref_tree, log), ref_binary)
    log(f"kconform bench: mutant-ttf: background: the reference for {budget} s from an empty corpus")
    bg = _hunt(ref_binary, None, budget, 1, [], log, "reference")
    known = [x for b in bg["background"] for x in b["rules"] if not b["how"].startswith("crash")]
    crashes = sorted({x for b in bg["background"] if b["how"].startswith("crash") for x in b["rules"]})
    bg_note = (f"background on the reference ({budget} s, excluded): {len(known)} rules"
               + (f" and crashes ({'; '.join(crashes)})" if crashes else ""))
    results = []
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
        # The median over all runs, a miss counting as > budget: a median only when most runs found it.
        ordered = sorted(times) + [float("inf")] * (runs - len(times))
        med = statistics.median(ordered) if runs else float("inf")
        results.append({"mutant": patch.stem, "median": round(med, 1) if med != float("inf") else None,
                        "found_runs": len(times), "runs": runs, "budget_s": budget, "times_s": times,
                        "rules": sorted({x for h in hits for x in h["rules"]}), "build_s": built,
                        "tries": tries, "background": bg, "background_note": bg_note})
    for r in results:
        r["ttf_total_wall_s"] = round(time.monotonic() - t_all, 1)
    return results
