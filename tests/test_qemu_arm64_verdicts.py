"""`run --target qemu-arm64` accounts for every scenario it is given, in every report form
(targets/qemu_arm64/run.py, engine/report.py), without booting QEMU: the boot is replaced
by one that feeds the agent's frames (probe, caps, skip, stop, done) to the driver, and the
rest is real (the replay through kconform-runner, the baseline, report.json, report.ktap,
report.junit.xml, the exit status).

- a `caps` frame (the kernel lacks a capability the scenario needs) and a `skip` frame
  (the agent cannot run the scenario here) are `unsupported` verdicts with the reason:
  the capability by name, or the agent's words; KTAP `# SKIP`, JUnit <skipped>;
- a scenario no frame came back for is a QEMU.NO-RECORD finding and the run exits 1;
- so is one the run never reached because its boots were used up (MAX_BOOTS).
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kconform.commands import cli
from kconform.commands import run as run_cmd
from kconform.core.paths import runner_binary
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine
from kconform.sources.kernel_image import Kernel
from kconform.targets.qemu_arm64 import run

PROBE = {"t": "probe", "ok": True, "release": "7.3.4+deb13-arm64", "page_size": 4096, "buf_pa": 0x7b100000,
         "buf_size": 24 << 20, "phys_base": 0x7f6c0000, "host_pages": 2432}

# Three 4K scenarios: one needs RECLAIM2 (not in Debian's 7.3: the agent sends "caps"), one
# injects an EL3 fault (a real TF-A takes none: "skip"), one the agent runs.
SCENARIOS = """\
kconform-scenario 1
abi ffa
name t/needs-reclaim2-4k
requires reclaim2 page_4k
version
rxtx_map tx=0x80000000 rx=0x80010000 pages=1
tx_mem_desc ranges=hex:000002800000000004000000
mem_share
tx_constituents offset=0 ranges=hex:000002800000000004000000
mem_reclaim2 handle=0 count=1 total_pages=4

kconform-scenario 1
abi ffa
name t/el3-fault-4k
requires page_4k
version version=V1_1
rxtx_map tx=0x80000000 rx=0x80001000 pages=1
el3_misbehave kind=ERROR value=0xfffffffa

