#!/usr/bin/python3
"""Regenerates NN-name.patch: each is gmem-write-reference.patch with one fault
(a single textual edit of the patched guest_memfd.c), as a whole patch against the
pristine tree. Usage: make_mutants.py PRISTINE_TREE (a full or NEEDED-paths tree)."""
import difflib, pathlib, subprocess, sys, tempfile

HERE = pathlib.Path(__file__).resolve().parent
REF = HERE.parent / "gmem-write-reference.patch"
G = "virt/kvm/guest_memfd.c"

# (name, file, old, new[, old2, new2 ...]): each old must occur exactly once in
# the patched file; the edits apply in order.
MUTANTS = [
    ("01-no-len-align", G, "!PAGE_ALIGNED(pos) || !PAGE_ALIGNED(len)", "!PAGE_ALIGNED(pos)"),
    ("02-no-pos-align", G, "!PAGE_ALIGNED(pos) || !PAGE_ALIGNED(len)", "!PAGE_ALIGNED(len)"),
    ("03-eof-one-page-past", G, "len > i_size_read(inode) - pos)",
     "len > i_size_read(inode) - pos + PAGE_SIZE)"),
    ("04-private-pages-writable", G, "\t\tif (!kvm_gmem_is_shared_mem(inode, index)) {\n",
     "\t\tif (0 && !kvm_gmem_is_shared_mem(inode, index)) {\n"),
    ("05-position-not-advanced", G, "\t\tiocb->ki_pos = pos;\n", ""),
    ("06-write-without-flag", G, "\tif (!kvm_gmem_supports_write(inode))\n\t\treturn -EINVAL;\n", ""),
    ("07-partial-page-copied", G,
     "\t\tif (copied != PAGE_SIZE) {\n\t\t\tiov_iter_revert(from, copied);\n\t\t\tr = -EFAULT;\n\t\t\tbreak;\n\t\t}\n",
     "\t\tif (!copied) {\n\t\t\tr = -EFAULT;\n\t\t\tbreak;\n\t\t}\n"),
    ("08-fault-returns-zero", G, "\t\treturn written;\n\t}\n\treturn r;\n", "\t\treturn written;\n\t}\n\treturn 0;\n"),
    ("09-llseek-espipe", G, "\tif (!kvm_gmem_supports_write(file_inode(file)))\n\t\treturn -ESPIPE;\n",
     "\treturn -ESPIPE;\n"),
    ("10-page-index-off-by-one", G, "\t\tfolio = kvm_gmem_get_folio(inode, index);\n\t\tif (IS_ERR(folio)) {\n\t\t\tiov_iter_revert",
     "\t\tfolio = kvm_gmem_get_folio(inode, index + 1);\n\t\tif (IS_ERR(folio)) {\n\t\t\tiov_iter_revert"),
    ("11-times-not-updated", G, "\t\tiocb->ki_pos = pos;\n\t\tfile_modified(file);\n", "\t\tiocb->ki_pos = pos;\n"),
    # v7's leak: a zero-length write allocates the page at pos and marks it up to
    # date without clearing it; a later fault maps whatever the page held before.
    ("12-zero-length-allocates-uncleared", G, "\tif (!len)\n\t\treturn 0;\n",
     "\tif (!len) {\n\t\tif (pos >= 0 && pos < i_size_read(inode)) {\n"
     "\t\t\tstruct folio *folio = kvm_gmem_get_folio(inode, pos >> PAGE_SHIFT);\n\n"
     "\t\t\tif (!IS_ERR(folio)) {\n\t\t\t\tfolio_mark_uptodate(folio);\n"
     "\t\t\t\tfolio_unlock(folio);\n\t\t\t\tfolio_put(folio);\n\t\t\t}\n\t\t}\n"
     "\t\treturn 0;\n\t}\n"),
    # No invalidate lock: population races PUNCH_HOLE page by page.
    ("13-no-invalidate-lock", G,
     "\tfilemap_invalidate_lock_shared(mapping);\n\n\twhile (iov_iter_count(from)) {",
     "\twhile (iov_iter_count(from)) {",
     "\tfilemap_invalidate_unlock_shared(mapping);\n\tfree_page(", "\tfree_page("),
]


# Mutants the suite does not kill yet: written to unkilled/, which the kill matrix
# (selftest mutants, NN-*.patch of this folder only) leaves out. Empty since the
# forced race window (models/gmem/SPEC.md HARNESS:WINDOW) kills 13.
UNKILLED: set[str] = set()


def main() -> int:
    tree = pathlib.Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as t:
        t = pathlib.Path(t)
        touched = ["Documentation/virt/kvm/api.rst", "include/linux/kvm_host.h",
                   "include/uapi/linux/kvm.h", G]
        for rel in touched:
            (t / "b" / rel).parent.mkdir(parents=True, exist_ok=True)
            (t / "b" / rel).write_bytes((tree / rel).read_bytes())
        subprocess.run(["patch", "-p1", "-s", "-d", str(t / "b"), "-i", str(REF)], check=True)
        for name, rel, *edits in MUTANTS:
            out = []
            for r in touched:
                a = (tree / r).read_text().splitlines(keepends=True)
                b = (t / "b" / r).read_text()
                if r == rel:
                    for old, new in zip(edits[::2], edits[1::2]):
                        assert b.count(old) == 1, (name, old)
                        b = b.replace(old, new)
                out += difflib.unified_diff(a, b.splitlines(keepends=True), f"a/{r}", f"b/{r}")
            where = HERE / "unkilled" if name in UNKILLED else HERE
            (where / f"{name}.patch").write_text("".join(out))
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
