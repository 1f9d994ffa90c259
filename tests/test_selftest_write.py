"""`kconform selftest mutants --abi gmem`: the guest_memfd write() kill matrix inside QEMU.

Needs QEMU, the Debian 7.3 kernel and tree (cache or network) and the kernel build
packages; skips otherwise. The full matrix runs: a cold kernel build (~5-10 min on
2 cores, shared with tests/test_qemu.py's patched build) and then, per mutant, an
incremental build (guest_memfd.o and the link) and a boot that runs the guest_memfd
suite. A mutant that survives is a hole in the suite that CI must show.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import is_nightly, kconform, kill_matrix
from test_qemu import _kernel_build_missing


def _matrix(tmp_path):
    return kill_matrix(tmp_path, "gmem")


WRITE_SLICE = ("01", "06", "12", "13")

# Each mutant's fault and a rule that must catch it (targets/qemu/write/MUTANTS.md).
EXPECTED_KILLERS = {
    "01": "GMEM.WRITE.ALIGN", "02": "GMEM.WRITE.ALIGN", "03": "GMEM.WRITE.EOF",
    "04": "GMEM.WRITE.SHARED_ONLY", "05": "GMEM.LSEEK.SEEKABLE", "06": "GMEM.WRITE.FLAG_REQUIRED",
    "07": "GMEM.WRITE.SRC_FAULT", "08": "GMEM.WRITE.SRC_FAULT", "09": "GMEM.LSEEK.SEEKABLE",
    "10": "GMEM.MMAP.CONTENT", "11": "GMEM.TIMES.WRITE", "12": "GMEM.CONTENT.FOREIGN",
    "13": "GMEM.CONCURRENT.LINEARIZABLE",
}


@pytest.mark.network
def test_every_write_mutant_is_killed_inside_qemu(tmp_path):
    why = _kernel_build_missing()
    if why:
        pytest.skip(why)
    # Without KCONFORM_NIGHTLY a fixed slice (the two that need the content and
    # concurrency oracles, and two of the ABI checks): each mutant is a kernel
    # build and boots; the whole matrix is the nightly run's.
    only = [] if is_nightly() else ["--only", ",".join(WRITE_SLICE)]
    r = kconform("selftest", "mutants", "--abi", "gmem", *only, "--format", "json", "--report-dir", str(tmp_path),
                 timeout=3600)
    m = _matrix(tmp_path)
    assert m["controls"]["stock"]["ok"], m["controls"]["stock"]
    assert m["controls"]["reference"]["ok"], m["controls"]["reference"]
    survivors = [x["mutant"] for x in m["mutants"] if x["status"] != "killed"]
    assert r.returncode == 0 and not survivors, f"survivors: {survivors}\n{r.stderr[-2000:]}"
    assert m["total"] >= 13 if is_nightly() else m["total"] == len(WRITE_SLICE)
    by = {x["mutant"][:2]: x for x in m["mutants"]}
    for n, rule in EXPECTED_KILLERS.items():
        if n not in by and not is_nightly():
            continue
        assert rule in by[n]["rules"], (n, by[n]["rules"])
    assert all(x["time_to_kill"] is not None and x["time_to_kill"] > 0 for x in m["mutants"])


# --- the kill decision itself, on made-up runs (no QEMU) ------------------------------

def _finding(rule, scenario, file, index, op):
    from kconform.engine.verdicts import Finding
    return Finding(rule=rule, target="qemu", release="7.3.4", scenario=scenario, file=file, index=index,
                   op=op, call="write", expected=["EINVAL"], observed="ok 4096")


def test_first_kill_is_the_earliest_in_pack_order_and_timed_from_its_begin():
    from kconform.selftest import write
    run = SimpleNamespace(findings=[_finding("GMEM.WRITE.EOF", "b", "f2.kcs", 0, 3),
                                    _finding("GMEM.WRITE.ALIGN", "a", "f1.kcs", 1, 5),
                                    _finding("GMEM.WRITE.ALIGN", "a", "f1.kcs", 1, 2)])
    boot = SimpleNamespace(started=100.0, ended=130.0)
    g = SimpleNamespace(began={0: 2.0, 1: 2.5, 2: 9.0}, boots=[boot])
    where = {("f1.kcs", 0): 0, ("f1.kcs", 1): 1, ("f2.kcs", 0): 2}
    f, text, t = write.first_kill(run, g, where)
    assert (f.rule, f.op, t) == ("GMEM.WRITE.ALIGN", 2, 2.5)
    assert text == "a op 2 (GMEM.WRITE.ALIGN)"


def test_a_run_without_findings_kills_nothing():
    from kconform.selftest import write
    run = SimpleNamespace(findings=[])
    g = SimpleNamespace(began={}, boots=[SimpleNamespace(started=0.0, ended=1.0)])
    assert write.kills(run) == []
    assert write.first_kill(run, g, {}) == (None, "", None)


def test_a_guest_crash_after_the_last_begin_is_timed_at_the_end_of_the_boot():
    from kconform.selftest import write
    run = SimpleNamespace(findings=[_finding("QEMU.PANIC", "x", "f9.kcs", 0, -1)])
    boots = [SimpleNamespace(started=10.0, ended=14.0), SimpleNamespace(started=15.0, ended=21.5)]
    g = SimpleNamespace(began={}, boots=boots)
    f, _text, t = write.first_kill(run, g, {("f9.kcs", 0): 7})
    assert f.rule == "QEMU.PANIC" and t == 11.5
