"""The mutant bench's counting rules (selftest/mutant_ttf.py hunt), with a fake
fuzzer and a fake reference replay: a finding the unmutated build shares does not
count, nor one whose input is a seed's; the time is the counted finding's, however
late in the budget or after a restart; and the plan's slice, --nightly and flags."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness" / "driver"))

from kconform.core.errors import ToolError  # noqa: E402
from kconform.selftest import mutant_ttf as ttf  # noqa: E402
from kconform.selftest.mutant_ttf import Candidate, ProcessEnd  # noqa: E402


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeFuzzer(ttf.Fuzzer):
    """Processes scripted as lists of (at_s, Candidate or "crash" Candidate): each
    process reveals its findings as the clock passes them; a crash ends the process."""

    def __init__(self, clock: Clock, processes: list[list[Candidate]], execs: int = 1000):
        self.clock, self.processes, self.execs = clock, list(processes), execs
        self.pending: list[Candidate] = []
        self.seeds: list[int] = []
        self.dropped: list[bytes] = []
        self.stopped_at: list[float] = []

    def run(self, seconds, seed, stop):
        self.seeds.append(seed)
        script = sorted(self.processes.pop(0) if self.processes else [], key=lambda c: c.at_s)
        end_at = self.clock.t + seconds
        for c in script:
            if c.at_s > end_at:
                break
            self.clock.t = c.at_s
            if c.kind == "crash":
                return ProcessEnd(crash=c, execs=self.execs)
            if self.reveal(c, stop):
                self.stopped_at.append(self.clock.t)
                return ProcessEnd(execs=self.execs)
        self.clock.t = end_at
        return ProcessEnd(execs=self.execs)

    def reveal(self, c, stop):
        """c occurs now: the process stores it; True when the bench ends the process."""
        self.pending.append(c)
        return stop()

    def new_findings(self):
        out, self.pending = self.pending, []
        return out

    def drop_from_corpus(self, data):
        self.dropped.append(data)


def rule(at, sig, data):
    return Candidate(at_s=at, kind="rule", signature=sig, rules=sig.split()[0].split(","), data=data)


def crash(at, data):
    return Candidate(at_s=at, kind="crash", signature="SUMMARY: libFuzzer: deadly signal", rules=["deadly signal"],
                     data=data)


def hunt(fuzzer, clock, on_ref=lambda c: False, seeds=(), budget=60):
    return ttf.hunt(fuzzer, on_ref, {ttf.sha1(s) for s in seeds}, budget, 101, clock=clock)


def test_a_finding_the_reference_shares_does_not_count():
    clock = Clock()
    fz = FakeFuzzer(clock, [[rule(3, "FFA.A mem_share", b"x"), rule(12, "FFA.B mem_reclaim", b"y")]])
    r = hunt(fz, clock, on_ref=lambda c: c.signature.startswith("FFA.A"))
    assert r["found"]["seconds"] == 12 and r["found"]["rules"] == ["FFA.B"]
    assert r["excluded"] == [{"at_s": 3, "signature": "FFA.A mem_share", "why": "on the reference too"}]
    assert fz.stopped_at == [12]  # the process is ended at the finding that counts


def test_every_finding_on_the_reference_means_not_found():
    clock = Clock()
    fz = FakeFuzzer(clock, [[rule(3, "FFA.A mem_share", b"x"), rule(30, "FFA.B mem_reclaim", b"y")]])
    r = hunt(fz, clock, on_ref=lambda c: True)
    assert r["found"] is None and len(r["excluded"]) == 2


class StoreOnceFuzzer(FakeFuzzer):
    """As the real fuzz process stores findings: one input per signature, until the
    bench sets the stored one aside (KCONFORM_FUZZ_REARM)."""

    def __init__(self, clock, processes):
        super().__init__(clock, processes)
        self.stored: set[str] = set()
        self.set_aside_at: list[tuple[float, str]] = []

    def reveal(self, c, stop):
        if stop():  # the bench's poll just before this input runs
            return True
        if c.signature in self.stored:
            return False
        self.stored.add(c.signature)
        return super().reveal(c, stop)

    def set_aside(self, c):
        self.set_aside_at.append((self.clock.t, c.signature))
        self.stored.discard(c.signature)


def test_a_signature_first_met_on_a_seed_is_judged_again_on_a_later_input():
    # The seed's input has the mutant's signature; 6 s later a mutated input has it too.
    clock = Clock()
    fz = StoreOnceFuzzer(clock, [[rule(0.5, "FFA.R2.UNSHARE mem_reclaim2", b"seed-1"),
                                  rule(1.0, "FFA.R2.UNSHARE mem_reclaim2", b"seed-1"),
                                  rule(6.0, "FFA.R2.UNSHARE mem_reclaim2", b"mutated")]])
    r = hunt(fz, clock, seeds=[b"seed-1"])
    assert r["found"] is not None and r["found"]["seconds"] == 6.0
    assert [x["why"] for x in r["excluded"]] == ["a seed's input"]
    assert fz.set_aside_at == [(6.0, "FFA.R2.UNSHARE mem_reclaim2")]  # set aside 1 s after, at the next check


def test_without_set_aside_the_later_input_stays_hidden():
    # What the bench measured before: the fuzz process never stores the signature again.
    clock = Clock()
    fz = StoreOnceFuzzer(clock, [[rule(0.5, "FFA.R2.UNSHARE mem_reclaim2", b"seed-1"),
                                  rule(6.0, "FFA.R2.UNSHARE mem_reclaim2", b"mutated")]])
    fz.set_aside = lambda c: None
    r = hunt(fz, clock, seeds=[b"seed-1"])
    assert r["found"] is None


def test_a_signature_the_reference_always_shares_is_set_aside_ever_more_slowly():
    clock = Clock()
    every_second = [rule(float(t), "FFA.A mem_share", bytes([t])) for t in range(1, 200)]
    fz = StoreOnceFuzzer(clock, [every_second])
    r = hunt(fz, clock, on_ref=lambda c: True, budget=200)
    assert r["found"] is None
    gaps = [b[0] - a[0] for a, b in zip(fz.set_aside_at, fz.set_aside_at[1:])]
    # Excluded at 1 s, set aside 1 s later; the next input is excluded at once and set
    # aside 2 s later, then 4, 8, ... up to the cap.
    assert fz.set_aside_at[:3] == [(2.0, "FFA.A mem_share"), (4.0, "FFA.A mem_share"), (8.0, "FFA.A mem_share")]
    assert gaps[:5] == [2.0, 4.0, 8.0, 16.0, 32.0] and set(gaps[4:]) == {ttf.REARM_MAX_S}
    assert len(r["excluded"]) == len(fz.set_aside_at) + 1  # the last one not yet due at the end


def test_a_finding_whose_input_is_a_seed_does_not_count():
    clock = Clock()
    fz = FakeFuzzer(clock, [[rule(0.5, "FFA.A mem_share", b"seed-1"), rule(20, "FFA.C mem_share", b"mutated")]])
    r = hunt(fz, clock, seeds=[b"seed-1", b"seed-2"])
    assert r["found"]["seconds"] == 20 and r["found"]["rules"] == ["FFA.C"]
    assert r["excluded"][0]["why"] == "a seed's input"


def test_a_seed_is_not_replayed_at_all():
    clock = Clock()
    replayed = []
    fz = FakeFuzzer(clock, [[rule(0.5, "FFA.A mem_share", b"seed-1")]])
    r = hunt(fz, clock, on_ref=lambda c: replayed.append(c) or False, seeds=[b"seed-1"])
    assert r["found"] is None and replayed == []


def test_a_mutant_found_late_in_the_budget_is_timed_right():
    clock = Clock()
    late = [rule(t, "FFA.A mem_share", b"bg%d" % t) for t in (1, 5, 9)] + [rule(57.3, "FFA.Z mem_reclaim", b"z")]
    fz = FakeFuzzer(clock, [late])
    r = hunt(fz, clock, on_ref=lambda c: c.signature.startswith("FFA.A"), budget=60)
    assert r["found"]["seconds"] == 57.3 and r["restarts"] == 0


def test_after_the_budget_is_not_found():
    clock = Clock()
    fz = FakeFuzzer(clock, [[rule(61, "FFA.Z mem_reclaim", b"z")]])
    assert hunt(fz, clock, budget=60)["found"] is None


def test_the_time_runs_on_across_a_restart_after_a_crash():
    """A crash the reference shares: the next process resumes with the time left (a new
    libFuzzer seed), the crashing input out of the corpus; the later finding's time is
    counted from the run's start."""
    clock = Clock()
    fz = FakeFuzzer(clock, [[crash(10, b"boom")], [rule(42, "FFA.Z mem_reclaim", b"z")]])
    r = hunt(fz, clock, on_ref=lambda c: c.kind == "crash")
    assert r["found"]["seconds"] == 42 and r["restarts"] == 1
    assert fz.seeds == [101, 102] and fz.dropped == [b"boom"]
    assert r["excluded"][0]["why"] == "crashes the reference too"
    assert r["execs"] == 2000


