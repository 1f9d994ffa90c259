"""`run --target qemu-arm64`'s pieces that need no download or boot
(harness/driver/kconform/targets/qemu_arm64: module.py, agent.py, run.py): the
packages the module build unpacks and the gcc wrapper, the agent's cache key, the
QEMU command line with the frame port, the observations' identity record, and the
flags the target refuses (exit 2, the flag named)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, kconform

from kconform.core.errors import ToolError
from kconform.sources.kernel_image import Kernel
from kconform.targets.qemu_arm64 import agent, firmware, module, run


def test_module_build_unpacks_debians_headers_kbuild_and_trixie_libc():
    pk = module.packages("7.3.4+deb13", "arm64")
    assert pk == [("linux-headers-7.3.4+deb13-arm64", "arm64"), ("linux-headers-7.3.4+deb13-common", "arm64"),
                  ("linux-kbuild-7.3.4+deb13", "amd64"), ("libc6", "amd64")]
    assert module.SUITES == ("trixie-backports", "trixie")


def test_gcc_wrapper_rewrites_only_the_gcc14_alignment_flag(tmp_path):
    wrap = tmp_path / "wrap.sh"
    # The wrapper execs CROSS_COMPILE gcc: point it at echo to see the arguments it passes.
    wrap.write_text(module.GCC_WRAP.replace("exec %sgcc", "exec echo"))
    wrap.chmod(0o755)
    out = subprocess.run([str(wrap), "-O2", "-fmin-function-alignment=8", "-c", "x.c"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["-O2", "-falign-functions=8", "-c", "x.c"]


def test_module_key_names_a_missing_source(tmp_path):
    (tmp_path / "kcffa.c").write_text("x")
    hdr = tmp_path / "hdr"
    hdr.mkdir()
    (hdr / module.STAMP).write_text("{}")
    with pytest.raises(ToolError, match="kcffa_uapi.h: no such file"):
        module.module_key(hdr, tmp_path)


def _agent_tree(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for rel in set(agent.SOURCES):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, repo / rel)
    for d in agent.HEADER_DIRS:
        (repo / d).mkdir(parents=True, exist_ok=True)
        for p in (REPO / d).glob("*.h"):
            shutil.copy2(p, repo / d / p.name)
    return repo


@pytest.mark.skipif(not shutil.which(agent.CXX), reason="g++-aarch64-linux-gnu (group qemu-arm64) not installed")
def test_agent_key_follows_its_sources_and_headers(tmp_path):
    repo = _agent_tree(tmp_path)
    k0 = agent.key(repo)
    assert agent.key(repo) == k0
    scenario_ops = repo / "models" / "ffa" / "scenario_ops.h"
    scenario_ops.write_text(scenario_ops.read_text() + "\n// changed\n")
    k1 = agent.key(repo)
    assert k1 != k0
    (repo / "targets" / "qemu_arm64" / "agent" / "ffa_agent.cc").write_text("int main() {}\n")
    assert agent.key(repo) not in (k0, k1)
    (repo / "models" / "ffa" / "desc.cc").unlink()
    with pytest.raises(ToolError, match="desc.cc: no such file"):
        agent.key(repo)


def test_qemu_command_adds_the_frame_port_and_the_resume_point(tmp_path):
    image = tmp_path / "Image"
    head = bytearray(64)
    head[16:24] = (40 << 20).to_bytes(8, "little")
    head[56:60] = b"ARM\x64"
    image.write_bytes(bytes(head))
    initrd = tmp_path / "initrd.cpio.gz"
    initrd.write_bytes(b"\0" * 1000)
    fw = firmware.Firmware(tmp_path, "k", {})
    kernel = Kernel(image=image, release="7.3.4+deb13-arm64", source="test", modules=())
    cmd = run.qemu_command(fw, kernel, initrd, tmp_path / "frames.log", 17)
    append = cmd[cmd.index("-append") + 1]
    assert "kconform.port=/dev/hvc0" in append and "kconform.from=17" in append
    assert "kvm-arm.mode=protected" in append
    assert cmd[-6:] == ["-device", "virtio-serial-pci", "-chardev", f"file,id=kcframes,path={tmp_path / 'frames.log'}",
                        "-device", "virtconsole,chardev=kcframes"]
    assert "kconform.caps" not in append      # Debian's 7.3: no RECLAIM2
    # A kernel built from a tree whose ffa.c handles RECLAIM2: the agent is told (kCapReclaim2).
    built = Kernel(image=image, release="7.3.4", source="debian:7.3+r2.patch", modules=(),
                   stamp={"tree_facts": {"handles_reclaim2": True, "mbox_pages": 1}})
    append = (c := run.qemu_command(fw, built, initrd, tmp_path / "frames.log", 0))[c.index("-append") + 1]
    assert "kconform.caps=1" in append and run.kernel_caps(built) == 1


PROBE = {"t": "probe", "ok": True, "release": "7.3.4+deb13-arm64", "page_size": 4096, "buf_pa": 0x7b100000,
         "buf_size": 24 << 20, "phys_base": 0x7f6c0000, "host_pages": 2432}


def test_identity_is_the_models_real_el3_profile_of_debians_73():
    # The partition our firmware starts is the one the model's SPMC must know.
    assert "id = <0x8001>;" in (REPO / "targets" / "qemu_arm64" / "sp" / "sp_manifest.dts").read_text()
    ident = run.identity(PROBE, "v2.12.1", 1.25)
    assert ident["abi"] == "ffa" and ident["target"] == "qemu-arm64"
    assert ident["release"] == "7.3.4+deb13-arm64+tf-a-2.12.1"
    # The values the el2 target reports for Debian's 7.3 tree at 4K.
    assert ident["ffa"] == {"page_size": 4096, "phys_base": 0x7f6c0000, "host_pages": 2432, "mbox_pages": 1,
                            "desc_buf_bytes": 36864, "version": 0x10002, "real_el3": 1, "reclaim2": 0,
                            "spmc": {"version": 0x10002, "sp_ids": [0x8001], "reclaim2": False,
                                     "donate": False, "one_send_in_flight": False}}
    assert ident["cap_bits"] == 2 and ident["seconds"] == 1.25
    with pytest.raises(ToolError, match="PAGE_SIZE 8192"):
        run.identity(dict(PROBE, page_size=8192), "v2.12.1", 0)


@pytest.mark.parametrize("flags, named", [
    (["--page-size", "64K"], "--page-size"),
    (["--kernel", "/nonexistent/Image"], "--kernel"),
    (["--fault", "wrong-errno:write"], "--fault"),
])
def test_flags_the_target_cannot_honour_are_refused(flags, named):
    r = kconform("run", "--target", "qemu-arm64", "corpora/ffa/smoke.kcs", *flags, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert named in r.stderr and "qemu-arm64" in r.stderr


def test_a_pkvm_hyp_bug_on_the_console_is_recognised():
    # The lines of a real boot (ffa/frag/tx-none-4k through stock 7.3 and TF-A 2.12.1).
    log = ("[    6.758571] kvm [98]: nVHE hyp BUG at: ffff8000812d12c8!\n"
           "[    6.763770] Kernel panic - not syncing: HYP panic:\n")
    m = run.HYP_PANIC.search(log)
    assert m and m.group(0) == "nVHE hyp BUG at: ffff8000812d12c8!"
    assert run.HYP_PANIC.search("kvm [1]: nVHE hyp panic at: [<ffff800080012345>] __kvm_nvhe_x+0x10/0x20!")
    assert not run.HYP_PANIC.search("kvm [1]: Protected hVHE mode initialized successfully")


def test_the_page_size_picks_debians_kernel_flavour():
    assert run.flavour_of(4096) == "arm64" and run.flavour_of(16384) == "arm64-16k"
    with pytest.raises(ToolError, match=r"flag --page-size: target qemu-arm64 runs 4K or 16K .* not 64K"):
        run.flavour_of(65536)
    # The module is built against the headers of the kernel it loads into.
    assert module.packages("7.3.4+deb13", "arm64-16k")[0] == ("linux-headers-7.3.4+deb13-arm64-16k", "arm64")


def test_the_kernels_flavour_must_be_one_of_its_architecture(tmp_path):
    from kconform.sources import debian_kernels
    with pytest.raises(debian_kernels.KernelError, match="flavour 'amd64' is not one of architecture 'arm64'"):
        debian_kernels.fetch("debian:7.3", cache_dir=tmp_path, arch="arm64", flavour="amd64")


def test_identity_at_16k_is_the_models_16k_profile():
    # harness_ram at 16K: 1152 host pages from 0x80000000 - 1088 pages; Debian 7.3's proxy
    # descriptor buffer at 16K is what the el2 target reports (49152 bytes).
    ident = run.identity(dict(PROBE, release="7.3.4+deb13-arm64-16k", page_size=16384, phys_base=0x7ef00000,
                              host_pages=1152), "v2.12.1", 0.5)
    assert ident["release"] == "7.3.4+deb13-arm64-16k+tf-a-2.12.1"
    assert ident["ffa"]["page_size"] == 16384 and ident["ffa"]["desc_buf_bytes"] == 49152
    assert ident["cap_bits"] == 1 << 2 and ["page_size", 16384] in ident["caps"]


def _plan(*sizes):
    import argparse
    from kconform.commands.run import _plan_qemu_arm64
    ns = argparse.Namespace(fault=None, kernel=None, build=False, tree=None, apply=None,
                            page_size=list(sizes) or None, scenarios=["corpora/ffa/smoke.kcs"])
    return _plan_qemu_arm64(ns, lambda m: None)


def test_one_plan_per_page_size_each_naming_its_rerun_flags():
    (p,) = _plan()
    assert (p.label, p.page_size, p.rerun) == ("qemu-arm64", 4096, ["--target", "qemu-arm64", "--page-size", "4K"])
    a, b = _plan("4K", "16K")
    assert (a.page_size, b.page_size) == (4096, 16384)
    assert b.label == "qemu-arm64-16k" and b.target == "qemu-arm64"
    assert b.rerun == ["--target", "qemu-arm64", "--page-size", "16K"]
    with pytest.raises(ToolError, match="--page-size.*4K or 16K"):
        _plan("4K", "64K")


def test_a_page_size_that_is_no_page_size_is_refused_naming_the_flag():
    r = kconform("run", "--target", "qemu-arm64", "corpora/ffa/smoke.kcs", "--page-size", "8K", timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "flag --page-size: '8K'" in r.stderr


# --- kernels built from a tree (--build [--tree T] [--apply P]) -------------------------

def _fake_pkvm_tree(root: Path, reclaim2: bool, mbox: str = "#define KVM_FFA_MBOX_NR_PAGES\t1\n") -> Path:
    ffa_c = root / run.FFA_C
    ffa_c.parent.mkdir(parents=True)
    ffa_c.write_text("case FFA_MEM_RECLAIM:\n" + ("case FFA_MEM_RECLAIM2:\n" if reclaim2 else ""))
    h = root / run.KVM_PKVM_H
    h.parent.mkdir(parents=True)
    h.write_text("#ifndef __ARM64_KVM_PKVM_H__\n" + mbox + "#endif\n")
    return root


def test_tree_facts_say_whether_ffa_c_handles_reclaim2_and_its_mailbox_size(tmp_path):
    assert run.tree_facts(_fake_pkvm_tree(tmp_path / "a", True)) == {"handles_reclaim2": True, "mbox_pages": 1}
    assert run.tree_facts(_fake_pkvm_tree(tmp_path / "b", False)) == {"handles_reclaim2": False, "mbox_pages": 1}
    with pytest.raises(ToolError, match="kvm_pkvm.h: no '#define KVM_FFA_MBOX_NR_PAGES N'"):
        run.tree_facts(_fake_pkvm_tree(tmp_path / "c", True, mbox="/* gone */\n"))
    with pytest.raises(ToolError, match=r"flag --tree: .*ffa\.c"):
        run.tree_facts(tmp_path / "empty")


def test_identity_of_a_built_kernel_follows_its_tree_and_names_its_patch():
    patched = Kernel(image=Path("/i/Image"), release="7.3.4", modules=(Path("/i/kcffa.ko"),), source="x",
                     stamp={"patch": "/r/targets/el2/reclaim2/reclaim2-reference.patch",
                            "tree_facts": {"handles_reclaim2": True, "mbox_pages": 1}})
    ident = run.identity(dict(PROBE, release="7.3.4"), "v2.12.1", 1.0, patched)
    # The proxy handles RECLAIM2 (the RECLAIM2 corpus runs: kCapReclaim2); TF-A does not.
    assert ident["ffa"]["reclaim2"] == 1 and ident["ffa"]["spmc"]["reclaim2"] is False
    assert ["reclaim2", 1] in ident["caps"] and ident["cap_bits"] == (1 << 1) | 1
    assert ident["release"] == "7.3.4+reclaim2-reference+tf-a-2.12.1"
    stock = Kernel(image=Path("/i/Image"), release="7.3.4", modules=(), source="x",
                   stamp={"patch": None, "tree_facts": {"handles_reclaim2": False, "mbox_pages": 1}})
    ident = run.identity(dict(PROBE, release="7.3.4"), "v2.12.1", 1.0, stock)
    assert ident["ffa"]["reclaim2"] == 0 and ident["cap_bits"] == 1 << 1
    assert ident["release"] == "7.3.4+tf-a-2.12.1"


def _ns(**kw):
    import argparse
    base = dict(fault=None, kernel=None, build=False, tree=None, apply=None, arch=None, page_size=None,
                scenarios=["corpora/ffa/smoke.kcs"])
    return argparse.Namespace(**(base | kw))


@pytest.mark.parametrize("kw, named", [
    (dict(tree="debian:7.3"), "flags --tree/--apply: for target qemu-arm64 they need --build"),
    (dict(apply="targets/el2/reclaim2/reclaim2-reference.patch"), "need --build"),
    (dict(build=True, arch="x86_64"), "flag --arch: target qemu-arm64 builds arm64 kernels, not x86_64"),
    (dict(kernel="/some/Image"), "flag --kernel: target qemu-arm64"),
])
def test_build_flags_that_do_not_fit_are_refused_before_any_build(kw, named):
    from kconform.commands.run import _plan_qemu_arm64
    with pytest.raises(ToolError, match=named):
        _plan_qemu_arm64(_ns(**kw), lambda m: None)


def test_a_build_plan_per_page_size_builds_that_page_size_and_names_its_rerun_flags(monkeypatch):
    from kconform.commands import run as run_cmd
    built = []
    monkeypatch.setattr(run, "built_kernel", lambda tree, patch, p, log: built.append((tree, patch, p)) or f"K{p}")
    a, b = run_cmd._plan_qemu_arm64(_ns(build=True, arch="arm64", apply="targets/el2/reclaim2/reclaim2-reference.patch",
                                        page_size=["4K", "16K"]), lambda m: None)
    assert built == [("debian:7.3", "targets/el2/reclaim2/reclaim2-reference.patch", 4096),
                     ("debian:7.3", "targets/el2/reclaim2/reclaim2-reference.patch", 16384)]
    assert (a.kernel, b.kernel) == ("K4096", "K16384")
    assert b.rerun == ["--target", "qemu-arm64", "--page-size", "16K", "--build", "--tree", "debian:7.3",
                       "--apply", "targets/el2/reclaim2/reclaim2-reference.patch"]


def test_the_arm64_fragment_survives_and_the_page_size_is_the_builds():
    from kconform.sources import kernel_build as kb
    f4 = kb.kernel_fragment(kb.ARM64, 4096).decode().splitlines()
    f16 = kb.kernel_fragment(kb.ARM64, 16384).decode().splitlines()
    for needed in ("CONFIG_KVM=y", "CONFIG_MODULES=y", "CONFIG_DMA_CMA=y", "CONFIG_VIRTIO_CONSOLE=y",
                   "CONFIG_SERIAL_AMBA_PL011_CONSOLE=y", "CONFIG_BLK_DEV_INITRD=y"):
        assert needed in f4 and needed in f16
    assert "CONFIG_ARM64_4K_PAGES=y" in f4 and "CONFIG_ARM64_16K_PAGES=y" not in f4
    assert "CONFIG_ARM64_16K_PAGES=y" in f16 and "CONFIG_ARM64_4K_PAGES=y" not in f16
    with pytest.raises(kb.KernelError, match="flag --page-size: an arm64 kernel build knows 4K, 16K, not 64K"):
        kb.kernel_fragment(kb.ARM64, 65536)
    with pytest.raises(kb.KernelError, match="x86_64 kernel build has 4K pages only"):
        kb.kernel_fragment(kb.X86_64, 16384)
    # The x86 build's fragment is what it always was.
    assert kb.kernel_fragment() == kb.KERNEL_FRAGMENT.read_bytes()


def test_the_firmwares_ffa_routing_is_read_from_the_tfa_tree(tmp_path, monkeypatch):
    # SPMC:ROUTED: BL31 hands FF-A numbers up to FFA_FNUM_MAX_VALUE to the SPMD.
    tree = tmp_path / "tfa"
    h = tree / firmware.FFA_SVC_H
    h.parent.mkdir(parents=True)
    h.write_text("#define FFA_FNUM_MIN_VALUE\tU(0x60)\n#define FFA_FNUM_MAX_VALUE\tU(0x8E)\n")
    monkeypatch.setattr(firmware.source_trees, "fetch", lambda spec, cache, progress=None: tree)
    assert firmware.tfa_max_fnum(lambda m: None, tmp_path) == 0x8E
    ident = run.identity(PROBE, "v2.12.1", 1.0, None, 0x8E)
    assert ident["ffa"]["spmc"]["max_fnum"] == 0x8E and "max_fnum" not in run.SPMC
    h.write_text("/* no such define */\n")
    with pytest.raises(ToolError, match="no '#define FFA_FNUM_MAX_VALUE'"):
        firmware.tfa_max_fnum(lambda m: None, tmp_path)
