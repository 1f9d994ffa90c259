"""libFuzzer as in-process workers (engine/libfuzzer_workers.py), with a stand-in
binary that prints libFuzzer's own lines: a worker a crash ended is restarted with
the time left and its executions still counted; a corpus input that kills the
process on loading is moved to quarantine/ (not deleted) so the restart can go on;
a process that dies before loading the corpus, again and again, is an error, not
an endless loop; several workers share one corpus and reload it."""

import os
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "harness" / "driver"))

from kconform.core.errors import ToolError  # noqa: E402
from kconform.engine.fuzzers import run_libfuzzer  # noqa: E402

FAKE = r"""#!/bin/sh
# A stand-in for a libFuzzer binary (in-process mode): records its arguments and
# prints libFuzzer's status lines (tab after the count, as libFuzzer prints them).
corpus=$1
for a in "$@"; do
  case $a in -artifact_prefix=*) art=${a#-artifact_prefix=};; -max_total_time=*) t=${a#-max_total_time=};; esac
done
echo "$@" >> "$KC_ARGS"
case "$KC_MODE" in
crash-once)
  if mkdir "$KC_STATE" 2>/dev/null; then
    printf '#2\tINITED cov: 5 ft: 7 corp: 1/1b exec/s: 0 rss: 30Mb\n' >&2
    printf '#700\tNEW    cov: 6 ft: 8 corp: 2/2b lim: 4 exec/s: 350 rss: 30Mb\n' >&2
    printf 'mutated' > "${art}crash-1"
    echo "==1==ERROR: AddressSanitizer: SEGV on unknown address" >&2
    echo "artifact_prefix='$art'; Test unit written to ${art}crash-1" >&2
    echo "stat::number_of_executed_units: 777" >&2
    exit 1
  fi;;
seed-crash)
  bad=""
  for d in "$1" "$2"; do [ -e "$d/bad" ] && bad="$d/bad"; done
  if [ -n "$bad" ]; then
    cp "$bad" "${art}crash-2"
    echo "==1== ERROR: libFuzzer: deadly signal" >&2
    echo "artifact_prefix='$art'; Test unit written to ${art}crash-2" >&2
    exit 1
  fi;;
always-dies)
  echo "==1== ERROR: libFuzzer: deadly signal" >&2
  exit 1;;
esac
printf '#2\tINITED cov: 5 ft: 7 corp: 1/1b exec/s: 0 rss: 30Mb\n' >&2
i=0
while [ $i -lt $((t * 5)) ]; do
  i=$((i + 1))
  printf '#%d\tpulse  cov: 5 ft: 7 corp: 1/1b lim: 4 exec/s: 50 rss: 30Mb\n' $((i * 10)) >&2
  sleep 0.2
done
echo "Done $((i * 10)) runs in $t second(s)" >&2
echo "stat::number_of_executed_units: $((i * 10))" >&2
exit 0
"""


class Progress:
    def __init__(self):
        self.stats = {}

    def show(self):
        pass


def run(tmp_path, mode: str, seconds: int, jobs: int = 1):
    fake = tmp_path / "fake-libfuzzer"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    root = tmp_path / "run"
    for d in ("corpus", "seeds", "artifacts"):
        (root / d).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, KC_MODE=mode, KC_ARGS=str(tmp_path / "args"), KC_STATE=str(tmp_path / "state"))
    progress = Progress()
    run_libfuzzer(fake, root, "ffa", seconds, jobs, 4096, env, progress, rss_limit=777)
    return root, progress.stats, (tmp_path / "args").read_text().splitlines()


def test_a_crashed_worker_is_restarted_with_the_time_left_and_its_executions_counted(tmp_path):
    root, stats, calls = run(tmp_path, "crash-once", 4)
    assert len(calls) == 2, calls
    assert stats["restarts"] == 1
    first, second = (int(c.split("-max_total_time=")[1].split()[0]) for c in calls)
    assert first == 4 and second <= 4
    # The crashed process's final count (777) plus the second's: nothing lost.
    assert stats["execs"] > 777, stats
    assert (root / "artifacts" / "crash-1").read_bytes() == b"mutated"  # for the crash path (fuzz_findings)
    assert "-fork" not in calls[0] and "-reload=0" in calls[0]  # one worker: nothing to reload
    for flag in ("-rss_limit_mb=777", "-malloc_limit_mb=777", "-timeout=3", "-print_final_stats=1"):
        assert flag in calls[0].split()
    log = (root / "fuzz.log").read_text()
    assert "Test unit written to" in log and "INITED" in log


