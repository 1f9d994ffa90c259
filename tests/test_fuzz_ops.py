"""Unattended fuzz campaigns (kconform fuzz, engine/fuzzers.py, engine/fuzz_findings.py):
the rule-side reader over handwritten counts files, `kconform fuzz status` on
handwritten run folders (running, ended, INCOMPLETE), corpus minimisation that never
loses the corpus, the memory limits passed to each engine, and no orphan process
after SIGTERM (a fake libFuzzer that starts a grandchild)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO, kconform


def counts(findings: Path, pid: int, text: str) -> None:
    d = findings / ".counts"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{pid}.tsv").write_text(textwrap.dedent(text))


def test_sides_reached_is_the_union_over_processes_and_tolerates_other_lines(tmp_path):
    from kconform.engine.fuzz_findings import sides_reached
    f = tmp_path / "findings"
    assert sides_reached(f) == set()  # no .counts at all
    counts(f, 101, """\
        execs\t500
        3\tnew\tviolation-X-bind-abc\tGMEM.BIND.RANGE bind host
        side\tGMEM.BIND.RANGE\tallowed
        side\tGMEM.BIND.RANGE\tforbidden
        side\tGMEM.WRITE.OFFSET\tallowed
        """)
    counts(f, 102, """\
        execs\t7
        side\tGMEM.WRITE.OFFSET\tallowed
        side\tGMEM.WRITE.OFFSET\tforbidden
        side\tGMEM.X\tmaybe
        side\t\tallowed
        side\tGMEM.Y
        side\tGMEM.TORN\tforbi""")  # a torn last line: a process still writing
    counts(f, 103, "execs\t1\n")      # a runner without side lines
    (f / ".counts" / "notes.txt").write_text("side\tGMEM.NOT_TSV\tallowed\n")
    assert sides_reached(f) == {("GMEM.BIND.RANGE", "allowed"), ("GMEM.BIND.RANGE", "forbidden"),
                                ("GMEM.WRITE.OFFSET", "allowed"), ("GMEM.WRITE.OFFSET", "forbidden")}


def test_sides_line_counts_only_the_abis_rules():
    from kconform.engine.fuzz_findings import abi_rules, sides_line
    rules = abi_rules("gmem")
    assert len(rules) > 10 and len(set(rules)) == len(rules) and all(r.startswith("GMEM.") for r in rules)
    reached = {(rules[0], "allowed"), (rules[0], "forbidden"), ("FFA.NOT_OURS", "allowed")}
    assert sides_line(reached, "gmem") == f"rule sides reached: 2 of {2 * len(rules)}"


def make_run(root: Path, rules: list[str], marker: dict | None, live: dict | None, last: dict | None) -> None:
    findings = root / "findings"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "a").write_bytes(b"x" * 100)
    (root / "corpus" / "b").write_bytes(b"y" * 50)
    (root / "artifacts").mkdir()
    (root / "artifacts" / "crash-123").write_bytes(b"z")
    findings.mkdir()
    (findings / "violation-R-op-1.kcsb").write_bytes(b"1")
    (findings / "violation-R-op-1.kcs").write_text("# x\n")
    (findings / "violation-S-op-2.kcsb").write_bytes(b"2")
    (findings / "violation-S-op-2.kcs").write_text("# y\n")
    (root / ".stored-before.json").write_text(json.dumps(["violation-S-op-2.kcsb"]))
    counts(findings, 1, f"execs\t40\n5\tnew\tviolation-R-op-1\tR op host\n2\tnew\tviolation-S-op-2\tS op host\n"
                        f"9\tknown\t-\tK op host\nside\t{rules[0]}\tallowed\nside\t{rules[1]}\tforbidden\n")
    counts(findings, 2, f"execs\t60\nside\t{rules[0]}\tallowed\nside\t{rules[0]}\tforbidden\n")
    if marker is not None:
        (root / "INCOMPLETE").write_text(json.dumps(marker))
    if live is not None:
        (root / "status.json").write_text(json.dumps(live))
    if last is not None:
        (root / "last-run.json").write_text(json.dumps(last))


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_status_of_a_running_campaign(tmp_path):
    from kconform.commands.fuzz import campaign_status, status_text
    from kconform.engine.fuzz_findings import abi_rules
    rules = abi_rules("gmem")
    root = tmp_path / "out" / "host"
    now = time.time()
    make_run(root, rules, {"status": "running", "pid": os.getpid()},
             {"engine": "libfuzzer", "target": "host", "jobs": 2, "deadline": now + 3700, "execs": 90,
              "execs_per_sec": 12.5, "coverage": "10 edges/20 features"}, None)
    doc = campaign_status(root, now=now)
    assert doc["state"] == "running" and doc["running"] and doc["pid"] == os.getpid()
    assert doc["execs"] == 100  # the runners' counts are ahead of the last status.json
    assert doc["execs_per_sec"] == 12.5 and 3690 < doc["seconds_left"] <= 3700
    assert (doc["corpus_files"], doc["corpus_bytes"]) == (2, 150)
    assert (doc["sides_reached"], doc["sides_total"]) == (3, 2 * len(rules))
    assert (doc["findings_new"], doc["findings_stored_before"], doc["findings_known"]) == (1, 1, 1)
    assert doc["crash_inputs_pending"] == 1 and doc["disk_bytes"] > 150
    text = "\n".join(status_text(doc))
    assert "running (pid" in text and "1h01m left" in text and f"rule sides reached: 3 of {2 * len(rules)}" in text
    assert "corpus: 2 file(s), 150 B" in text and "findings: 1 new, 1 stored before, 1 known" in text
    # The same through the command line, from the --out folder, as JSON.
    r = kconform("fuzz", "status", "--json", str(tmp_path / "out"), timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["state"] == "running" and got["sides_reached"] == 3 and got["corpus_files"] == 2


def test_status_of_an_ended_and_of_an_abandoned_campaign(tmp_path):
    from kconform.commands.fuzz import campaign_status
    from kconform.engine.fuzz_findings import abi_rules
    rules = abi_rules("ffa")
    ended = tmp_path / "el2-4k"
    make_run(ended, rules, None, {"deadline": time.time() + 100},
             {"engine": "afl", "target": "el2-4k", "execs": 5000, "execs_per_sec": 80.0, "interrupted": False,
              "findings": [{"signature": "crash asan.x at f ffa.c:1", "count": 1, "status": "new",
                            "path": "p.kcs"}]})
    doc = campaign_status(ended)
    assert doc["state"] == "ended" and not doc["running"] and doc["seconds_left"] is None
    assert doc["execs"] == 5000 and doc["execs_per_sec"] == 80.0 and doc["sides_total"] == 2 * len(rules)
    assert doc["findings_new"] == 2  # the runner's one and the crash path's one (last-run.json)
    gone = tmp_path / "gone" / "host"
    make_run(gone, abi_rules("gmem"), {"status": "running", "pid": dead_pid()}, {"execs": 7}, None)
    doc = campaign_status(gone)
    assert doc["state"].startswith("INCOMPLETE") and "gone" in doc["state"] and not doc["running"]
    r = kconform("fuzz", "status", str(gone), timeout=120)
    assert r.returncode == 0 and "INCOMPLETE" in r.stdout and "rule sides reached: 3 of" in r.stdout, r.stdout
    r = kconform("fuzz", "status", str(tmp_path / "nothing"), timeout=120)
    assert r.returncode == 2 and "is not a folder" in r.stderr


def fake_merger(tmp_path: Path, ok: bool) -> Path:
    """A stand-in fuzz binary for `-merge=1 NEW OLD ...`: keeps OLD's first file, or fails."""
    script = tmp_path / ("merge-ok" if ok else "merge-fail")
    body = 'f=$(ls "$3" | head -n1); cp "$3/$f" "$2/"; exit 0' if ok else 'touch "$2/partial"; exit 3'
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def test_minimisation_swaps_only_after_success_and_recovers_a_half_swap(tmp_path):
    from kconform.engine.fuzzers import merge_corpus, recover_corpus
    root = tmp_path / "run"
    (root / "corpus").mkdir(parents=True)
    for i in range(5):
        (root / "corpus" / f"in{i}").write_bytes(bytes([i]) * 10)
    said = []
    assert merge_corpus("libfuzzer", fake_merger(tmp_path, False), root, dict(os.environ), said.append) == (5, 5)
    assert sorted(p.name for p in (root / "corpus").iterdir()) == [f"in{i}" for i in range(5)]
    assert "failed" in said[0] and not (root / "corpus.merge").exists()
    assert merge_corpus("libfuzzer", fake_merger(tmp_path, True), root, dict(os.environ), said.append) == (5, 1)
    assert [p.name for p in (root / "corpus").iterdir()] == ["in0"]
    assert not (root / "corpus.old").exists() and not (root / "corpus.merge").exists()
    # Killed between the two renames: corpus.old is the corpus.
    (root / "corpus").rename(root / "corpus.old")
    recover_corpus(root)
    assert [p.name for p in (root / "corpus").iterdir()] == ["in0"] and not (root / "corpus.old").exists()
    # Killed after them: corpus.old is the replaced one.
    (root / "corpus.old").mkdir()
    recover_corpus(root)
    assert (root / "corpus").exists() and not (root / "corpus.old").exists()


