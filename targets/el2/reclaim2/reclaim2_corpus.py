#!/usr/bin/python3
"""Writes the directed FFA_MEM_RECLAIM2 suite, corpora/ffa/reclaim2-<4k|16k>.kcs.

One scenario per case and host PAGE_SIZE; sizes are counted in host pages
(hp = PAGE_SIZE / 4K 4K-pages) so a case means the same at 4K and 16K. Each
scenario's comment names what it checks, the SPEC.md clauses in brackets and
the mutants (targets/el2/reclaim2/mutants) it is meant to kill.

    reclaim2_corpus.py [--check]    write (or compare) both files
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TX, RX = 0x80000000, 0x80010000
A, B, C = 0x80020000, 0x80030000, 0x80038000  # share regions (host-page aligned at 4K and 16K)


def rng(*pairs: tuple[int, int]) -> str:
    """ranges= bytes: (address u64, pages u32) records."""
    return "hex:" + b"".join(struct.pack("<QI", a, n) for a, n in pairs).hex()


def desc(*items: tuple[int, int, int]) -> str:
    """tx_write data: full 16-byte constituents (address, pages, reserved)."""
    return "hex:" + b"".join(struct.pack("<QII", a, n, r) for a, n, r in items).hex()


def cases(ps: int) -> list[tuple[str, str, str, list[str]]]:
    """(name, comment, requires, ops after version) for host page size ps."""
    hp = ps // 4096
    mbox = ps  # KVM_FFA_MBOX_NR_PAGES = 1 host page
    mp = f"rxtx_map tx={TX:#x} rx={RX:#x} pages={hp}"
    one = [mp, f"tx_mem_desc ranges={rng((A, 4 * hp))}", "mem_share"]
    lend = [mp, f"tx_mem_desc attrs=UNSPECIFIED ranges={rng((A, 4 * hp))}", "mem_lend"]
    two = [mp, f"tx_mem_desc ranges={rng((A, 4 * hp), (B, 4 * hp))}", "mem_share"]
    r2 = "requires reclaim2"
    out: list[tuple[str, str, str, list[str]]] = []

    def add(name, why, ops, req=r2):
        out.append((name, why, req, ops))

    # --- not implemented (stock trees): every tree runs these --------------------------
    add("not-implemented-valid",
        "A valid RECLAIM2 of a whole share: a handler that implements it reclaims and unshares it; "
        "one that does not must answer NOT_SUPPORTED and change nothing [R2:OPTIONAL, R2:UNSHARE]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}", "mem_reclaim handle=0"], req="")
    add("not-implemented-features",
        "FFA_FEATURES(RECLAIM2) after a share: NOT_SUPPORTED from a proxy without it [R2:OPTIONAL, FEATURES:CONSISTENT]",
        one + ["features id=MEM_RECLAIM2", "mem_reclaim handle=0"], req="")
    add("not-implemented-bad-args",
        "RECLAIM2 with reserved flag bits: INVALID_PARAMETERS from a handler with RECLAIM2, NOT_SUPPORTED "
        "from one without [R2:OPTIONAL, R2:PROFILE]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 flags=2 count=1 total_pages={4 * hp}", "mem_reclaim handle=0"], req="")

    # --- allowed side: whole, in pieces, equivalence -------------------------------------
    add("whole-one-call",
        "One RECLAIM2 of every page: w2 = all, every host page host-owned, the handle gone "
        "(FFA_MEM_RECLAIM then fails) [R2:RESULT, R2:UNSHARE, R2:EQUIVALENCE]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}", "mem_reclaim handle=0"])
    add("pieces-equal-one-reclaim",
        "Two regions reclaimed in four RECLAIM2 calls, out of order (second half of B, all of A, first "
        "half of B with index 0): same end state as one FFA_MEM_RECLAIM [R2:UNSHARE, R2:EQUIVALENCE]; "
        "kills 24 on the multi-descriptor calls",
        two + [f"tx_constituents offset=0 ranges={rng((B, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 page_index={2 * hp} total_pages={4 * hp}",
               f"tx_constituents offset=0 ranges={rng((A, 2 * hp), (A + 2 * ps, 2 * hp))}",
               f"mem_reclaim2 handle=0 count=2 total_pages={4 * hp}",
               f"tx_constituents offset=0 ranges={rng((B, 2 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={2 * hp}",
               "mem_reclaim handle=0"])
    add("pieces-reference-reclaim",
        "The same two regions ended by one FFA_MEM_RECLAIM: the state pieces-equal-one-reclaim must reach "
        "[PKVM:RECLAIM, R2:EQUIVALENCE]",
        two + ["mem_reclaim handle=0"])
    add("two-descriptors-index",
        "Descriptors [A, B] with index 2hp: the second half of A and all of B are reclaimed, A's first half "
        "stays shared (EL3 holds it); then A's first half [R2:RESULT, R2:UNSHARE]; kills 02, 03, 04, 24",
        two + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp), (B, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=2 page_index={2 * hp} total_pages={8 * hp}",
               f"tx_constituents offset=0 ranges={rng((A, 2 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={2 * hp}"])
    add("offset-bit4",
        "Descriptors at offset 48 (bit 4 set) with other valid descriptors at offset 0: only those at 48 "
        "are reclaimed [R2:PROFILE offset, R2:UNSHARE]; kills 13, 25",
        two + [f"tx_constituents offset=0 ranges={rng((B, 4 * hp))}",
               f"tx_constituents offset=48 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 offset=48 count=1 total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("last-descriptor-at-tx-end",
        "The only descriptor in the last 16 bytes of TX (offset + 16*count == TX size) is accepted "
        "[R2:PROFILE bounds]; kills 14",
        one + [f"tx_constituents offset={mbox - 16} ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 offset={mbox - 16} count=1 total_pages={4 * hp}"])
    add("zero-flag-on-lend",
        "Zero-before-reclaim on a lend is allowed and reclaims [R2:PROFILE flags]; kills 12",
        lend + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
                f"mem_reclaim2 handle=0 flags=ZERO count=1 total_pages={4 * hp}"])
    add("returned-count-within-asked",
        "Index hp of 4hp pages: EL3 reclaims (and w2 reports) at most the 3hp pages asked for, never total "
        "[R2:RESULT]; then the first host page [R2:EQUIVALENCE]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 page_index={hp} total_pages={4 * hp}",
               f"tx_constituents offset=0 ranges={rng((A, hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={hp}"])

    # --- EL3 results: short and impossible counts, errors ----------------------------------
    add("el3-short-count-resume",
        "EL3 reclaims one host page of four (SHORT_COUNT): exactly that page becomes host-owned; the host "
        "resumes at index hp [HARNESS:EL3, R2:RESULT, R2:UNSHARE, R2:EQUIVALENCE]; kills 19, 21",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"el3_misbehave kind=SHORT_COUNT value={hp}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
               f"mem_reclaim2 handle=0 count=1 page_index={hp} total_pages={4 * hp}"])
    add("el3-short-count-zero",
        "EL3 reports 0 pages reclaimed: an impossible count, an error and stage-2 untouched [PKVM:DISTRUST, "
        "R2:RESULT]; kills 22",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               "el3_misbehave kind=SHORT_COUNT value=0",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("el3-long-count",
        "EL3 reports one page more than asked: an error (or trusted up to what was asked), never more "
        "unshared [PKVM:DISTRUST, R2:RESULT]; kills 22",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               "el3_misbehave kind=LONG_COUNT value=1",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}"])
    add("el3-long-count-with-index",
        "Index 2hp: EL3 reports asked + 1 pages, still <= total: the bound is total - index [R2:RESULT]; "
        "kills 23",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               "el3_misbehave kind=LONG_COUNT value=1",
               f"mem_reclaim2 handle=0 count=1 page_index={2 * hp} total_pages={4 * hp}"])
    add("el3-error",
        "EL3 answers FFA_ERROR(DENIED) doing nothing: the host gets EL3's error and nothing changes "
        "[PKVM:ATOMIC, HARNESS:EL3]; kills 19, 20",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               "el3_misbehave kind=ERROR value=0xfffffffa",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
               "mem_reclaim handle=0"])

    # --- forbidden side: EL3's checks (handle, membership, reclaimed, retrieved) -------------
    add("bad-handle",
        "A handle that names no transaction: INVALID_PARAMETERS, nothing changes [R2:PROFILE errors]; kills 19, 20",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 handle_xor=1 count=1 total_pages={4 * hp}",
               f"mem_reclaim2 handle=0 handle_xor=0x100000000 count=1 total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("handle-after-reclaim",
        "RECLAIM2 of a handle FFA_MEM_RECLAIM already ended: INVALID_PARAMETERS [R2:PROFILE errors]",
        one + ["mem_reclaim handle=0", f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}"])
    add("already-reclaimed",
        "The first half twice: the second call asks for pages already reclaimed, INVALID_PARAMETERS; "
        "then the rest [R2:PROFILE errors, R2:EQUIVALENCE]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 2 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={2 * hp}",
               f"mem_reclaim2 handle=0 count=1 total_pages={2 * hp}",
               f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 page_index={2 * hp} total_pages={4 * hp}",
               f"tx_constituents offset=0 ranges={rng((A + 2 * ps, 2 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={2 * hp}"])
    add("repeated-descriptor",
        "The same descriptor twice: INVALID_PARAMETERS, nothing reclaimed [R2:PROFILE descriptors]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 2 * hp), (A, 2 * hp))}",
               f"mem_reclaim2 handle=0 count=2 total_pages={4 * hp}", "mem_reclaim handle=0"])
    add("overlapping-descriptors",
        "Two descriptors that overlap by one host page: INVALID_PARAMETERS [R2:PROFILE descriptors]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 2 * hp), (A + ps, 2 * hp))}",
               f"mem_reclaim2 handle=0 count=2 total_pages={4 * hp}", "mem_reclaim handle=0"])
    add("not-in-transaction",
        "A descriptor past the end of the share: INVALID_PARAMETERS [R2:PROFILE descriptors]",
        one + [f"tx_constituents offset=0 ranges={rng((A + 2 * ps, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}", "mem_reclaim handle=0"])
    add("retrieved",
        "While a borrower holds the memory: DENIED; after it relinquishes, reclaimed [R2:PROFILE errors, "
        "HARNESS:SP]; kills 19, 20",
        one + ["sp_retrieve handle=0", f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
               "sp_relinquish handle=0",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}"])
    add("el3-unk-live-share",
        "RECLAIM2 of a live share made at v1.1 (an EL3 SPMC that refuses v1.2 descriptors, as TF-A 2.12.1 does, "
        "still takes it): an EL3 with RECLAIM2 reclaims it; one without it (TF-A answers SMC_UNK, SPMC:ROUTED) "
        "reclaims nothing, the pages stay shared and the host gets NOT_SUPPORTED or EL3's SMC_UNK; "
        "FFA_FEATURES agrees [R2:EL3-UNK, R2:UNSHARE, FEATURES:CONSISTENT]",
        ["version version=V1_1", mp, f"tx_mem_desc layout=V1_1 ranges={rng((A, 4 * hp))}", "mem_share",
         f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
         f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}", "features id=MEM_RECLAIM2"])
    add("zero-flag-on-share",
        "Zero-before-reclaim on a share: INVALID_PARAMETERS (EL3's check) [R2:PROFILE flags, SPMC:RECLAIM]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 flags=ZERO count=1 total_pages={4 * hp}", "mem_reclaim handle=0"])

    # --- forbidden side: the relayer's checks (H1 sees a relay) --------------------------------
    add("flags-reserved",
        "Flag bits 1 and 31: INVALID_PARAMETERS, never relayed [R2:PROFILE flags]; kills 11",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 flags=TIME_SLICE count=1 total_pages={4 * hp}",
               f"mem_reclaim2 handle=0 flags=0x80000000 count=1 total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("offset-unaligned",
        "Offsets 8 and 4: INVALID_PARAMETERS, never relayed [R2:PROFILE offset]; kills 13",
        one + [f"tx_constituents offset=8 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 offset=8 count=1 total_pages={4 * hp}",
               f"mem_reclaim2 handle=0 offset=4 count=1 total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("count-zero-stale-copy",
        "count 0 at an offset where an earlier RECLAIM2 left a descriptor in the hypervisor's TX copy, "
        "total 0: INVALID_PARAMETERS, never relayed [R2:PROFILE count]; kills 17",
        two + [f"tx_constituents offset=32 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 offset=32 count=1 total_pages={4 * hp}",
               "mem_reclaim2 handle=0 offset=32 count=0 total_pages=0",
               "mem_reclaim handle=0"])
    add("bounds-one-past",
        "The last descriptor 16 bytes past TX (a small overrun): INVALID_PARAMETERS, never relayed "
        "[R2:PROFILE bounds]; kills 14's neighbour and 16 (small overrun)",
        one + [f"tx_constituents offset={mbox - 16} ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 offset={mbox - 16} count=2 total_pages={4 * hp}",
               f"mem_reclaim2 handle=0 offset={mbox} count=1 total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("bounds-count-2pow28",
        "count 2^28: 16*count wraps to 0 in 32 bits; INVALID_PARAMETERS [R2:PROFILE bounds]; kills 15 (crash)",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=0x10000000 total_pages={4 * hp}", "mem_reclaim handle=0"])
    add("bounds-count-max",
        "count 2^32-1: INVALID_PARAMETERS [R2:PROFILE bounds]; kills 16 (crash)",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=0xffffffff total_pages={4 * hp}", "mem_reclaim handle=0"])
    add("descriptor-reserved",
        "A descriptor's reserved word set: INVALID_PARAMETERS, never relayed [R2:PROFILE descriptors]; kills 18",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))} reserved=1",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
               f"tx_write offset=0 data={desc((A, 2 * hp, 0), (A + 2 * ps, 2 * hp, 0x80000000))}",
               f"mem_reclaim2 handle=0 count=2 total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("descriptor-invalid",
        "A descriptor of 0 pages, one at an unaligned address, one that wraps 2^64: INVALID_PARAMETERS "
        "[R2:PROFILE descriptors]",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp), (B, 0))}",
               f"mem_reclaim2 handle=0 count=2 total_pages={4 * hp}",
               f"tx_constituents offset=0 ranges={rng((A + 8, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
               f"tx_constituents offset=0 ranges={rng((0x10000000000000000 - ps, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("total-mismatch",
        "total one short and one over the sum: INVALID_PARAMETERS, never relayed [R2:PROFILE total]; kills 09",
        one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp - 1}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp + 1}",
               "mem_reclaim handle=0"])
    add("total-u32-overflow",
        "Descriptors whose page counts sum to 2^32 with total 0 (equal only modulo 2^32): "
        "INVALID_PARAMETERS [R2:PROFILE total]; kills 10",
        one + [f"tx_constituents offset=0 ranges={rng((A, 16), (0x100000000, 0xfffffff0))}",
               "mem_reclaim2 handle=0 count=2 total_pages=0",
               "mem_reclaim handle=0"])
    add("page-index-edges",
        "Index = pages of the first descriptor, then 2^32 + hp (upper bits set): INVALID_PARAMETERS, "
        "never relayed [R2:PROFILE page index]; kills 01, 05",
        one + [f"tx_constituents offset=0 ranges={rng((A, 2 * hp), (A + 2 * ps, 2 * hp))}",
               f"mem_reclaim2 handle=0 count=2 page_index={2 * hp} total_pages={4 * hp}",
               f"mem_reclaim2 handle=0 count=2 page_index={(1 << 32) + hp} total_pages={4 * hp}",
               "mem_reclaim handle=0"])
    add("no-tx-mapped",
        "RECLAIM2 after FFA_RXTX_UNMAP: INVALID_PARAMETERS or DENIED, nothing changes, and the next call "
        "still works [MBOX:TX-REQUIRED]; kills 26 (crash), 28",
        one + ["rxtx_unmap", f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
               f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}", "mem_reclaim handle=0"])

    # --- host pages larger than 4K ----------------------------------------------------------
    if hp > 1:
        add("granule-index-inside-host-page",
            "Index 1 of two host pages: refused, or relayed with the first host page kept shared while EL3 "
            "holds its first 4K page [R2:GRANULE]; kills 06",
            one + [f"tx_constituents offset=0 ranges={rng((A, 2 * hp))}",
                   f"mem_reclaim2 handle=0 count=1 page_index=1 total_pages={2 * hp}"])
        add("granule-descriptor-inside-host-page",
            "A descriptor starting 4K into a host page: refused, or relayed keeping that host page shared "
            "[R2:GRANULE]; kills 07",
            one + [f"tx_constituents offset=0 ranges={rng((A + 4096, 2 * hp - 1))}",
                   f"mem_reclaim2 handle=0 count=1 total_pages={2 * hp - 1}"])
        add("granule-short-count-inside-host-page",
            "EL3 stops 2 4K pages into the second host page (SHORT_COUNT hp+2): the first host page is "
            "host-owned, the second stays shared [R2:GRANULE, R2:UNSHARE]; kills 08",
            one + [f"tx_constituents offset=0 ranges={rng((A, 4 * hp))}",
                   f"el3_misbehave kind=SHORT_COUNT value={hp + 2}",
                   f"mem_reclaim2 handle=0 count=1 total_pages={4 * hp}",
                   f"mem_reclaim2 handle=0 count=1 page_index={2 * hp} total_pages={4 * hp}"])
        add("granule-call-ends-inside-host-page",
            "A call whose last descriptor ends 4K into a host page (1 + hp... 4K pages): refused, or relayed "
            "keeping that host page shared [R2:GRANULE]",
            one + [f"tx_constituents offset=0 ranges={rng((A, hp + 1))}",
                   f"mem_reclaim2 handle=0 count=1 total_pages={hp + 1}"])
    return out


def render(ps: int) -> str:
    k = ps // 1024
    hdr = (f"# Directed FFA_MEM_RECLAIM2 suite, host PAGE_SIZE {k}K: every FFA.R2.* rule on its allowed and\n"
           f"# forbidden side (models/ffa/SPEC.md labels in brackets) and the cases the mutants in\n"
           f"# targets/el2/reclaim2/mutants need. Generated by targets/el2/reclaim2/reclaim2_corpus.py:\n"
           f"# edit that, not this file. TX at {TX:#x}, RX at {RX:#x} (one host page each),\n"
           f"# regions A {A:#x}, B {B:#x}. 'requires reclaim2': only on a handler that implements it\n"
           f"# (stock trees report unsupported); the not-implemented-* cases run everywhere.\n")
    parts = [hdr]
    for name, why, req, ops in cases(ps):
        reqs = " ".join(x for x in (req.removeprefix("requires ").strip(), f"page_{k}k") if x)
        # ops start with FFA_VERSION (v1.2, the default), unless they ask for another
        first = "" if ops and ops[0].startswith("version ") else "version\n"
        parts.append(f"\n# {why}\nkconform-scenario 1\nabi ffa\nname ffa/reclaim2/{name}-{k}k\n"
                     f"requires {reqs}\n{first}" + "\n".join(ops) + "\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the files differ")
    a = ap.parse_args(argv)
    bad = 0
    for ps in (4096, 16384):
        path = REPO / "corpora" / "ffa" / f"reclaim2-{ps // 1024}k.kcs"
        text = render(ps)
        if a.check:
            if not path.exists() or path.read_text() != text:
                print(f"stale: {path}")
                bad = 1
        else:
            path.write_text(text)
            print(f"wrote {path}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
