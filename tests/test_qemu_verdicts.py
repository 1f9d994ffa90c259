"""`run --target qemu` (guest_memfd in a booted x86 kernel) accounts for every scenario it
is given, as qemu-arm64 does (targets/qemu/replay.py no_record()), without booting QEMU:
the boot is replaced by one that feeds the agent's frames to the driver; the replay through
kconform-runner is real.

- a scenario whose op frames came back but not its end frame was judged only up to its
  last op: a QEMU.NO-RECORD finding naming that op;
- a scenario no frame came back for is one too;
- so is every scenario the run never reached because its boots were used up (MAX_BOOTS);
- a `skip` frame (capabilities the kernel lacks) is `unsupported`, not a finding;
- each op frame is placed by its op index "i": one lost (or repeated, out of order) in
  the middle of a scenario whose end frame came back cuts it there, the ops before it
  judged and the rest a QEMU.NO-RECORD finding naming the op frame, not the next op's
  outcome judged as its; an op frame without "i" (an older agent) is an error.
"""

from __future__ import annotations

import time

import pytest

from kconform.core.errors import ToolError
from kconform.sources.kernel_image import Kernel
from kconform.targets.qemu import guest
from kconform.targets.qemu.boot import Boot, Crash
from kconform.targets.qemu.replay import place_ops, replay_guest

SCENARIOS = "".join(f"""kconform-scenario 1
abi gmem
name t/create-{n}
requires gmem
create_vm
create_gmem vm=0 size=0x200000 flags=0

""" for n in range(3)) + """kconform-scenario 1
abi gmem
name t/needs-write
requires gmem mmap init_shared write
create_vm
create_gmem vm=0 size=0x4000 flags=MMAP|INIT_SHARED|WRITE
"""

PROBE = {"t": "probe", "ok": True, "release": "7.3.4+deb13-amd64",
         "profile": {"write_abi": False, "page_size": 4096, "supported_flags": [3, 0],
                     "vm_types": 1, "user_memory2": True, "gmem_on_vm_type": [True, False]},
         "caps": [["KVM_CAP_GUEST_MEMFD_FLAGS", 3]], "cap_bits": 23}


def frames(s: int, ops: int = 2, end: bool = True) -> list[dict]:
    out = [{"t": "begin", "s": s, "name": f"t/create-{s}"}]
    out += [{"t": "op", "s": s, "i": i, "k": 0, "v": 0, "a": 0} for i in range(ops)]
    return out + ([{"t": "end", "s": s}] if end else [])


@pytest.fixture
def fake_guest(tmp_path, monkeypatch, engine):
    """run_guest with its initramfs and boot replaced: boots is a list the test fills with
    (frames, crash-or-None) per boot."""
    monkeypatch.setattr(guest, "build_initramfs", lambda *a: tmp_path / "initrd")
    boots: list[tuple[list[dict], tuple | None]] = []
    seen: list[int] = []

    def boot_once(kernel, initrd, work, accel, start_from, log, on_record, on_tick=None):
        seen.append(start_from)
        records, crash = boots[len(seen) - 1]
        console = work / f"console-{len(seen) - 1}.log"
        console.write_text("")
        for rec in records:
            on_record(rec)
        now = time.monotonic()
        return Boot(records, console, console, now, now, now, 0, Crash(*crash, console) if crash else None, 0, 0)

    monkeypatch.setattr(guest, "boot_once", boot_once)
    scen = tmp_path / "t.kcs"
    scen.write_text(SCENARIOS)
    kernel = Kernel(image=tmp_path / "bzImage", release="7.3.4+deb13-amd64", source="test", modules=())

    def run(max_boots: int = guest.MAX_BOOTS):
        monkeypatch.setattr(guest, "MAX_BOOTS", max_boots)
        work = tmp_path / f"work-{len(seen)}"
        work.mkdir()
        g = guest.run_guest(engine, [str(scen)], kernel, work, "tcg", lambda m: None)
        return g, replay_guest(engine, [str(scen)], g, work / "verdicts.jsonl", lambda m: None)

    return boots, seen, run


def no_record(run) -> dict[str, str]:
    return {f.scenario: f.observed for f in run.findings if f.rule == "QEMU.NO-RECORD"}


def test_every_scenario_accounted_for_passes(fake_guest):
    boots, _, run = fake_guest
    boots.append(([{"t": "hello"}, PROBE, *frames(0), *frames(1), *frames(2),
                   {"t": "skip", "s": 3, "missing": 8}, {"t": "done", "scenarios": 3, "ops": 6, "seconds": 0.1}],
                  None))
    g, r = run()
    assert g.total == 4 and g.completed == {0, 1, 2} and g.skipped == {3}
    assert not r.findings and r.summary["no_record"] == 0
    assert r.counts["pass"] == 6 and r.counts["unsupported"] == 2


def test_a_scenario_without_its_end_frame_or_any_frame_is_a_finding(fake_guest):
    boots, _, run = fake_guest
    # Scenario 1's second op and its end frame are lost; nothing of scenario 2 comes back.
    boots.append(([{"t": "hello"}, PROBE, *frames(0), *frames(1, ops=1, end=False),
                   {"t": "skip", "s": 3, "missing": 8}, {"t": "done", "scenarios": 3, "ops": 6, "seconds": 0.1}],
                  None))
    _, r = run()
    lost = no_record(r)
    assert set(lost) == {"t/create-1", "t/create-2"}
    assert "not its end frame: judged only up to its op 0" in lost["t/create-1"]
    assert "no frame for it came back" in lost["t/create-2"]
    assert r.summary["no_record"] == 2
    assert {f.kind for f in r.findings} == {"no-record"}