def test_el2_hangs_cost_seconds_not_tens():
    """An EL2 input runs in well under a millisecond: a stall of the code under test is
    called a hang after 3 s (libFuzzer -timeout, AFL++ -t), the host target keeps 10."""
    from kconform.engine.fuzzers import HANG_SECONDS
    assert HANG_SECONDS["ffa"] == 3 and HANG_SECONDS["gmem"] == 10


def test_memory_limits_reach_each_engine():
    from kconform.engine.fuzzers import asan_options
    opts = dict(o.split("=", 1) for o in asan_options({"ASAN_OPTIONS": "symbolize=1:foo=2"}, 1500).split(":"))
    assert opts["abort_on_error"] == "1" and opts["symbolize"] == "0"  # AFL++ refuses a custom one without them
    assert opts["hard_rss_limit_mb"] == "1500" and opts["max_allocation_size_mb"] == "1500"
    assert opts["foo"] == "2" and opts["detect_leaks"] == "0"


FAKE_LIBFUZZER = """#!/bin/sh
# A stand-in for a libFuzzer binary: records its arguments, starts a child (a process
# in its group, as an ASan symbolizer would be) and prints statistics lines.
echo "$@" >> "$KCONFORM_TEST_ARGS"
echo $$ >> "$KCONFORM_TEST_SELF"
sleep 600 &
echo $! >> "$KCONFORM_TEST_CHILD"
i=0
while true; do i=$((i+1)); printf '#%d\\tpulse  cov: 5 ft: 7 corp: 1/1b exec/s: 100 rss: 30Mb\\n' $i >&2; sleep 0.2; done
"""