def test_a_crash_only_the_mutant_has_is_found():
    clock = Clock()
    fz = FakeFuzzer(clock, [[crash(7.5, b"boom")]])
    r = hunt(fz, clock, on_ref=lambda c: False)
    assert r["found"]["seconds"] == 7.5 and r["found"]["kind"] == "crash"


def test_a_crashing_seed_is_dropped_and_does_not_count():
    clock = Clock()
    fz = FakeFuzzer(clock, [[crash(0.2, b"seed-1")], [rule(5, "FFA.Z mem_reclaim", b"z")]])
    r = hunt(fz, clock, seeds=[b"seed-1"])
    assert fz.dropped == [b"seed-1"] and r["found"]["seconds"] == 5


def test_summarize_median_needs_most_runs():
    tries = [{"found": {"seconds": 4.0, "rules": ["FFA.Z"]}, "execs": 1}, {"found": None, "execs": 1},
             {"found": {"seconds": 9.0, "rules": ["FFA.Y"]}, "execs": 1}]
    s = ttf.summarize("09-x", "reclaim2", "seeds", tries, 60)
    assert s["median"] == 9.0 and s["found_runs"] == 2 and s["rules"] == ["FFA.Y", "FFA.Z"]
    s = ttf.summarize("09-x", "reclaim2", "seeds", tries[1:2] * 2 + tries[:1], 60)
    assert s["median"] is None
    fr = ttf.fractions([s, ttf.summarize("01-y", "stock", "seeds", tries, 60)])
    allrow = [f for f in fr if f["family"] == "all"][0]
    assert (allrow["runs"], allrow["runs_found"], allrow["mutants"], allrow["mutants_found"]) == (6, 3, 2, 1)
    assert allrow["median_s"] is None or allrow["median_s"] > 0


