"""`kconform run --target qemu-arm64`: FF-A scenarios issued from the host kernel of
Debian's arm64 kernel in pKVM protected mode, through pKVM's real FF-A proxy at EL2,
to TF-A 2.12.1's real EL3 SPMC, under qemu-system-aarch64 (TCG); the outcomes are
replayed through the FF-A model on this machine (Engine.replay, the model's proxy
profile with a real EL3 and the target's state hidden: the host sees registers and
results, not its stage-2 or the SPMC's table).

The agent (agent.py, ffa_agent.cc) and its module (module.py, kcffa.c) run inside;
frames come over a virtio console (/dev/hvc0, a file here). A scenario runs only when
pKVM's FF-A state is the one the model starts from (the agent's "stop" frames): the
driver then boots again from the scenario named, as it does after a crash. A kernel
panic, oops (pKVM's hyp panic and BUG included), WARNING or a hang is a QEMU.* finding
at the scenario in flight, with the console log.

Every scenario given is accounted for in the verdicts: one the agent reports it cannot
run ("caps": capabilities the kernel lacks; "skip": what this target cannot do) is
written `unsupported` with the reason by the replay, as every target's run writes one;
one for which no frame ever came back (frames lost, the boots used up, a crash with no
scenario in flight that ended the run), whose end frame did not (judged only up to its
last op frame), or one of whose op frames was lost, repeated or out of order (each op
is placed by its frame's op index "i"; judged only up to the op before it), is a
QEMU.NO-RECORD finding (targets/qemu/replay.py no_record() and place_ops(), which the
x86 qemu target shares).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Callable

from kconform.core.errors import ToolError
from kconform.core.files import naming
from kconform.core.paths import cache_dir
from kconform.engine.runner import Engine
from kconform.engine.verdicts import Finding, TargetRun
from kconform.sources import debian_kernels
from kconform.sources.kernel_image import Kernel
from kconform.targets.qemu.boot import NONFATAL_KINDS, QemuProcess, console_events, in_flight_at
from kconform.targets.qemu.frames import FrameStream
from kconform.targets.qemu.initramfs import cache_archive
from kconform.targets.qemu.replay import (console_findings, no_record, no_record_findings, place_ops,
                                          scenario_locations, scenario_shapes)
from kconform.targets.qemu_arm64 import agent as agent_build
from kconform.targets.qemu_arm64 import boot, firmware, module, toolchain
from kconform.targets.qemu_arm64.initramfs import BUSYBOX
from kconform.sources import debian_files

Log = Callable[[str], None]

TARGET = "qemu-arm64"
KERNEL = debian_kernels.DEFAULT_KERNEL      # debian:7.3, its arm64 build
RUN_INIT = Path(__file__).resolve().parents[5] / "targets" / "qemu_arm64" / "initramfs" / "run-init"
MAX_BOOTS = 1000          # a bound only: every boot runs at least one scenario, so a run ends
BOOT_TIMEOUT = 180.0      # QEMU start -> the agent's probe frame
SILENCE_TIMEOUT = 60.0    # no frame for this long after the probe: a hang
# The FF-A proxy of Debian's 7.3 ffa.c as the model must see it (the el2 target reads the
# same values from the same tree: KVM_FFA_MBOX_NR_PAGES 1, the proxy's descriptor buffer
# hyp_ffa_proxy_pages() less its two mailboxes, FF-A v1.2).
MBOX_PAGES = 1
FFA_VERSION_12 = 0x10002
# TF-A 2.12.1's EL3 SPMC as our firmware configures it, for the model's SPMC (what
# targets/spmc/tfa_spmc.cc TfaSpmc::model_config says of the same SPMC in-process): FF-A
# v1.2, one partition (ours, sp/sp_manifest.dts: 0x8001), no RECLAIM2, no DONATE, a new send
# while a fragmented one is in flight is not BUSY.
SPMC = {"version": FFA_VERSION_12, "sp_ids": [0x8001], "reclaim2": False, "donate": False,
        "one_send_in_flight": False}
# pKVM's own failures, printed by the host kernel before it panics (arch/arm64/kvm/handle_exit.c).
HYP_PANIC = re.compile(r"(?:nVHE hyp (?:panic|BUG) at:[^\n]*|hVHE hyp (?:panic|BUG) at:[^\n]*)")


@dataclasses.dataclass
class ArmBoot:
    records: list
    console: Path
    started: float
    first_op: float | None
    ended: float
    crash: tuple | None          # (kind, detail, scenario, op)
    stop: dict | None            # the agent's stop frame
    garbled: int
    gaps: int


def desc_buf_bytes(page_size: int) -> int:
    """PROFILE:DESC-BUF of Debian 7.3's ffa.c at page_size: its proxy pages
    (hyp_ffa_proxy_pages()) less its two mailboxes, as the el2 target built from the
    same tree reports it (caps desc_buf_bytes: 36864 at 4K, 49152 at 16K)."""
    return DESC_BUF[page_size]


DESC_BUF = {4096: 36864, 16384: 49152}
# The host PAGE_SIZE a run asks for -> Debian's arm64 kernel flavour with that page size
# (linux-binary/-modules/-headers-<abi>-<flavour>, trixie-backports).
FLAVOURS = {4096: "arm64", 16384: "arm64-16k"}


def flavour_of(page_size: int) -> str:
    if page_size not in FLAVOURS:
        raise ToolError(f"flag --page-size: target {TARGET} runs 4K or 16K (Debian's -arm64 and "
                        f"-arm64-16k kernels), not {page_size // 1024}K")
    return FLAVOURS[page_size]


CAP_RECLAIM2 = 1 << 0    # kCapReclaim2 (harness/scenario/ffa_abi.h)


def kernel_caps(kernel: Kernel) -> int:
    """Capabilities the agent cannot ask the guest for (kconform.caps=): CAP_RECLAIM2
    when a kernel built from a tree handles RECLAIM2."""
    return CAP_RECLAIM2 if (kernel.stamp.get("tree_facts") or {}).get("handles_reclaim2") else 0


def qemu_command(fw: firmware.Firmware, kernel: Kernel, initrd: Path, frames: Path, start_from: int,
                 page_size: int = 4096) -> list[str]:
    size = initrd.stat().st_size
    boot.check_layout(kernel.image, size)
    cmd = boot.qemu_command(fw.bios, kernel.image, initrd, size)
    if page_size == 16384:
        # The -arm64-16k kernel sees LPA2 on -cpu max and uses 52-bit addresses for KVM;
        # under bookworm's QEMU 7.2 (TCG) it then hangs after "mpls_gso" (no output for
        # 180 s, seen 2026-12-02); with lpa2=off it boots and runs (48-bit, as 4K does).
        cmd[cmd.index("-cpu") + 1] += ",lpa2=off"
    at = cmd.index("-append") + 1
    cmd[at] += f" kconform.port=/dev/hvc0 kconform.from={start_from}"
    if caps := kernel_caps(kernel):
        cmd[at] += f" kconform.caps={caps}"
    return cmd + ["-device", "virtio-serial-pci", "-chardev", f"file,id=kcframes,path={frames}",
                  "-device", "virtconsole,chardev=kcframes"]


def boot_once(fw, kernel, initrd, work: Path, start_from: int, log: Log, on_record, page_size: int = 4096) -> ArmBoot:
    n = len(list(work.glob("console-*.log")))
    console, frames = work / f"console-{n}.log", work / f"frames-{n}.log"
    frames.touch()
    cmd = qemu_command(fw, kernel, initrd, frames, start_from, page_size)
    (work / f"qemu-{n}.cmd").write_text(shlex.join(cmd) + "\n")
    stream = FrameStream()
    started = time.monotonic()
    first_op = None
    crash = None
    stop = None
    probed = done = False
    last = started
    with QemuProcess(cmd, console) as q, open(frames, "rb") as fr:
        while True:
            new = stream.feed(fr.read())
            now = time.monotonic()
            for rec in new:
                last = now
                t = rec.get("t")
                if t == "probe":
                    probed = True
                elif t == "op" and first_op is None:
                    first_op = now
                elif t == "stop":
                    stop = rec
                elif t == "done":
                    done = True
                on_record(rec)
            if done:
                try:
                    q.proc.wait(timeout=30)
                except Exception:  # noqa: BLE001 - killed on leaving the block
                    pass
                break
            if q.proc.poll() is not None:
                stream.feed(fr.read() + b"\n")
                crash = ("early-exit", f"QEMU exited with status {q.proc.returncode} before the agent's 'done' frame")
                break
            if not probed and now - started > BOOT_TIMEOUT:
                crash = ("boot-timeout", f"no probe frame {BOOT_TIMEOUT:.0f} s after start")
                break
            if probed and now - last > SILENCE_TIMEOUT:
                crash = ("hang", f"no frame for {SILENCE_TIMEOUT:.0f} s")
                break
            time.sleep(0.05)
        ended = time.monotonic()
    text = console.read_text(errors="replace")
    fatal = [(k, line) for k, line, _ in console_events(text) if k in ("panic", "oops")]
    hyp = HYP_PANIC.search(text)
    if hyp and (crash or not done):
        crash = ("hyp-panic", hyp.group(0).strip())
    elif fatal and (crash or not done):
        crash = fatal[0]
    s, op = in_flight_at(stream.records)
    full = (crash[0], crash[1], s, op) if crash else None
    return ArmBoot(stream.records, console, started, first_op, ended, full, stop, stream.garbled, stream.gaps)


def build_initrd(kernel: Kernel, ko: Path, agent: Path, pack: Path, log: Log) -> Path:
    busybox = debian_files.fetch(BUSYBOX, cache_dir(), progress=log)
    if not RUN_INIT.is_file():
        raise ToolError(f"{RUN_INIT}: no such file (the qemu-arm64 run's /init)")
    files = [("init", RUN_INIT.read_bytes(), 0o100755),
             ("bin/busybox", busybox.read_bytes(), 0o100755),
             ("kconform/modules/kcffa.ko", ko.read_bytes(), 0o100644),
             ("kconform/kconform-ffa-agent", agent.read_bytes(), 0o100755)]
    for f in sorted(pack.glob("*.kcsb")):
        files.append((f"kconform/scenarios/{f.name}", f.read_bytes(), 0o100644))
    return cache_archive(files, cache_dir(), "arm64-run-", TARGET, log)


# What the model must know of a kernel built from a tree (--build), read from the tree as
# built (patch applied) by tree_facts(): does its ffa.c handle FFA_MEM_RECLAIM2 (the el2
# target's extract_tree.py asks the same question of the same file), and its mailbox size.
FFA_C = "arch/arm64/kvm/hyp/nvhe/ffa.c"
KVM_PKVM_H = "arch/arm64/include/asm/kvm_pkvm.h"
MBOX_DEFINE = re.compile(r"^#define\s+KVM_FFA_MBOX_NR_PAGES\s+(\d+)\s*$", re.M)


def tree_facts(tree: Path) -> dict:
    """The facts of a kernel tree (as built) that the replay's profile needs."""
    try:
        ffa_c = (tree / FFA_C).read_text(errors="replace")
        pkvm_h = (tree / KVM_PKVM_H).read_text(errors="replace")
    except OSError as e:
        raise ToolError(f"flag --tree: {tree}: {e.strerror}: {e.filename} (target {TARGET} needs pKVM's FF-A proxy)")
    m = MBOX_DEFINE.search(pkvm_h)
    if not m:
        raise ToolError(f"flag --tree: {tree / KVM_PKVM_H}: no '#define KVM_FFA_MBOX_NR_PAGES N'")
    return {"handles_reclaim2": "FFA_MEM_RECLAIM2" in ffa_c, "mbox_pages": int(m.group(1))}


