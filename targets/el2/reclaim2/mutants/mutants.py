#!/usr/bin/python3
"""The RECLAIM2 mutants: each one named fault in the reference handler, as an edit.

This table is the source of the mutants/NN-name.patch files: each edit
replaces one exact fragment of ffa.c as reclaim2-reference.patch leaves it
(the fragment must occur exactly once). MUTANTS.md says what each one breaks
and which rule should catch it.

    mutants.py write  [--tree T]   regenerate every NN-name.patch
    mutants.py check  [--tree T]   every patch applies on top of the reference

T is the unpatched tree (default: debian:7.3 from the cache). Needs
harness/driver on the path (done below).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "harness" / "driver"))

from kconform.sources import patches, tree_fetch as trees  # noqa: E402

FFA_C = "arch/arm64/kvm/hyp/nvhe/ffa.c"
REFERENCE = HERE.parent / "reclaim2-reference.patch"

# (name, fault, [(old, new), ...]) — one fault each, sometimes spelled over two lines.
MUTANTS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("01-page-index-off-by-one",
     "the page index may equal the first descriptor's page count",
     [("\tif (page_idx >= ranges[0].pg_cnt)\n", "\tif (page_idx > ranges[0].pg_cnt)\n")]),
    ("02-page-index-every-range",
     "the unshare walk skips page_idx pages of every descriptor, not only the first",
     [("\t\tu64 first = i ? 0 : page_idx;\n", "\t\tu64 first = page_idx;\n")]),
    ("03-unshare-from-range-start",
     "the unshare walk ignores the page index and starts at the first descriptor's first page",
     [("\t\tu64 first = i ? 0 : page_idx;\n", "\t\tu64 first = 0;\n")]),
    ("04-page-index-in-bytes",
     "the unshare walk adds the page index as a byte offset",
     [("\t\tphys = range->address + first * FFA_PAGE_SIZE;\n", "\t\tphys = range->address + first;\n")]),
    ("05-page-index-read-as-w6",
     "the page index is read as w6: its upper 32 bits are dropped",
     [("\tDECLARE_REG(u64, page_idx, ctxt, 6);\n", "\tDECLARE_REG(u32, page_idx, ctxt, 6);\n")]),
    ("06-index-host-granule-unchecked",
     "no check that the page index starts a host page (PAGE_SIZE > 4K)",
     [("\t/* ...and starts a host page. */\n"
       "\tif (!PAGE_ALIGNED(page_idx * FFA_PAGE_SIZE))\n"
       "\t\tgoto out_unlock;\n\n", "")]),
    ("07-descriptor-granule-4k",
     "descriptors are checked for 4K alignment instead of host PAGE_SIZE alignment",
     [("\t\tif (!PAGE_ALIGNED(range->address | sz))\n",
       "\t\tif (!IS_ALIGNED(range->address | sz, FFA_PAGE_SIZE))\n")]),
    ("08-host-page-rounded-up",
     "a host page EL3 reclaimed only part of is unshared (rounds up, not down)",
     [("\t\tsz = ALIGN_DOWN(n * FFA_PAGE_SIZE, PAGE_SIZE);\n", "\t\tsz = PAGE_ALIGN(n * FFA_PAGE_SIZE);\n")]),
    ("09-no-total-check",
     "total_pages is not compared with the sum of the descriptors",
     [("\tif (nr_pages != total_pages)\n\t\tgoto out_unlock;\n\n", "")]),
    ("10-total-sum-u32",
     "the descriptors' page counts are summed in 32 bits (wraps)",
     [("\t\t*nr_pages += range->pg_cnt;\n", "\t\t*nr_pages = (u32)(*nr_pages + range->pg_cnt);\n")]),
    ("11-flags-unchecked",
     "reserved flag bits are not checked (MBZ)",
     [("\tif (flags & ~FFA_MEM_RECLAIM2_FLAGS)\n\t\tgoto out;\n\n", "")]),
    ("12-flags-all-mbz",
     "every flag bit is treated as MBZ: zero-before-reclaim is refused",
     [("\tif (flags & ~FFA_MEM_RECLAIM2_FLAGS)\n", "\tif (flags)\n")]),
    ("13-offset-align-mask",
     "offset alignment mask without the - 1 (tests bit 4 instead of bits 3:0)",
     [("\tif (!nranges || offset % sizeof(*ranges))\n", "\tif (!nranges || offset & sizeof(*ranges))\n")]),
    ("14-tx-bounds-off-by-one",
     "descriptors ending exactly at the end of TX are refused (>= for >)",
     [("\tif ((u64)offset + (u64)nranges * sizeof(*ranges) >\n",
       "\tif ((u64)offset + (u64)nranges * sizeof(*ranges) >=\n")]),
    ("15-tx-bounds-u32-length",
     "the array length in the TX bounds check is computed in 32 bits (count 2^28 wraps to 0)",
     [("\tu64 nr_pages, nr_reclaimed;\n", "\tu64 nr_pages, nr_reclaimed;\n\tu32 len;\n"),
      ("\tif ((u64)offset + (u64)nranges * sizeof(*ranges) >\n\t    KVM_FFA_MBOX_NR_PAGES * PAGE_SIZE)\n",
       "\tlen = nranges * sizeof(*ranges);\n\tif (offset + len > KVM_FFA_MBOX_NR_PAGES * PAGE_SIZE)\n")]),
    ("16-tx-bounds-offset-only",
     "only the offset is bounded, not offset + 16 * count: the copy reads past the host TX buffer",
     [("\tif ((u64)offset + (u64)nranges * sizeof(*ranges) >\n\t    KVM_FFA_MBOX_NR_PAGES * PAGE_SIZE)\n",
       "\tif (offset >= KVM_FFA_MBOX_NR_PAGES * PAGE_SIZE)\n")]),
    ("17-count-zero-allowed",
     "a call with no descriptor is not refused",
     [("\tif (!nranges || offset % sizeof(*ranges))\n", "\tif (offset % sizeof(*ranges))\n")]),
    ("18-reserved-unchecked",
     "a descriptor's reserved field is not checked (MBZ)",
     [("\t\tif (!range->pg_cnt || range->reserved)\n", "\t\tif (!range->pg_cnt)\n")]),
    ("19-unshare-before-el3",
     "the pages asked for are unshared before EL3 has reclaimed them",
     [("\tret = 0;\n\tffa_mem_reclaim2(",
       "\tret = 0;\n\tWARN_ON(ffa_reclaim2_unshare(ranges, nranges, page_idx,\n"
       "\t\t\t\t    total_pages - page_idx));\n\tffa_mem_reclaim2("),
      ("\t/* If the SPMD was happy, then we should be too. */\n"
       "\tWARN_ON(ffa_reclaim2_unshare(ranges, nranges, page_idx, nr_reclaimed));\n", "")]),
    ("20-el3-error-unchecked",
     "EL3's result is not checked for FFA_SUCCESS: an error's code is taken as the count",
     [("\tif (res->a0 != FFA_SUCCESS && res->a0 != FFA_FN64_SUCCESS)\n\t\tgoto out_unlock;\n\n", "")]),
    ("21-unshare-requested-count",
     "the pages asked for are unshared, not the count EL3 returned",
     [("\tWARN_ON(ffa_reclaim2_unshare(ranges, nranges, page_idx, nr_reclaimed));\n",
       "\tWARN_ON(ffa_reclaim2_unshare(ranges, nranges, page_idx,\n\t\t\t\t    total_pages - page_idx));\n")]),
    ("22-count-bound-unchecked",
     "EL3's count is trusted: 0 or more than asked is not an error",
     [("\tif (!nr_reclaimed || nr_reclaimed > total_pages - page_idx) {\n"
       "\t\tret = FFA_RET_ABORTED;\n\t\tgoto out_unlock;\n\t}\n\n", "")]),
    ("23-count-bound-ignores-index",
     "EL3's count is bounded by total_pages, forgetting the page index",
     [("\tif (!nr_reclaimed || nr_reclaimed > total_pages - page_idx) {\n",
       "\tif (!nr_reclaimed || nr_reclaimed > total_pages) {\n")]),
    ("24-unshare-first-descriptor-only",
     "only the first descriptor is unshared",
     [("\tWARN_ON(ffa_reclaim2_unshare(ranges, nranges, page_idx, nr_reclaimed));\n",
       "\tWARN_ON(ffa_reclaim2_unshare(ranges, 1, page_idx, nr_reclaimed));\n")]),
    ("25-copy-from-tx-base",
     "the descriptors are copied from the start of the host TX buffer, not from the offset",
     [("\tmemcpy(hyp_buffers.tx + offset, host_buffers.tx + offset, len);\n",
       "\tmemcpy(hyp_buffers.tx + offset, host_buffers.tx, len);\n")]),
    ("26-copy-before-lock",
     "the host TX buffer is read before the lock is taken and its presence checked",
     [("\thyp_spin_lock(&host_buffers.lock);\n\tif (!host_buffers.tx)\n\t\tgoto out_unlock;\n\n"
       "\tranges = ffa_reclaim2_copy_ranges(offset, nranges);\n",
       "\tranges = ffa_reclaim2_copy_ranges(offset, nranges);\n\n"
       "\thyp_spin_lock(&host_buffers.lock);\n\tif (!host_buffers.tx)\n\t\tgoto out_unlock;\n")]),
    ("27-unshare-after-unlock",
     "the lock is dropped before the stage-2 walk over our TX copy",
     [("\t/* If the SPMD was happy, then we should be too. */\n"
       "\tWARN_ON(ffa_reclaim2_unshare(ranges, nranges, page_idx, nr_reclaimed));\n"
       "out_unlock:\n",
       "\thyp_spin_unlock(&host_buffers.lock);\n\n"
       "\t/* If the SPMD was happy, then we should be too. */\n"
       "\tWARN_ON(ffa_reclaim2_unshare(ranges, nranges, page_idx, nr_reclaimed));\n"
       "\tgoto out;\n"
       "out_unlock:\n")]),
    ("28-lock-leak-without-tx",
     "with no TX buffer mapped the call returns with the lock held",
     [("\thyp_spin_lock(&host_buffers.lock);\n\tif (!host_buffers.tx)\n\t\tgoto out_unlock;\n\n"
       "\tranges = ffa_reclaim2_copy_ranges",
       "\thyp_spin_lock(&host_buffers.lock);\n\tif (!host_buffers.tx)\n\t\tgoto out;\n\n"
       "\tranges = ffa_reclaim2_copy_ranges")]),
]


def reference_tree(base: Path, cache: Path | None) -> Path:
    return patches.apply(base, REFERENCE, cache)


def mutate(text: str, name: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        n = text.count(old)
        if n != 1:
            raise SystemExit(f"{name}: fragment occurs {n} times in the reference ffa.c:\n{old}")
        text = text.replace(old, new)
    return text


def diff(old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 f"a/{FFA_C}", f"b/{FFA_C}", n=3)
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=("write", "check"))
    ap.add_argument("--tree", type=Path, default=None, help="unpatched tree (default: fetch debian:7.3)")
    ap.add_argument("--cache", type=Path, default=None)
    a = ap.parse_args(argv)
    base = a.tree or trees.fetch("debian:7.3", a.cache, progress=lambda m: None)
    ref = reference_tree(base, a.cache)
    ref_text = (ref / FFA_C).read_text()
    failed = 0
    for name, fault, edits in MUTANTS:
        path = HERE / f"{name}.patch"
        if a.cmd == "write":
            path.write_text(diff(ref_text, mutate(ref_text, name, edits)))
            print(f"wrote {path.name}: {fault}")
            continue
        try:
            out = patches.apply(ref, path, a.cache)
        except patches.PatchError as e:
            print(f"FAIL {name}: {e}")
            failed += 1
            continue
        want = mutate(ref_text, name, edits)
        ok = (out / FFA_C).read_text() == want
        print(f"{'ok  ' if ok else 'STALE'} {name}: {out}")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