def test_scenarios_left_when_the_boots_are_used_up_are_findings(fake_guest):
    boots, seen, run = fake_guest
    # Each boot panics in the scenario it starts with; two boots allowed.
    boots.append(([{"t": "hello"}, PROBE, *frames(0, ops=1, end=False)], ("panic", "Kernel panic", 0, 1)))
    boots.append(([{"t": "hello"}, PROBE, *frames(1, ops=1, end=False)], ("panic", "Kernel panic", 1, 1)))
    g, r = run(max_boots=2)
    assert seen == [0, 1]
    assert g.ended is not None and g.ended[0] == 2
    rules = {(f.rule, f.scenario) for f in r.findings}
    # the two crashes at their scenarios, and the two never reached
    assert {("QEMU.PANIC", "t/create-0"), ("QEMU.PANIC", "t/create-1")} <= rules
    lost = no_record(r)
    assert set(lost) == {"t/create-2", "t/needs-write"}
    assert all("2 boots (MAX_BOOTS) were used up" in why for why in lost.values())


# Four ops; the third fails (a guest_memfd of size 0): an op frame out of its place
# would judge an EINVAL as a create that succeeds, or the reverse.
LOST_OP = """kconform-scenario 1
abi gmem
name t/lost-op
requires gmem
create_vm
create_gmem vm=0 size=0x200000 flags=0
create_gmem vm=0 size=0 flags=0
create_gmem vm=0 size=0x200000 flags=0
"""
OUTCOMES = [(0, 0), (0, 0), (1, 22), (0, 0)]      # (kind, value): ok, ok, EINVAL, ok


def lost_op_frames(order: list[int]) -> list[dict]:
    """Scenario 0's frames with op frames of the given op indices, in that order."""
    return ([{"t": "begin", "s": 0, "name": "t/lost-op"}]
            + [{"t": "op", "s": 0, "i": i, "k": OUTCOMES[i][0], "v": OUTCOMES[i][1], "a": 0} for i in order]
            + [{"t": "end", "s": 0}])


def test_every_op_frame_back_is_judged_whole(fake_guest, tmp_path):
    boots, _, run = fake_guest
    (tmp_path / "t.kcs").write_text(LOST_OP)
    boots.append(([{"t": "hello"}, PROBE, *lost_op_frames([0, 1, 2, 3])], None))
    _, r = run()
    assert not r.findings and r.counts["pass"] == 4


@pytest.mark.parametrize("order, observed", [
    ([0, 2, 3], "its op 1 frame was lost, its op 2 frame came in its place"),
    ([0, 0, 1, 2], "its op 1 frame did not come next (a frame lost, repeated or out of order), "
                      "its op 0 frame came in its place"),
], ids=["lost", "repeated"])
def test_an_op_frame_lost_or_repeated_cuts_the_scenario_there(fake_guest, tmp_path, order, observed):
    """The end frame came back, so only the op indices tell: op 0 is judged, op 1 on
    is a QEMU.NO-RECORD finding naming op 1's frame; no op's outcome is judged as
    another's (no false violation)."""
    boots, _, run = fake_guest
    (tmp_path / "t.kcs").write_text(LOST_OP)
    boots.append(([{"t": "hello"}, PROBE, *lost_op_frames(order)], None))
    g, r = run()
    assert [(f.rule, f.scenario) for f in r.findings] == [("QEMU.NO-RECORD", "t/lost-op")]
    assert g.completed == {0} and len(g.observations[0]) == 1
    why = no_record(r)["t/lost-op"]
    assert observed in why and why.endswith(": judged only up to its op 0")
    assert r.counts["violation"] == 0 and r.counts["pass"] == 1 and r.summary["no_record"] == 1


def test_an_op_frame_without_its_index_is_an_error_naming_it(fake_guest, tmp_path):
    boots, _, run = fake_guest
    (tmp_path / "t.kcs").write_text(LOST_OP)
    frames = lost_op_frames([0, 1, 2, 3])
    del frames[2]["i"]
    boots.append(([{"t": "hello"}, PROBE, *frames], None))
    with pytest.raises(ToolError, match=r'target qemu: an op frame without an op index "i".*"k": 0, "v": 0'):
        run()


def test_place_ops_follows_repeat_runs():
    """`repeat N`: the op indices run 0..n-1 once per run; a run cut short is named."""
    op = {"t": "op", "s": 0}

    def place(order, completed=frozenset({0})):
        return place_ops({0: [dict(op, i=i, k=0, v=n, a=0) for n, i in enumerate(order)]}, [(2, 3)],
                         set(completed), lambda r: r["v"], "qemu")

    assert place([0, 1, 0, 1, 0, 1]) == ({0: [0, 1, 2, 3, 4, 5]}, {})
    assert place([0, 1, 1, 0, 1]) == (
        {0: [0, 1]}, {0: ("its op 0 (run 2 of 3) frame did not come next (a frame lost, repeated or out of "
                          "order), its op 1 frame came in its place", "only its first 1 of 3 runs judged")})
    assert place([0, 1, 0]) == ({0: [0, 1, 2]}, {0: ("its op 1 (run 2 of 3) frame was lost, its end frame "
                                                     "came back before it", "only its first 1 of 3 runs judged")})
    assert place([0, 1, 0], completed=()) == ({0: [0, 1, 2]}, {})   # no end frame: no_record() says so
    assert place([0, 1, 0, 1, 0, 1, 0])[1][0][0] == "more op frames came back than it has ops (op 0 after its last)"