def built_kernel(tree: str, patch: str | None, page_size: int, log: Log) -> Kernel:
    """An arm64 kernel built from tree (+ patch) at page_size, with our kcffa.ko built
    against the same output (sources/kernel_build.py, arch arm64; cached by content)."""
    from kconform.sources import kernel_build
    k = kernel_build.build(tree, patch, progress=log, arch=kernel_build.ARM64, page_size=page_size,
                           external=module.MODULE_SRC, inspect=tree_facts)
    facts = k.stamp.get("tree_facts") or {}
    if facts.get("mbox_pages") != MBOX_PAGES:
        raise ToolError(f"flag --tree: {tree}: KVM_FFA_MBOX_NR_PAGES is {facts.get('mbox_pages')}; target {TARGET} "
                        f"knows the proxy layout of Debian 7.3's ffa.c ({MBOX_PAGES} page; run.py DESC_BUF)")
    if [m.name for m in k.modules] != ["kcffa.ko"]:
        raise ToolError(f"the kernel build of {tree} gave modules {[m.name for m in k.modules]}, not kcffa.ko")
    return k


def identity(probe: dict, tfa_version: str, seconds: float, kernel: Kernel | None = None,
             max_fnum: int | None = None) -> dict:
    """The run's identity for the replay. kernel: a kernel built with --build (its tree's
    facts decide whether the proxy handles RECLAIM2; a patch names the release), or None
    for Debian's. max_fnum: SPMC:ROUTED, the highest FF-A function number BL31 hands to
    the SPMD (firmware.tfa_max_fnum(); None: all of FF-A's)."""
    ps = int(probe["page_size"])
    if ps not in DESC_BUF:
        raise ToolError(f"target {TARGET}: the guest's PAGE_SIZE {ps} is not one this target knows (4K, 16K)")
    caps_bits = {4096: 1 << 1, 16384: 1 << 2, 65536: 1 << 3}[ps]
    caps_bits |= kernel_caps(kernel) if kernel is not None else 0
    reclaim2 = int(bool(caps_bits & CAP_RECLAIM2))
    patch = (kernel.stamp.get("patch") or "") if kernel is not None else ""
    built = f"+{Path(patch).stem}" if patch else ""
    release = f"{probe['release']}{built}+tf-a-{tfa_version.lstrip('v')}"
    ffa = {"page_size": ps, "phys_base": probe["phys_base"], "host_pages": probe["host_pages"],
           "mbox_pages": MBOX_PAGES, "desc_buf_bytes": desc_buf_bytes(ps), "version": FFA_VERSION_12,
           "real_el3": 1, "reclaim2": reclaim2,
           "spmc": SPMC | ({"max_fnum": max_fnum} if max_fnum is not None else {})}
    caps = [["page_size", ps], ["reclaim2", reclaim2], ["host_pages", probe["host_pages"]],
            ["phys_base", probe["phys_base"]], ["buf_pa", probe["buf_pa"]], ["real_el3", 1]]
    return {"type": "identity", "abi": "ffa", "target": TARGET, "release": release, "ffa": ffa,
            "caps": caps, "cap_bits": caps_bits, "seconds": seconds}