def test_a_corpus_input_that_kills_the_process_is_quarantined_not_deleted(tmp_path):
    corpus = tmp_path / "run" / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "bad").write_bytes(b"kills it")
    (corpus / "good").write_bytes(b"fine")
    root, stats, calls = run(tmp_path, "seed-crash", 3)
    assert len(calls) == 2 and stats["restarts"] == 1
    assert sorted(p.name for p in corpus.iterdir()) == ["good"]
    assert (root / "quarantine" / "corpus-bad").read_bytes() == b"kills it"
    assert "quarantine" in (root / "fuzz.log").read_text()


def test_a_process_that_keeps_dying_before_loading_the_corpus_is_an_error(tmp_path):
    with pytest.raises(ToolError, match="died 3 times before loading the corpus"):
        run(tmp_path, "always-dies", 30)
    assert len((tmp_path / "args").read_text().splitlines()) == 3


def test_workers_share_one_corpus_and_reload_it(tmp_path):
    root, stats, calls = run(tmp_path, "normal", 2, jobs=2)
    assert len(calls) == 2
    for c in calls:
        args = c.split()
        assert args[0] == str(root / "corpus") and args[1] == str(root / "seeds") and "-reload=5" in args
    assert stats["execs"] >= 2 * 50 and stats["restarts"] == 0  # both processes' counts summed
    log = (root / "fuzz.log").read_text()
    assert "[0] " in log and "[1] " in log


def test_two_workers_dying_on_the_same_corpus_input_go_on(tmp_path):
    """Both workers load the same corpus: the one that finds the input already moved
    by the other finds it in quarantine/, which is not a death without a cause."""
    corpus = tmp_path / "run" / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "bad").write_bytes(b"kills it")
    root, stats, calls = run(tmp_path, "seed-crash", 3, jobs=2)
    assert [p.name for p in (root / "quarantine").iterdir()] == ["corpus-bad"] and not (corpus / "bad").exists()
    assert 1 <= stats["restarts"] <= 2


def test_the_log_is_rotated_so_a_long_run_stays_bounded(tmp_path, monkeypatch):
    from kconform.engine import libfuzzer_workers
    monkeypatch.setattr(libfuzzer_workers, "LOG_LIMIT", 400)
    root, _, _ = run(tmp_path, "normal", 2)
    assert (root / "fuzz.log.1").exists()
    assert (root / "fuzz.log").stat().st_size <= 400 + 200 and (root / "fuzz.log.1").stat().st_size <= 400 + 200



def test_a_seed_that_killed_this_build_is_left_out_of_its_next_runs(tmp_path):
    """seeds/ is remade from the corpora every run: a seed that killed the build while
    loading is quarantined once, and the next run of the same build leaves it out from
    the start (no timeout, no restart); a different build gets it again."""
    seeds = tmp_path / "run" / "seeds"
    seeds.mkdir(parents=True)
    (seeds / "bad").write_bytes(b"kills it")
    root, stats, _ = run(tmp_path, "seed-crash", 4)
    assert stats["restarts"] == 1 and (root / "quarantine" / "seeds-bad").exists()
    (seeds / "bad").write_bytes(b"kills it")  # as make_seeds remakes it
    root, stats, _ = run(tmp_path, "seed-crash", 4)
    assert stats["restarts"] == 0 and not (seeds / "bad").exists()
    assert "left out" in (root / "fuzz.log").read_text()
    # Another build (the stand-in binary changed) is not assumed to die on it.
    (seeds / "bad").write_bytes(b"kills it")
    (tmp_path / "fake-libfuzzer").unlink()
    global FAKE
    saved, FAKE = FAKE, FAKE + "# another build\n"
    try:
        root, stats, _ = run(tmp_path, "seed-crash", 4)
    finally:
        FAKE = saved
    assert stats["restarts"] == 1
