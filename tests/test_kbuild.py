"""Kernels built from content, whatever the mtimes, and builds that wait for each other
(issue 11): sources/kernel_build.py, core/locks.py, engine/build.py's lock.

The kernel build runs here on a fake kernel tree whose `make bzImage` takes no time (a
Makefile with the kernel's targets: tinyconfig, olddefconfig, bzImage), through the very
build() that builds real kernels: mirror, content hashes, the record of what the obj
folder was built from, make, the image cache, the lock. The real kernel's incremental
check is tests/test_qemu.py::test_a_file_restored_with_an_older_mtime_is_rebuilt.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import KCONFORM, REPO, kernel_build_missing
from kconform.core import locks
from kconform.core.errors import ToolError
from kconform.sources import kernel_build
from kconform.sources.kernel_image import KernelError

DRIVER = REPO / "harness" / "driver"
GM = "virt/kvm/guest_memfd.c"
OLD = 1_000_000_000           # 2001-09-09: older than any build
OLDER = 900_000_000

MAKEFILE = """\
VERSION = 7
PATCHLEVEL = 3
SUBLEVEL = 4
O ?= .
.PHONY: tinyconfig olddefconfig bzImage
tinyconfig:
\tmkdir -p $(O) && echo CONFIG_TINY=y > $(O)/.config
olddefconfig:
\ttrue
$(O)/virt/kvm/guest_memfd.o: virt/kvm/guest_memfd.c include/linux/kvm_host.h
\tmkdir -p $(dir $@) && cat $^ > $@
bzImage: $(O)/virt/kvm/guest_memfd.o
\tsleep $(or $(KC_FAKE_SLEEP),0)
\ttest -z "$(KC_FAKE_FAIL)"
\tmkdir -p $(O)/arch/x86/boot && /usr/bin/python3 mkbz.py $< $(O)/arch/x86/boot/bzImage
"""
MKBZ = """\
import sys
head = bytearray(0x240); head[0x202:0x206] = b"HdrS"   # what user_kernel() checks
open(sys.argv[2], "wb").write(bytes(head) + open(sys.argv[1], "rb").read())
"""


def _missing() -> str | None:
    return kernel_build_missing()


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def fake_tree(root: Path, gm: str = "int content = 1;\n") -> Path:
    for rel, text in {"Makefile": MAKEFILE, "mkbz.py": MKBZ, GM: gm,
                      "include/linux/kvm_host.h": "/* kvm_host.h */\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def payload(image: Path) -> str:
    """What the fake bzImage was built from: guest_memfd.c + kvm_host.h."""
    return Path(image).read_bytes()[0x240:].decode()


def restore(path: Path, text: str, mtime: int, in_place: bool = False) -> None:
    """Puts text at path with an old mtime, as `rsync -t`/`tar x` (a new file renamed over
    it) or `cp -p` (in_place: the same inode, rewritten) do."""
    if in_place:
        with open(path, "r+") as f:
            f.truncate(0)
            f.write(text)
    else:
        tmp = path.with_name(f".{path.name}.restore")
        tmp.write_text(text)
        os.replace(tmp, path)
    os.utime(path, (mtime, mtime))


class Build:
    def __init__(self, tree: Path, cache: Path):
        self.tree, self.cache, self.lines = tree, cache, []

    def __call__(self, patch: Path | None = None):
        self.lines = []
        return kernel_build.build(str(self.tree), str(patch) if patch else None, cache_dir=self.cache,
                                  progress=self.lines.append)

    @property
    def cached(self) -> bool:
        return any("(cached" in l for l in self.lines)


@pytest.fixture
def fake(tmp_path):
    return Build(fake_tree(tmp_path / "tree"), tmp_path / "cache")


# --- content, not mtimes --------------------------------------------------------------

@pytest.mark.parametrize("in_place", [False, True], ids=["rsync-t", "cp-p"])
def test_a_file_restored_with_an_older_mtime_is_rebuilt(fake, in_place):
    k1 = fake()
    assert payload(k1.image).startswith("int content = 1;") and not fake.cached
    restore(fake.tree / GM, "int content = 2;\n", OLD, in_place)
    k2 = fake()
    assert payload(k2.image).startswith("int content = 2;"), "an image of the old content was built"
    assert k2.stamp["key"] != k1.stamp["key"] and k2.image != k1.image
    assert payload(k1.image).startswith("int content = 1;")      # the first image is intact
    # Back to the first content, even older: the first image, from the cache, no make.
    restore(fake.tree / GM, "int content = 1;\n", OLDER, in_place)
    k3 = fake()
    assert fake.cached and k3.image == k1.image and k3.stamp["key"] == k1.stamp["key"]
    # ... and building it again for real gives that content too (the obj folder holds 2).
    k3.image.unlink()
    k4 = fake()
    assert not fake.cached and payload(k4.image).startswith("int content = 1;")


def test_an_mtime_alone_changes_nothing(fake):
    k1 = fake()
    os.utime(fake.tree / GM, (OLD, OLD))
    os.utime(fake.tree / "include/linux/kvm_host.h")
    k2 = fake()
    assert fake.cached and k2.image == k1.image


def test_the_tree_is_never_changed(fake):
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
              for p in fake.tree.rglob("*") if p.is_file()}
    fake()
    restore(fake.tree / GM, "int content = 2;\n", OLD)
    before[fake.tree / GM] = ((fake.tree / GM).stat().st_ino, (fake.tree / GM).stat().st_mtime_ns,
                              (fake.tree / GM).read_bytes())
    fake()
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
             for p in fake.tree.rglob("*") if p.is_file()}
    assert after == before


def test_an_interrupted_build_is_repaired_by_the_next(fake, monkeypatch):
    """The object of content 2 is built, then the build fails; the tree goes back to
    content 1 with an older mtime: the next build must not take the object for built
    from content 1."""
    k1 = fake()
    restore(fake.tree / GM, "int content = 2;\n", OLD)
    monkeypatch.setenv("KC_FAKE_FAIL", "1")
    with pytest.raises(KernelError, match="failed"):
        fake()
    monkeypatch.delenv("KC_FAKE_FAIL")
    restore(fake.tree / GM, "int content = 1;\n", OLDER)
    k1.image.unlink()                   # no cached image: build content 1 again
    k = fake()
    assert not fake.cached and payload(k.image).startswith("int content = 1;")


def test_an_obj_folder_written_by_someone_else_is_built_from_scratch(fake):
    fake()
    obj = next(p for p in (fake.cache / "kbuild").glob("obj-*") if p.is_dir())
    (obj / GM.replace(".c", ".o")).write_text("int content = 99;\n")   # e.g. an older kconform
    restore(fake.tree / GM, "int content = 2;\n", OLD)
    k = fake()
    assert any("from scratch" in l for l in fake.lines), fake.lines
    assert payload(k.image).startswith("int content = 2;")


def test_a_stamp_for_other_content_is_refused(fake):
    k1 = fake()
    stamp = k1.image.parent / kernel_build.IMAGE_STAMP
    doc = stamp.read_text().replace(k1.stamp["content_sha256"], "0" * 64)
    stamp.write_text(doc)
    k2 = fake()
    assert not fake.cached and k2.image == k1.image and k2.stamp["content_sha256"] != "0" * 64


# --- patches on a mirror ----------------------------------------------------------------

def _hunk(rel: str, a: str, b: str) -> str:
    return f"--- a/{rel}\n+++ b/{rel}\n@@ -1 +1 @@\n-{a}\n+{b}\n"


def test_a_mutant_rebuilds_only_what_it_changes(fake, tmp_path):
    """The files a mutant shares with the last built patch keep the mtime of that build
    (make does not rebuild what includes them); the file it changes does not."""
    kh = "include/linux/kvm_host.h"
    ref, mutant = tmp_path / "ref.patch", tmp_path / "mutant.patch"
    ref.write_text(_hunk(kh, "/* kvm_host.h */", "/* kvm_host.h + write */")
                   + _hunk(GM, "int content = 1;", "int content = 10;"))
    mutant.write_text(_hunk(kh, "/* kvm_host.h */", "/* kvm_host.h + write */")
                      + _hunk(GM, "int content = 1;", "int content = 11;"))
    k = fake(ref)
    assert payload(k.image) == "int content = 10;\n/* kvm_host.h + write */\n"
    m = next((fake.cache / "kbuild").glob("src-*"))
    built_kh = (m / kh).stat().st_mtime_ns
    k = fake(mutant)
    assert payload(k.image) == "int content = 11;\n/* kvm_host.h + write */\n"
    assert (m / kh).stat().st_mtime_ns == built_kh        # as the last build compiled it
    assert (m / GM).stat().st_mtime_ns > built_kh
    k = fake(None)                                        # back to the stock tree
    assert payload(k.image) == "int content = 1;\n/* kvm_host.h */\n"
    assert (fake.tree / kh).read_text() == "/* kvm_host.h */\n"          # never patched in place
    assert os.stat(m / "Makefile").st_ino == os.stat(fake.tree / "Makefile").st_ino


def test_the_mirror_follows_the_tree(fake):
    fake()
    (fake.tree / "extra").mkdir()
    (fake.tree / "extra" / "new.h").write_text("new\n")
    (fake.tree / "include/linux/kvm_host.h").unlink()
    (fake.tree / "include/linux/kvm_host.h").write_text("/* kvm_host.h v2 */\n")
    os.utime(fake.tree / "include/linux/kvm_host.h", (OLD, OLD))
    k = fake()
    m = next((fake.cache / "kbuild").glob("src-*"))
    assert (m / "extra/new.h").read_text() == "new\n"
    assert payload(k.image).endswith("/* kvm_host.h v2 */\n")
    (fake.tree / "extra" / "new.h").unlink()
    (fake.tree / "extra").rmdir()
    fake()
    assert not (m / "extra").exists()


def test_make_from_content_on_a_small_makefile_project(tmp_path):
    """The function the kernel build runs make through, on its own: a project whose
    output is its input's content, restored with older mtimes over and over."""
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "Makefile").write_text("$(O)/out.txt: in.txt\n\tcp in.txt $(O)/out.txt\n")
    obj = tmp_path / "obj"
    hashes = kernel_build.HashCache(None)
    for n, mtime in enumerate([OLD + 500, OLD, OLDER, OLD, OLD + 1000]):
        restore(proj / "in.txt", f"version {n}\n", mtime) if n else (proj / "in.txt").write_text("version 0\n")
        files, _ = kernel_build.walk(proj, hashes)
        kernel_build.make_from_content(proj, obj, ["make", "-s", "-C", str(proj), f"O={obj}"],
                                       hashes=hashes, files=files, tools="t", log=tmp_path / "log",
                                       progress=lambda m: None)
        assert (obj / "out.txt").read_text() == f"version {n}\n"