def test_read_signatures_and_stem(tmp_path):
    (tmp_path / ".counts").mkdir()
    (tmp_path / ".counts" / "1.tsv").write_text(
        "execs\t10\n3\tnew\tviolation-FFA.A+FFA.B-mem_share-0123456789abcdef\tFFA.A,FFA.B mem_share el2 debian-7.3.4-4k\n"
        "9\tknown\t-\tFFA.C mem_reclaim el2 debian-7.3.4-4k\n")
    assert ttf.read_signatures(tmp_path) == {
        "violation-FFA.A+FFA.B-mem_share-0123456789abcdef": "FFA.A,FFA.B mem_share"}
    assert ttf.rule_signature_of("violation-FFA.A+FFA.B-mem_share-0123456789abcdef") == "FFA.A,FFA.B mem_share"


def test_seed_baseline_never_matches_fuzz_inputs():
    import fnmatch
    lines = ttf.seed_baseline(["FFA.A"]).splitlines()
    pats = [x.split("\t")[1] for x in lines]
    assert not any(fnmatch.fnmatchcase(ttf.FUZZ_NAME, p) for p in pats)
    assert all(any(fnmatch.fnmatchcase(n, p) for p in pats) for n in ("ffa/checks/map-rx-unaligned-4k", "a", "abc"))


def test_plan_slice_nightly_and_flags():
    p = ttf.plan()
    assert [f"{f}:{m.name[:2]}" for f, m in p["mutants"]] == list(ttf.SLICE_MUTANTS)
    assert (p["corpora"], p["runs"], p["budget"]) == (["seeds"], 1, 30)
    n = ttf.plan(nightly=True)
    fams = {f for f, _ in n["mutants"]}
    assert fams == {"reclaim2", "stock"} and len(n["mutants"]) >= 10 + 4
    assert (n["corpora"], n["runs"], n["budget"]) == (["seeds", "empty"], 3, 300)
    s = ttf.plan(families=["stock"], budget=60)
    assert {f for f, _ in s["mutants"]} == {"stock"} and len(s["mutants"]) >= 10 and s["budget"] == 60
    m = ttf.plan(mutants=["stock:03", "01"], families=["reclaim2"])
    assert [(f, x.name[:2]) for f, x in m["mutants"]] == [("reclaim2", "01"), ("stock", "03")]
    with pytest.raises(ToolError, match="--mutant-family"):
        ttf.plan(families=["nope"])
    with pytest.raises(ToolError, match="--mutant-corpus"):
        ttf.plan(corpora=["nope"])
    with pytest.raises(ToolError, match="--mutants"):
        ttf.plan(mutants=["stock:99"])
    with pytest.raises(ToolError, match="at least 1"):
        ttf.plan(runs=0)