kconform-scenario 1
abi ffa
name t/plain-4k
requires page_4k
version
"""
WHY = "el3_misbehave: a real TF-A takes no injected fault"


@pytest.fixture
def fake_stack(tmp_path, monkeypatch):
    """run_target's downloads, builds and boot replaced; boots: a list the test fills with
    one list of frames per boot (each ends as the agent's would, or not at all)."""
    fw = run.firmware.Firmware(tmp_path / "fw", "k", {"inputs": {"tree": {"version": "v2.12.1"}}})
    image = tmp_path / "Image"
    image.write_bytes(b"")
    kernel = Kernel(image=image, release="7.3.4+deb13-arm64", source="test", modules=())
    monkeypatch.setattr(run.toolchain, "ensure", lambda log: None)
    monkeypatch.setattr(run.firmware, "build", lambda log: fw)
    monkeypatch.setattr(run.firmware, "tfa_max_fnum", lambda log: None)
    monkeypatch.setattr(run.debian_kernels, "fetch", lambda *a, **k: kernel)
    monkeypatch.setattr(run.module, "build", lambda *a, **k: tmp_path / "kcffa.ko")
    monkeypatch.setattr(run.agent_build, "build", lambda log: tmp_path / "agent")
    monkeypatch.setattr(run, "build_initrd", lambda *a: tmp_path / "initrd")
    # Only kconform-runner is needed (pack, replay, rules), not the whole preset.
    if not runner_binary().exists():
        build_preset("default", targets=["kconform-runner"], log=lambda m: None)
    monkeypatch.setattr(run_cmd, "build_preset", lambda *a, **k: None)
    boots: list[list[dict]] = []
    seen: list[int] = []

    def boot_once(fw, kernel, initrd, work, start_from, log, on_record, page_size=4096):
        seen.append(start_from)
        console = work / f"console-{len(seen) - 1}.log"
        console.write_text("[    0.000000] Booting Linux on physical CPU 0x0000000000\n")
        records = boots[len(seen) - 1]
        for rec in records:
            on_record(rec)
        stop = next((r for r in records if r["t"] == "stop"), None)
        now = time.monotonic()
        return run.ArmBoot(records, console, now, None, now, None, stop, 0, 0)

    monkeypatch.setattr(run, "boot_once", boot_once)
    scenarios = tmp_path / "t.kcs"
    scenarios.write_text(SCENARIOS)
    return boots, seen, scenarios


PLAIN = [{"t": "begin", "s": 2, "name": "t/plain-4k"},
         {"t": "op", "s": 2, "i": 0, "k": 0, "v": 0, "a": 0, "r": [0x10002, 0, 0, 0, 0, 0, 0, 0]},
         {"t": "end", "s": 2}]


def done(n: int) -> dict:
    return {"t": "done", "scenarios": n, "ops": 0, "seconds": 0.01, "uptime": 1.0}


def kconform_run(scenarios: Path, tmp_path: Path) -> tuple[int, dict, str, ET.Element, Path]:
    reports = tmp_path / "reports"
    code = cli._run(["run", "--target", "qemu-arm64", str(scenarios), "--report-dir", str(reports), "-q"])
    (out,) = [d for d in reports.iterdir() if d.is_dir()]
    doc = json.loads((out / "report.json").read_text())
    ktap = (out / "report.ktap").read_text()
    junit = ET.parse(out / "report.junit.xml").getroot()
    return code, doc, ktap, junit, out


def skipped_cases(junit: ET.Element) -> dict[str, str]:
    return {c.get("name"): c.find("skipped").get("message") for c in junit.iter("testcase")
            if c.find("skipped") is not None}


def test_caps_and_skip_frames_are_unsupported_with_the_reason_in_every_form(fake_stack, tmp_path):
    boots, _, scenarios = fake_stack
    # The agent's frames for the three: RECLAIM2 missing (kCapReclaim2), not runnable here,
    # and the third run (FFA_VERSION: pKVM's v1.2, as a real boot answers).
    boots.append([{"t": "hello"}, PROBE, {"t": "caps", "s": 0, "missing": 1},
                  {"t": "skip", "s": 1, "why": WHY}, *PLAIN, done(1)])
    code, doc, ktap, junit, out = kconform_run(scenarios, tmp_path)
    (r,) = doc["runs"]
    # The canonical stream: every op of the two written `unsupported`, with the reason.
    recs = [json.loads(line) for line in (out / "verdicts-qemu-arm64.jsonl").read_text().splitlines()]
    ops = {(x["scenario"], x["verdict"]) for x in recs if x["type"] == "op"}
    assert ("t/needs-reclaim2-4k", "unsupported") in ops and ("t/el3-fault-4k", "unsupported") in ops
    assert all(x.get("missing") == ["reclaim2"] for x in recs if x.get("scenario") == "t/needs-reclaim2-4k")
    assert all(x.get("note") == WHY for x in recs if x.get("scenario") == "t/el3-fault-4k")
    # JSON report
    reasons = {u["scenario"]: u["reason"] for u in r["unsupported"]}
    assert reasons == {"t/needs-reclaim2-4k": "missing capability: reclaim2", "t/el3-fault-4k": WHY}
    assert r["counts"] == {"pass": 1, "violation": 0, "unsupported": 6 + 3, "unchecked": 0}
    # KTAP: `ok N name # SKIP reason`, never a plain ok
    assert any(line.startswith("    ok ") and line.endswith(" t/needs-reclaim2-4k # SKIP unsupported: "
                                                             "missing capability: reclaim2") for line in ktap.splitlines()), ktap
    assert any(line.endswith(f" t/el3-fault-4k # SKIP unsupported: {WHY}") for line in ktap.splitlines()), ktap
    assert not any(line.rstrip().endswith(("t/needs-reclaim2-4k", "t/el3-fault-4k")) for line in ktap.splitlines())
    plan = [line for line in ktap.splitlines() if line.startswith("    1..")]
    rows = [line for line in ktap.splitlines() if line.startswith(("    ok ", "    not ok "))]
    assert plan == [f"    1..{len(rows)}"]
    # JUnit: <skipped message=...>
    skipped = skipped_cases(junit)
    assert skipped["t/needs-reclaim2-4k"] == "unsupported: missing capability: reclaim2"
    assert skipped["t/el3-fault-4k"] == f"unsupported: {WHY}"
    # skipped.json stays for compatibility; not the only place any more.
    assert json.loads((out / "qemu-arm64" / "skipped.json").read_text()) == {"1": WHY}
    assert code == 0 and not r["findings"]


@pytest.mark.parametrize("frames, observed", [
    ([], "no frame for it came back"),
    (PLAIN[::2], "its begin frame came back from the guest, no op frame did"),
    (PLAIN[:2], "not its end frame: judged only up to its op 0"),
], ids=["every-frame-lost", "op-frames-lost", "end-frame-lost"])
def test_a_scenario_with_no_record_is_a_finding_and_the_run_fails(fake_stack, tmp_path, frames, observed):
    boots, _, scenarios = fake_stack
    # Scenario 2's frames never arrive (lost on the port), though the agent says done.
    boots.append([{"t": "hello"}, PROBE, {"t": "caps", "s": 0, "missing": 1},
                  {"t": "skip", "s": 1, "why": WHY}, *frames, done(1)])
    code, doc, ktap, junit, _ = kconform_run(scenarios, tmp_path)
    assert code == 1
    (r,) = doc["runs"]
    (f,) = r["findings"]
    assert (f["rule"], f["scenario"], f["kind"]) == ("QEMU.NO-RECORD", "t/plain-4k", "no-record")
    assert observed in f["observed"]
    assert doc["new_findings"] == 1 and r["summary"]["no_record"] == 1
    assert "    # FAIL no-record QEMU.NO-RECORD on qemu-arm64" in ktap and "not ok 1 qemu-arm64" in ktap
    (case,) = [c for c in junit.iter("testcase") if c.get("name") == "QEMU.NO-RECORD"]
    assert case.find("failure") is not None and "t/plain-4k" in case.find("failure").text


def test_scenarios_left_when_the_boots_are_used_up_are_findings_naming_why(fake_stack, tmp_path, monkeypatch):
    boots, seen, scenarios = fake_stack
    monkeypatch.setattr(run, "MAX_BOOTS", 1)
    # The first boot stops before scenario 1 (it needs a fresh FF-A version); no boot is left.
    boots.append([{"t": "hello"}, PROBE, {"t": "caps", "s": 0, "missing": 1},
                  {"t": "stop", "s": 1, "reason": "fresh", "detail": "pKVM's FF-A version was fixed"}, done(0)])
    code, doc, ktap, _, _ = kconform_run(scenarios, tmp_path)
    assert seen == [0] and code == 1
    (r,) = doc["runs"]
    lost = {f["scenario"]: f["observed"] for f in r["findings"]}
    assert set(lost) == {"t/el3-fault-4k", "t/plain-4k"}
    assert all("1 boots (run.py MAX_BOOTS) were used up" in why for why in lost.values())
    assert [u["scenario"] for u in r["unsupported"]] == ["t/needs-reclaim2-4k"]


# Three ops: a lost op frame would put FFA_ID_GET's registers on the second FFA_VERSION.
LOST_OP = """\
kconform-scenario 1
abi ffa
name t/lost-op-4k
requires page_4k
version
version
id_get
"""
VERSION = [0x10002, 0, 0, 0, 0, 0, 0, 0]
ID_GET = [0x84000061, 0, 0, 0, 0, 0, 0, 0]       # FFA_SUCCESS_32, id 0 in x2


def lost_op_frames(ops: list[tuple[int, list]]) -> list[dict]:
    return ([{"t": "begin", "s": 0, "name": "t/lost-op-4k"}]
            + [{"t": "op", "s": 0, "i": i, "k": 0, "v": 0, "a": 0, "r": r} for i, r in ops]
            + [{"t": "end", "s": 0}])


def test_every_op_frame_back_is_judged_whole(fake_stack, tmp_path):
    boots, _, _ = fake_stack
    scenarios = tmp_path / "lost.kcs"
    scenarios.write_text(LOST_OP)
    boots.append([{"t": "hello"}, PROBE, *lost_op_frames([(0, VERSION), (1, VERSION), (2, ID_GET)]), done(1)])
    code, doc, _, _, _ = kconform_run(scenarios, tmp_path)
    (r,) = doc["runs"]
    assert code == 0 and not r["findings"] and r["counts"]["pass"] == 3


def test_a_lost_middle_op_frame_cuts_the_scenario_there(fake_stack, tmp_path):
    """Op 1's frame is lost on the port, op 2's and the end frame come back: op 2's
    registers are not judged as op 1's (no false violation); op 0 is judged, the rest of
    the scenario is a QEMU.NO-RECORD finding naming the op frame lost."""
    boots, _, _ = fake_stack
    scenarios = tmp_path / "lost.kcs"
    scenarios.write_text(LOST_OP)
    boots.append([{"t": "hello"}, PROBE, *lost_op_frames([(0, VERSION), (2, ID_GET)]), done(1)])
    code, doc, _, _, out = kconform_run(scenarios, tmp_path)
    (r,) = doc["runs"]
    assert code == 1
    assert [(f["rule"], f["scenario"]) for f in r["findings"]] == [("QEMU.NO-RECORD", "t/lost-op-4k")]
    (f,) = r["findings"]
    assert "its op 1 frame was lost" in f["observed"] and "judged only up to its op 0" in f["observed"]
    recs = [json.loads(line) for line in (out / "verdicts-qemu-arm64.jsonl").read_text().splitlines()]
    assert [(x["op"], x["verdict"]) for x in recs if x["type"] == "op"] == [(0, "pass")]
    assert r["counts"]["violation"] == 0 and r["summary"]["no_record"] == 1


def test_an_op_frame_without_its_index_is_an_error_naming_it(fake_stack, tmp_path):
    boots, _, _ = fake_stack
    scenarios = tmp_path / "lost.kcs"
    scenarios.write_text(LOST_OP)
    frames = lost_op_frames([(0, VERSION), (1, VERSION), (2, ID_GET)])
    del frames[2]["i"]
    boots.append([{"t": "hello"}, PROBE, *frames, done(1)])
    with pytest.raises(run.ToolError, match=r'an op frame without an op index "i".*"s": 0'):
        run.run_target(Engine(runner_binary()), [str(scenarios)], tmp_path / "v.jsonl", tmp_path, lambda m: None)