# --- locks ---------------------------------------------------------------------------

CHILD = """\
import sys, time
sys.path.insert(0, {driver!r})
from kconform.sources import kernel_build
k = kernel_build.build({tree!r}, {patch!r}, cache_dir={cache!r},
                       progress=lambda m: print(m, flush=True))
print("IMAGE", k.image, flush=True)
"""


def _child(tree: Path, cache: Path, patch: Path | None = None, **env) -> subprocess.Popen:
    code = CHILD.format(driver=str(DRIVER), tree=str(tree), cache=str(cache),
                        patch=str(patch) if patch else None)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, **env))


def _image(out: str) -> Path:
    return Path(next(l for l in out.splitlines() if l.startswith("IMAGE ")).split(" ", 1)[1])


def test_two_builds_of_one_tree_wait_for_each_other(tmp_path):
    """The second asks for the same kernel while the first builds it: it waits for the lock,
    saying who holds it, then takes the first's image."""
    tree, cache = fake_tree(tmp_path / "tree"), tmp_path / "cache"
    first = _child(tree, cache, KC_FAKE_SLEEP="3")
    lock = cache / "kbuild" / f"{kernel_build.full_tree(str(tree), cache, lambda m: None)[2]}.lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    second = _child(tree, cache)
    out1, _ = first.communicate(timeout=120)
    out2, _ = second.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, out1 + out2
    assert f"waiting for the lock on the kernel build of" in out2 and f"held by pid {first.pid}" in out2, out2
    assert "(cached" in out2 and "make -j" not in out2, out2
    assert _image(out1) == _image(out2)
    assert payload(_image(out2)) == "int content = 1;\n/* kvm_host.h */\n"


