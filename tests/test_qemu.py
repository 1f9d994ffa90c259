"""The QEMU target: the frame codec (also against garbled serial lines), the initramfs
archive, crash detection on the console, judging recorded outcomes on the host, and a
real boot of Debian's 7.3 kernel (network + QEMU; skipped with the reason when either
is missing)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, kconform, kernel_build_missing
from kconform.engine.runner import REPLAY_SUBCOMMAND
from kconform.sources import debian_kernels, kernel_build
from kconform.sources.kernel_image import KernelError, user_kernel
from kconform.targets.qemu.boot import QEMU, boot_once, console_events, in_flight_at
from kconform.targets.qemu.frames import FrameStream, decode_frame, encode_frame
from kconform.targets.qemu.guest import agent_binary
from kconform.targets.qemu.initramfs import BUSYBOX, build_initramfs, newc_archive
from kconform.targets.qemu.replay import run_target

# --- frames ----------------------------------------------------------------------


def test_frame_matches_the_agents_exact_form():
    # targets/qemu/wire/frame_test.cc Frame.ExactForm: the two sides agree.
    assert encode_frame(7, b"ab") == "@@KC 7 6162 9e83486d@@\n"
    assert decode_frame("@@KC 7 6162 9e83486d@@") == ("ok", 7, b"ab")


@pytest.mark.parametrize("payload", [b"", b'{"t":"hello"}', bytes(range(256)), b"@@KC 1 00 00000000@@\n"])
def test_frame_round_trips(payload):
    line = encode_frame(123, payload)
    assert decode_frame(line.rstrip("\n")) == ("ok", 123, payload)
    assert decode_frame(line.rstrip("\n") + "\r") == ("ok", 123, payload)


@pytest.mark.parametrize("line", [
    "[    4.158895] reboot: Power down",
    "",
    "@@K 1 00 00000000@@",
    "kconform: begin s=3 gmem/x",
])
def test_kernel_lines_are_not_frames(line):
    assert decode_frame(line)[0] == "none"


def test_every_truncation_is_rejected():
    line = encode_frame(12, b'{"t":"op","s":1,"v":-22}').rstrip("\n")
    for n in range(len(line)):
        assert decode_frame(line[:n])[0] != "ok", n


def test_every_payload_and_crc_corruption_is_rejected():
    line = encode_frame(5, b'{"t":"op","s":1}').rstrip("\n")
    payload_start = line.index(" ", 5) + 1
    for i in range(payload_start, len(line)):
        for repl in "0a9f@ Z\x00":
            if line[i] == repl:
                continue
            bad = line[:i] + repl + line[i + 1:]
            assert decode_frame(bad)[0] != "ok", (i, repl)


def test_kernel_message_inside_a_frame_is_rejected():
    line = encode_frame(9, b'{"t":"op","s":1}').rstrip("\n")
    cut = line[:20] + "[   5.1] BUG: kernel NULL pointer dereference" + line[20:]
    assert decode_frame(cut)[0] in ("malformed", "badcrc")


def test_stream_survives_chunking_noise_and_counts_losses():
    frames = [encode_frame(i, json.dumps({"t": "op", "i": i}).encode()) for i in range(6)]
    garbled = frames[2][:15] + "\n"          # frame 2 cut off by a reset
    noise = "[ 1.2] kvm: loaded\n"
    data = (noise + frames[0] + frames[1] + garbled + noise + frames[3] + frames[5]).encode()
    s = FrameStream()
    got = []
    for k in range(0, len(data), 7):        # arbitrary chunk boundaries
        got += s.feed(data[k:k + 7])
    assert [r["i"] for r in got] == [0, 1, 3, 5]
    assert s.garbled == 1
    assert s.gaps == 2                       # frames 2 and 4


def test_stream_rejects_a_valid_crc_with_a_non_json_payload():
    s = FrameStream()
    assert s.feed(encode_frame(0, b"not json").encode()) == []
    assert s.garbled == 1


# --- initramfs ---------------------------------------------------------------------

@pytest.mark.skipif(not shutil.which("cpio"), reason="cpio not installed (Debian package cpio)")
def test_newc_archive_is_read_by_cpio(tmp_path):
    archive = newc_archive([("init", b"#!/bin/sh\n", 0o100755),
                                 ("kconform/scenarios/000000.kcsb", b"KCSN\x01", 0o100644)])
    assert newc_archive([("kconform/scenarios/000000.kcsb", b"KCSN\x01", 0o100644),
                              ("init", b"#!/bin/sh\n", 0o100755)]) == archive  # deterministic
    r = subprocess.run(["cpio", "-idm", "--quiet"], input=archive, cwd=tmp_path, capture_output=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "init").read_bytes() == b"#!/bin/sh\n"
    assert os.access(tmp_path / "init", os.X_OK)
    assert (tmp_path / "kconform/scenarios/000000.kcsb").read_bytes() == b"KCSN\x01"


# --- crash detection ---------------------------------------------------------------

CONSOLE = """\
[    5.3] kconform: begin s=7 gmem/bind/a
[    5.4] kconform: begin s=8 gmem/bind/b
[    5.5] WARNING: CPU: 0 PID: 71 at arch/x86/kvm/mmu/mmu.c:123 kvm_mmu_x+0x1/0x2 [kvm]
[    5.6] BUG: kernel NULL pointer dereference, address: 0000000000000008
[    5.7] Kernel panic - not syncing: Fatal exception
"""


def test_console_events_name_the_scenario_in_flight():
    events = console_events(CONSOLE)
    assert [(k, s) for k, _, s in events] == [("warning", 8), ("oops", 8), ("panic", 8)]
    assert events[1][1].startswith("BUG: kernel NULL pointer dereference")


KASAN_AND_LOCKDEP = """\
[    5.3] kconform: begin s=2 gmem/concurrent/write-vs-punch-same-page
[    5.4] BUG: KASAN: slab-use-after-free in kvm_gmem_write+0x1/0x2
[    5.5] kconform: begin s=3 gmem/concurrent/write-vs-close
[    5.6] WARNING: possible circular locking dependency detected
[    5.7] WARNING: CPU: 0 PID: 71 at mm/filemap.c:1 x+0x1/0x2
[    5.8] BUG: sleeping function called from invalid context at mm/memory.c:1
"""


def test_kasan_and_lockdep_reports_are_findings_though_the_guest_runs_on():
    """A KASAN or lockdep report does not stop the guest; each is a finding at the scenario
    in flight (QEMU.KASAN a sanitizer finding, QEMU.LOCKDEP a guest warning)."""
    from kconform.engine.verdicts import finding_kind
    from kconform.targets.qemu.boot import NONFATAL_KINDS
    from kconform.targets.qemu.replay import console_findings
    events = console_events(KASAN_AND_LOCKDEP)
    assert [(k, s) for k, _, s in events] == [("kasan", 2), ("lockdep", 3), ("warning", 3), ("oops", 3)]
    kept = [e for e in events if e[0] in NONFATAL_KINDS]
    where = [("f.kcs", i, f"n{i}") for i in range(4)]
    found = console_findings(kept, where, "qemu", "7.3.4", "/w")
    assert [(f.rule, f.scenario) for f in found] == [("QEMU.KASAN", "n2"), ("QEMU.LOCKDEP", "n3"),
                                                     ("QEMU.WARNING", "n3")]
    assert found[0].observed.startswith("BUG: KASAN: slab-use-after-free")
    assert [finding_kind(f.rule, f.expected, f.note) for f in found] == ["sanitizer", "guest-warning",
                                                                          "guest-warning"]


def test_in_flight_from_frames():
    recs = [{"t": "begin", "s": 3}, {"t": "op", "s": 3}, {"t": "end", "s": 3},
            {"t": "begin", "s": 4}, {"t": "op", "s": 4}, {"t": "op", "s": 4}]
    assert in_flight_at(recs) == (4, 2)
    assert in_flight_at(recs[:3]) == (None, None)


def test_user_kernel_must_be_a_bzimage(tmp_path):
    p = tmp_path / "vmlinux"
    p.write_bytes(b"\x7fELF" + bytes(1000))
    with pytest.raises(KernelError, match="not an x86 bzImage"):
        user_kernel(p)
    with pytest.raises(KernelError, match="no such file"):
        user_kernel(tmp_path / "missing")



# --- kernels built from a full tree (--tree T --build --apply P) ---------------------

def _fake_tree(root: Path) -> Path:
    for rel, text in {"Makefile": "VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 4\n",
                      "virt/kvm/guest_memfd.c": "a\nb\nc\n", "other.c": "x\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_build_mirror_patches_a_copy_and_never_the_tree(tmp_path):
    """The mirror: the tree hard-linked (same inodes), the patch applied to new files.
    What make then rebuilds is decided by content (tests/test_kbuild.py)."""
    src = _fake_tree(tmp_path / "tree")
    patch = tmp_path / "p.patch"
    patch.write_text("--- a/virt/kvm/guest_memfd.c\n+++ b/virt/kvm/guest_memfd.c\n"
                     "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
    old = src / "virt/kvm/guest_memfd.c"
    os.utime(old, (1_000_000, 1_000_000))
    cache = tmp_path / "cache"
    m, src_files, m_files = kernel_build.mirror(src, "t", patch, cache, progress=lambda _m: None)
    assert (m / "virt/kvm/guest_memfd.c").read_text() == "a\nB\nc\n"
    assert old.read_text() == "a\nb\nc\n"                 # the tree itself is never changed
    assert os.stat(m / "other.c").st_ino == os.stat(src / "other.c").st_ino
    assert src_files["virt/kvm/guest_memfd.c"].sha != m_files["virt/kvm/guest_memfd.c"].sha
    assert kernel_build.mirror(src, "t", patch, cache, progress=lambda _m: None)[0] == m
    assert os.stat(m / "other.c").st_ino == os.stat(src / "other.c").st_ino
    # Back to the stock tree: the tree's own file again, the tree untouched.
    m, src_files, m_files = kernel_build.mirror(src, "t", None, cache, progress=lambda _m: None)
    back = m / "virt/kvm/guest_memfd.c"
    assert back.read_text() == "a\nb\nc\n" and os.stat(back).st_ino == os.stat(old).st_ino
    assert old.stat().st_mtime == 1_000_000
    assert {k: v.sha for k, v in src_files.items()} == {k: v.sha for k, v in m_files.items()}


def test_build_rejects_a_tree_without_guest_memfd_and_a_missing_patch(tmp_path):
    with pytest.raises(KernelError, match="not a full kernel tree"):
        kernel_build.build(str(tmp_path), cache_dir=tmp_path / "c", progress=lambda _m: None)
    with pytest.raises(KernelError, match="no such patch file"):
        kernel_build.build(str(_fake_tree(tmp_path / "t")), str(tmp_path / "nope.patch"),
                      cache_dir=tmp_path / "c", progress=lambda _m: None)


def test_kernel_fragment_builds_kvm_in():
    lines = kernel_build.KERNEL_FRAGMENT.read_text().splitlines()
    for opt in ("CONFIG_KVM=y", "CONFIG_KVM_AMD=y", "CONFIG_KVM_SW_PROTECTED_VM=y",
                "CONFIG_X86_IOPL_IOPERM=y", "CONFIG_BLK_DEV_INITRD=y", "CONFIG_SMP=y"):
        assert opt in lines
    debug = kernel_build.KERNEL_DEBUG_FRAGMENT.read_text().splitlines()
    for opt in ("CONFIG_KASAN=y", "CONFIG_PROVE_LOCKING=y", "# CONFIG_SLUB_TINY is not set"):
        assert opt in debug and opt not in lines


def test_kernel_debug_fragment_is_added_only_when_asked(monkeypatch):
    monkeypatch.delenv("KCONFORM_KERNEL_DEBUG", raising=False)
    assert kernel_build.kernel_fragment() == kernel_build.KERNEL_FRAGMENT.read_bytes()
    monkeypatch.setenv("KCONFORM_KERNEL_DEBUG", "1")
    assert b"CONFIG_KASAN=y" in kernel_build.kernel_fragment()


# --- judging recorded outcomes on the host -----------------------------------------

SCENARIO = """\
kconform-scenario 1
abi gmem
name test/qemu/create
create_vm
create_gmem vm=0 size=0x200000 flags=0
"""

IDENTITY = {"type": "identity", "target": "qemu", "release": "7.3.4+deb13-amd64", "seconds": 1.5,
            "profile": {"write_abi": False, "page_size": 4096, "supported_flags": [3, 0],
                        "vm_types": 1, "user_memory2": True, "gmem_on_vm_type": [True, False]},
            "caps": [["KVM_CAP_GUEST_MEMFD_FLAGS", 3]], "cap_bits": 23}


def _judge(engine, tmp_path, ops, name="obs.jsonl"):
    scen = tmp_path / "s.kcs"
    scen.write_text(SCENARIO)
    obs = tmp_path / name
    obs.write_text(json.dumps(IDENTITY) + "\n" + json.dumps({"type": "scenario", "s": 0, "ops": ops}) + "\n")
    r = subprocess.run([str(engine.binary), REPLAY_SUBCOMMAND, "--observations", str(obs), str(scen)],
                       capture_output=True, text=True)
    return r, [json.loads(l) for l in r.stdout.splitlines()]


def test_judge_replays_recorded_outcomes_through_the_model(engine, tmp_path):
    r, recs = _judge(engine, tmp_path, [[0, 0, 0], [0, 0, 0]])
    assert r.returncode == 0, r.stderr
    target = recs[1]
    assert (target["target"], target["release"], target["profile"]) == ("qemu", "7.3.4+deb13-amd64", "gmem-base")
    assert [x["verdict"] for x in recs if x["type"] == "op"] == ["pass", "pass"]
    assert recs[-1]["seconds"] == 1.5


def test_judge_finds_a_lie(engine, tmp_path):
    r, recs = _judge(engine, tmp_path, [[0, 0, 0], [1, 22, 0]])  # create_gmem: EINVAL
    assert r.returncode == 1, r.stderr
    assert [x["verdict"] for x in recs if x["type"] == "op"] == ["pass", "violation"]


def test_judge_stops_at_the_last_recorded_op(engine, tmp_path):
    r, recs = _judge(engine, tmp_path, [[0, 0, 0]])  # the guest died in op 1
    assert r.returncode == 0, r.stderr
    assert [x["op"] for x in recs if x["type"] == "op"] == [0]


CONCURRENT = """\
kconform-scenario 2
abi gmem
name test/qemu/concurrent
repeat 2
create_vm
create_gmem vm=0 size=0x2000 flags=MMAP|INIT_SHARED
mmap gmem=0 offset=0 len=0x2000
@1 store map=0 offset=0 len=1 pattern=4
@2 fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x1000
fstat gmem=0
"""


def test_judge_replays_every_run_of_a_repeated_concurrent_scenario(engine, tmp_path):
    """The agent sends the runs of `repeat N` one after the other; replay judges each run
    (groups through the interleaving search) and reports the first with a violation."""
    scen = tmp_path / "c.kcs"
    scen.write_text(CONCURRENT)
    good = [[0, 0, 0]] * 5 + [[0, 0, 0x2000]]
    bad = [[0, 0, 0]] * 5 + [[0, 0, 0x1000]]  # fstat: the size changed
    out = {}
    for label, ops in (("good", good + good), ("bad", good + bad), ("short", good + good[:3])):
        obs = tmp_path / f"{label}.jsonl"
        obs.write_text(json.dumps(IDENTITY) + "\n" + json.dumps({"type": "scenario", "s": 0, "ops": ops}) + "\n")
        r = subprocess.run([str(engine.binary), REPLAY_SUBCOMMAND, "--observations", str(obs), str(scen)],
                           capture_output=True, text=True)
        out[label] = (r.returncode, [json.loads(l) for l in r.stdout.splitlines() if '"type":"op"' in l])
    code, recs = out["good"]
    assert code == 0 and [x["verdict"] for x in recs] == ["pass"] * 6
    code, recs = out["bad"]
    assert code == 1 and recs[5]["verdict"] == "violation"
    assert "GMEM.CONCURRENT.LINEARIZABLE" in recs[5]["violated"]
    assert "repetition 2 of 2" in recs[5]["note"], recs[5]
    code, recs = out["short"]  # the guest died in run 2: run 1 is judged
    assert code == 0 and len(recs) == 6


def test_judge_rejects_bad_observations(engine, tmp_path):
    scen = tmp_path / "s.kcs"
    scen.write_text(SCENARIO)
    obs = tmp_path / "bad.jsonl"
    obs.write_text(json.dumps({"type": "scenario", "s": 5, "ops": []}) + "\n")
    r = subprocess.run([str(engine.binary), REPLAY_SUBCOMMAND, "--observations", str(obs), str(scen)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "field 's'" in r.stderr


# --- a real boot ---------------------------------------------------------------------

def _qemu_missing() -> str | None:
    if not shutil.which(QEMU):
        return f"{QEMU} not installed (./kconform run --target qemu installs group 'qemu')"
    if not BUSYBOX.is_file():
        return "busybox-static not installed"
    if os.environ.get("KCONFORM_OFFLINE"):
        return "KCONFORM_OFFLINE set"
    return None


@pytest.fixture(scope="module")
def debian_kernel():
    why = _qemu_missing()
    if why:
        pytest.skip(why)
    try:
        return debian_kernels.fetch("debian:7.3", progress=lambda m: None)
    except KernelError as e:
        pytest.skip(f"Debian 7.3 kernel unavailable: {str(e).splitlines()[0]}")


@pytest.mark.network
def test_debian_7_3_boots_and_runs_scenarios(engine, debian_kernel, tmp_path):
    files = [str(REPO / "corpora/gmem/create.kcs")]
    raw = tmp_path / "verdicts-qemu.jsonl"
    t0 = time.monotonic()
    run = run_target(engine, files, raw, tmp_path, None, "tcg", lambda m: None)
    assert time.monotonic() - t0 < 300
    assert run.name == "qemu" and run.release.startswith("7.3.4")
    assert run.counts["pass"] > 0
    assert run.findings == [], run.findings
    assert run.summary["boot_to_first_op_seconds"] is not None
    obs = (tmp_path / "qemu" / "observations.jsonl").read_text().splitlines()
    assert json.loads(obs[0])["cap_bits"] & 1


@pytest.mark.network
def test_boot_timeout_is_a_finding_and_qemu_is_killed(engine, debian_kernel, tmp_path):
    pack = tmp_path / "p"
    pack.mkdir()
    initrd = build_initramfs(debian_kernel, agent_binary(), pack, tmp_path, lambda m: None)
    boot = boot_once(debian_kernel, initrd, tmp_path, "tcg", 0, lambda m: None, boot_timeout=0.5)
    assert boot.crash is not None and boot.crash.kind == "boot-timeout"
    assert boot.exit_code is not None  # the process is gone
    r = subprocess.run(["pgrep", "-f", str(tmp_path / "frames-0.log")], capture_output=True)
    assert r.returncode == 1, "a QEMU process outlived the boot"


# --- the write patch built into a kernel (the done-when command) -------------

WRITE_PATCH = REPO / "targets/qemu/write/gmem-write-reference.patch"


def _kernel_build_missing() -> str | None:
    return _qemu_missing() or kernel_build_missing()


@pytest.mark.network
def test_patched_debian_7_3_build_boots_and_passes_the_write_profile(tmp_path):
    """`kconform run --target qemu --tree debian:7.3 --apply <write patch> --build`: a cold
    build takes ~5-10 min on 2 cores (then cached by tree, patch and fragment)."""
    why = _kernel_build_missing()
    if why:
        pytest.skip(why)
    r = kconform("run", "--target", "qemu", "--tree", "debian:7.3", "--apply", str(WRITE_PATCH), "--build",
                 "--format", "json", "--report-dir", str(tmp_path), timeout=2400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(r.stdout)
    (run,) = doc["runs"]
    assert run["target"]["profile"] == "gmem-write" and run["target"]["release"] == "7.3.4"
    assert run["target"]["caps"]["KVM_CAP_GUEST_MEMFD_FLAGS"] & 4      # GUEST_MEMFD_FLAG_WRITE
    assert run["findings"] == [] and run["counts"]["violation"] == 0
    rules = {x["id"]: x for x in run["rules"]}
    for rid in ("GMEM.WRITE.ALIGN", "GMEM.WRITE.EOF", "GMEM.WRITE.SHARED_ONLY", "GMEM.WRITE.POPULATE",
                "GMEM.WRITE.SRC_FAULT", "GMEM.WRITE.FLAG_REQUIRED", "GMEM.TIMES.WRITE",
                "GMEM.LSEEK.NO_WRITE_FLAG", "GMEM.LSEEK.SEEKABLE"):
        assert rules[rid]["allowed"] + rules[rid]["forbidden"] > 0, rid
    assert run["summary"]["guest_scenarios_per_second"] > 0


def _xz_payload(image: Path) -> bytes:
    """The kernel inside a bzImage (CONFIG_KERNEL_XZ, as kernel.config's tinyconfig has it)."""
    import lzma
    data = image.read_bytes()
    start = data.find(b"\xfd7zXZ\x00")
    assert start > 0, f"{image}: no xz stream"
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:])


