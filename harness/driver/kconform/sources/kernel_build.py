"""Small x86-64 kernels with KVM built in, built from a full tree (full_trees.py),
optionally patched (`run --target qemu --tree T --build [--apply P]`).

Layout under <cache>:
  kbuild/src-<tree_id>/          a hard-link mirror of the tree with the patch applied
                                 (GNU patch writes new files, so the tree itself never changes)
  kbuild/obj-<tree_id>-<frag>/   make O= output: incremental across patches of one tree
  kbuild/img/<key>/bzImage       built kernels by (tree state, patch hash, fragment hash)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from kconform.core import deps
from kconform.core.paths import REPO
from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources import patches
from kconform.sources.debian import Progress
from kconform.sources.full_trees import full_tree
from kconform.sources.kernel_image import Kernel, KernelError, user_kernel

KERNEL_FRAGMENT = REPO / "targets" / "qemu" / "kernel.config"
MIRROR_STAMP = ".kconform-mirror.json"
IMAGE_STAMP = "kconform-image.json"


def _h(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mirror(src: Path, tree_state: str, tree_id: str, patch: Path | None, cache: Path,
           progress: Progress) -> Path:
    """kbuild/src-<tree_id>: src hard-linked, with patch applied. Files a previous patch
    touched are replaced by fresh copies with a new mtime, so make rebuilds them."""
    m = cache / "kbuild" / f"src-{tree_id}"
    patch_bytes = patch.read_bytes() if patch else b""
    want = {"tree_state": tree_state, "patch_sha256": _h(patch_bytes) if patch else None}
    try:
        st = json.loads((m / MIRROR_STAMP).read_text())
    except (OSError, ValueError):
        st = {}
    if st.get("tree_state") == want["tree_state"] and st.get("patch_sha256") == want["patch_sha256"] \
            and st.get("complete"):
        return m
    touched = set(st.get("touched", [])) | set(patches.touched_paths(patch_bytes))
    if m.exists() and not st:
        # Unknown state (interrupted before a stamp): rebuild what any patch may have touched.
        touched |= {"virt/kvm/guest_memfd.c", "include/uapi/linux/kvm.h", "include/linux/kvm_host.h"}
    if m.exists():
        shutil.rmtree(m)
    m.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["cp", "-al", str(src), str(m)], capture_output=True, text=True)
    if r.returncode != 0:
        raise KernelError(f"cp -al {src} {m} failed (the cache must be on the tree's file "
                          f"system for hard links): {r.stderr.strip()}")
    built = st.get("built", {}) if st.get("complete") else {}
    (m / MIRROR_STAMP).write_text(json.dumps(dict(want, touched=sorted(touched), complete=False)))
    for rel in sorted(touched):
        p = m / rel
        if p.is_file():
            data = p.read_bytes()
            p.unlink()               # break the hard link; new inode, new mtime
            p.write_bytes(data)
    if patch:
        try:
            patches.run_patch(m, patch, src, 0, False)
        except patches.PatchError as e:
            raise KernelError(str(e)) from e
        progress(f"kernel build: applied {patch} to {m}")
    # A file whose content is what the last build compiled gets that build's mtime back,
    # so make rebuilds only what this patch really changes (a mutant of a patch: one
    # object file and the link, not everything that includes a header of the patch).
    kept = 0
    for rel in sorted(touched):
        p = m / rel
        old = built.get(rel)
        if old and p.is_file() and _h(p.read_bytes()) == old[0]:
            os.utime(p, ns=(old[1], old[1]))  # p is a fresh inode (above), never the tree's
            kept += 1
    if kept:
        progress(f"kernel build: {kept} of {len(touched)} patched file(s) unchanged since the last build")
    (m / MIRROR_STAMP).write_text(json.dumps(dict(want, touched=sorted(touched), complete=True)))
    return m


def record_built(tree: Path, touched: list[str]) -> None:
    """After a build: the touched files as compiled (content hash, mtime), for mirror()."""
    mst = json.loads((tree / MIRROR_STAMP).read_text())
    built = {}
    for rel in touched:
        p = tree / rel
        if p.is_file():
            built[rel] = [_h(p.read_bytes()), p.stat().st_mtime_ns]
    mst.update(touched=touched, built=built)
    (tree / MIRROR_STAMP).write_text(json.dumps(mst))


def _configure(src: Path, obj: Path, fragment: bytes, log: Path) -> None:
    fh = _h(fragment)
    try:
        if json.loads((obj / ".kconform-config.json").read_text()).get("fragment") == fh \
                and (obj / ".config").is_file():
            return
    except (OSError, ValueError):
        pass
    obj.mkdir(parents=True, exist_ok=True)
    with log.open("a") as lf:
        for step in ("tinyconfig", None, "olddefconfig"):
            if step is None:
                with (obj / ".config").open("a") as c:
                    c.write("\n# kconform: " + str(KERNEL_FRAGMENT) + "\n" + fragment.decode())
                continue
            r = subprocess.run(["make", "-C", str(src), f"O={obj}", step], stdout=lf,
                               stderr=subprocess.STDOUT)
            if r.returncode != 0:
                raise KernelError(f"make {step} failed; see {log}")
    have = set((obj / ".config").read_text().splitlines())
    lost = [l for l in fragment.decode().splitlines() if l.startswith("CONFIG_") and l not in have]
    if lost:
        raise KernelError(f"{KERNEL_FRAGMENT}: olddefconfig dropped {', '.join(lost)} "
                          f"(a dependency is missing from the fragment)")
    (obj / ".kconform-config.json").write_text(json.dumps({"fragment": fh}))


def build(tree_spec: str, patch: str | None = None, cache_dir: str | os.PathLike | None = None,
          progress: Progress = print, jobs: int | None = None) -> Kernel:
    """Builds (incrementally) a small x86-64 kernel with KVM built in from a full tree,
    optionally patched; cached by (tree state, patch hash, fragment hash)."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    patch_path = Path(patch).resolve() if patch else None
    if patch_path is not None and not patch_path.is_file():
        raise KernelError(f"flag --apply: {patch}: no such patch file")
    fragment = KERNEL_FRAGMENT.read_bytes()
    src, tree_state, tree_id = full_tree(tree_spec, cache, progress)
    ph = _h(patch_path.read_bytes())[:12] if patch_path else "none"
    fh = _h(fragment)[:12]
    key = _h(f"{tree_state}\0{ph}\0{fh}".encode())[:20]
    img_dir = cache / "kbuild" / "img" / key
    image = img_dir / "bzImage"
    source = f"{tree_spec}" + (f"+{patch_path.name}" if patch_path else "")
    try:
        st = json.loads((img_dir / IMAGE_STAMP).read_text())
    except (OSError, ValueError):
        st = {}
    if st.get("key") == key and image.is_file():
        progress(f"kernel build: {image} (cached: {source})")
        return _built(image, source, st)
    deps.ensure(["kernel-build"], progress)
    t0 = time.monotonic()
    tree = mirror(src, tree_state, tree_id, patch_path, cache, progress)
    obj = cache / "kbuild" / f"obj-{tree_id}-{fh}"
    obj.mkdir(parents=True, exist_ok=True)
    log = obj / "kconform-build.log"
    log.write_text("")
    _configure(tree, obj, fragment, log)
    n = jobs or os.cpu_count() or 2
    again = (obj / "vmlinux").is_file()
    progress(f"kernel build: make -j{n} bzImage in {obj} ("
             + ("incremental" if again else "first build ~10 min on 2 cores") + f"; log {log})")
    with log.open("a") as lf:
        r = subprocess.run(["make", "-C", str(tree), f"O={obj}", f"-j{n}", "bzImage"],
                           stdout=lf, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise KernelError(f"kernel build of {source} failed (exit {r.returncode}); "
                          f"last lines of {log}:\n{tail}")
    # Built: only the current patch's files differ from the tree from now on.
    record_built(tree, patches.touched_paths(patch_path.read_bytes()) if patch_path else [])
    built = obj / "arch" / "x86" / "boot" / "bzImage"
    img_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, image)
    st = {"key": key, "tree": tree_spec, "tree_id": tree_id, "tree_state": tree_state,
          "patch": str(patch_path) if patch_path else None, "patch_sha256_12": ph,
          "fragment_sha256_12": fh, "seconds": round(time.monotonic() - t0, 1)}
    (img_dir / IMAGE_STAMP).write_text(json.dumps(st, indent=2) + "\n")
    progress(f"kernel build: {image} ({st['seconds']} s)")
    return _built(image, source, st)


def _built(image: Path, source: str, stamp: dict) -> Kernel:
    k = user_kernel(image)
    return Kernel(image=k.image, release=k.release, modules=(), source=source, stamp=stamp)


def built_images(cache: Path | None = None) -> list[dict]:
    """The stamps of the kernels in <cache>/kbuild/img (tree, patch, key...)."""
    root = (cache if cache is not None else default_cache_dir()) / "kbuild" / "img"
    out = []
    for stamp in sorted(root.glob(f"*/{IMAGE_STAMP}")):
        try:
            out.append(json.loads(stamp.read_text()))
        except (OSError, ValueError):
            continue
    return out
