"""AFL++'s own multi-instance sync, as harness/fuzz/README.md documents it for
campaigns over several machines: instances sharing one -o folder (-M main, -S
secondaries; on other machines, a folder kept in sync with rsync) import each
other's queue. Here a main instance finds inputs in a tiny target, then a
secondary started on the same output folder imports them: its queue has entries
named ",sync:main". Skipped only if afl-fuzz (or afl-clang-fast) is absent."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not (shutil.which("afl-fuzz") and shutil.which("afl-clang-fast")),
                                reason="afl-fuzz / afl-clang-fast not installed")

TARGET = r"""
#include <stdio.h>
#include <unistd.h>
int main(void) {
  unsigned char b[64];
  ssize_t n = read(0, b, sizeof b);
  int depth = 0;
  if (n > 0 && b[0] == 'k') { depth++;
    if (n > 1 && b[1] == 'c') { depth++;
      if (n > 2 && b[2] == 'f') { depth++;
        if (n > 3 && b[3] == '!') depth++; } } }
  if (n > 4 && b[4] > 128) depth += 10;
  if (n > 5 && (b[5] & 1)) depth += 20;
  printf("%d\n", depth);
  return 0;
}
"""


def afl_env() -> dict:
    return dict(os.environ, AFL_NO_UI="1", AFL_SKIP_CPUFREQ="1", AFL_NO_AFFINITY="1", AFL_BENCH_UNTIL_CRASH="0",
                AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES="1", AFL_FAST_CAL="1", AFL_ALLOW_TMP="1")


def queue(out: Path, name: str) -> list[str]:
    return sorted(p.name for p in (out / name / "queue").glob("id:*"))


def test_two_afl_instances_sync_through_a_shared_output_folder(tmp_path):
    src = tmp_path / "t.c"
    src.write_text(TARGET)
    binary = tmp_path / "t"
    subprocess.run(["afl-clang-fast", "-O1", "-o", str(binary), str(src)], check=True, capture_output=True,
                   env=dict(os.environ, AFL_QUIET="1"), timeout=120)
    seeds = tmp_path / "in"
    seeds.mkdir()
    (seeds / "a").write_bytes(b"aaaaaaaa")
    out = tmp_path / "sync"  # the shared folder (on several machines: rsync'ed between them)
    main = subprocess.Popen(["afl-fuzz", "-i", str(seeds), "-o", str(out), "-M", "main", "-V", "20",
                             "--", str(binary)], env=afl_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)
    second = None
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(queue(out, "main")) < 4:
            time.sleep(0.5)
        found = queue(out, "main")
        assert len(found) >= 2, f"main found nothing new: {found}"
        # AFL_IMPORT_FIRST: the secondary syncs before fuzzing (otherwise it syncs every
        # AFL_SYNC_TIME minutes): main's queue is imported into its own.
        second = subprocess.Popen(["afl-fuzz", "-i", str(seeds), "-o", str(out), "-S", "s1", "-V", "5",
                                   "--", str(binary)], env=dict(afl_env(), AFL_IMPORT_FIRST="1"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and not any(",sync:main" in n for n in queue(out, "s1")):
            time.sleep(0.5)
        imported = [n for n in queue(out, "s1") if ",sync:main" in n]
        assert imported, f"s1 imported nothing from main: {queue(out, 's1')}"
        # What it records of the sync: the last main entry it has seen.
        assert (out / "s1" / ".synced" / "main").exists()
    finally:
        for p in (main, second):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