DRIVER = """
import sys, time
sys.path.insert(0, sys.argv[1] + "/harness/driver")
from pathlib import Path
from kconform.core import procs
from kconform.core.errors import Interrupted
from kconform.engine.fuzzers import run_libfuzzer
procs.install_signal_handlers()
class P:
    stats = {}
    def show(self): pass
root = Path(sys.argv[2])
try:
    run_libfuzzer(Path(sys.argv[3]), root, "gmem", 300, 2, 4096, dict(__import__("os").environ), P(), rss_limit=777)
except Interrupted as e:
    procs.closing(); procs.end_all()
    print("INTERRUPTED", flush=True)
    sys.exit(e.exit_code)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] != "Z"
    except OSError:
        return False


def test_sigterm_leaves_no_orphan_process(tmp_path):
    """The fuzzer workers run in their own process groups (core/procs.py): SIGTERM to
    kconform ends both workers and every process they started, none survives."""
    fake = tmp_path / "fake-fuzzer"
    fake.write_text(FAKE_LIBFUZZER)
    fake.chmod(0o755)
    root = tmp_path / "run"
    for d in ("corpus", "seeds", "artifacts"):
        (root / d).mkdir(parents=True)
    env = dict(os.environ, KCONFORM_TEST_ARGS=str(tmp_path / "args"), KCONFORM_TEST_CHILD=str(tmp_path / "child"),
               KCONFORM_TEST_SELF=str(tmp_path / "self"))
    p = subprocess.Popen([sys.executable, "-c", DRIVER, str(REPO), str(root), str(fake)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def pids(name):
        f = tmp_path / name
        return [int(x) for x in f.read_text().split()] if f.exists() else []

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(pids("child")) == 2 and len(pids("self")) == 2):
        time.sleep(0.2)
    time.sleep(1)  # the driver reading its statistics lines
    started = pids("child") + pids("self")
    assert len(started) == 4 and all(alive(pid) for pid in started), started
    for args in (tmp_path / "args").read_text().splitlines():
        assert "-rss_limit_mb=777" in args and "-malloc_limit_mb=777" in args and "-fork" not in args
        assert "-timeout=10" in args  # the host target's real KVM calls keep 10 s (fuzzers.HANG_SECONDS)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM and "INTERRUPTED" in out, err
    time.sleep(0.5)
    survivors = [pid for pid in started if alive(pid)]
    for pid in survivors:  # do not leave them behind if the test fails
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"orphans after SIGTERM: {survivors}"


def processes_of(marker: str) -> list[int]:
    """The processes whose environment names marker (every child of a campaign inherits
    KCONFORM_FUZZ_FINDINGS=<its folder>/findings)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if marker.encode() in (d / "environ").read_bytes() and alive(int(d.name)):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@pytest.mark.slow
