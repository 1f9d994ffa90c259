"""`kconform fuzz`: coverage-guided, structure-aware fuzzing of a target with
libFuzzer or AFL++ (harness/fuzz), the oracle as the crash condition.

Layout under reports/fuzz/<target>/ (untracked; <target> is host or el2-<page size>):
  corpus/     the persistent corpus: a run resumes from it and leaves it merged and minimised
  seeds/      the directed suite and the Z3 cases of the target's ABI, in binary form (rebuilt each run)
  artifacts/  the engine's raw crash/timeout files (emptied into findings/)
  afl/        AFL++'s output folder (resumed with AFL_AUTORESUME)
  findings/   one <kind>-<rule>-<sha1[:12]>.{kcsb,kcs,log} per distinct finding, never overwritten
  known.log   baselined findings met (recorded, not crashes)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from kconform import build, deps
from kconform.errors import EXIT_CLEAN, EXIT_VIOLATIONS, ToolError
from kconform.paths import CORPORA, DEFAULT_BASELINE, REPO, build_dir, runner_binary

FUZZ_DIR = REPO / "harness" / "fuzz"
ENGINES = ("libfuzzer", "afl")
TARGETS = {"host": "gmem", "el2": "ffa"}
KINDS = ("crash", "timeout", "oom", "leak", "slow-unit")


def parse_duration(text: str) -> int:
    m = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not m:
        raise ToolError(f"flag --time: '{text}' is not a duration (e.g. 30s, 10m, 8h)")
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def target_label(target: str, page_size: int) -> str:
    return "host" if target == "host" else f"el2-{page_size // 1024}k"


def fuzz_binary(engine: str, label: str) -> Path:
    return build_dir(f"fuzz-{engine}") / "harness" / "fuzz" / f"kconform-fuzz-{label}"


def known_rules(target: str, baseline: Path, extra: list[str]) -> list[str]:
    """Rule IDs the baseline accepts for this target (any release), plus --known ones."""
    rules = list(extra)
    if baseline.exists():
        for e in json.loads(baseline.read_text()).get("findings", []):
            if e.get("target") == target and e.get("rule") not in rules:
                rules.append(e["rule"])
    return rules


def build_harness(engine: str, label: str, log) -> Path:
    if engine == "afl":
        deps.ensure(["fuzz"], log)
        build.build("default", targets=["kconform-afl-mutator"], log=log)
    preset = f"fuzz-{engine}"
    log(f"kconform fuzz: building kconform-fuzz-{label} ({preset})")
    build.build(preset, targets=[f"kconform-fuzz-{label}"], log=log)
    binary = fuzz_binary(engine, label)
    if not binary.exists():
        raise ToolError(f"{binary} was not built (for el2: is a kernel tree available? ./kconform tree fetch debian:7.3)")
    return binary


def make_seeds(abi: str, seeds: Path, page_size: int) -> int:
    """The directed suite and the Z3 cases of the ABI, converted to binary."""
    build.build("default", log=lambda m: None)
    if seeds.exists():
        shutil.rmtree(seeds)
    seeds.mkdir(parents=True)
    files = []
    for d in (CORPORA / abi, CORPORA / "z3" / abi):
        if d.exists():
            files += sorted(str(f) for f in d.rglob("*.kcs"))
    if abi == "ffa":  # only the cases of this PAGE_SIZE (and those for any)
        want = f"page_{page_size // 1024}k"
        files = [f for f in files if want in Path(f).read_text() or "page_" not in Path(f).read_text()]
    if not files:
        return 0
    tmp = seeds.with_name("seeds.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    r = subprocess.run([str(runner_binary()), "convert", "--to", "binary", "--out-dir", str(tmp)] + files,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"converting the seeds failed: {r.stderr.strip()}")
    for f in tmp.iterdir():
        data = f.read_bytes()
        (seeds / hashlib.sha1(data).hexdigest()).write_bytes(data)
    shutil.rmtree(tmp)
    return sum(1 for _ in seeds.iterdir())


# --- findings ------------------------------------------------------------------

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
    text = subprocess.run([str(runner_binary()), "convert", "--to", "text", str(path)],
                          capture_output=True, text=True)
    summary = [line for line in stderr.splitlines() if line.startswith("SUMMARY:")]
    (findings / (stem + ".kcs")).write_text(
        f"# {kind} found by kconform fuzz: {summary[0] if summary else rule}\n"
        f"# replay: {binary} {path}\n" + (text.stdout if text.returncode == 0 else "# (does not decode)\n"))
    (findings / (stem + ".log")).write_text("\n".join(stderr.splitlines()[-200:]) + "\n")
    return path, True


def collect(engine: str, binary: Path, root: Path, env: dict) -> list[tuple[Path, bool]]:
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


# --- engines -------------------------------------------------------------------

class Progress:
    def __init__(self, console: Console, quiet: bool):
        self.console, self.quiet, self.last = console, quiet, 0.0
        self.stats = {"execs_per_sec": 0.0, "coverage": "0", "findings": 0, "execs": 0}

    def show(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.quiet or (not force and now - self.last < (0.5 if self.console.is_terminal else 10)):
            return
        self.last = now
        s = self.stats
        line = (f"kconform fuzz: {s['execs']} execs, {s['execs_per_sec']:.0f} execs/s, "
                f"coverage {s['coverage']}, findings {s['findings']}")
        if self.console.is_terminal:
            sys.stdout.write("\r" + line[:self.console.width - 1].ljust(self.console.width - 1))
            sys.stdout.flush()
        else:
            print(line, flush=True)


LIBFUZZER_LINE = re.compile(r"#(\d+):? .*?cov: (\d+) ft: (\d+).*?exec/s:? (\d+)(?:.*?oom/timeout/crash: (\d+)/(\d+)/(\d+))?")


def run_libfuzzer(binary: Path, root: Path, abi: str, seconds: int, jobs: int, max_len: int, env: dict,
                  progress: Progress) -> None:
    cmd = [str(binary), str(root / "corpus"), str(root / "seeds"),
           f"-max_total_time={seconds}", f"-artifact_prefix={root / 'artifacts'}/",
           f"-dict={FUZZ_DIR / (abi + '.dict')}", f"-max_len={max_len}", "-timeout=10",
           "-rss_limit_mb=4096", "-print_final_stats=1", "-reload=1",
           f"-fork={jobs}", "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"]
    with open(root / "fuzz.log", "w") as logf:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                             cwd=root)
        for line in p.stderr:
            logf.write(line)
            m = LIBFUZZER_LINE.search(line)
            if m:
                progress.stats.update(execs=int(m.group(1)), coverage=f"{m.group(2)} edges/{m.group(3)} features",
                                      execs_per_sec=float(m.group(4)))
                if m.group(7) is not None:
                    progress.stats["findings"] = int(m.group(5)) + int(m.group(6)) + int(m.group(7))
                progress.show()
        p.wait()


def _afl_stats(out: Path) -> dict:
    total = {"execs_done": 0, "execs_per_sec": 0.0, "bitmap_cvg": "0%", "saved_crashes": 0, "saved_hangs": 0}
    for f in out.glob("*/fuzzer_stats"):
        kv = dict(line.split(":", 1) for line in f.read_text().splitlines() if ":" in line)
        kv = {k.strip(): v.strip() for k, v in kv.items()}
        total["execs_done"] += int(kv.get("execs_done", 0))
        total["execs_per_sec"] += float(kv.get("execs_per_sec", 0))
        total["bitmap_cvg"] = kv.get("bitmap_cvg", total["bitmap_cvg"])
        total["saved_crashes"] += int(kv.get("saved_crashes", kv.get("unique_crashes", 0)))
        total["saved_hangs"] += int(kv.get("saved_hangs", kv.get("unique_hangs", 0)))
    return total


def run_afl(binary: Path, root: Path, abi: str, seconds: int, jobs: int, max_len: int, env: dict,
            progress: Progress) -> None:
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
               AFL_IGNORE_SEED_PROBLEMS="1", AFL_FAST_CAL="1", AFL_CMPLOG_ONLY_NEW="1")
    out = root / "afl"
    procs = []
    for j in range(jobs):
        role = ["-M", "main"] if j == 0 else ["-S", f"s{j}"]
        cmd = ["afl-fuzz", "-i", str(inp), "-o", str(out), "-m", "none", "-t", "10000+", "-V", str(seconds),
               "-x", str(FUZZ_DIR / (abi + ".dict"))] + role + ["--", str(binary)]
        logf = open(root / f"afl-{j}.log", "w")
        procs.append((subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=root), logf))
    try:
        while any(p.poll() is None for p, _ in procs):
            time.sleep(1)
            s = _afl_stats(out)
            progress.stats.update(execs=s["execs_done"], execs_per_sec=s["execs_per_sec"],
                                  coverage=f"{s['bitmap_cvg']} of the map",
                                  findings=s["saved_crashes"] + s["saved_hangs"])
            progress.show()
    finally:
        for p, logf in procs:
            if p.poll() is None:
                p.terminate()
                p.wait()
            logf.close()
    bad = [(j, p.returncode) for j, (p, _) in enumerate(procs) if p.returncode not in (0, None)]
    if bad and not any(out.glob("*/fuzzer_stats")):
        tail = (root / "afl-0.log").read_text()[-2000:]
        raise ToolError(f"afl-fuzz failed (exit {bad[0][1]}):\n{tail}")
    # The queue becomes part of the persistent corpus (merged below).
    for f in out.glob("*/queue/id:*"):
        data = f.read_bytes()
        (root / "corpus" / hashlib.sha1(data).hexdigest()).write_bytes(data)


def merge_corpus(engine: str, binary: Path, root: Path, env: dict, log) -> tuple[int, int]:
    """Minimises the corpus (libFuzzer -merge=1, or afl-cmin); returns (before, after)."""
    corpus = root / "corpus"
    before = sum(1 for _ in corpus.iterdir())
    new = root / "corpus.merge"
    shutil.rmtree(new, ignore_errors=True)
    if engine == "libfuzzer":
        new.mkdir()
        cmd = [str(binary), "-merge=1", str(new), str(corpus), f"-artifact_prefix={root / 'artifacts'}/"]
    else:
        cmd = ["afl-cmin", "-i", str(corpus), "-o", str(new), "-m", "none", "-t", "10000", "--", str(binary)]
        env = dict(env, AFL_SKIP_CPUFREQ="1", AFL_NO_AFFINITY="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, timeout=1800)
    after = sum(1 for _ in new.iterdir()) if new.exists() else 0
    if r.returncode != 0 or (before and not after):
        (root / "merge.log").write_text(r.stdout + r.stderr)
        shutil.rmtree(new, ignore_errors=True)
        log(f"kconform fuzz: corpus minimisation failed (exit {r.returncode}, see {root / 'merge.log'}); "
            "the corpus is kept as it was")
        return before, before
    shutil.rmtree(corpus)
    new.rename(corpus)
    return before, after


def cmd_fuzz(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    seconds = parse_duration(args.time)
    if args.jobs < 1:
        raise ToolError("flag --jobs: at least 1")
    page_size = {"4K": 4096, "16K": 16384, "64K": 65536}.get(args.page_size.upper())
    if not page_size:
        raise ToolError(f"flag --page-size: '{args.page_size}' is not 4K, 16K or 64K")
    abi = TARGETS[args.target]
    label = target_label(args.target, page_size)
    root = Path(args.out) / label if args.out else REPO / "reports" / "fuzz" / label
    for d in ("corpus", "artifacts", "findings"):
        (root / d).mkdir(parents=True, exist_ok=True)
    binary = build_harness(args.engine, label, log)
    n_seeds = make_seeds(abi, root / "seeds", page_size)
    known = known_rules(args.target, Path(args.baseline or DEFAULT_BASELINE), args.known or [])
    env = dict(os.environ, KCONFORM_FUZZ_KNOWN_RULES=",".join(known),
               KCONFORM_FUZZ_KNOWN_LOG=str(root / "known.log"))
    resumed = sum(1 for _ in (root / "corpus").iterdir())
    log(f"kconform fuzz: {args.engine} on {label} for {seconds} s with {args.jobs} job(s); "
        f"corpus {resumed} input(s){' (resumed)' if resumed else ''}, {n_seeds} seeds; "
        f"baselined rules: {', '.join(known) or 'none'}")
    progress = Progress(console, args.quiet)
    start = time.monotonic()
    runner = run_libfuzzer if args.engine == "libfuzzer" else run_afl
    runner(binary, root, abi, seconds, args.jobs, args.max_len, env, progress)
    elapsed = time.monotonic() - start
    progress.show(force=True)
    if console.is_terminal and not args.quiet:
        print()
    stored = collect(args.engine, binary, root, env)
    before, after = (0, 0)
    if not args.no_merge:
        before, after = merge_corpus(args.engine, binary, root, env, log)
    new = [p for p, is_new in stored if is_new]
    s = progress.stats
    if s["execs"] and elapsed > 0:  # the whole run's rate (fork mode reports per job)
        s["execs_per_sec"] = s["execs"] / elapsed
    log(f"kconform fuzz: {elapsed:.0f} s, {s['execs']} execs, {s['execs_per_sec']:.0f} execs/s, "
        f"coverage {s['coverage']}; corpus {before} -> {after} after merging; "
        f"{len(stored)} finding input(s), {len(new)} new; known findings in {root / 'known.log'}")
    for p in new:
        log(f"  new finding: {os.path.relpath(str(p)[:-1], Path.cwd())}")
    summary = {"engine": args.engine, "target": label, "seconds": round(elapsed, 1), "execs": s["execs"],
               "execs_per_sec": s["execs_per_sec"], "coverage": s["coverage"], "corpus": after,
               "findings": [str(p) for p, _ in stored], "new_findings": [str(p) for p in new]}
    (root / "last-run.json").write_text(json.dumps(summary, indent=2) + "\n")
    return EXIT_VIOLATIONS if new else EXIT_CLEAN