def run_target(engine: Engine, files: list[str], raw_out: Path, out_dir: Path, log: Log,
               page_size: int = 4096, built: Kernel | None = None) -> TargetRun:
    """built: a kernel built with --build (built_kernel(): its modules hold kcffa.ko);
    None: Debian's 7.3 kernel of the page size's flavour, kcffa built against its headers."""
    flavour = flavour_of(page_size) if built is None else f"built ({built.source})"
    toolchain.ensure(log)
    fw = firmware.build(log)
    if built is None:
        kernel = debian_kernels.fetch(KERNEL, progress=log, arch="arm64", flavour=flavour)
        ko = module.build(cache_dir(), log, flavour=flavour)
    else:
        kernel, ko = built, built.modules[0]
    agent = agent_build.build(log)
    work = out_dir / (TARGET if page_size == 4096 else f"{TARGET}-{page_size // 1024}k")
    work.mkdir()
    pack = work / "scenarios"
    pack.mkdir()
    total = engine.pack(files, pack)
    initrd = build_initrd(kernel, ko, agent, pack, log)

    frames: dict[int, list] = {}          # s -> its op frames as they came (place_ops() below)
    skipped: dict[int, str] = {}          # s -> the agent's why ("skip")
    missing: dict[int, int] = {}          # s -> capability bits the kernel lacks ("caps")
    completed: set[int] = set()           # "end": run to its end
    state: dict = {"probe": None, "ops": 0}
    agent_seconds = 0.0
    agent_scenarios = agent_ops = 0
    boots: list[ArmBoot] = []
    crashes: list[tuple] = []
    warnings: list = []
    stops: list[dict] = []

    def on_record(rec: dict) -> None:
        t = rec.get("t")
        if t == "probe":
            if not rec.get("ok"):
                raise ToolError(f"target {TARGET}: the agent cannot run: {rec.get('error')}; see {work}/console-*.log")
            state["probe"] = rec
        elif t == "begin":
            frames[rec["s"]] = []
        elif t == "op":
            frames.setdefault(rec["s"], []).append(rec)
            state["ops"] += 1
            if state["ops"] % 200 == 0:
                print(f"kconform: {TARGET}: {state['ops']} ops received", file=sys.stderr, flush=True)
        elif t == "caps":
            missing[rec["s"]] = int(rec["missing"])
        elif t == "skip":
            skipped[rec["s"]] = rec["why"]
        elif t == "end":
            completed.add(rec["s"])
        elif t == "bad":
            raise ToolError(f"target {TARGET}: the agent could not decode scenario {rec['s']}: {rec['error']}")

    start_from = 0
    ended: tuple[int, str] | None = None   # (first scenario not run, why the run ended before it)
    t0 = time.monotonic()
    while start_from < total:
        if len(boots) >= MAX_BOOTS:
            log(f"kconform: {TARGET}: {MAX_BOOTS} boots used; scenarios {start_from}..{total - 1} not run")
            ended = (start_from, f"not run: the run's {MAX_BOOTS} boots (run.py MAX_BOOTS) were used up "
                                 f"before it")
            break
        log(f"kconform: {TARGET}: boot {len(boots) + 1}, scenarios {start_from}..{total - 1}")
        b = boot_once(fw, kernel, initrd, work, start_from, log, on_record, page_size)
        boots.append(b)
        text = b.console.read_text(errors="replace")
        warnings += [(k, line, s) for k, line, s in console_events(text) if k in NONFATAL_KINDS]
        for rec in b.records:
            if rec.get("t") == "done":
                agent_seconds += rec["seconds"]
                agent_ops += rec["ops"]
                agent_scenarios += rec["scenarios"]
        if b.crash:
            crashes.append((b.crash, b.console))
            kind, detail, s, op = b.crash
            log(f"kconform: {TARGET}: guest {kind}: {detail} (scenario in flight: {s}, op {op}); console: {b.console}")
            if s is None or state["probe"] is None:
                ended = (start_from, f"not run: the run stopped after a guest {kind} with no scenario in "
                                     f"flight ({detail}; console: {b.console})")
                break
            start_from = s + 1
        elif b.stop:
            stops.append(b.stop)
            start_from = int(b.stop["s"])
        else:
            break
    if state["probe"] is None:
        raise ToolError(f"target {TARGET}: the agent never reported a probe; console log: {boots[-1].console}")

    if int(state["probe"]["page_size"]) != page_size:
        raise ToolError(f"target {TARGET}: the {flavour} kernel reports PAGE_SIZE {state['probe']['page_size']}, "
                        f"not the {page_size} asked for")
    ident = identity(state["probe"], fw.tfa_version, agent_seconds, built, firmware.tfa_max_fnum(log))
    # Each op where its op index "i" puts it, up to the first frame lost, repeated or out of order.
    obs, cut = place_ops(frames, scenario_shapes(engine, files), completed,
                         lambda r: [r["k"], r["v"], r["a"], r["r"]], TARGET)
    obs_path = work / "observations.jsonl"
    with naming(obs_path), open(obs_path, "x") as f:
        f.write(json.dumps(ident) + "\n")
        for s in sorted(obs):
            f.write(json.dumps({"type": "scenario", "s": s, "ops": obs[s]}) + "\n")
        # What the agent could not run: the replay writes each `unsupported`, with the
        # capabilities missing by name or the agent's reason.
        for s in sorted(missing):
            f.write(json.dumps({"type": "unsupported", "s": s, "missing": missing[s]}) + "\n")
        for s in sorted(skipped):
            f.write(json.dumps({"type": "unsupported", "s": s, "why": skipped[s]}) + "\n")
    (work / "skipped.json").write_text(json.dumps({str(k): v for k, v in sorted(skipped.items())}, indent=1) + "\n")
    (work / "stops.json").write_text(json.dumps(stops, indent=1) + "\n")
    run = engine.replay(obs_path, files, raw_out, TARGET)
    in_flight = {c[0][2] for c in crashes if c[0][2] is not None}   # each a QEMU.<crash> finding
    lost = no_record(total, obs, completed, in_flight | set(missing) | set(skipped), ended, boots, cut)
    first = boots[0].first_op - boots[0].started if boots[0].first_op else None
    rate = agent_scenarios / agent_seconds if agent_seconds else None
    wall = time.monotonic() - t0
    timing = (f"boot to first observed op {first:.1f} s; " if first is not None else "no op observed; ") + \
             f"in the guest {agent_scenarios} scenarios, {agent_ops} ops in {agent_seconds:.2f} s" + \
             (f" ({rate:.1f} scenarios/s)" if rate else "") + \
             f"; {len(boots)} boot(s) ({sum(1 for x in stops if x.get('reason') == 'fresh')} for a scenario that needs " \
             f"a fresh FF-A version, {sum(1 for x in stops if x.get('reason') == 'taint')} after a cleanup that failed, " \
             f"{len(crashes)} after a crash), wall {wall:.1f} s; " \
             f"{len(skipped)} scenario(s) not runnable here and {len(missing)} needing capabilities the kernel " \
             f"lacks (unsupported), {len(lost)} with no record (QEMU.NO-RECORD); frames lost: " \
             f"{sum(b.garbled for b in boots)} garbled, {sum(b.gaps for b in boots)} gaps"
    run.target["kernel"] = str(kernel.image) + (f" (built from {built.source})" if built is not None else "")
    run.target["firmware"] = str(fw.folder)
    run.target["timing"] = timing
    run.summary["boot_to_first_op_seconds"] = first
    run.summary["guest_scenarios_per_second"] = rate
    run.summary["not_runnable"] = len(skipped)
    run.summary["no_record"] = len(lost)
    log(f"kconform: {TARGET}: {timing}")

    where = scenario_locations(engine, files)
    for (kind, detail, s, op), console in crashes:
        if s is None:
            continue
        file, index, name = where[s]
        run.findings.append(Finding(
            rule=f"QEMU.{kind.upper()}", target=run.name, release=run.release, scenario=name,
            file=file, index=index, op=op if op is not None else -1,
            call=f"op {op} in flight" if op is not None else "after the scenario",
            expected=["the host runs the scenario to its end"], observed=detail,
            note=f"console log: {console}"))
    run.findings += console_findings(warnings, where, run.name, run.release, str(work))
    run.findings += no_record_findings(lost, where, run, work)
    return run