def test_sigterm_to_a_real_campaign_leaves_no_process(tmp_path):
    """`kconform fuzz` with two libFuzzer fork jobs, SIGTERM while it fuzzes: exit 143, an
    interrupted summary, and no process of the campaign left. On el2 (the real ffa.c), which
    every machine can run: the process handling is the driver's, whatever the target."""
    from conftest import KCONFORM
    out = tmp_path / "camp"
    p = subprocess.Popen([str(KCONFORM), "fuzz", "--engine", "libfuzzer", "--target", "el2", "--time", "300s",
                          "--jobs", "2", "--out", str(out), "-q"], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    marker = f"KCONFORM_FUZZ_FINDINGS={out / 'el2-4k' / 'findings'}"
    deadline = time.monotonic() + 900
    seen: set[int] = set()
    while time.monotonic() < deadline and p.poll() is None:
        seen |= set(processes_of(marker))
        if len(seen) >= 3:  # libFuzzer's main process and its fork jobs
            break
        time.sleep(0.5)
    time.sleep(2)
    seen |= set(processes_of(marker))
    assert len(seen) >= 2, "the campaign never started its fuzzer"
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "INTERRUPTED after" in stdout, stdout[-3000:]
    time.sleep(1)
    left = processes_of(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the campaign left after SIGTERM: {left}"
    doc = json.loads((out / "el2-4k" / "last-run.json").read_text())
    assert doc["interrupted"] is True and "sides_reached" in doc


def test_a_hang_that_does_not_reproduce_alone_is_stored_and_says_so(tmp_path):
    """The engine called an input a hang (3 s on el2); replayed alone it ends at once:
    it is still stored (a finding is never dropped), and its .kcs says the replay did
    not confirm it (a stalled machine, or a hang that depends on the inputs before it)."""
    from kconform.engine import fuzz_findings
    quick = tmp_path / "quick-runner"
    quick.write_text("#!/bin/sh\nexit 0\n")
    quick.chmod(0o755)
    path, new = fuzz_findings.store_finding(quick, b"KCSB not really", "timeout", tmp_path / "findings",
                                            dict(os.environ))
    assert new and path.name.startswith("timeout-")
    head = path.with_suffix(".kcs").read_text()
    assert "# replay: NOT CONFIRMED: alone, the input ran to its end in" in head, head
    # A crash replayed the same way carries no such line (only hangs are re-judged by time).
    path2, _ = fuzz_findings.store_finding(quick, b"other bytes", "crash", tmp_path / "findings2", dict(os.environ))
    assert "NOT CONFIRMED" not in path2.with_suffix(".kcs").read_text()
