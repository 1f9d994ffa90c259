"""Findings never stop the fuzzer: libFuzzer on the in-process EL2 target (stock
Debian 7.3 ffa.c, 4K) with seeds that have genuine findings keeps executing past
them (-runs=N completes), stores each signature once (a second process, the
next run, stores nothing again), counts a baselined one without storing it; a
crash of the process still goes through libFuzzer's crash path and the driver
stores its input once per signature."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import KCONFORM, REPO, default_tree_missing

RUNS = 300


@pytest.fixture(scope="module")
def fuzz_el2():
    """kconform-fuzz-el2-4k of the stock tree. Without the tree (not cached, no network)
    a skip; a build that fails (the code under test does not compile) fails."""
    from kconform.engine.fuzzers import build_harness
    why = default_tree_missing()
    if why:
        pytest.skip(why)
    return build_harness("libfuzzer", "el2-4k", log=lambda m: None)


def seed(engine, tmp_path: Path, name: str) -> bytes:
    """The corpus scenario `name` in the binary form the fuzz runner reads."""
    src = next(f for f in sorted((REPO / "corpora" / "ffa").glob("*.kcs")) if f"name {name}\n" in f.read_text())
    out = tmp_path / ("conv-" + name.replace("/", "_"))
    out.mkdir()
    engine.to_binary([str(src)], out)
    # The converter writes one file per scenario, in file order: pick ours by its name inside.
    for f in sorted(out.iterdir()):
        if name.encode() in f.read_bytes():
            return f.read_bytes()
    raise AssertionError(f"{name} not converted")


def env_for(findings: Path, baseline: str = "") -> dict:
    return dict(os.environ, KCONFORM_FUZZ_FINDINGS=str(findings), KCONFORM_FUZZ_BASELINE=baseline,
                KCONFORM_FUZZ_KNOWN_RULES="")


def fuzz(binary: Path, corpus: Path, env: dict, tmp_path: Path, runs: int = RUNS):
    return subprocess.run([str(binary), f"-runs={runs}", "-seed=1", f"-artifact_prefix={tmp_path}/art-",
                           str(corpus)], capture_output=True, text=True, env=env, timeout=600)


def test_a_finding_does_not_stop_the_fuzzer_and_is_stored_once(fuzz_el2, engine, tmp_path):
    from kconform.engine.fuzz_findings import read_counts
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "bit31").write_bytes(seed(engine, tmp_path, "ffa/version/bit31-4k"))
    findings = tmp_path / "findings"
    r = fuzz(fuzz_el2, corpus, env_for(findings), tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"Done {RUNS} runs" in r.stderr, r.stderr[-3000:]
    assert not list(tmp_path.glob("art-*")), "no crash artifact: a finding is not a crash"
    stored = sorted(findings.glob("violation-FFA.VERSION.BIT31*.kcsb"))
    assert len(stored) >= 1, sorted(p.name for p in findings.iterdir())
    execs, sigs = read_counts(findings)
    assert execs >= RUNS - 10
    bit31 = {s: c for s, c in sigs.items() if "FFA.VERSION.BIT31" in s[0]}
    assert bit31 and not any(known for _, known in bit31)
    assert sum(c["count"] for c in bit31.values()) >= 2, "met more than once, stored once"
    # One .kcsb per signature, and every stored stem is one of the counted signatures.
    assert sorted(p.name for p in findings.glob("*.kcsb")) == sorted(
        {c["stem"] + ".kcsb" for c in sigs.values() if c["stem"]})
    kcs = stored[0].with_suffix(".kcs").read_text()
    assert "# violation found by kconform fuzz: FFA.VERSION.BIT31" in kcs and "kconform-scenario 1" in kcs
    assert '"type":"target"' in stored[0].with_suffix(".jsonl").read_text().replace(" ", "")

    # A second process on the same folder (a fork job, a restart, the next run): counted, not stored again.
    before = {p.name: p.stat().st_mtime_ns for p in findings.iterdir() if p.is_file()}
    r = fuzz(fuzz_el2, corpus, env_for(findings), tmp_path, runs=50)
    assert r.returncode == 0, r.stderr[-3000:]
    after = {p.name: p.stat().st_mtime_ns for p in findings.iterdir() if p.is_file()}
    for name, mtime in before.items():
        assert after[name] == mtime, f"{name} overwritten"
    _, sigs2 = read_counts(findings)
    assert sum(c["count"] for s, c in sigs2.items() if "FFA.VERSION.BIT31" in s[0]) > \
        sum(c["count"] for c in bit31.values()), "the second process counted its duplicates"


def test_a_baselined_finding_is_counted_not_stored(fuzz_el2, engine, tmp_path):
    from kconform.engine.fuzz_findings import read_counts
    case = tmp_path / "bit31"
    case.write_bytes(seed(engine, tmp_path, "ffa/version/bit31-4k"))
    findings = tmp_path / "findings"
    r = subprocess.run([str(fuzz_el2), str(case)], capture_output=True, text=True, timeout=120,
                       env=env_for(findings, "FFA.VERSION.BIT31\t*"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert not list(findings.glob("*FFA.VERSION.BIT31*"))
    _, sigs = read_counts(findings)
    bit31 = [(known, c) for (s, known), c in sigs.items() if s.startswith("FFA.VERSION.BIT31 ")]
    assert bit31 and all(known and c["stem"] is None for known, c in bit31), sigs


def test_a_crash_goes_through_the_crash_path_and_is_stored_once(fuzz_el2, engine, tmp_path):
    """ffa/el3-reclaim/frag1-huge-4k crashes the stock handler (CRASH.SIGNAL/SANITIZER in
    ci/known-findings.json): libFuzzer writes it as a crash artifact, the driver stores it
    once under its signature, and a second crashing input with that signature is counted."""
    from kconform.engine import fuzz_findings
    data = seed(engine, tmp_path, "ffa/el3-reclaim/frag1-huge-4k")
    root = tmp_path / "run"
    (root / "artifacts").mkdir(parents=True)
    corpus = tmp_path / "corpus"  # a folder: libFuzzer writes a crash artifact for it (not for a file)
    corpus.mkdir()
    (corpus / "huge").write_bytes(data)
    env = env_for(root / "findings")
    r = subprocess.run([str(fuzz_el2), "-runs=1", f"-artifact_prefix={root / 'artifacts'}/", str(corpus)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode != 0, "the input crashes the process"
    arts = list((root / "artifacts").glob("crash-*"))
    assert len(arts) == 1, r.stderr[-3000:]
    got = fuzz_findings.collect(fuzz_el2, root, env)
    assert len(got) == 1
    path, new, sig = got[0]
    assert new and path.name.startswith("crash-") and path.name.endswith(".kcsb"), path
    # Signed by the frames inside the code under test (the stock ffa.c), not by our runner's.
    assert sig.startswith("crash asan.") and " ffa.c:" in sig and "fuzz_runner" not in sig, sig
    assert path.read_bytes() == data and path.with_suffix(".kcs").exists() and path.with_suffix(".log").exists()
    # The same input again, and another input with the same crash: counted, not stored again.
    (root / "artifacts" / "crash-again").write_bytes(data)
    other = data  # the 16K variant does not run on 4K; perturb the name only (same ops, same crash)
    renamed = other.replace(b"frag1-huge-4k", b"frag1-huge-4K")
    assert renamed != other
    (root / "artifacts" / "crash-other").write_bytes(renamed)
    got = fuzz_findings.collect(fuzz_el2, root, env)
    assert [(p, n, s) for p, n, s in got] == [(path, False, sig), (path, False, sig)]
    assert len(list((root / "findings").glob("*.kcsb"))) == 1


@pytest.mark.slow
def test_sigterm_ends_the_fuzzer_with_its_summary(fuzz_el2, tmp_path):
    """`kconform fuzz` on SIGTERM: the fuzzer ended, a summary of what ran printed and
    written (last-run.json, interrupted), exit 143."""
    out = tmp_path / "fuzz"
    p = subprocess.Popen([str(KCONFORM), "fuzz", "--engine", "libfuzzer", "--target", "el2", "--time", "300s",
                          "--out", str(out), "-q"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    log = out / "el2-4k" / "fuzz.log"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and p.poll() is None:
        if log.exists() and "#" in log.read_text() and (out / "el2-4k" / "findings" / ".counts").exists():
            break
        time.sleep(1)
    time.sleep(5)
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "INTERRUPTED after" in stdout and "findings:" in stdout, stdout[-3000:]
    doc = json.loads((out / "el2-4k" / "last-run.json").read_text())
    assert doc["interrupted"] is True and doc["runner_execs"] > 0, doc
