"""kconform export: a finding as a gcc-only C reproducer, a kselftest function, an EL2 folder."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIND_PAST_2_63, REPO, kconform, needs_host_gmem, needs_kvm, run_report, skip_for_kernel

sys.path.insert(0, str(REPO / "harness" / "driver"))
from kconform.engine import export_c  # noqa: E402

GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is missing")

HEADER = ("# kconform finding: violation GMEM.BIND.RANGE on host test (gmem-base), scenario fuzz (x #0), "
          "op 2: bind vm=0 slot=0 gpa=0 size=0x1000 gmem=0 gmem_offset={off}\n"
          "# GMEM.BIND.RANGE: expected: errno EINVAL [GMEM.BIND.RANGE]\n"
          "# GMEM.BIND.RANGE: observed: ok 0\n")


def finding(tmp: Path, offset: str = "0x7ffffffffffff000", name: str = "f.kcs") -> Path:
    p = tmp / name
    p.write_text(HEADER.format(off=offset) + BIND_PAST_2_63.replace("0x7ffffffffffff000", offset))
    return p


def export_and_run(tmp: Path, f: Path) -> subprocess.CompletedProcess:
    c = tmp / "repro.c"
    r = kconform("export", "--as", "c", str(f), "-o", str(c))
    assert r.returncode == 0, r.stderr
    b = subprocess.run([GCC, "-O2", "-Wall", "-Werror", "-o", str(tmp / "repro"), str(c)],
                       capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    return subprocess.run([str(tmp / "repro")], capture_output=True, text=True, timeout=60)


# A finding for the C reproducer on every kernel: a lying host target's. With
# --fault fail:fallocate the host target reports the first successful fallocate of a
# scenario as EIO (targets/faulty/faulty_target.h "fail"); a KEEP_SIZE allocation
# inside the file must succeed (models/gmem/rules.def GMEM.FALLOC.ALLOC), so run
# finds GMEM.FALLOC.ALLOC at op 2 and saves the reproducer. Exported as C, it passes
# on the kernel (which does not lie), and reproduces the finding exactly under LIE_C,
# a preload library that makes the C library's fallocate() lie as the target did.
ALLOC = """kconform-scenario 1
abi gmem
name gmem/export/alloc-inside
requires gmem
create_vm
create_gmem vm=0 size=0x4000 flags=0
fallocate gmem=0 mode=KEEP_SIZE offset=0 len=0x1000
"""
LIE_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>

/* fail: a success is reported as EIO (the call itself is made, as the faulty target makes it) */
static int lie(const char *name, int fd, int mode, off_t offset, off_t len)
{
	int (*real)(int, int, off_t, off_t) = (int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, name);

	if (real(fd, mode, offset, len) != 0)
		return -1;
	errno = EIO;
	return -1;
}

int fallocate(int fd, int mode, off_t offset, off_t len) { return lie("fallocate", fd, mode, offset, len); }
int fallocate64(int fd, int mode, off_t offset, off_t len) { return lie("fallocate64", fd, mode, offset, len); }
"""


@needs_kvm
@needs_host_gmem
@needs_gcc
def test_c_reproducer_of_a_lying_targets_finding_reproduces_the_lie(engine, tmp_path):
    scenario = tmp_path / "alloc.kcs"
    scenario.write_text(ALLOC)
    # Where only a VM type other than the default has guest_memfd, the file is never made.
    truth = engine.run("host", [str(scenario)], tmp_path / "truth.jsonl")
    ops = {rec["op"]: rec for rec in map(json.loads, (tmp_path / "truth.jsonl").read_text().splitlines())
           if rec.get("type") == "op"}
    if ops[1]["verdict"] == "unsupported" or not ops[1]["observed"].startswith("ok "):
        skip_for_kernel("guest_memfd on a VM of the default type fails here: "
                        + ops[1].get("observed", str(ops[1].get("missing"))))
    assert not truth.findings and [ops[i]["verdict"] for i in range(3)] == ["pass"] * 3, ops
    code, doc = run_report(tmp_path / "run", "--target", "host", "--fault", "fail:fallocate", str(scenario))
    assert code == 1
    found = [(f["rule"], f["op"], f["observed"], f["baselined_by"]) for f in doc["runs"][0]["findings"]]
    assert found == [("GMEM.FALLOC.ALLOC", 2, "errno EIO", None)], found
    saved = REPO / doc["runs"][0]["findings"][0]["saved"]
    text = saved.read_text()
    assert "# GMEM.FALLOC.ALLOC: expected: ok 0 [GMEM.FALLOC.ALLOC]" in text and \
        "# GMEM.FALLOC.ALLOC: observed: errno EIO" in text, text
    # On the kernel, which does not lie: the allocation succeeds, as the rule says.
    r = export_and_run(tmp_path, saved)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "#   GMEM.FALLOC.ALLOC: observed: ok 0\n" in r.stdout
    assert "ok 1 GMEM.FALLOC.ALLOC: op 2 fallocate" in r.stdout and "not ok" not in r.stdout
    # With the C library lying as the target did: the finding, as run recorded it.
    lib = tmp_path / "lie.so"
    (tmp_path / "lie.c").write_text(LIE_C)
    b = subprocess.run([GCC, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(lib), str(tmp_path / "lie.c"),
                        "-ldl"], capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    r = subprocess.run([str(tmp_path / "repro")], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LD_PRELOAD=str(lib)))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "#   GMEM.FALLOC.ALLOC: observed: errno EIO\n" in r.stdout
    assert "not ok 1 GMEM.FALLOC.ALLOC: op 2 fallocate" in r.stdout


