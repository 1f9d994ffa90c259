"""Small kernels with KVM built in, built from a full tree (full_trees.py), optionally
patched: x86-64 for `run --target qemu --tree T --build [--apply P]`, arm64 (cross-built,
with an external module built against the same output) for `run --target qemu-arm64
--build ...`. An Arch names what differs: the config fragment, make's variables and
targets, the image, the compiler that goes into the key.

Layout under <cache>/kbuild/:
  src-<tree_id>/          a hard-link mirror of the tree (same names, same inodes; no .git)
                          with the patch applied (GNU patch writes new files, so the tree
                          itself never changes)
  obj-<tree_id>-<frag>/   make O= output, incremental across patches of one tree;
                          .kconform-sources.json: the content of every source file it
                          was built from (SOURCES_MANIFEST)
  img/<key>/bzImage       built kernels by content key (tree files, patch, config
                          fragment, toolchain, external module sources); arm64: Image
                          and the external module's .ko files; kconform-image.json
                          records the key
  hashes-<tree_id>.json   content hashes of the files of the tree and its mirror, by inode
                          and stat (a file is hashed again when its size, mtime or ctime
                          changed)
  <tree_id>.lock          held while the mirror, an obj folder or an image of the tree is
                          written (core/locks.py): a second build of the tree waits

Built from content, whatever the mtimes. make compares mtimes only, so a file restored
with an older mtime (`cp -p`, `rsync -t`, `tar x`) looks older than its object and would
not be recompiled. Before make runs, every source file whose content differs from what
the obj folder was built from (or that is new to it) gets an mtime of now (a file shared
with the tree by a hard link is first replaced by a private copy: the tree is never
touched), so make rebuilds what depends on it; a private copy whose content is what the
last build compiled gets that build's mtime back, so a mutant of a patch rebuilds only
what it changes. The record is cleared of the files being rebuilt before make runs, so an
interrupted build is repaired by the next one. An obj folder with no record (or built by
another toolchain) is built from scratch. The image is cached under the key of the
content it was built from, checked again after make: if a file changed during the build,
the build fails rather than cache an image of unknown content.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from kconform.core import deps, locks, procs
from kconform.core.files import atomic_write
from kconform.core.paths import REPO
from kconform.core.paths import cache_dir as default_cache_dir
from kconform.sources import patches
from kconform.sources.debian import Progress
from kconform.sources.full_trees import full_tree
from kconform.sources.kernel_image import Kernel, KernelError, user_kernel

KERNEL_FRAGMENT = REPO / "targets" / "qemu" / "kernel.config"
# KASAN and lockdep, on top of KERNEL_FRAGMENT when KCONFORM_KERNEL_DEBUG=1.
KERNEL_DEBUG_FRAGMENT = REPO / "targets" / "qemu" / "kernel-debug.config"


@dataclasses.dataclass(frozen=True)
class Arch:
    """What a build for one architecture needs that another does not."""
    name: str                   # the kernel's ARCH (x86_64 builds with the host's make as is)
    fragment: Path              # applied on top of tinyconfig
    make_vars: tuple[str, ...]  # given to every make (ARCH=, CROSS_COMPILE=)
    targets: tuple[str, ...]    # what make builds
    image: str                  # the image, relative to the obj folder
    prefix: str                 # the compiler's prefix (its version goes into the key)
    deps: tuple[str, ...]       # groups of ci/packages.txt the build needs
    page_sizes: dict[int, str]  # host page size -> the config line that chooses it ({}: fixed)


X86_64 = Arch("x86_64", KERNEL_FRAGMENT, (), ("bzImage",), "arch/x86/boot/bzImage", "",
              ("kernel-build",), {})
ARM64 = Arch("arm64", REPO / "targets" / "qemu_arm64" / "kernel.config",
             ("ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"),
             # modules: Module.symvers, which an external module is built against
             ("Image", "modules"), "arch/arm64/boot/Image", "aarch64-linux-gnu-",
             ("kernel-build", "qemu-arm64"),
             {4096: "CONFIG_ARM64_4K_PAGES=y", 16384: "CONFIG_ARM64_16K_PAGES=y"})


def kernel_fragment(arch: Arch = X86_64, page_size: int = 4096) -> bytes:
    """The config fragment of this build: the arch's fragment (kernel.config), its page
    size line, plus kernel-debug.config (KASAN, lockdep) when the environment says
    KCONFORM_KERNEL_DEBUG=1."""
    fragment = arch.fragment.read_bytes()
    if arch.page_sizes:
        if page_size not in arch.page_sizes:
            raise KernelError(f"flag --page-size: an {arch.name} kernel build knows "
                              + ", ".join(f"{p // 1024}K" for p in arch.page_sizes)
                              + f", not {page_size // 1024}K")
        fragment += f"\n# kconform: --page-size {page_size // 1024}K\n{arch.page_sizes[page_size]}\n".encode()
    elif page_size != 4096:
        raise KernelError(f"flag --page-size: an {arch.name} kernel build has 4K pages only")
    if os.environ.get("KCONFORM_KERNEL_DEBUG", "") == "1":
        fragment += b"\n" + KERNEL_DEBUG_FRAGMENT.read_bytes()
    return fragment
MIRROR_STAMP = ".kconform-mirror.json"
IMAGE_STAMP = "kconform-image.json"
SOURCES_MANIFEST = ".kconform-sources.json"
IMAGE_FORMAT = 2       # 2: keyed by content (format 1 keys named the tree's mtimes)
MANIFEST_FORMAT = 1
HASHES_FORMAT = 1
NOT_MIRRORED = (".git",)   # top-level names of a tree the mirror leaves out
RACY_NS = 2_000_000_000    # a file changed this close to its hashing is hashed again
TREE_ATTEMPTS = 3


def _h(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- content hashes, cached by inode and stat -------------------------------------------

@dataclasses.dataclass(frozen=True)
class FileState:
    """A file of a tree: its content hash and what stat said when it was read."""
    sha: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    nlink: int
    symlink: bool

    def same_stat(self, other: "FileState") -> bool:
        return (self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns, self.symlink) == \
            (other.dev, other.ino, other.size, other.mtime_ns, other.ctime_ns, other.symlink)


class HashCache:
    """SHA-256 of files by (device, inode), trusted while size, mtime and ctime are what
    they were when the file was hashed (ctime cannot be set back, unlike the mtime), and
    the change was not within RACY_NS of the hashing (a write in the same timestamp tick
    would not show in the stat). None: a cache of this process only."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, list] = {}
        self.seen: set[str] = set()
        self.dirty = False
        if path is not None:
            try:
                doc = json.loads(path.read_text())
                if doc.get("format") == HASHES_FORMAT and isinstance(doc.get("entries"), dict):
                    self.entries = doc["entries"]
            except (OSError, ValueError):
                pass

    def sha(self, path: Path, st: os.stat_result, symlink: bool) -> str:
        key = f"{st.st_dev}:{st.st_ino}"
        self.seen.add(key)
        e = self.entries.get(key)
        if e and e[:3] == [st.st_size, st.st_mtime_ns, st.st_ctime_ns] \
                and max(st.st_mtime_ns, st.st_ctime_ns) < e[3] - RACY_NS:
            return e[4]
        hashed_ns = time.time_ns()
        try:
            if symlink:
                sha = "symlink:" + _h(os.fsencode(os.readlink(path)))
            else:
                with open(path, "rb") as f:
                    sha = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError as e:
            raise KernelError(f"cannot read {path}: {e.strerror}") from None
        self.entries[key] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, hashed_ns, sha]
        self.dirty = True
        return sha

    def save(self) -> None:
        if self.path is None or not (self.dirty or len(self.seen) < len(self.entries)):
            return
        keep = {k: v for k, v in self.entries.items() if k in self.seen}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps({"format": HASHES_FORMAT, "entries": keep},
                                               separators=(",", ":")))
        except OSError:
            pass  # only a cache: the next build hashes again
        self.dirty = False