def test_libfuzzer_findings_are_timed_from_the_run_start(tmp_path):
    """The real Fuzzer's findings: each stored .kcsb once, its time its mtime less the
    run's start, its signature from the counts (or its stem before they are flushed)."""
    import os
    fz = ttf.LibFuzzer(Path("/nonexistent"), tmp_path, [], {})
    stem = "violation-FFA.R2.PAGE_INDEX-mem_reclaim2-0123456789abcdef"
    kcsb = fz.findings / (stem + ".kcsb")
    kcsb.write_bytes(b"input")
    os.utime(kcsb, (fz.t0_wall + 17.5, fz.t0_wall + 17.5))
    got = fz.new_findings()
    assert len(got) == 1 and abs(got[0].at_s - 17.5) < 1e-6
    assert got[0].signature == "FFA.R2.PAGE_INDEX mem_reclaim2" and got[0].data == b"input"
    assert fz.new_findings() == []


def test_libfuzzer_set_aside_moves_the_finding_away_and_its_next_input_is_new(tmp_path):
    fz = ttf.LibFuzzer(Path("/nonexistent"), tmp_path, [], {})
    stem = "violation-FFA.R2.UNSHARE-mem_reclaim2-0123456789abcdef"
    for ext, data in ((".kcsb", b"seed"), (".kcs", b"text"), (".jsonl", b"{}"), (".log", b"line")):
        (fz.findings / (stem + ext)).write_bytes(data)
    (first,) = fz.new_findings()
    fz.set_aside(first)
    assert sorted(f.name for f in fz.findings.iterdir() if f.is_file()) == []
    away = sorted(f.name for f in (tmp_path / "excluded").iterdir())
    assert away == [f"{stem}.0{e}" for e in (".jsonl", ".kcs", ".kcsb", ".log")]  # kept, not deleted
    (fz.findings / (stem + ".kcsb")).write_bytes(b"mutated")  # the process stores the next one
    (second,) = fz.new_findings()
    assert second.data == b"mutated"
    fz.set_aside(second)
    assert (tmp_path / "excluded" / f"{stem}.1.kcsb").read_bytes() == b"mutated"


def _scenario(name: bytes, caps: int = 0, ops: bytes = b"\x01\x02\x03") -> bytes:
    return b"KCSN" + bytes([2, 1, caps, 1, len(name)]) + name + ops


def test_a_seed_renamed_by_the_mutator_is_still_a_seed():
    seed = _scenario(b"ffa/checks/map-rx-unaligned-4k", caps=3)
    keys = ttf.seed_keys([seed])
    assert ttf.scenario_key(_scenario(b"fuzz")) in keys                      # renamed, caps cleared
    assert ttf.scenario_key(_scenario(b"fuzz", ops=b"\x01\x02\x04")) not in keys  # a changed op
    assert ttf.scenario_key(b"not a scenario") is None
    clock = Clock()
    fz = FakeFuzzer(clock, [[rule(2, "FFA.A mem_share", _scenario(b"fuzz")),
                             rule(8, "FFA.A mem_share", _scenario(b"fuzz", ops=b"\x09"))]])
    r = ttf.hunt(fz, lambda c: False, keys, 60, 101, clock=clock)
    assert r["found"]["seconds"] == 8 and r["excluded"][0]["why"] == "a seed's input"