@pytest.mark.network
def test_a_file_restored_with_an_older_mtime_is_rebuilt(tmp_path, monkeypatch):
    """A user's tree (here debian:7.3's full tree, hard-linked, with its own
    virt/kvm/binary_stats.c, a file the write patch does not touch) built with the write
    patch; then binary_stats.c restored with other content and an OLDER mtime (as `rsync -t`
    or `tar x` do): make would skip it by its mtime (the old main cached the image of the
    previous content under the new key), the image must hold the new content. Then the
    first content again, older still: the first image, cached.
    Builds in debian:7.3's obj folder (~11 s each, after the patched build above); skipped
    when that folder has no record of its sources (a cold build)."""
    import uuid
    from kconform.core.paths import cache_dir
    why = _kernel_build_missing()
    if why:
        pytest.skip(why)
    cache = cache_dir()
    fulls = [d for d in sorted((cache / "fulltrees").glob("debian-7.3.*")) if (d / "Makefile").is_file()]
    if not fulls:
        pytest.skip("debian:7.3's full tree is not in the cache (the patched build above fetches it)")
    full = fulls[-1]
    frag = kernel_build._h(kernel_build.kernel_fragment())[:12]
    obj = cache / "kbuild" / f"obj-{full.name}-{frag}"
    if not (obj / kernel_build.SOURCES_MANIFEST).is_file():
        pytest.skip(f"{obj} has no record of its sources: this check would be a cold build")
    if os.stat(full).st_dev != os.stat(tmp_path).st_dev:
        pytest.skip(f"{tmp_path} is not on the file system of {full}")
    tree = tmp_path / "tree"
    subprocess.run(["cp", "-al", str(full), str(tree)], check=True)
    monkeypatch.setattr(kernel_build, "full_tree", lambda spec, c, progress: (tree, "test", full.name))
    gm = tree / "virt/kvm/binary_stats.c"
    stock = gm.read_text()
    run_id = uuid.uuid4().hex[:12]

    def put(n: int, mtime: int | None) -> bytes:
        marker = f"kconform-restore-{run_id}-{n}"
        tmp = gm.with_name(".binary_stats.c.restore")    # a new file: the cache's inode is shared
        tmp.write_text(stock + f'\nstatic const char kconform_marker[] __used = "{marker}";\n')
        os.replace(tmp, gm)
        if mtime is not None:
            os.utime(gm, (mtime, mtime))
        return marker.encode()

    said = []
    build = lambda: kernel_build.build("test", str(WRITE_PATCH), progress=said.append)  # noqa: E731
    # The images go into the real cache (its obj folder is what makes this quick): each run
    # makes two of its own content, which nothing would use again; removed at the end.
    try:
        _restored_file_checks(put, build, said)
    finally:
        _remove_images_of(cache, tree)


def _remove_images_of(cache: Path, tree: Path) -> None:
    """Removes the cached kernel images whose stamp names tree as their source."""
    for stamp in (cache / "kbuild" / "img").glob("*/kconform-image.json"):
        try:
            if json.loads(stamp.read_text()).get("tree_path") == str(tree):
                shutil.rmtree(stamp.parent)
        except (OSError, ValueError):
            pass


def _restored_file_checks(put, build, said) -> None:
    one = put(1, None)
    k1 = build()
    assert one in _xz_payload(k1.image)
    two = put(2, 1_000_000_000)                         # 2001: older than anything built
    said.clear()
    k2 = build()
    body = _xz_payload(k2.image)
    assert two in body and one not in body, "an image of the previous content was built"
    assert k2.stamp["key"] != k1.stamp["key"] and not any("(cached" in l for l in said)
    put(1, 900_000_000)
    said.clear()
    k3 = build()
    assert k3.image == k1.image and any("(cached" in l for l in said) and one in _xz_payload(k3.image)
