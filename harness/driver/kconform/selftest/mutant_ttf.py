"""The fuzzer's time to find a mutant (`kconform bench --only mutant-ttf`, issue 14).

Families (the code fuzzed; the unmutated build is the reference a finding is checked on):
  reclaim2  targets/el2/reclaim2/mutants on debian:7.3 + the reference RECLAIM2 patch
  stock     targets/el2/stock-mutants, single-line mutants of Debian's real 7.3 ffa.c
Start corpora:
  seeds     what `kconform fuzz` seeds with (commands/fuzz.py make_seeds: the directed
            corpora and the Z3 cases of FF-A, the 4K ones, in binary form)
  empty     nothing (the dictionary harness/fuzz/ffa.dict only); libFuzzer's first
            input, "\n", runs the first of the ABI's starters (FuzzRunner::run); the
            mutator starts inputs that do not decode from any of them (EngineHints::starters)

One reused build folder per page size (build/el2/bench-mutant-fuzz for 4K,
bench-mutant-fuzz-16k for 16K: only the tree changes, so only ffa.c and what names
it recompile) holds kconform-fuzz-el2-<N>k built for libFuzzer. A mutant is fuzzed
at the page size its fault exists at (mutant_page_size): 16K for a fault that needs a
host PAGE_SIZE > 4K (the 4K build is the reference's), with seeds of that page size. The build is plain (coverage, no ASan/UBSan): the crash condition is the
oracle. (UBSan once stopped every empty-corpus run on a pointer overflow in our own
model, a clipped TX write at a huge offset; fixed in the model, with a regression
test: harness/fuzz/README.md.)

A run: one libFuzzer process (seed 101, 102, ... per run) in the runner's record
mode (KCONFORM_FUZZ_FINDINGS: a finding never stops the process; each signature's
first input is stored, harness/fuzz/fuzz_runner.h FindingStore) for the budget. Its
findings are read while it runs, in the order they were stored (the .kcsb's time,
counted from the run's start), and a finding counts (the mutant is found, at that
time; the process is then ended) unless
  - its input is byte-identical to a seed, or is a seed's scenario renamed (the
    mutator names every input "fuzz": scenario_key): the directed scenarios do not
    count, only the fuzzer. Seeds are also baselined in the runner by name (every rule,
    any scenario name but "fuzz", the name of every input the mutator makes), so
    a seed never claims a signature a mutated input could reach later; or
  - it is on the reference: the input, replayed on the reference binary (record
    mode, a scratch folder), gives the same violation (rules and op kind), or, for
    a crash of the process, crashes the reference too.
An excluded finding does not end the signature: the process stores one input per
signature, so the first input of one (a seed's renamed by the mutator, which the
by-name baseline misses, or one the reference shares) would hide every later input
of it, the mutant's own included. The bench moves an excluded finding aside (into
the run's excluded/ folder) 1, 2, 4, ... REARM_MAX_S s after its n-th exclusion, and
the process (KCONFORM_FUZZ_REARM=1) stores the signature's next input, which is
judged in turn.
A crash of the process (the engine's crash path, e.g. a SEGV) ends it; the crashing
input is judged the same way, and a new process resumes from the corpus with the
time left (a crashing seed is taken out of the corpus first).

Record per mutant, start corpus and run: found or not, seconds, rules, executions,
what was excluded and why.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kconform.core import procs
from kconform.core.errors import ToolError
from kconform.core.paths import REPO, runner_binary
from kconform.engine.build import build_preset, cmake_build
from kconform.engine.runner import Engine
from kconform.selftest import reclaim2, stock
from kconform.selftest.mutants import mutant_patches
from kconform.sources import patches, tree_fetch
from kconform.sources.trees import DEFAULT_TREE

TTF_BUILD = REPO / "build" / "el2" / "bench-mutant-fuzz"
PAGE_SIZES = (4096, 16384)
FAMILIES = ("reclaim2", "stock")
START_CORPORA = ("seeds", "empty")
# The slice the default bench runs (CI-sized): 2 mutants x seeds x 1 run x 30 s.
SLICE_MUTANTS = ("reclaim2:09", "stock:08")
SLICE = {"corpora": ["seeds"], "runs": 1, "budget": 30}
# The full matrix (--nightly): every mutant of both families, both corpora, 3 runs of 300 s.
NIGHTLY = {"corpora": list(START_CORPORA), "runs": 3, "budget": 300}
# Every name the mutator gives an input (harness/fuzz/mutator.cc); seeds are named otherwise.
FUZZ_NAME = "fuzz"
SEED_NAME_PATTERNS = ("?????*", "?", "??", "???")  # any name but one of 4 characters (the seeds have >= 14)
TIMEOUT_S = 5  # libFuzzer -timeout: stock ffa.c loops for ever on some inputs (el3_reclaim.kcs stalls)
POLL_S = 0.5


def family_dirs() -> dict[str, tuple[Path, list[Path]]]:
    """Family -> (its mutants' folder, the patches its reference is the base tree plus)."""
    return {"reclaim2": (reclaim2.MUTANTS_DIR, [reclaim2.REFERENCE]), "stock": (stock.MUTANTS_DIR, [])}


# Where each family says which of its faults exist only with a host PAGE_SIZE > 4K:
# the table of its mutants, the mutant's row, and a column whose cell starts with
# (stock: the first kill, "16K ...") or names (reclaim2: needs, "direct, 16K: ...") 16K.
PAGE_TABLES = {"reclaim2": ("MUTANTS.md", "needs", False), "stock": ("README.md", "first kill", True)}


def sixteen_k_mutants(family: str, folder: Path | None = None) -> set[str]:
    """The mutants of family (patch stems) whose fault needs PAGE_SIZE > 4K, read from the
    family's own table (PAGE_TABLES). A table without the column is an error naming it."""
    doc, column, starts = PAGE_TABLES[family]
    path = (folder or family_dirs()[family][0]) / doc
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ToolError(f"mutant-ttf: cannot read {path}: {e.strerror}") from None
    header = next((l for l in lines if l.startswith("| mutant |")), None)
    cells = [c.strip() for c in header.strip("|").split("|")] if header else []
    if column not in cells:
        raise ToolError(f"mutant-ttf: {path}: no mutant table with a '{column}' column "
                        "(it says which faults need a 16K host page)")
    k = cells.index(column)
    out = set()
    for line in lines:
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or len(row) <= k or not re.match(r"\d\d-", row[0]):
            continue
        cell = row[k]
        if (cell.startswith("16K") if starts else re.search(r"\b16K\b", cell)):
            out.add(row[0])
    return out


def mutant_page_size(family: str, patch: Path, sixteen: dict[str, set[str]] | None = None) -> int:
    """The host PAGE_SIZE a mutant is fuzzed at: 16K if its fault needs it, else 4K."""
    names = (sixteen or {}).get(family)
    if names is None:
        names = sixteen_k_mutants(family)
    return 16384 if patch.stem in names else 4096


def plan(mutants: list[str] | None = None, families: list[str] | None = None, corpora: list[str] | None = None,
         runs: int | None = None, budget: int | None = None, nightly: bool = False) -> dict:
    """What to measure: {"mutants": [(family, patch)], "corpora", "runs", "budget"}.
    Nothing given: the slice (SLICE_MUTANTS, SLICE). --nightly: every mutant of the
    families, NIGHTLY. Mutants are NN or name (in each chosen family) or family:NN."""
    fams = list(families or FAMILIES)
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        raise ToolError(f"flag --mutant-family: no family {', '.join(bad)} (known: {', '.join(FAMILIES)})")
    bad = [c for c in corpora or [] if c not in START_CORPORA]
    if bad:
        raise ToolError(f"flag --mutant-corpus: no start corpus {', '.join(bad)} (known: {', '.join(START_CORPORA)})")
    dirs = family_dirs()
    if mutants is None and families is None and not nightly:
        mutants = list(SLICE_MUTANTS)
    chosen: list[tuple[str, Path]] = []
    if not mutants:
        for f in fams:
            chosen += [(f, p) for p in mutant_patches(dirs[f][0], None, flag="--mutants")]
    else:
        per: dict[str, list[str]] = {}
        for m in mutants:
            f, sep, name = m.partition(":")
            if sep:
                if f not in FAMILIES:
                    raise ToolError(f"flag --mutants: '{m}': no family {f} (known: {', '.join(FAMILIES)})")
                per.setdefault(f, []).append(name)
            else:
                for f in fams:
                    per.setdefault(f, []).append(m)
        for f in FAMILIES:
            if f in per:
                chosen += [(f, p) for p in mutant_patches(dirs[f][0], per[f], flag="--mutants")]
    base = NIGHTLY if nightly else SLICE
    out = {"mutants": chosen, "corpora": list(corpora or base["corpora"]),
           "runs": runs if runs is not None else base["runs"],
           "budget": budget if budget is not None else base["budget"]}
    if out["runs"] < 1 or out["budget"] < 1:
        raise ToolError("flags --mutant-budget and --mutant-runs: at least 1")
    return out


# ---- the counting rules (pure: tests drive them with a fake fuzzer and replayer) ----

@dataclass
class Candidate:
    """One finding of a run: a stored violation (kind "rule") or a crash of the process."""
    at_s: float                 # since the run's start
    kind: str                   # rule | crash
    signature: str              # "<rules> <op kind>" for a rule; the crash line for a crash
    rules: list[str]
    data: bytes                 # the input
    path: Path | None = None


@dataclass
class ProcessEnd:
    """How one fuzz process ended."""
    crash: Candidate | None = None  # the crashing input (the engine's crash path), if it crashed
    execs: int = 0


class Fuzzer:
    """One run's fuzz processes (an interface; LibFuzzer below, a fake in the tests)."""

    def run(self, seconds: float, seed: int, stop: Callable[[], bool]) -> ProcessEnd:
        """Runs one process for at most seconds, calling stop() about twice a second
        and ending the process when it returns True."""
        raise NotImplementedError

    def new_findings(self) -> list[Candidate]:
        """Findings stored since the last call, with their times since the run's start."""
        raise NotImplementedError

    def drop_from_corpus(self, data: bytes) -> None:
        """Takes an input out of the corpus (a crashing seed would crash every restart)."""

    def set_aside(self, c: Candidate) -> None:
        """Moves an excluded finding out of the findings folder (kept beside it), so that
        the next input with its signature is stored and judged too. The fuzz process
        stores one input per signature; without this, a signature whose first input was
        a seed's, or one the unmutated code shares, hid every later input of it, the
        mutant's own included (KCONFORM_FUZZ_REARM, harness/fuzz/fuzz_runner.h)."""


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def _uleb(data: bytes, i: int) -> tuple[int, int]:
    v, shift = 0, 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated uleb")
        b = data[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def scenario_key(data: bytes) -> str | None:
    """The hash of a binary scenario (harness/scenario/codec_binary.cc) without its name
    and required capabilities, the fields the mutator rewrites ("fuzz", 0) on every input
    it makes: a seed run through the mutator unchanged has its seed's key. None if data
    is not a binary scenario."""
    try:
        if data[:4] != b"KCSN" or len(data) < 6:
            return None
        version = data[4]
        _, i = _uleb(data, 6)              # requires_caps
        head = data[4:6]
        if version >= 2:
            start = i
            _, i = _uleb(data, i)          # repeat
            head += data[start:i]
        n, i = _uleb(data, i)              # name
        return sha1(head + data[i + n:])
    except (ValueError, IndexError):
        return None


def seed_keys(seeds: list[bytes]) -> set[str]:
    """What makes a finding's input a seed's: its bytes' hash or its scenario's key."""
    return {sha1(s) for s in seeds} | {k for s in seeds if (k := scenario_key(s))}


# libFuzzer keeps to -max_total_time in whole seconds and stops at its next check.
EARLY_END_SLACK_S = 5
# An excluded signature is set aside (Fuzzer.set_aside) 1, 2, 4, ... s after its
# n-th exclusion, at most this long: each next input of it costs a replay on the
# unmutated build, so a signature the reference always shares is replayed about
# log2(budget) + budget / REARM_MAX_S times.
REARM_MAX_S = 32


def hunt(fuzzer: Fuzzer, on_reference: Callable[[Candidate], bool], seed_hashes: set[str], budget: float,
         seed: int, clock: Callable[[], float] = time.monotonic, log=lambda m: None) -> dict:
    """One run: fuzzes until a finding counts or the budget is spent. Returns {found:
    {seconds, kind, rules, signature} or None, excluded: [{at_s, signature, why}],
    restarts, execs, wall_s}."""
    t0 = clock()
    found: Candidate | None = None
    excluded: list[dict] = []
    execs, restarts = 0, 0
    times_excluded: dict[str, int] = {}
    set_aside: list[tuple[float, Candidate]] = []  # (when, finding) to set aside

    def exclude(c: Candidate, why: str) -> None:
        excluded.append({"at_s": round(c.at_s, 2), "signature": c.signature, "why": why})
        if c.kind != "rule" or why == "after the budget":
            return
        n = times_excluded[c.signature] = times_excluded.get(c.signature, 0) + 1
        set_aside.append((clock() + min(2 ** (n - 1), REARM_MAX_S), c))

    def judge(c: Candidate) -> bool:
        """Whether c counts; else it goes to excluded."""
        nonlocal found
        if c.at_s > budget:
            exclude(c, "after the budget")
            return False
        if sha1(c.data) in seed_hashes or scenario_key(c.data) in seed_hashes:
            why = "a seed's input"
        elif on_reference(c):
            why = "on the reference too" if c.kind == "rule" else "crashes the reference too"
        else:
            found = c
            log(f"found {c.signature} at {c.at_s:.1f} s")
            return True
        exclude(c, why)
        return False

    def check() -> bool:
        now = clock()
        due = [c for when, c in set_aside if when <= now]
        set_aside[:] = [x for x in set_aside if x[0] > now]
        for c in due:
            fuzzer.set_aside(c)
        for c in sorted(fuzzer.new_findings(), key=lambda c: c.at_s):
            if judge(c):
                return True
        return False

    while found is None and (left := budget - (clock() - t0)) >= 1:
        end = fuzzer.run(left, seed + restarts, check)
        execs += end.execs
        if found is not None or check():
            break
        if end.crash is None:
            # The time is up. A process that ended well before it, with no crash, did
            # not fuzz (libFuzzer's "no interesting inputs" once ended every
            # empty-corpus run after 2 executions): not a miss, a bench that cannot run.
            if budget - (clock() - t0) > EARLY_END_SLACK_S:
                raise ToolError(f"the fuzzer ended after {clock() - t0:.1f} s of a {budget:.0f} s budget "
                                f"without a crash or a finding ({end.execs} executions): it did not fuzz")
            break
        restarts += 1
        if judge(end.crash):
            break
        fuzzer.drop_from_corpus(end.crash.data)
    return {"seed": seed, "found": None if found is None else {
                "seconds": round(found.at_s, 2), "kind": found.kind, "rules": found.rules,
                "signature": found.signature},
            "excluded": excluded, "restarts": restarts, "execs": execs, "wall_s": round(clock() - t0, 1)}


def summarize(mutant: str, family: str, corpus: str, tries: list[dict], budget: int) -> dict:
    """Per mutant and start corpus: the median over the runs (a miss counts as more than
    the budget, so a median only when most runs found it), runs found, times, rules."""
    hits = [t["found"] for t in tries if t["found"]]
    times = [h["seconds"] for h in hits]
    runs = len(tries)
    ordered = sorted(times) + [float("inf")] * (runs - len(times))
    med = statistics.median(ordered) if runs else float("inf")
    return {"mutant": mutant, "family": family, "corpus": corpus,
            "median": round(med, 1) if med != float("inf") else None, "found_runs": len(times), "runs": runs,
            "budget_s": budget, "times_s": times, "rules": sorted({x for h in hits for x in h["rules"]}),
            "execs": [t["execs"] for t in tries], "tries": tries}


def fractions(results: list[dict]) -> list[dict]:
    """Per family and start corpus, and per start corpus over both families: mutants found
    in most runs / mutants, runs found / runs, and the median over every run (misses as
    more than the budget)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["family"], r["corpus"]), []).append(r)
        groups.setdefault(("all", r["corpus"]), []).append(r)
    out = []
    for (fam, corpus), rs in groups.items():
        if fam == "all" and len({r["family"] for r in rs}) < 2:
            continue
        times = [t for r in rs for t in r["times_s"]]
        runs = sum(r["runs"] for r in rs)
        ordered = sorted(times) + [float("inf")] * (runs - len(times))
        med = statistics.median(ordered) if ordered else float("inf")
        out.append({"family": fam, "corpus": corpus, "mutants": len(rs),
                    "mutants_found": sum(1 for r in rs if r["median"] is not None),
                    "runs": runs, "runs_found": len(times),
                    "median_s": None if med == float("inf") else round(med, 1),
                    "budget_s": rs[0]["budget_s"]})
    return out


# ---- libFuzzer and the reference replay ----

def ttf_build_dir(page_size: int) -> Path:
    return TTF_BUILD if page_size == 4096 else TTF_BUILD.with_name(f"{TTF_BUILD.name}-{page_size // 1024}k")


def ttf_binary(page_size: int) -> str:
    return f"kconform-fuzz-el2-{page_size // 1024}k"


def _build_fuzz_el2(tree: Path, log, page_size: int = 4096) -> Path:
    """Configures and builds the libFuzzer el2-<N>k harness against tree."""
    build, binary = ttf_build_dir(page_size), ttf_binary(page_size)
    cmake_build(build, definitions={
                    "CMAKE_C_COMPILER": "clang", "CMAKE_CXX_COMPILER": "clang++",
                    "CMAKE_BUILD_TYPE": "RelWithDebInfo", "KCONFORM_SANITIZE": "OFF",
                    "KCONFORM_TESTS": "OFF", "KCONFORM_FUZZ_ENGINE": "libfuzzer",
                    "CMAKE_C_FLAGS": "-fsanitize=fuzzer-no-link", "CMAKE_CXX_FLAGS": "-fsanitize=fuzzer-no-link",
                    "KCONFORM_PAGE_SIZE": str(page_size), "KCONFORM_EL2_REQUIRED": "ON"},
                targets=[binary], tree=tree, tree_required=True,
                what=f"the el2-{page_size // 1024}k fuzz runner for {tree}", log=log)
    return build / "harness" / "fuzz" / binary


def seed_baseline(rule_ids: list[str]) -> str:
    """KCONFORM_FUZZ_BASELINE that makes every rule known in any scenario not named "fuzz"."""
    return "\n".join(f"{r}\t{p}" for r in rule_ids for p in SEED_NAME_PATTERNS)


def read_signatures(findings: Path) -> dict[str, str]:
    """Stored stem -> "<rules> <op kind>" from a FindingStore's .counts/*.tsv."""
    out = {}
    for tsv in sorted((findings / ".counts").glob("*.tsv")):
        try:
            lines = tsv.read_text().splitlines()
        except OSError:
            continue
        for line in lines[1:]:
            parts = line.split("\t")
            if len(parts) == 4 and parts[1] == "new" and parts[2] != "-":
                out[parts[2]] = " ".join(parts[3].split()[:2])
    return out


class LibFuzzer(Fuzzer):
    def __init__(self, binary: Path, work: Path, seeds: list[Path], env: dict):
        self.binary, self.work, self.env = binary, work, env
        self.corpus, self.art, self.findings = work / "corpus", work / "artifacts", work / "findings"
        for d in (self.corpus, self.art, self.findings):
            d.mkdir(parents=True, exist_ok=True)
        for s in seeds:
            shutil.copyfile(s, self.corpus / s.name)
        self.seen: set[str] = set()
        self.t0_wall = time.time()
        self.processes = 0

    def run(self, seconds: float, seed: int, stop: Callable[[], bool]) -> ProcessEnd:
        for f in self.art.iterdir():
            f.unlink()
        self.processes += 1
        log_path = self.work / f"fuzz-{self.processes}.log"
        cmd = [str(self.binary), str(self.corpus), f"-max_total_time={max(1, int(seconds))}", f"-seed={seed}",
               f"-dict={REPO / 'harness' / 'fuzz' / 'ffa.dict'}", "-max_len=8192", f"-timeout={TIMEOUT_S}",
               "-rss_limit_mb=4096", f"-artifact_prefix={self.art}/", "-print_final_stats=1"]
        env = dict(self.env, KCONFORM_FUZZ_FINDINGS=str(self.findings), KCONFORM_FUZZ_REARM="1")
        t_start = time.monotonic()
        stopped = False
        with open(log_path, "w") as logf, procs.Popen(cmd, stdout=subprocess.DEVNULL, stderr=logf, env=env,
                                                      cwd=self.work) as p:
            while p.poll() is None:
                time.sleep(POLL_S)
                if stop():
                    stopped = True
                    p.end(grace=2)
                    break
                if time.monotonic() - t_start > seconds + 60:
                    p.end(grace=2)  # libFuzzer did not keep to -max_total_time
                    break
        text = log_path.read_text(errors="replace")
        execs = [int(x) for x in re.findall(r"^#(\d+)", text, re.M)]
        m = re.search(r"stat::number_of_executed_units:\s*(\d+)", text)
        end = ProcessEnd(execs=int(m.group(1)) if m else (execs[-1] if execs else 0))
        arts = sorted(self.art.glob("*-*"))
        if not stopped and p.returncode not in (0, None) and arts:
            line = next((x for x in reversed(text.splitlines()) if x.startswith("SUMMARY:")),
                        f"{arts[0].name.split('-')[0]} (exit {p.returncode})")
            end.crash = Candidate(at_s=time.time() - self.t0_wall, kind="crash",
                                  signature=line.strip(), rules=[crash_name(line)],
                                  data=arts[0].read_bytes(), path=arts[0])
        return end

    def new_findings(self) -> list[Candidate]:
        out = []
        sigs = None
        for kcsb in sorted(self.findings.glob("violation-*.kcsb")):
            stem = kcsb.name[:-len(".kcsb")]
            if stem in self.seen:
                continue
            if sigs is None:
                sigs = read_signatures(self.findings)
            self.seen.add(stem)
            sig = sigs.get(stem) or rule_signature_of(stem)  # the counts are flushed at most once a second
            rules = sig.split()[0].split(",")
            out.append(Candidate(at_s=kcsb.stat().st_mtime - self.t0_wall, kind="rule", signature=sig,
                                 rules=rules, data=kcsb.read_bytes(), path=kcsb))
        return out

    def set_aside(self, c: Candidate) -> None:
        if c.path is None:
            return
        stem = c.path.name[:-len(".kcsb")]
        away = self.work / "excluded"
        away.mkdir(exist_ok=True)
        n = sum(1 for _ in away.glob(f"{stem}.*.kcsb"))
        # The .kcsb last: the process stores the signature again once it is gone, and
        # its new .kcs/.jsonl/.log must not be taken for the old ones.
        for f in sorted(self.findings.glob(f"{stem}.*"), key=lambda f: f.suffix == ".kcsb"):
            if ".kcsb.tmp" not in f.name:
                f.rename(away / f"{stem}.{n}{f.suffix}")
        self.seen.discard(stem)

    def drop_from_corpus(self, data: bytes) -> None:
        for f in self.corpus.iterdir():
            if f.stat().st_size == len(data) and f.read_bytes() == data:
                f.unlink()


def runnable_seeds(ref_binary: Path, seeds: list[Path], env: dict, log, tries: int = 30) -> list[Path]:
    """The seeds less those that crash or hang the unmutated build (stock ffa.c's stalls
    and SEGV in el3_reclaim.kcs): each would end every process of every run at its
    start (a finding it makes counts only if the reference does not share it, and it
    does), costing a timeout and a restart. `kconform fuzz` moves such an input to
    quarantine/ when it first kills a worker (engine/libfuzzer_workers.py) instead."""
    left = list(seeds)
    with tempfile.TemporaryDirectory(prefix="kconform-ttf-seeds-") as d:
        corpus, art = Path(d) / "corpus", Path(d) / "artifacts"
        corpus.mkdir()
        art.mkdir()
        for s in left:
            shutil.copyfile(s, corpus / s.name)
        for _ in range(tries):
            for f in art.iterdir():
                f.unlink()
            try:
                r = procs.run([str(ref_binary), str(corpus), "-runs=0", f"-timeout={TIMEOUT_S}",
                               f"-artifact_prefix={art}/"], capture_output=True, timeout=600,
                              env=dict(env, KCONFORM_FUZZ_FINDINGS=str(Path(d) / "findings")))
            except subprocess.TimeoutExpired:
                break
            arts = list(art.iterdir())
            if r.returncode == 0 or not arts:
                break
            data = arts[0].read_bytes()
            bad = [s for s in left if s.read_bytes() == data]
            if not bad:
                break
            for s in bad:
                left.remove(s)
                (corpus / s.name).unlink()
                log(f"left out seed {s.name}: it ends the unmutated build's process ({arts[0].name.split('-')[0]})")
    return left


def crash_name(summary: str) -> str:
    """A short name for a crash from its SUMMARY line: "SUMMARY: AddressSanitizer: SEGV
    /a/b/ffa.c:412 in ffa_x" -> "CRASH SEGV in ffa_x (ffa.c:412)"."""
    text = summary.split(":", 2)[-1].strip() if summary.startswith("SUMMARY:") else summary.strip()
    kind, _, rest = text.partition(" ")
    where, _, func = rest.partition(" in ")
    if ":" not in where and not func:  # "deadly signal": no place
        return f"CRASH {text}"[:160]
    where = where.strip().rsplit("/", 1)[-1]
    return ("CRASH " + kind + (f" in {func.strip()}" if func else "")
            + (f" ({where})" if where else "")).strip()[:160]


def rule_signature_of(stem: str) -> str:
    """ "<rules> <op kind>" of a stored stem violation-<rules '+'-joined>-<op>-<hash>."""
    parts = stem.split("-")
    return parts[1].replace("+", ",") + " " + "-".join(parts[2:-1])


def make_replayer(ref_binary: Path, env: dict) -> Callable[[Candidate], bool]:
    """on_reference for hunt(): replays a candidate's input on the reference binary in
    record mode; a rule finding is on the reference when the reference records the same
    "<rules> <op kind>"; a crash, when the reference process crashes too."""
    def on_reference(c: Candidate) -> bool:
        with tempfile.TemporaryDirectory(prefix="kconform-ttf-ref-") as d:
            inp = Path(d) / "input"
            inp.write_bytes(c.data)
            findings = Path(d) / "findings"
            try:
                r = procs.run([str(ref_binary), f"-timeout={TIMEOUT_S}", str(inp)], capture_output=True, text=True,
                              errors="replace", timeout=120,
                              env=dict(env, KCONFORM_FUZZ_FINDINGS=str(findings), KCONFORM_FUZZ_BASELINE=""))
                rc = r.returncode
            except subprocess.TimeoutExpired:
                rc = -1  # hangs the reference too
            if c.kind == "crash":
                return rc != 0
            return c.signature in set(read_signatures(findings).values())
    return on_reference


def measure(log, mutants: list[str] | None = None, families: list[str] | None = None,
            corpora: list[str] | None = None, budget: int | None = None, runs: int | None = None,
            nightly: bool = False, make_seeds: Callable[[Path, int], object] | None = None) -> dict:
    """The plan's matrix: {"plan", "results": [summarize() per mutant and start corpus],
    "fractions", "wall_s"}. make_seeds(folder, page_size) fills folder with the seed
    corpus of that page size in binary form (the caller passes `kconform fuzz`'s:
    commands/fuzz.py make_seeds). Each mutant is fuzzed at mutant_page_size()."""
    t_all = time.monotonic()
    p = plan(mutants, families, corpora, runs, budget, nightly)
    sixteen = {f: sixteen_k_mutants(f) for f in FAMILIES}
    sizes = {(f, m.stem): mutant_page_size(f, m, sixteen) for f, m in p["mutants"]}
    log(f"kconform bench: mutant-ttf: {len(p['mutants'])} mutant(s) x {', '.join(p['corpora'])} x "
        f"{p['runs']} run(s) x {p['budget']} s"
        + (f"; at 16K (their fault needs it): {', '.join(f'{f}:{m}' for (f, m), ps in sizes.items() if ps != 4096)}"
           if any(ps != 4096 for ps in sizes.values()) else ""))
    seeds: dict[int, list[Path]] = {ps: [] for ps in PAGE_SIZES}
    if "seeds" in p["corpora"]:
        if make_seeds is None:
            raise ToolError("mutant-ttf: start corpus seeds needs a make_seeds")
        for ps in sorted(set(sizes.values())):
            seeds_dir = REPO / "build" / "el2" / ("bench-mutant-fuzz-seeds" + ("" if ps == 4096 else f"-{ps // 1024}k"))
            make_seeds(seeds_dir, ps)
            seeds[ps] = sorted(seeds_dir.iterdir())
            log(f"kconform bench: mutant-ttf: {len(seeds[ps])} seeds (commands/fuzz.py make_seeds, {ps // 1024}K)")
    seed_hashes = seed_keys([s.read_bytes() for ps in seeds for s in seeds[ps]])
    build_preset("default", targets=["kconform-runner"], log=log)
    rule_ids = [r["id"] for r in Engine(runner_binary()).rules()]
    env = dict(os.environ, KCONFORM_FUZZ_KNOWN_RULES="", KCONFORM_FUZZ_BASELINE=seed_baseline(rule_ids))
    env.pop("KCONFORM_FUZZ_KNOWN_LOG", None)
    base = tree_fetch.fetch(DEFAULT_TREE, progress=log)
    dirs = family_dirs()
    results = []
    left_out: dict[str, int] = {}
    for fam in FAMILIES:
        ref_patches = dirs[fam][1]
        for ps in PAGE_SIZES:
            chosen = [m for f, m in p["mutants"] if f == fam and sizes[(f, m.stem)] == ps]
            if not chosen:
                continue
            label = f"el2-{ps // 1024}k"
            log(f"kconform bench: mutant-ttf: building the libFuzzer {label} harness on {DEFAULT_TREE}"
                + (" + reference" if ref_patches else " (stock)"))
            ref_tree = patches.apply_all(base, ref_patches) if ref_patches else base
            ref_binary = ttf_build_dir(ps) / f"reference-{fam}-{ttf_binary(ps)}"
            shutil.copy2(_build_fuzz_el2(ref_tree, log, ps), ref_binary)
            on_reference = make_replayer(ref_binary, env)
            fam_seeds = runnable_seeds(ref_binary, seeds[ps], env,
                                       lambda m: log(f"kconform bench: mutant-ttf: {fam} {label}: {m}"))
            left_out[f"{fam}-{ps // 1024}k" if ps != 4096 else fam] = len(seeds[ps]) - len(fam_seeds)
            for patch in chosen:
                t0 = time.monotonic()
                binary = _build_fuzz_el2(patches.apply_all(base, ref_patches + [patch]), log, ps)
                built = round(time.monotonic() - t0, 1)
                for corpus in p["corpora"]:
                    tries = []
                    for i in range(p["runs"]):
                        what = f"{fam} {patch.stem} ({label}) from {corpus}, run {i + 1}/{p['runs']} (seed {101 + i})"
                        log(f"kconform bench: mutant-ttf: {what}, {p['budget']} s budget")
                        work = Path(tempfile.mkdtemp(prefix="kconform-ttf-"))
                        try:
                            fz = LibFuzzer(binary, work, fam_seeds if corpus == "seeds" else [], env)
                            t = hunt(fz, on_reference, seed_hashes, p["budget"], 101 + i,
                                     log=lambda m, w=what: log(f"kconform bench: mutant-ttf: {w}: {m}"))
                        finally:
                            shutil.rmtree(work, ignore_errors=True)
                        why: dict[str, int] = {}
                        for x in t["excluded"]:
                            why[x["why"]] = why.get(x["why"], 0) + 1
                        log(f"kconform bench: mutant-ttf: {what}: "
                            + (f"found at {t['found']['seconds']} s" if t["found"] else f"not found in {p['budget']} s")
                            + f", {t['restarts']} restart(s); excluded: "
                            + (", ".join(f"{n} {w}" for w, n in sorted(why.items())) or "none"))
                        tries.append(t)
                    r = summarize(patch.stem, fam, corpus, tries, p["budget"])
                    r["build_s"] = built
                    r["page_size"] = ps
                    results.append(r)
                    log(f"kconform bench: mutant-ttf: RESULT {fam} {patch.stem} {label} {corpus}: found "
                        f"{r['found_runs']}/{r['runs']}, times {r['times_s']} s, median {r['median']}, rules "
                        f"{','.join(r['rules']) or '-'}, execs {r['execs']}, build {built} s")
    return {"plan": {"mutants": [f"{f}:{m.stem}" for f, m in p["mutants"]], "corpora": p["corpora"],
                     "runs": p["runs"], "budget_s": p["budget"], "nightly": nightly,
                     "seeds": {f"{ps // 1024}k": len(v) for ps, v in seeds.items() if v},
                     "page_sizes": {f"{f}:{m}": ps for (f, m), ps in sizes.items()}},
            "results": results, "fractions": fractions(results), "wall_s": round(time.monotonic() - t_all, 1),
            "seeds_left_out": left_out}