def test_bench_rows_and_readme_table(monkeypatch):
    from kconform.commands import bench
    tries = [{"found": {"seconds": 4.0, "rules": ["FFA.Z"]}, "execs": 10, "excluded": [{"why": "x"}]},
             {"found": None, "execs": 20, "excluded": []}]
    results = [ttf.summarize("09-no-total-check", "reclaim2", "seeds", tries, 30),
               ttf.summarize("08-send", "stock", "seeds", tries[1:], 30)]
    doc = {"plan": {}, "results": results, "fractions": ttf.fractions(results), "wall_s": 1}
    monkeypatch.setattr(ttf, "measure", lambda log, **kw: doc)
    rows = bench._mutant_ttf_rows(lambda m: None)
    names = [r["benchmark"] for r in rows]
    assert "fuzzer time to find reclaim2 mutant 09-no-total-check from seeds" in names
    assert rows[1]["median"] is None and "not found within 30 s" in rows[1]["skipped"]
    frac = [r for r in rows if r["benchmark"] == "fuzzer mutants found, both families from seeds"][0]
    assert frac["median"] == round(1 / 3, 3)
    table = bench.ttf_markdown(rows)
    assert "| reclaim2 | 09-no-total-check | seeds | not found | 1/2 | 4 | FFA.Z |" in table  # not most runs
    assert "| stock | 08-send | seeds | not found | 0/1 | - | - |" in table
    assert "| all | seeds | 0/2 | 1/3 (33%) | not found | 30 |" in table


def test_crash_names_are_short():
    line = ("SUMMARY: AddressSanitizer: SEGV /root/.cache/kconform/patched/x-18-y/arch/arm64/kvm/hyp/nvhe/ffa.c:412 "
            "in ffa_do_reclaim")
    assert ttf.crash_name(line) == "CRASH SEGV in ffa_do_reclaim (ffa.c:412)"
    assert ttf.crash_name("SUMMARY: libFuzzer: timeout") == "CRASH timeout"
    assert ttf.crash_name("SUMMARY: libFuzzer: deadly signal") == "CRASH deadly signal"


class EarlyEnd(FakeFuzzer):
    """A fuzzer process that ends at once without a crash (libFuzzer's "no interesting
    inputs were found" from an empty corpus)."""

    def run(self, seconds, seed, stop):
        self.clock.t += 0.3
        return ProcessEnd(execs=2)


def test_a_fuzzer_that_ended_early_is_an_error_not_a_miss():
    clock = Clock()
    with pytest.raises(ToolError, match="did not fuzz"):
        hunt(EarlyEnd(clock, []), clock, budget=60)


def test_the_16k_mutants_are_read_from_each_familys_own_table():
    # The faults that need a host PAGE_SIZE > 4K, as MUTANTS.md (needs) and the stock
    # README (first kill) say: fuzzed at 16K, where they exist.
    assert ttf.sixteen_k_mutants("reclaim2") == {"06-index-host-granule-unchecked", "07-descriptor-granule-4k",
                                                 "08-host-page-rounded-up"}
    assert ttf.sixteen_k_mutants("stock") == {"16-share-range-size-unchecked"}
    assert ttf.mutant_page_size("reclaim2", Path("07-descriptor-granule-4k.patch")) == 16384
    assert ttf.mutant_page_size("reclaim2", Path("09-no-total-check.patch")) == 4096


def test_a_family_table_without_its_page_column_is_an_error_naming_it(tmp_path):
    (tmp_path / "README.md").write_text("| mutant | area | weakens |\n|---|---|---|\n| 01-x | a | b |\n")
    with pytest.raises(ToolError, match=r"README.md: no mutant table with a 'first kill' column"):
        ttf.sixteen_k_mutants("stock", tmp_path)
    (tmp_path / "README.md").write_text("| mutant | first kill |\n|---|---|\n| 01-x | 4K `a` op 1 |\n"
                                         "| 02-y | 16K `b` op 3 |\n")
    assert ttf.sixteen_k_mutants("stock", tmp_path) == {"02-y"}


def test_a_16k_mutant_is_named_so_in_the_readme_table(monkeypatch):
    from kconform.commands import bench
    tries = [{"found": {"seconds": 2.0, "rules": ["FFA.R2.HOST_GRANULE"]}, "execs": 5, "excluded": []}]
    r = ttf.summarize("07-descriptor-granule-4k", "reclaim2", "seeds", tries, 60)
    r["page_size"] = 16384
    doc = {"plan": {}, "results": [r], "fractions": ttf.fractions([r]), "wall_s": 1}
    monkeypatch.setattr(ttf, "measure", lambda log, **kw: doc)
    rows = bench._mutant_ttf_rows(lambda m: None)
    assert "libFuzzer el2-16k from seeds" in rows[0]["how"]
    assert "| reclaim2 | 07-descriptor-granule-4k (16K) | seeds | 2 | 1/1 |" in bench.ttf_markdown(rows)
