#!/usr/bin/python3
"""Writes corpora/ffa/large.kcs: FF-A transactions larger than one mailbox.

Hundreds (at 4K, thousands) of constituents, sent as a first fragment and
several FFA_MEM_FRAG_TX, then reclaimed: the proxy's retrieve request is
answered in several chunks (FFA_MEM_RETRIEVE_RESP, then FFA_MEM_FRAG_RX /
FFA_MEM_FRAG_TX) wherever the descriptor is longer than one mailbox. One
scenario per case and host PAGE_SIZE (4K, 16K, 64K: `requires page_<n>k`).

The EL2 target's host RAM (targets/el2/ffa_target.cc) is the 64 host pages the
other directed files address from 0x80000000 plus LOW_PAGES[ps] more below
them; every constituent here is one host page of that low part. Descriptors
use the v1.1 layout after `version version=V1_1`, as the other directed files,
so the hypervisor's retrieve response is v1.1 too: 80 bytes of header,
endpoint and composite, then 16 bytes per constituent.

The proxy's own descriptor buffer (SPEC.md PROFILE:DESC-BUF) is, on Debian's
6.12, 7.2 and 7.3 trees, 9 pages at 4K (36 KiB), 3 at 16K (48 KiB) and 1 at
64K (64 KiB): at 4K a transaction of 2299 constituents (exactly 36 KiB) is
reclaimed and one of 2300 is NO_MEMORY. At 16K and 64K the limit lies beyond
the target's host RAM (3067 and 4091 host pages, 48 MiB and 256 MiB), so
only the model's unit test covers it there.

    large_corpus.py [--check]    write (or compare) corpora/ffa/large.kcs
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "corpora" / "ffa" / "large.kcs"
TOP = 0x80000000                                   # the 64 host pages of the other files start here
LOW_PAGES = {4096: 2368, 16384: 1088, 65536: 320}  # targets/el2/ffa_target.cc low_host_pages()
HEADER = 80                                        # v1.1: 48 header + 16 endpoint + 16 composite
DESC_BUF = {4096: 9 * 4096}                        # PROFILE:DESC-BUF, where host RAM can exceed it


def rng(pairs: list[tuple[int, int]]) -> str:
    """ranges= bytes: (address u64, pages u32) records."""
    return "hex:" + b"".join(struct.pack("<QI", a, n) for a, n in pairs).hex()


def pages(ps: int, n: int, first: int = 0) -> list[tuple[int, int]]:
    """n constituents of one host page each, from the bottom of host RAM."""
    assert first + n <= LOW_PAGES[ps], f"{first + n} constituents at {ps}: more than the low host RAM"
    base = TOP - LOW_PAGES[ps] * ps
    return [(base + (first + i) * ps, ps // 4096) for i in range(n)]


def fragmented(ps: int, rs: list[tuple[int, int]], per_frag: int, send: str = "mem_share",
               desc_args: str = "") -> list[str]:
    """The descriptor in TX (clipped to the mailbox), a first fragment of the header and
    per_frag constituents (fewer if the mailbox holds fewer), then FRAG_TX of at most per_frag
    constituents each, until all are sent."""
    first = min(per_frag, (ps - HEADER) // 16)
    args = (desc_args + " ") if desc_args else ""
    ops = [f"tx_mem_desc layout=V1_1 {args}ranges={rng(rs)}", f"{send} frag_len={HEADER + 16 * first}"]
    sent = first
    while sent < len(rs):
        k = min(per_frag, ps // 16, len(rs) - sent)
        ops += [f"tx_constituents offset=0 ranges={rng(rs[sent:sent + k])}", f"mem_frag_tx handle=0 frag_len={16 * k}"]
        sent += k
    return ops


def cases(ps: int) -> list[tuple[str, str, list[str]]]:
    """(name, comment, ops after version and rxtx_map) for host page size ps."""
    per_mbox = (ps - HEADER) // 16        # constituents of a whole descriptor in one mailbox
    out: list[tuple[str, str, list[str]]] = []

    def add(name: str, comment: str, ops: list[str]) -> None:
        out.append((name, comment, ops))

    n = {4096: 600, 16384: 1080, 65536: 300}[ps]

    def frags(ops: list[str]) -> int:
        return 1 + sum(op.startswith("mem_frag_tx") for op in ops)

    def chunks(k: int) -> str:
        c = -(-(HEADER + 16 * k) // ps)
        return f"{HEADER + 16 * k} bytes, {c} mailbox chunk{'s' if c > 1 else ''}"

    share = fragmented(ps, pages(ps, n), 256)
    add(f"share-{n}",
        f"A share of {n} one-page constituents in {frags(share)} fragments (first + FRAG_TX), then "
        f"reclaimed: the retrieve response is {chunks(n)} [MEM:FRAGMENT, PKVM:RECLAIM, SPMC:HYP-RETRIEVE]",
        share + ["mem_reclaim handle=0"])
    lend = fragmented(ps, pages(ps, n), 100, "mem_lend", "attrs=UNSPECIFIED")
    add(f"lend-{n}",
        f"A lend of {n} one-page constituents (memory type not given) in {frags(lend)} fragments, then "
        f"reclaimed: the retrieve response is {chunks(n)} [MEM:FRAGMENT, PKVM:LEND, PKVM:RECLAIM]",
        lend + ["mem_reclaim handle=0"])
    add("share-one-mailbox",
        f"A whole share of {per_mbox} constituents, exactly one mailbox ({HEADER + 16 * per_mbox} bytes), "
        f"reclaimed from a one-chunk retrieve response as long as the mailbox [MEM:ARGS, PKVM:RECLAIM]",
        [f"tx_mem_desc layout=V1_1 ranges={rng(pages(ps, per_mbox))}", "mem_share", "mem_reclaim handle=0"]
        if per_mbox <= LOW_PAGES[ps] else [])
    add("two-large",
        f"Two fragmented shares of {n // 2} constituents each, live together, reclaimed in the other order "
        f"[MEM:FRAGMENT, PKVM:RECLAIM, SPMC:HANDLE]",
        fragmented(ps, pages(ps, n // 2), 128)
        + [op.replace("handle=0", "handle=1") for op in fragmented(ps, pages(ps, n // 2, n // 2), 128)]
        + ["mem_reclaim handle=1", "mem_reclaim handle=0"])
    add("reclaim-rx-held",
        f"A reclaim of {n} constituents while the host owns its RX: BUSY with nothing changed, or reclaimed; "
        f"then released and reclaimed [MBOX:RX-RELEASE, PKVM:RECLAIM]",
        fragmented(ps, pages(ps, n), 256) + ["partition_info_get", "mem_reclaim handle=0", "rx_release",
                                             "mem_reclaim handle=0"])
    if ps in DESC_BUF:
        fit = (DESC_BUF[ps] - HEADER) // 16
        add(f"desc-buf-fits-{fit}",
            f"A share of {fit} constituents: the retrieve response is {HEADER + 16 * fit} bytes, exactly the "
            f"proxy's descriptor buffer, reclaimed from {-(-(HEADER + 16 * fit) // ps)} mailbox chunks "
            f"[PROFILE:DESC-BUF, PKVM:RECLAIM]",
            fragmented(ps, pages(ps, fit), 256) + ["mem_reclaim handle=0"])
        add(f"desc-buf-over-{fit + 1}",
            f"A share of {fit + 1} constituents: the retrieve response is {HEADER + 16 * (fit + 1)} bytes, 16 "
            f"more than the proxy's descriptor buffer: the proxy may refuse the send (NO_MEMORY, nothing "
            f"changes; stock pKVM does, and the fragments and reclaim that follow name no transaction) or "
            f"relay it, and then the reclaim is NO_MEMORY with the pages still shared [PROFILE:DESC-BUF]",
            fragmented(ps, pages(ps, fit + 1), 256) + ["mem_reclaim handle=0"])
    return [c for c in out if c[2]]


def render() -> str:
    lines = [
        "# FF-A directed suite, large.kcs: transactions larger than one mailbox (fragmented sends of hundreds",
        "# of constituents, multi-chunk retrieve responses on reclaim) and the proxy's own descriptor buffer.",
        "# Written by corpora/ffa/large_corpus.py (edit that, then run it); models/ffa/SPEC.md clauses in brackets.",
        "# Layout: TX at 0x80000000, RX one host page above; constituents are host pages below 0x80000000",
        "# (the EL2 target's host RAM reaches down there, targets/el2/ffa_target.cc).",
    ]
    for ps in (4096, 16384, 65536):
        k = ps // 1024
        for name, comment, ops in cases(ps):
            lines += ["", f"# {comment}", "kconform-scenario 1", "abi ffa", f"name ffa/large/{name}-{k}k",
                      f"requires page_{k}k", "version version=V1_1",
                      f"rxtx_map tx={TOP:#x} rx={TOP + ps:#x} pages={ps // 4096}", *ops]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if large.kcs differs from what would be written")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT}: out of date; run {Path(__file__).relative_to(REPO)}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