def test_two_builds_of_different_content_do_not_cross(tmp_path):
    tree, cache = fake_tree(tmp_path / "tree"), tmp_path / "cache"
    pa, pb = tmp_path / "a.patch", tmp_path / "b.patch"
    pa.write_text(_hunk(GM, "int content = 1;", "int content = 100;"))
    pb.write_text(_hunk(GM, "int content = 1;", "int content = 200;"))
    a = _child(tree, cache, pa, KC_FAKE_SLEEP="2")
    time.sleep(0.5)
    b = _child(tree, cache, pb, KC_FAKE_SLEEP="2")
    out_a, _ = a.communicate(timeout=120)
    out_b, _ = b.communicate(timeout=120)
    assert a.returncode == 0 and b.returncode == 0, out_a + out_b
    assert payload(_image(out_a)).startswith("int content = 100;")
    assert payload(_image(out_b)).startswith("int content = 200;")


def test_a_lock_names_its_holder_and_times_out(tmp_path):
    lock = tmp_path / "d" / locks.LOCK_NAME
    code = textwrap.dedent(f"""\
        import sys, time
        sys.path.insert(0, {str(DRIVER)!r})
        from kconform.core import locks
        with locks.locked({str(lock)!r}, "the test folder", log=print):
            print("held", flush=True)
            time.sleep(30)
        """)
    holder = subprocess.Popen([sys.executable, "-c", code, "--an-arg"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        said = []
        t0 = time.monotonic()
        with pytest.raises(locks.LockTimeout, match=rf"held by pid {holder.pid} \(.*--an-arg") as e:
            with locks.locked(lock, "the test folder", log=said.append, timeout=0.5):
                pass
        assert isinstance(e.value, ToolError) and 0.5 <= time.monotonic() - t0 < 5
        assert said and f"waiting for the lock on the test folder ({lock}), held by pid {holder.pid}" in said[0]
    finally:
        holder.kill()
        holder.wait()
    with locks.locked(lock, "the test folder", log=said.append, timeout=5):   # free again
        with locks.locked(lock, "the test folder", timeout=0):               # re-entrant
            assert locks.holds(lock)
    assert not locks.holds(lock)


def test_a_lock_outlives_its_holder_while_a_build_command_it_started_runs(tmp_path):
    lock = tmp_path / locks.LOCK_NAME
    code = textwrap.dedent(f"""\
        import subprocess, sys
        sys.path.insert(0, {str(DRIVER)!r})
        from kconform.core import locks
        with locks.locked({str(lock)!r}, "x", log=print):
            p = subprocess.Popen(["sleep", "3"], pass_fds=locks.held_fds(), start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(p.pid, flush=True)
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    said = []
    t0 = time.monotonic()
    with locks.locked(lock, "x", log=said.append, timeout=20):
        waited = time.monotonic() - t0
    assert waited > 1 and "that process has exited" in said[0], said


def test_a_cmake_build_folder_lock_times_out_with_exit_2(tmp_path):
    """`./kconform build` while another process holds build/default: a clear error, exit 2."""
    from kconform.core.paths import build_dir
    lock = build_dir("default") / locks.LOCK_NAME
    with locks.locked(lock, "build/default (held by the test)", log=lambda m: None):
        r = subprocess.run([str(KCONFORM), "build"], cwd=REPO, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, KCONFORM_LOCK_TIMEOUT="1"))
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "waiting for the lock on the build folder build/default" in out, out
    assert f"held by pid {os.getpid()}" in out and "KCONFORM_LOCK_TIMEOUT" in out, out


# --- the EL2 handler: ffa.c compiled in place from the tree ----------------------------

def _el2_missing() -> str | None:
    from kconform.sources import trees
    if trees.cached_spec("debian:7.3") is None and os.environ.get("KCONFORM_OFFLINE"):
        return "debian:7.3 not cached and KCONFORM_OFFLINE set"
    return None


def test_el2_content_key_covers_every_tree_file_the_el2_build_reads():
    """el2.tree_content() hashes trees.NEEDED_PATHS: every file extract_tree.py reads (its
    deps.txt) must be among them, or a change to it would not rebuild the handler."""
    import importlib.util
    from kconform.sources.trees import NEEDED_PATHS
    spec = importlib.util.spec_from_file_location("extract_tree", REPO / "targets/el2/tools/extract_tree.py")
    et = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(et)
    reads = {"Makefile", et.FFA_C, et.KVM_PKVM_H, et.SCATTERLIST_H, *et.WHOLE}
    assert reads <= set(NEEDED_PATHS), reads - set(NEEDED_PATHS)
    text = (REPO / "targets/el2/tools/extract_tree.py").read_text()
    assert text.count("deps.append(") == 3 and "deps = [tree / \"Makefile\", tree / FFA_C]" in text, \
        "extract_tree.py reads other files now: update this test and check NEEDED_PATHS"


@pytest.mark.network
@pytest.mark.slow
def test_el2_runner_follows_ffa_c_restored_with_an_older_mtime(tmp_path):
    """The reference RECLAIM2 ffa.c, then mutant 01's (killed by FFA.R2.PAGE_INDEX) restored
    over it in place with an older mtime (`cp -p`), then the reference again, older still:
    each build's runner must run the ffa.c the tree holds. Uses build/el2/selftest, the
    folder of the RECLAIM2 kill matrix (cold: ~2 min; then seconds)."""
    if _el2_missing():
        pytest.skip(_el2_missing())
    from kconform.selftest.reclaim2 import BUILD_ID, MUTANTS_DIR, PAGE_SIZES, REFERENCE
    from kconform.sources import patches, tree_fetch
    from kconform.targets import el2
    ffa = "arch/arm64/kvm/hyp/nvhe/ffa.c"
    base = tree_fetch.fetch("debian:7.3", progress=lambda m: None)
    ref = patches.apply(base, REFERENCE, tmp_path / "cache")
    mutant = patches.apply(ref, MUTANTS_DIR / "01-page-index-off-by-one.patch", tmp_path / "cache")
    ref_ffa = (ref / ffa).read_bytes()
    suite = str(REPO / "corpora" / "ffa" / "reclaim2-4k.kcs")

    def run(binary: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(binary), "run", "--target", "el2", suite], capture_output=True,
                              text=True, timeout=300)

    first = el2.build(ref, BUILD_ID, list(PAGE_SIZES), log=lambda m: None)[4096]
    r = run(first)
    assert r.returncode == 0, r.stderr[-2000:]

    (ref / ffa).write_bytes((mutant / ffa).read_bytes())        # in place, as `cp -p` does
    os.utime(ref / ffa, (OLD, OLD))
    second = el2.build(ref, BUILD_ID, list(PAGE_SIZES), log=lambda m: None)[4096]
    r = run(second)
    assert r.returncode == 1 and "FFA.R2.PAGE_INDEX" in r.stdout, "the runner still runs the old ffa.c"
    assert run(first).returncode == 0         # a run holding the first runner keeps the first ffa.c

    (ref / ffa).write_bytes(ref_ffa)
    os.utime(ref / ffa, (OLDER, OLDER))
    third = el2.build(ref, BUILD_ID, list(PAGE_SIZES), log=lambda m: None)[4096]
    assert run(third).returncode == 0
    # The patched copy itself was changed behind apply()'s back: apply() makes it again.
    (ref / ffa).write_bytes((mutant / ffa).read_bytes())
    os.utime(ref / ffa, (OLD, OLD))
    assert patches.apply(base, REFERENCE, tmp_path / "cache") == ref and (ref / ffa).read_bytes() == ref_ffa


def test_a_symlink_pointed_at_an_older_file_is_rebuilt(fake):
    (fake.tree / "include/linux/v1.h").write_text("/* v1 */\n")
    (fake.tree / "include/linux/v0.h").write_text("/* v0 */\n")
    os.utime(fake.tree / "include/linux/v0.h", (OLD, OLD))
    kh = fake.tree / "include/linux/kvm_host.h"
    kh.unlink()
    kh.symlink_to("v1.h")
    assert payload(fake().image).endswith("/* v1 */\n")
    kh.unlink()
    kh.symlink_to("v0.h")                        # now a link to a file older than the build
    assert payload(fake().image).endswith("/* v0 */\n")
    assert payload(fake().image).endswith("/* v0 */\n")      # and again (cached)


# --- another architecture, with an external module built against the output ------------

FAKE_ARCH_MAKEFILE = MAKEFILE.replace(".PHONY: tinyconfig olddefconfig bzImage", """\
.PHONY: tinyconfig olddefconfig bzImage Image modules
ifneq ($(M),)
modules:
\ttest "$(ARCH)" = fake64 && for c in $(M)/*.c; do cat $$c $(O)/.config > $${c%.c}.ko; done
else
Image: $(O)/virt/kvm/guest_memfd.o
\ttest "$(ARCH)" = fake64
\tmkdir -p $(O)/arch/fake/boot $(O)/include/config && cat $< > $(O)/arch/fake/boot/Image
\techo 7.3.4-fake > $(O)/include/config/kernel.release
modules:
\ttrue
endif""")


def test_another_arch_builds_its_image_and_an_external_module_against_the_same_output(tmp_path):
    tree = fake_tree(tmp_path / "tree")
    (tree / "Makefile").write_text(FAKE_ARCH_MAKEFILE)
    frag = tmp_path / "fake.config"
    frag.write_text("CONFIG_FAKE=y\n")
    arch = kernel_build.Arch("fake64", frag, ("ARCH=fake64",), ("Image", "modules"), "arch/fake/boot/Image", "",
                             ("kernel-build",), {4096: "CONFIG_FAKE_4K=y", 16384: "CONFIG_FAKE_16K=y"})
    ext = tmp_path / "mod"
    ext.mkdir()
    (ext / "kcffa.c").write_text("module one\n")
    lines = []

    def build(page_size=4096, facts=None):
        lines.clear()
        return kernel_build.build(str(tree), None, cache_dir=tmp_path / "cache", progress=lines.append, arch=arch,
                                  page_size=page_size, external=ext, inspect=facts)

    k = build(facts=lambda t: {"seen": (t / GM).read_text()})
    assert k.image.name == "Image" and k.release == "7.3.4-fake"
    assert [m.name for m in k.modules] == ["kcffa.ko"]
    # The module was built against this build's own configuration (the 4K line).
    ko = k.modules[0].read_text()
    assert ko.startswith("module one\n") and "CONFIG_FAKE_4K=y" in ko and "CONFIG_FAKE_16K=y" not in ko
    assert k.stamp["tree_facts"] == {"seen": "int content = 1;\n"} and k.stamp["arch"] == "fake64"
    # Cached: same image, same module, no make.
    k2 = build()
    assert any("(cached" in l for l in lines) and k2.image == k.image and k2.modules == k.modules
    # The module's sources are part of the key: a changed module is a new image folder.
    (ext / "kcffa.c").write_text("module two\n")
    k3 = build()
    assert not any("(cached" in l for l in lines) and k3.image != k.image
    assert k3.modules[0].read_text().startswith("module two\n")
    assert k.modules[0].read_text().startswith("module one\n")     # the first is intact
    # Another page size is another configuration, another image.
    k16 = build(16384)
    assert k16.image != k3.image and "CONFIG_FAKE_16K=y" in k16.modules[0].read_text()
    # A cached image whose module went missing is built again, not returned half.
    k16.modules[0].unlink()
    k16b = build(16384)
    assert not any("(cached" in l for l in lines) and k16b.modules[0].is_file()