def walk(root: Path, hashes: HashCache | None, skip: tuple[str, ...] = ()) -> tuple[dict[str, FileState], set[str]]:
    """Every regular file and symlink under root (relative path -> FileState; sha "" when
    hashes is None) and every folder, leaving out the top-level names in skip."""
    files: dict[str, FileState] = {}
    dirs: set[str] = set()
    stack = [("", root)]
    while stack:
        rel_dir, path = stack.pop()
        try:
            it = os.scandir(path)
        except OSError as e:
            raise KernelError(f"cannot list {path}: {e.strerror}") from None
        with it:
            for entry in it:
                if not rel_dir and entry.name in skip:
                    continue
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                st = entry.stat(follow_symlinks=False)
                link = entry.is_symlink()
                if not link and entry.is_dir(follow_symlinks=False):
                    dirs.add(rel)
                    stack.append((rel, Path(entry.path)))
                    continue
                if not link and not entry.is_file(follow_symlinks=False):
                    continue  # a FIFO, socket or device: not source
                sha = hashes.sha(Path(entry.path), st, link) if hashes is not None else ""
                files[rel] = FileState(sha, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                                       st.st_ctime_ns, st.st_nlink, link)
    return files, dirs


def digest(files: dict[str, FileState]) -> str:
    """What names a tree's content: its file names and content hashes."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel}\0{files[rel].sha}\n".encode())
    return h.hexdigest()


def toolchain(prefix: str = "") -> str:
    """The first --version line of gcc, ld (with the cross prefix) and make (part of an
    image's key)."""
    out = []
    for tool in (prefix + "gcc", prefix + "ld", "make"):
        try:
            r = procs.run([tool, "--version"], capture_output=True, text=True)
            line = r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else ""
        except OSError:
            line = ""
        out.append(line or f"{tool}: missing")
    return "; ".join(out)


def image_key(tree_digest: str, patch_sha: str | None, fragment_sha: str, tools: str,
              extra: str = "") -> str:
    """extra: what else the image folder holds was built from (external module sources)."""
    return _h(f"kbuild-image-{IMAGE_FORMAT}\0{tree_digest}\0{patch_sha or 'none'}\0"
              f"{fragment_sha}\0{tools}".encode() + (f"\0{extra}".encode() if extra else b""))[:20]


# --- the mirror --------------------------------------------------------------------

def _replace(make_tmp: Callable[[Path], None], dest: Path) -> None:
    tmp = dest.with_name(f".kconform-tmp-{dest.name}")
    if tmp.exists() or tmp.is_symlink():
        tmp.unlink()
    make_tmp(tmp)
    os.replace(tmp, dest)


def sync_mirror(src: Path, src_files: dict[str, FileState], src_dirs: set[str], m: Path) -> int:
    """Makes m a hard-link mirror of src (as walked): the same folders, every file the
    same inode, every symlink the same target; anything else in m goes. Returns how many
    names changed."""
    m.mkdir(parents=True, exist_ok=True)
    m_files, m_dirs = walk(m, None, skip=(MIRROR_STAMP,))
    changed = 0
    for rel, e in m_files.items():
        s = src_files.get(rel)
        if s is None or s.symlink != e.symlink:
            (m / rel).unlink()
            changed += 1
    for rel in sorted(m_dirs - src_dirs, key=len, reverse=True):
        shutil.rmtree(m / rel, ignore_errors=True)
        changed += 1
    for rel in sorted(src_dirs - m_dirs):
        (m / rel).mkdir(exist_ok=True)
    for rel, s in src_files.items():
        e = m_files.get(rel)
        here = e is not None and e.symlink == s.symlink
        if s.symlink:
            target = os.readlink(src / rel)
            if here and os.readlink(m / rel) == target:
                continue
            _replace(lambda t, target=target: os.symlink(target, t), m / rel)
        else:
            if here and (e.dev, e.ino) == (s.dev, s.ino):
                continue
            try:
                _replace(lambda t, rel=rel: os.link(src / rel, t), m / rel)
            except OSError as err:
                if err.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise KernelError(f"cannot hard-link {src / rel} into {m} ({err.strerror}): the "
                                      f"cache must be on the tree's file system (KCONFORM_CACHE)") from None
                raise
        changed += 1
    return changed


def mirror(src: Path, tree_id: str, patch: Path | None, cache: Path, progress: Progress,
           hashes: HashCache | None = None) -> tuple[Path, dict[str, FileState], dict[str, FileState]]:
    """kbuild/src-<tree_id>: src hard-linked, with patch applied. Returns (the mirror, the
    files of src it mirrors, the files of the mirror) with their content hashes; src is
    walked again after the mirror is made, and the mirror made again if src changed."""
    hashes = hashes if hashes is not None else HashCache(None)
    m = cache / "kbuild" / f"src-{tree_id}"
    patch_sha = _h(patch.read_bytes()) if patch else None
    for _ in range(TREE_ATTEMPTS):
        src_files, src_dirs = walk(src, hashes, skip=NOT_MIRRORED)
        stamp = {"tree": str(src), "patch_sha256": patch_sha, "complete": False}
        m.mkdir(parents=True, exist_ok=True)
        (m / MIRROR_STAMP).write_text(json.dumps(stamp))
        n = sync_mirror(src, src_files, src_dirs, m)
        if n:
            progress(f"kernel build: mirrored {src} into {m} ({n} name(s) changed)")
        if patch:
            try:
                patches.run_patch(m, patch, src, 0, False)
            except patches.PatchError as e:
                raise KernelError(str(e)) from e
            progress(f"kernel build: applied {patch} to {m}")
        m_files, _ = walk(m, hashes, skip=(MIRROR_STAMP,))
        after, _ = walk(src, hashes, skip=NOT_MIRRORED)
        if after.keys() == src_files.keys() and \
                all(after[r].sha == s.sha and (after[r].dev, after[r].ino) == (s.dev, s.ino)
                    for r, s in src_files.items()):
            (m / MIRROR_STAMP).write_text(json.dumps(dict(stamp, complete=True)))
            return m, src_files, m_files
        progress(f"kernel build: {src} changed while it was mirrored; mirroring it again")
    raise KernelError(f"{src} kept changing while kconform mirrored it ({TREE_ATTEMPTS} "
                      f"attempts): build it when it is not being written to")


# --- make, from content ---------------------------------------------------------------

def _load_manifest(obj: Path) -> dict | None:
    try:
        doc = json.loads((obj / SOURCES_MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if doc.get("format") != MANIFEST_FORMAT or not isinstance(doc.get("sources"), dict):
        return None
    return doc


def _write_manifest(obj: Path, tools: str, sources: dict[str, list], outputs_before_ns: int | None,
                    seal: list[int] | None = None) -> None:
    atomic_write(obj / SOURCES_MANIFEST, json.dumps({
        "format": MANIFEST_FORMAT, "toolchain": tools, "outputs_before_ns": outputs_before_ns,
        "seal": seal, "sources": sources}, separators=(",", ":")))


def _seal(obj: Path) -> list[int]:
    """[number of files, newest mtime] of obj: what a build that did not update the
    record (an older kconform on the same cache) would change."""
    n, newest = 0, 0
    for dirpath, _dirs, names in os.walk(obj):
        for name in names:
            if dirpath == str(obj) and name == SOURCES_MANIFEST:
                continue
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            n += 1
            newest = max(newest, st.st_mtime_ns)
    return [n, newest]


def _private_copy(path: Path) -> None:
    """path (a hard link shared with the tree, or a symlink to a file) becomes a file of
    its own, same content and mode, mtime now."""
    mode = path.stat().st_mode & 0o7777

    def make(tmp: Path) -> None:
        shutil.copyfile(path, tmp)
        os.chmod(tmp, mode)
    _replace(make, path)


def freshen(tree: Path, files: dict[str, FileState], manifest: dict | None) -> tuple[list[str], list[str], int]:
    """Before make: every file of tree whose content is not what the obj folder was built
    from (or new to it) gets mtime now, unless it is already newer than every output; a
    private copy (one link) whose content is what was built gets its recorded mtime back.
    Returns (the files whose content changed, those given a new mtime, how many got
    their old mtime back)."""
    built = manifest["sources"] if manifest else {}
    newest_output = manifest.get("outputs_before_ns") if manifest else None
    changed, fresh, kept = [], [], 0
    for rel, e in files.items():
        b = built.get(rel)
        if b and b[0] == e.sha:
            if e.nlink == 1 and not e.symlink and e.mtime_ns != b[1]:
                os.utime(tree / rel, ns=(b[1], b[1]))
                kept += 1
            continue
        changed.append(rel)
        if e.symlink:
            # make follows a symlink: one pointing elsewhere now may show an old mtime.
            # A link to a file becomes a copy of it (the next mirror makes it a link again).
            if (tree / rel).is_file():
                _private_copy(tree / rel)
                fresh.append(rel)
            continue
        if isinstance(newest_output, int) and e.mtime_ns > newest_output:
            continue  # newer than anything the last build wrote: make rebuilds it anyway
        if e.nlink > 1:
            _private_copy(tree / rel)   # never set the mtime of the tree's own file
        fresh.append(rel)
    now = time.time_ns()
    for rel in fresh:
        os.utime(tree / rel, ns=(now, now))
    return sorted(changed), fresh, kept


def make_from_content(tree: Path, obj: Path, make: list[str], *, hashes: HashCache,
                      files: dict[str, FileState], tools: str, log: Path, progress: Progress,
                      configure: Callable[[], None] | None = None, what: str = "make") -> str:
    """Runs make (a build from tree's sources into obj) so that it rebuilds everything
    whose sources' content changed since obj was built, whatever their mtimes (see the
    module's docstring). files: tree as walked (with hashes) just before. Returns the
    digest of the content built."""
    manifest = _load_manifest(obj) if obj.is_dir() else None
    why = "no record of the sources it was built from"
    if manifest is not None and manifest.get("seal") is not None and manifest["seal"] != _seal(obj):
        manifest = None         # written to since its record was: by whom, from what, unknown
        why = "written to since the record of its sources (by another kconform?)"
    elif manifest is not None and manifest.get("toolchain") != tools:
        manifest = None
        why = "built by another toolchain"
    if obj.is_dir() and any(obj.iterdir()) and manifest is None:
        progress(f"kernel build: {obj}: {why}; building it from scratch")
        shutil.rmtree(obj)
        manifest = None
    obj.mkdir(parents=True, exist_ok=True)
    changed, fresh, kept = freshen(tree, files, manifest) if manifest is not None else ([], [], 0)
    if manifest is not None:      # (without one there is no output yet: everything is built)
        progress(f"kernel build: {len(changed)} file(s) changed since {obj.name} was built"
                 + (f" ({', '.join(changed[:3])}{'...' if len(changed) > 3 else ''})" if changed else "")
                 + (f", {len(fresh)} of them with an mtime older than the build (now renewed)" if fresh else "")
                 + (f"; {kept} patched file(s) as last built" if kept else ""))
    # What make reads from now on: a symlink given a new mtime is a copy of its file now.
    expect = dict(files)
    for rel in fresh:
        if files[rel].symlink:
            st = os.lstat(tree / rel)
            expect[rel] = FileState(hashes.sha(tree / rel, st, False), st.st_dev, st.st_ino, st.st_size,
                                    st.st_mtime_ns, st.st_ctime_ns, st.st_nlink, False)
    # Until make succeeds, the record holds only what is certainly built.
    built = manifest["sources"] if manifest else {}
    sure = {rel: b for rel, b in built.items() if rel in files and files[rel].sha == b[0]}
    _write_manifest(obj, tools, sure, None)
    if configure is not None:
        configure()
    with log.open("a") as lf:
        r = procs.run(make, stdout=lf, stderr=subprocess.STDOUT, pass_fds=locks.held_fds())
    done_ns = time.time_ns()
    if r.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise KernelError(f"{what} failed (exit {r.returncode}); last lines of {log}:\n{tail}")
    after, _ = walk(tree, hashes, skip=(MIRROR_STAMP,))
    # A file that changed or went while make ran: the build may have seen either version.
    # (A file that appeared is left out of the record: it counts as new next time.)
    moved = sorted(rel for rel in expect if rel not in after or after[rel].sha != expect[rel].sha)
    # (recorded as the mirror holds them: a symlink by its target's name)
    _write_manifest(obj, tools, {rel: [files[rel].sha, e.mtime_ns] for rel, e in after.items()
                                 if rel in files and rel not in moved},
                    None if moved else done_ns, None if moved else _seal(obj))
    if moved:
        raise KernelError(f"{tree}: {len(moved)} file(s) changed while {what} ran "
                          f"({', '.join(moved[:5])}): run the build again")
    return digest(files)


# --- the kernel build ------------------------------------------------------------------

def _configure(src: Path, obj: Path, fragment: bytes, log: Path, arch: Arch = X86_64) -> None:
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
                    c.write("\n# kconform: " + str(arch.fragment) + "\n" + fragment.decode())
                continue
            r = procs.run(["make", "-C", str(src), f"O={obj}", *arch.make_vars, step], stdout=lf,
                          stderr=subprocess.STDOUT, pass_fds=locks.held_fds())
            if r.returncode != 0:
                raise KernelError(f"make {step} failed; see {log}")
    have = set((obj / ".config").read_text().splitlines())
    lost = [l for l in fragment.decode().splitlines() if l.startswith("CONFIG_") and l not in have]
    if lost:
        raise KernelError(f"{arch.fragment}: olddefconfig dropped {', '.join(lost)} "
                          f"(a dependency is missing from the fragment)")
    (obj / ".kconform-config.json").write_text(json.dumps({"fragment": fh}))


def _image_name(arch: Arch) -> str:
    return Path(arch.image).name


def external_sources(external: Path | None) -> str:
    """The hash of an external module's folder (its files' names and content), or ""."""
    if external is None:
        return ""
    if not external.is_dir():
        raise KernelError(f"{external}: no such folder (the external module to build)")
    h = hashlib.sha256()
    for f in sorted(p for p in external.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def build_external(tree: Path, obj: Path, arch: Arch, external: Path, dest: Path, log: Path) -> list[str]:
    """Builds the module in external (its sources copied aside: kbuild writes next to
    them) against obj, as `make -C tree O=obj M=...`; its .ko files go to dest."""
    with tempfile.TemporaryDirectory(prefix="kconform-ext-") as d:
        work = Path(d) / external.name
        shutil.copytree(external, work)
        cmd = ["make", "-C", str(tree), f"O={obj}", *arch.make_vars, f"M={work}", "modules"]
        with log.open("a") as lf:
            lf.write("\n# kconform: " + " ".join(cmd) + "\n")
            lf.flush()
            r = procs.run(cmd, stdout=lf, stderr=subprocess.STDOUT, pass_fds=locks.held_fds())
        kos = sorted(work.glob("*.ko"))
        if r.returncode != 0 or not kos:
            raise KernelError(f"building the module in {external} against {obj} failed; see {log}")
        for ko in kos:
            shutil.copy2(ko, dest / ko.name)
        return [ko.name for ko in kos]


def _cached(img_dir: Path, key: str, content: str, image: str = "bzImage") -> dict | None:
    """The stamp of img_dir if it holds an image built from exactly this content."""
    try:
        st = json.loads((img_dir / IMAGE_STAMP).read_text())
    except (OSError, ValueError):
        return None
    if st.get("format") != IMAGE_FORMAT or st.get("key") != key or st.get("content_sha256") != content \
            or not (img_dir / image).is_file() \
            or not all((img_dir / m).is_file() for m in st.get("modules", [])):
        return None
    return st


def build(tree_spec: str, patch: str | None = None, cache_dir: str | os.PathLike | None = None,
          progress: Progress = print, jobs: int | None = None, arch: Arch = X86_64,
          page_size: int = 4096, external: Path | None = None,
          inspect: Callable[[Path], dict] | None = None) -> Kernel:
    """Builds (incrementally) a small kernel with KVM built in from a full tree, optionally
    patched; cached by content (tree files, patch, fragment, toolchain, external module).
    arch: X86_64 (a bzImage) or ARM64 (an Image, cross-built, at page_size). external: a
    folder holding an out-of-tree module, built against the same output; its .ko files
    are the Kernel's modules. inspect(tree): facts read from the patched tree as built
    (recorded in the stamp as "tree_facts")."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    patch_path = Path(patch).resolve() if patch else None
    if patch_path is not None and not patch_path.is_file():
        raise KernelError(f"flag --apply: {patch}: no such patch file")
    fragment = kernel_fragment(arch, page_size)
    image_name = _image_name(arch)
    ext = external_sources(external)
    src, tree_state, tree_id = full_tree(tree_spec, cache, progress)
    patch_bytes = patch_path.read_bytes() if patch_path else None
    ps = _h(patch_bytes) if patch_bytes is not None else None
    fs = _h(fragment)
    kb = cache / "kbuild"
    source = f"{tree_spec}" + (f"+{patch_path.name}" if patch_path else "") + \
        ("+debug" if os.environ.get("KCONFORM_KERNEL_DEBUG", "") == "1" else "")
    hashes = HashCache(kb / f"hashes-{tree_id}.json")

    tools = toolchain(arch.prefix)
    files, _ = walk(src, hashes, skip=NOT_MIRRORED)
    content = digest(files)
    key = image_key(content, ps, fs, tools, ext)
    st = _cached(kb / "img" / key, key, content, image_name)
    hashes.save()
    if st is not None:
        progress(f"kernel build: {kb / 'img' / key / image_name} (cached: {source})")
        return _built(kb / "img" / key, arch, source, st)

    with locks.locked(kb / f"{tree_id}.lock", f"the kernel build of {tree_id}", progress):
        deps.ensure(list(arch.deps), progress)
        t0 = time.monotonic()
        tools = toolchain(arch.prefix)
        tree, files, m_files = mirror(src, tree_id, patch_path, cache, progress, hashes)
        content = digest(files)   # the tree as mirrored (it may have changed while we waited)
        key = image_key(content, ps, fs, tools, ext)
        img_dir = kb / "img" / key
        st = _cached(img_dir, key, content, image_name)
        if st is not None:      # built by the run we waited for
            hashes.save()
            progress(f"kernel build: {img_dir / image_name} (cached: {source})")
            return _built(img_dir, arch, source, st)
        obj = kb / f"obj-{tree_id}-{fs[:12]}"
        log = kb / f"obj-{tree_id}-{fs[:12]}.log"
        log.write_text("")
        n = jobs or os.cpu_count() or 2
        again = (obj / "vmlinux").is_file() and _load_manifest(obj) is not None
        what = " ".join(arch.targets)
        progress(f"kernel build: make -j{n} {what} in {obj} ("
                 + ("incremental" if again else
                    f"first build ~{'5-10' if arch is X86_64 else '15-25'} min on 2 cores") + f"; log {log})")
        try:
            make_from_content(tree, obj, ["make", "-C", str(tree), f"O={obj}", *arch.make_vars, f"-j{n}",
                                          *arch.targets],
                              hashes=hashes, files=m_files, tools=tools, log=log, progress=progress,
                              configure=lambda: _configure(tree, obj, fragment, log, arch),
                              what=f"kernel build of {source}")
        finally:
            hashes.save()
        st = {"format": IMAGE_FORMAT, "key": key, "content_sha256": content,
              "built_content_sha256": digest(m_files), "tree": tree_spec, "tree_id": tree_id,
              "tree_path": str(src), "tree_state": tree_state,
              "patch": str(patch_path) if patch_path else None, "patch_sha256": ps,
              "fragment_sha256": fs, "toolchain": tools, "arch": arch.name, "page_size": page_size,
              "release": _release(obj)}
        if inspect is not None:
            st["tree_facts"] = inspect(tree)
        st["seconds"] = round(time.monotonic() - t0, 1)    # the kernel's make (the module's is seconds)
        _copy_out(obj / arch.image, img_dir, st, image_name,
                  lambda d: st.update(external=str(external), external_sha256=ext,
                                      modules=build_external(tree, obj, arch, external, d, log))
                  if external is not None else None)
    progress(f"kernel build: {img_dir / image_name} ({st['seconds']} s)")
    return _built(img_dir, arch, source, st)


def _release(obj: Path) -> str:
    """The kernel's release (uname -r) as the build wrote it."""
    try:
        return (obj / "include" / "config" / "kernel.release").read_text().strip()
    except OSError:
        return ""


def _copy_out(built: Path, img_dir: Path, stamp: dict, name: str = "bzImage",
              fill: Callable[[Path], None] | None = None) -> None:
    """img_dir/<name> (+ what fill(folder) adds) + stamp, all at once: a folder made
    aside, then renamed."""
    img_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{img_dir.name}.", dir=img_dir.parent))
    try:
        shutil.copy2(built, tmp / name)
        if fill is not None:
            fill(tmp)
        (tmp / IMAGE_STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
        if img_dir.exists():    # an image of other content, or of an older format
            old = Path(tempfile.mkdtemp(prefix=f".{img_dir.name}.old.", dir=img_dir.parent))
            img_dir.rename(old / "img")
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(img_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _built(img_dir: Path, arch: Arch, source: str, stamp: dict) -> Kernel:
    image = img_dir / _image_name(arch)
    if arch is X86_64:
        k = user_kernel(image)
        return Kernel(image=k.image, release=k.release, modules=(), source=source, stamp=stamp, vcpus=2)
    mods = tuple(img_dir / m for m in stamp.get("modules", []))
    return Kernel(image=image.resolve(), release=stamp.get("release", ""), modules=mods, source=source,
                  stamp=stamp, vcpus=2)


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
