#!/usr/bin/python3
"""Single-line mutants of the stock ffa.c (Debian 7.3): one weakened check each.

This table is the source of the NN-name.patch files beside it. Each entry
replaces exactly one line of the stock `arch/arm64/kvm/hyp/nvhe/ffa.c` of
debian:7.3 (or deletes it): `old` is a fragment that occurs exactly once in the
file and may carry unchanged context lines to make it unique; `new` is the same
fragment with one line changed. The patch's first line (before the diff, which
`patch` ignores) says what the mutant weakens. README.md says what kills each.

    mutants.py write  [--tree T]   regenerate every NN-name.patch
    mutants.py check  [--tree T]   every patch applies to the stock tree, changes one line

T is the unpatched tree (default: debian:7.3 from the cache).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "harness" / "driver"))

FFA_C = "arch/arm64/kvm/hyp/nvhe/ffa.c"

# (name, area, what it weakens, old, new)
MUTANTS: list[tuple[str, str, str, str, str]] = [
    ("01-unmap-keeps-el3-mapping", "mailbox",
     "FFA_RXTX_UNMAP: the hypervisor's own pair is left mapped at EL3 when the host's is unmapped",
     "\tffa_unmap_hyp_buffers();\n\nout_unlock:\n",
     "\n\nout_unlock:\n"),
    ("02-map-rx-alignment-unchecked", "mailbox",
     "FFA_RXTX_MAP: only the TX address is checked for PAGE_SIZE alignment, not RX",
     "\tif (!PAGE_ALIGNED(tx) || !PAGE_ALIGNED(rx)) {\n",
     "\tif (!PAGE_ALIGNED(tx)) {\n"),
    ("03-unmap-id-low-half", "mailbox",
     "FFA_RXTX_UNMAP: only the low 16 bits of w1 are compared with the host's ID (the ID is in bits 31:16)",
     "\tif (id != HOST_FFA_ID) {\n",
     "\tif ((u16)id != HOST_FFA_ID) {\n"),
    ("04-unmap-without-map", "mailbox",
     "FFA_RXTX_UNMAP: no check that a pair is mapped before unpinning it",
     "\thyp_spin_lock(&host_buffers.lock);\n\tif (!host_buffers.tx) {\n"
     "\t\tret = FFA_RET_INVALID_PARAMETERS;\n\t\tgoto out_unlock;\n\t}\n\n\thyp_unpin_shared_mem",
     "\thyp_spin_lock(&host_buffers.lock);\n\tif (0) {\n"
     "\t\tret = FFA_RET_INVALID_PARAMETERS;\n\t\tgoto out_unlock;\n\t}\n\n\thyp_unpin_shared_mem"),
    ("05-frag-tx-length-multiple-8", "fragment",
     "FFA_MEM_FRAG_TX: the fragment length need only be a multiple of 8, not of the 16-byte constituent",
     "\tif (fraglen % sizeof(*buf))\n",
     "\tif (fraglen % 8)\n"),
    ("06-frag-tx-el3-error-kept", "fragment",
     "FFA_MEM_FRAG_TX: an EL3 error no longer rolls back this fragment's stage-2 share",
     "\tif (res->a0 != FFA_SUCCESS && res->a0 != FFA_MEM_FRAG_RX)\n",
     "\tif (res->a0 == FFA_ERROR && res->a2 == FFA_RET_ABORTED)\n"),
    ("07-frag-tx-without-tx", "fragment",
     "FFA_MEM_FRAG_TX: no check that the host mapped a TX buffer before copying from it",
     "\tif (!host_buffers.tx)\n\t\tgoto out_unlock;\n\n\tbuf = hyp_buffers.tx;\n",
     "\tif (0)\n\t\tgoto out_unlock;\n\n\tbuf = hyp_buffers.tx;\n"),
    ("08-send-address-mbz-unchecked", "send",
     "FFA_MEM_SHARE/LEND: the buffer address in x3 is not checked (MBZ without dynamic buffers)",
     "\tif (addr_mbz || npages_mbz || fraglen > len ||\n",
     "\tif (npages_mbz || fraglen > len ||\n"),
    ("09-send-page-count-mbz-unchecked", "send",
     "FFA_MEM_SHARE/LEND: the buffer page count in w4 is not checked (MBZ without dynamic buffers)",
     "\tif (addr_mbz || npages_mbz || fraglen > len ||\n",
     "\tif (addr_mbz || fraglen > len ||\n"),
    ("10-send-minimum-length-header-only", "send",
     "FFA_MEM_SHARE/LEND: the fragment need only hold the descriptor header, not one endpoint access descriptor",
     "\tif (fraglen < mem_region_len + ffa_emad_size_get(hyp_ffa_version)) {\n",
     "\tif (fraglen < mem_region_len) {\n"),
    ("11-send-without-tx", "send",
     "FFA_MEM_SHARE/LEND: no check that the host mapped a TX buffer before copying from it",
     "\tif (!host_buffers.tx) {\n\t\tret = FFA_RET_INVALID_PARAMETERS;\n\t\tgoto out_unlock;\n\t}\n\n"
     "\tif (len > ffa_desc_buf.len) {\n",
     "\tif (0) {\n\t\tret = FFA_RET_INVALID_PARAMETERS;\n\t\tgoto out_unlock;\n\t}\n\n"
     "\tif (len > ffa_desc_buf.len) {\n"),
    ("12-send-composite-offset-zero", "send",
     "FFA_MEM_SHARE/LEND: a composite offset of 0 is not refused",
     "\tif (!offset || buf->ep_count != 1 || buf->sender_id != HOST_FFA_ID) {\n",
     "\tif (buf->ep_count != 1 || buf->sender_id != HOST_FFA_ID) {\n"),
    ("13-send-ep-count-zero", "send",
     "FFA_MEM_SHARE/LEND: an endpoint count of 0 is accepted (!= 1 weakened to > 1)",
     "\tif (!offset || buf->ep_count != 1 || buf->sender_id != HOST_FFA_ID) {\n",
     "\tif (!offset || buf->ep_count > 1 || buf->sender_id != HOST_FFA_ID) {\n"),
    ("14-send-composite-header-past-fragment", "send",
     "FFA_MEM_SHARE/LEND: the composite offset is bounded by the fragment, its 16-byte header is not",
     "\tif (fraglen < checked_offset) {\n",
     "\tif (fraglen < offset) {\n"),
    ("15-send-el3-error-kept", "send",
     "FFA_MEM_SHARE/LEND: an EL3 error on a whole (unfragmented) send no longer rolls back the stage-2 share",
     "\t} else if (res->a0 != FFA_SUCCESS) {\n",
     "\t} else if (res->a0 == FFA_ERROR && res->a2 == FFA_RET_ABORTED) {\n"),
    ("16-share-range-size-unchecked", "send",
     "constituents are shared when the address is PAGE_SIZE aligned, whatever their size (16K: a 4K constituent)",
     "\t\tif (!PAGE_ALIGNED(sz | range->address))\n\t\t\tbreak;\n\n\t\tif (__pkvm_host_share_ffa(",
     "\t\tif (!PAGE_ALIGNED(range->address))\n\t\t\tbreak;\n\n\t\tif (__pkvm_host_share_ffa("),
    ("17-share-range-address-unchecked", "send",
     "constituents are shared when the size is a whole number of host pages, wherever they start (16K)",
     "\t\tif (!PAGE_ALIGNED(sz | range->address))\n\t\t\tbreak;\n\n\t\tif (__pkvm_host_share_ffa(",
     "\t\tif (!PAGE_ALIGNED(sz))\n\t\t\tbreak;\n\n\t\tif (__pkvm_host_share_ffa("),
    ("18-reclaim-retrieve-error-unchecked", "reclaim",
     "FFA_MEM_RECLAIM: EL3's answer to the hypervisor's retrieve request is not checked for RETRIEVE_RESP",
     "\tif (res->a0 != FFA_MEM_RETRIEVE_RESP)\n",
     "\tif (res->a0 == FFA_ERROR && res->a2 == FFA_RET_ABORTED)\n"),
    ("19-reclaim-el3-refusal-unchecked", "reclaim",
     "FFA_MEM_RECLAIM: the pages are unshared even when EL3 refused the reclaim",
     "\tffa_mem_reclaim(res, handle_lo, handle_hi, flags);\n\tif (res->a0 != FFA_SUCCESS)\n",
     "\tffa_mem_reclaim(res, handle_lo, handle_hi, flags);\n\tif (res->a0 == FFA_ERROR && res->a2 == FFA_RET_ABORTED)\n"),
    ("20-reclaim-fragment-bound-unchecked", "reclaim",
     "FFA_MEM_RECLAIM: the retrieve response's fragment length is not bounded by the mailbox",
     "\tif (offset + CONSTITUENTS_OFFSET(0) > len ||\n\t    fraglen > KVM_FFA_MBOX_NR_PAGES * PAGE_SIZE) {\n",
     "\tif (offset + CONSTITUENTS_OFFSET(0) > len ||\n\t    fraglen > 16 * KVM_FFA_MBOX_NR_PAGES * PAGE_SIZE) {\n"),
    ("21-version-major-zero", "version",
     "FFA_VERSION: a request with major version 0 is not refused (!= 1 weakened to > 1)",
     "\tif (FFA_MAJOR_VERSION(ffa_req_version) != 1) {\n",
     "\tif (FFA_MAJOR_VERSION(ffa_req_version) > 1) {\n"),
    ("22-version-lower-after-negotiation", "version",
     "FFA_VERSION: after negotiation a request one minor version lower is answered with the negotiated version",
     "\t\tif (FFA_MINOR_VERSION(ffa_req_version) < FFA_MINOR_VERSION(hyp_ffa_version))\n",
     "\t\tif (FFA_MINOR_VERSION(ffa_req_version) + 1 < FFA_MINOR_VERSION(hyp_ffa_version))\n"),
    ("23-version-no-downgrade", "version",
     "FFA_VERSION: a host asking for an older minor version is not downgraded (the proxy keeps its own layout)",
     "\tif (FFA_MINOR_VERSION(ffa_req_version) < FFA_MINOR_VERSION(hyp_ffa_version)) {\n",
     "\tif (FFA_MINOR_VERSION(ffa_req_version) + 1 < FFA_MINOR_VERSION(hyp_ffa_version)) {\n"),
    ("24-reclaim-flags-dropped", "reclaim",
     "FFA_MEM_RECLAIM: the host's flags are not passed to EL3, so reserved bits are never refused",
     "\tffa_mem_reclaim(res, handle_lo, handle_hi, flags);\n",
     "\tffa_mem_reclaim(res, handle_lo, handle_hi, 0);\n"),
    ("25-reclaim-rx-not-released", "reclaim",
     "FFA_MEM_RECLAIM: the hypervisor's RX is not released after the first chunk of the retrieve response",
     "\tmemcpy(buf, hyp_buffers.rx, fraglen);\n\tffa_rx_release(res);\n",
     "\tmemcpy(buf, hyp_buffers.rx, fraglen);\n\n"),
    ("26-send-emad-size-exact", "send",
     "FFA_MEM_SHARE/LEND interoperability: an endpoint memory access descriptor size other than the negotiated "
     "version's is refused, so a v1.2 host's v1.1-sized (16-byte) descriptor is too (the model's reading before "
     "issue 38: too strict)",
     "\tif (!offset || buf->ep_count != 1 || buf->sender_id != HOST_FFA_ID) {\n",
     "\tif (!offset || buf->ep_count != 1 || buf->sender_id != HOST_FFA_ID || "
     "(FFA_MEM_REGION_HAS_EP_MEM_OFFSET(hyp_ffa_version) && buf->ep_mem_size != ffa_emad_size_get(hyp_ffa_version))) {\n"),
]


def mutate(text: str, name: str, old: str, new: str) -> str:
    n = text.count(old)
    if n != 1:
        raise SystemExit(f"{name}: fragment occurs {n} times in the stock ffa.c:\n{old}")
    changed = [(a, b) for a, b in zip(old.splitlines(), new.splitlines()) if a != b]
    if len(old.splitlines()) != len(new.splitlines()) or len(changed) != 1:
        raise SystemExit(f"{name}: must change exactly one line (changes {len(changed)})")
    return text.replace(old, new)


def patch_text(stock: str, name: str, area: str, weakens: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(stock.splitlines(keepends=True),
                                 mutate(stock, name, old, new).splitlines(keepends=True),
                                 f"a/{FFA_C}", f"b/{FFA_C}", n=3)
    return (f"kconform stock-ffa.c mutant {name} ({area}): weakens {weakens}\n"
            "(single-line mutant of Debian 7.3 ffa.c; targets/el2/stock-mutants/mutants.py)\n\n"
            + "".join(lines))


def main(argv: list[str] | None = None) -> int:
    from kconform.sources import patches, tree_fetch
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=("write", "check"))
    ap.add_argument("--tree", type=Path, default=None, help="unpatched tree (default: fetch debian:7.3)")
    a = ap.parse_args(argv)
    base = a.tree or tree_fetch.fetch("debian:7.3", progress=lambda m: None)
    stock = (base / FFA_C).read_text()
    failed = 0
    for name, area, weakens, old, new in MUTANTS:
        path = HERE / f"{name}.patch"
        text = patch_text(stock, name, area, weakens, old, new)
        if a.cmd == "write":
            path.write_text(text)
            print(f"wrote {path.name}: {weakens}")
            continue
        if not path.is_file() or path.read_text() != text:
            print(f"STALE {name}: run `mutants.py write`")
            failed += 1
            continue
        out = patches.apply(base, path)
        ok = (out / FFA_C).read_text() == mutate(stock, name, old, new)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {out}")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