@needs_kvm
@needs_host_gmem
@needs_gcc
def test_c_reproducer_of_the_known_6_18_finding_fails_on_this_kernel(tmp_path):
    # The known finding (ci/known-findings.json): a bind past 2^63 the kernel accepts.
    known = json.loads((REPO / "ci" / "known-findings.json").read_text())
    release = os.uname().release
    if not any(e.get("rule") == "GMEM.BIND.RANGE" and fnmatch.fnmatch(release, e.get("release", "*"))
               for e in known["findings"]):
        skip_for_kernel(f"the bind past 2^63 is not a known finding on {release}")
    r = export_and_run(tmp_path, finding(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "GMEM.BIND.RANGE: expected: errno EINVAL" in r.stdout
    assert "GMEM.BIND.RANGE: observed: ok 0" in r.stdout
    assert "not ok 1 GMEM.BIND.RANGE" in r.stdout


@needs_kvm
@needs_host_gmem
@needs_gcc
def test_c_reproducer_exits_0_when_the_kernel_behaves(tmp_path):
    # gmem range [0x1000, +0x1000) within a 0x4000 file: EINVAL is not expected;
    # a header expecting what every kernel does (ok 0) passes.
    f = tmp_path / "ok.kcs"
    f.write_text(HEADER.format(off="0x1000").replace("errno EINVAL [GMEM.BIND.RANGE]", "ok 0 [GMEM.BIND.RANGE]")
                 + BIND_PAST_2_63.replace("0x7ffffffffffff000", "0x1000"))
    r = export_and_run(tmp_path, f)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok 1 GMEM.BIND.RANGE" in r.stdout and "not ok" not in r.stdout


@needs_kvm
@needs_host_gmem
@needs_gcc
def test_c_reproducer_runs_every_op_kind_as_the_host_target(tmp_path):
    # Data through write, a mapping, a load's digest (FNV-1a of the pattern bytes)
    # and a SIGBUS past EOF: the outcomes the host target reports.
    f = tmp_path / "ops.kcs"
    f.write_text("# kconform finding: violation X on host t (p), scenario s (x #0), op 5: load map=0 offset=0 len=0x1000\n"
                 "# GMEM.X.Y: expected: signal SIGBUS [GMEM.X.Y]\n# GMEM.X.Y: observed: ?\n"
                 "kconform-scenario 1\nabi gmem\nname ops\nrequires gmem mmap init_shared\ncreate_vm\n"
                 "create_gmem vm=0 size=0x1000 flags=MMAP|INIT_SHARED\nmmap gmem=0 offset=0 len=0x2000\n"
                 "store map=0 offset=0 len=0x1000 pattern=7\nfstat gmem=0\nload map=0 offset=0x1000 len=0x1000\n"
                 "fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x1000\nread gmem=0 len=0x1000\n")
    r = export_and_run(tmp_path, f)
    if r.returncode == 4:
        skip_for_kernel("guest_memfd MMAP|INIT_SHARED missing: " + r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "# op 4: fstat gmem=0 -> ok 0 aux=0x1000" in r.stdout
    assert "# op 5: load map=0 offset=0x1000 len=0x1000 -> signal SIGBUS" in r.stdout


def test_bad_input_exits_2_naming_the_file(tmp_path):
    r = kconform("export", "--as", "c", str(tmp_path / "missing.kcs"))
    assert r.returncode == 2 and "missing.kcs: no such finding file" in r.stderr
    ffa = tmp_path / "ffa.kcs"
    ffa.write_text("# kconform finding: violation A on el2 x (p), scenario s (x #0), op 0: version\n"
                   "# FFA.A.B: expected: ok 0 x0=0x1 [FFA.A.B]\n# FFA.A.B: observed: ok 0\n"
                   "kconform-scenario 1\nabi ffa\nname s\nversion\n")
    r = kconform("export", "--as", "c", str(ffa))
    assert r.returncode == 2 and "ffa.kcs: abi ffa" in r.stderr and "--as el2" in r.stderr
    r = kconform("export", "--as", "el2", str(finding(tmp_path)), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and "f.kcs: abi gmem" in r.stderr
    plain = tmp_path / "plain.kcs"
    plain.write_text(BIND_PAST_2_63)
    r = kconform("export", "--as", "c", str(plain))
    assert r.returncode == 2 and "plain.kcs: not a finding" in r.stderr


def test_triage_headers_name_the_op(tmp_path):
    mini = tmp_path / "x.min.kcs"
    mini.write_text("# kconform triage: violation GMEM.BIND.RANGE bind on host (6.18)\n# from a #0: 3 ops -> 3\n"
                    "#  at op 2: bind vm=0 ... (violation, conformance)\n#  GMEM.BIND.RANGE: statement\n"
                    "#    expected: errno EINVAL [GMEM.BIND.RANGE]\n#    observed: ok 0\n" + BIND_PAST_2_63)
    f = export_c.load_finding(str(mini), mini.read_text(), REPO)
    assert (f.op, f.rule, f.expected, f.observed) == (2, "GMEM.BIND.RANGE", "errno EINVAL [GMEM.BIND.RANGE]", "ok 0")
    src = finding(tmp_path)
    auto = tmp_path / "y.min.kcs"
    auto.write_text(f"# kconform triage: violation GMEM.BIND.RANGE bind: minimised from {src} (3 -> 3 ops)\n"
                    + BIND_PAST_2_63)
    g = export_c.load_finding(str(auto), auto.read_text(), REPO)
    assert (g.op, g.expected) == (2, "errno EINVAL [GMEM.BIND.RANGE]")


def test_op_table_matches_the_engine(engine):
    ops = {}
    for line in subprocess.run([str(engine.binary), "ops"], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        d = json.loads(line)
        if d["abi"] == "gmem":
            ops[d["op"]] = d["args"]
    assert ops == {name: [a.name for a in args] for name, args in export_c.OPS.items()}


KSELFTEST_STUBS = """
#define _GNU_SOURCE  /* as the selftests Makefile builds */
#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
typedef uint64_t u64; typedef uint32_t u32; typedef uint8_t u8; typedef u64 gpa_t;
struct kvm_vm;
struct kvm_vm *vm_create_barebones_type(unsigned long type);
int __vm_create_guest_memfd(struct kvm_vm *vm, u64 size, u64 flags);
int __vm_set_user_memory_region2(struct kvm_vm *vm, u32 slot, u32 flags, gpa_t gpa, u64 size, void *hva,
                                 u32 guest_memfd, u64 guest_memfd_offset);
void kvm_vm_free(struct kvm_vm *vm);
void test_assert(int exp, const char *exp_str, const char *file, unsigned int line, const char *fmt, ...);
#define TEST_ASSERT(e, fmt, ...) test_assert((e), #e, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define READ_ONCE(x) (*(volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
"""


@needs_gcc
def test_kselftest_function_parses_against_the_selftest_api(tmp_path):
    # Stub declarations of the 7.3 selftest library's functions the export uses
    # (tools/testing/selftests/kvm/include/kvm_util.h, test_util.h).
    f = finding(tmp_path)
    r = kconform("export", "--as", "kselftest", str(f))
    assert r.returncode == 0, r.stderr
    assert "static void test_gmem_bind_range_fuzz(void)" in r.stdout
    assert "GMEM.BIND.RANGE" in r.stdout and "errno == EINVAL" in r.stdout
    src = tmp_path / "t.c"
    src.write_text(KSELFTEST_STUBS + r.stdout + "int main(void) { test_gmem_bind_range_fuzz(); return 0; }\n")
    b = subprocess.run([GCC, "-fsyntax-only", "-Wall", "-Werror", "-std=gnu11", str(src)],
                       capture_output=True, text=True)
    assert b.returncode == 0, b.stderr


def test_el2_export_writes_a_build_folder(tmp_path):
    tree = REPO / ".." / "no-tree"
    f = tmp_path / "ffa.kcs"
    f.write_text("# kconform finding: violation FFA.R2.NOT_IMPLEMENTED on el2 x (p), scenario s (x #0), op 0: "
                 "version\n# FFA.R2.NOT_IMPLEMENTED: expected: ok 0 x0=0x1 [FFA.R2.NOT_IMPLEMENTED]\n"
                 "# FFA.R2.NOT_IMPLEMENTED: observed: ok 0\n"
                 "# re-run: ./kconform run --target el2 --tree debian:7.3 --page-size 16K f.kcs\n"
                 "kconform-scenario 1\nabi ffa\nname s\nversion\n")
    del tree
    out = tmp_path / "el2"
    r = kconform("export", "--as", "el2", str(f), "-o", str(out))
    if r.returncode == 2 and "debian:7.3" in r.stderr:
        pytest.skip("the debian:7.3 tree cannot be fetched here: " + r.stderr)
    assert r.returncode == 0, r.stderr
    sh = (out / "build.sh").read_text()
    assert "-DKCONFORM_PAGE_SIZE=16384" in sh and "kconform-runner-el2-16k" in sh
    assert "version" in (out / "scenario.kcs").read_text()


@needs_gcc
@pytest.mark.network
def test_c_reproducer_runs_inside_the_debian_7_3_guest(tmp_path):
    # The same reproducer, built with gcc -static, inside Debian's 7.3 kernel in QEMU:
    # 7.3 refuses the bind past 2^63 (EINVAL), so the finding does not reproduce there.
    from test_qemu import _qemu_missing
    why = _qemu_missing()
    if why:
        pytest.skip(why)
    r = kconform("export", "--as", "c", str(finding(tmp_path)), "--qemu", timeout=900)
    if r.returncode == 2 and "kernel" in r.stderr.lower() and "debian" in r.stderr.lower():
        pytest.skip("Debian 7.3 kernel unavailable: " + r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "# kernel 7.3" in r.stdout
    assert "GMEM.BIND.RANGE: observed: errno EINVAL" in r.stdout
    assert "ok 1 GMEM.BIND.RANGE" in r.stdout


@needs_gcc
@pytest.mark.network
def test_kselftest_function_parses_in_the_7_3_selftests_tree(tmp_path):
    # Against the real tools/testing/selftests/kvm headers of Debian's 7.3 tree
    # (fetched into the cache like `run --target qemu --build` does).
    from kconform.core.paths import cache_dir
    from kconform.sources.full_trees import full_tree
    from kconform.sources.kernel_image import KernelError
    try:
        tree = Path(full_tree("debian:7.3", cache_dir(), progress=lambda m: None)[0])
    except KernelError as e:  # what full_tree raises when the download or extraction cannot happen
        pytest.skip(f"debian:7.3's full tree cannot be fetched: {str(e).splitlines()[0]}")
    k = tree / "tools" / "testing" / "selftests" / "kvm"
    r = kconform("export", "--as", "kselftest", str(finding(tmp_path)))
    assert r.returncode == 0, r.stderr
    src = tmp_path / "t.c"
    src.write_text('#include "kvm_util.h"\n#include "test_util.h"\n#include <sys/mman.h>\n#include <sys/uio.h>\n'
                   + r.stdout + "int main(void) { test_gmem_bind_range_fuzz(); return 0; }\n")
    inc = [f"-I{k / 'include'}", f"-I{k / 'include' / 'x86'}", f"-I{k.parent}", f"-I{tree / 'tools/include'}",
           f"-I{tree / 'tools/arch/x86/include'}", f"-I{tree / 'tools/include/uapi'}",
           "-isystem", str(tree / "include/uapi"), "-isystem", str(tree / "arch/x86/include/uapi"),
           "-isystem", str(tree / "arch/x86/include/generated/uapi")]
    b = subprocess.run([GCC, "-fsyntax-only", "-Wall", "-Werror", "-D_GNU_SOURCE", *inc, str(src)],
                       capture_output=True, text=True)
    assert b.returncode == 0, b.stderr


@needs_kvm
@needs_host_gmem
@needs_gcc
def test_c_reproducer_agrees_with_the_host_target_op_by_op(engine, tmp_path):
    # Fidelity: every scenario of the directed gmem corpus that the host target runs
    # here (concurrent groups are not exported), run by kconform-runner and by its
    # exported C file, gives the same outcome at every op (errno, value, a load's
    # digest, fstat's size, a fault's signal).
    files = sorted(p for p in (REPO / "corpora" / "gmem").glob("*.kcs") if p.name != "concurrent.kcs")
    out = tmp_path / "v.jsonl"
    subprocess.run([str(engine.binary), "run", "--target", "host", "--out", str(out), *map(str, files)],
                   capture_output=True, text=True, timeout=600)
    observed: dict = {}
    for line in out.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "op" and rec.get("verdict") != "unsupported" and "observed" in rec:
            observed.setdefault((rec["file"], rec["index"]), {})[rec["op"]] = rec["observed"]
    assert len(observed) > 200
    compared = 0
    for (file, index), by_op in sorted(observed.items())[::2]:  # every other one: ~40 s of gcc
        text = ["kconform-scenario" + c for c in engine.to_text(str(REPO / file) if not Path(file).is_absolute()
                                                                else file).split("kconform-scenario")[1:]][index]
        if "@" in text or "\nrepeat" in text:
            continue
        last = max(by_op)
        head = (f"# kconform finding: t on host t (p), scenario s (x #0), op {last}: x\n"
                f"# GMEM.T.T: expected: {by_op[last]} [GMEM.T.T]\n# GMEM.T.T: observed: {by_op[last]}\n")
        f = export_c.load_finding(f"{file}#{index}", head + text, REPO)
        c = tmp_path / "r.c"
        c.write_text(export_c.to_c(f, file))
        subprocess.run([GCC, "-O0", "-o", str(tmp_path / "r"), str(c)], check=True, capture_output=True)
        r = subprocess.run([str(tmp_path / "r")], capture_output=True, text=True, timeout=60)
        got = {int(m.group(1)): m.group(2) for m in re.finditer(r"^# op (\d+): .*? -> (.*)$", r.stdout, re.M)}
        for op, want in by_op.items():
            assert got.get(op) == want, f"{file} #{index} op {op}: runner {want}, C {got.get(op)}\n{r.stdout}"
            compared += 1
    assert compared > 600, compared
    print(f"compared {compared} ops of {len(observed)} scenarios")


RICH = """# kconform finding: violation X on host t (p), scenario rich (x #0), op 9: fallocate gmem=0 mode=KEEP_SIZE offset=0 len=0
# GMEM.FALLOCATE.LEN: expected: errno EINVAL [GMEM.FALLOCATE.LEN]
# GMEM.FALLOCATE.LEN: observed: ok 0
kconform-scenario 1
abi gmem
name gmem/rich/every-op
requires gmem mmap init_shared user_memory2
create_vm
create_gmem vm=0 size=0x4000 flags=MMAP|INIT_SHARED
pwrite gmem=0 offset=0 len=0x1000 pattern=3
pwritev gmem=0 offset=0 len=0x2000 iovcnt=3
read gmem=0 len=0x1000
lseek gmem=0 offset=0 whence=END
mmap gmem=0 offset=0 len=0x2000
store map=0 offset=0 len=0x10 pattern=5
load map=0 offset=0 len=0x10
fallocate gmem=0 mode=KEEP_SIZE offset=0 len=0
fstat gmem=0
munmap map=0
bind vm=0 slot=1 gpa=0x100000 size=0x1000 gmem=0 gmem_offset=0
unbind vm=0 slot=1
close gmem=0
close_vm vm=0
"""


@needs_gcc
def test_kselftest_of_every_op_kind_parses_and_names_the_rule(tmp_path):
    f = tmp_path / "rich.kcs"
    f.write_text(RICH)
    r = kconform("export", "--as", "kselftest", str(f))
    assert r.returncode == 0, r.stderr
    assert "static void test_gmem_fallocate_len_every_op(void)" in r.stdout
    assert " * GMEM.FALLOCATE.LEN: fallocate" in r.stdout and "errno == EINVAL" in r.stdout
    src = tmp_path / "t.c"
    src.write_text(KSELFTEST_STUBS + r.stdout + "int main(void) { test_gmem_fallocate_len_every_op(); return 0; }\n")
    b = subprocess.run([GCC, "-fsyntax-only", "-Wall", "-Werror", "-std=gnu11", str(src)],
                       capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    # What a kselftest cannot say is refused, naming the file and the op.
    sig = tmp_path / "sig.kcs"
    sig.write_text(RICH.replace("op 9: fallocate gmem=0 mode=KEEP_SIZE offset=0 len=0", "op 8: load")
                   .replace("errno EINVAL [GMEM.FALLOCATE.LEN]", "signal SIGBUS [GMEM.FALLOCATE.LEN]"))
    r = kconform("export", "--as", "kselftest", str(sig))
    assert r.returncode == 2 and "op 8" in r.stderr and "--as c" in r.stderr


@needs_kvm
@needs_host_gmem
@needs_gcc
def test_c_reproducer_of_every_op_kind_compiles_warning_free_and_runs(tmp_path):
    f = tmp_path / "rich.kcs"
    f.write_text(RICH)
    r = export_and_run(tmp_path, f)
    if r.returncode == 4:
        skip_for_kernel("guest_memfd MMAP|INIT_SHARED missing: " + r.stdout)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert r.stdout.count("# op ") == 16
