"""RECLAIM2's cost (`kconform selftest cost`): SMC round trips to EL3 for
FFA_MEM_RECLAIM vs FFA_MEM_RECLAIM2 through the real handler (debian:7.3 + the
reference patch), measured where the EL2 target's memory allows and derived
beyond (targets/el2/reclaim2/COST.md)."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from kconform.selftest.reclaim2 import PAGE_SIZES, R2_DIR, REFERENCE
from kconform.sources import patches, tree_fetch
from kconform.sources.trees import DEFAULT_TREE
from kconform.targets import el2

COST_RANGES = (1, 16, 256, 4096)
COST_BATCHES = (1, 16, 256)
COST_MEASURED_MAX = 16  # the EL2 target has 64 host pages (ffa_target.cc kHostPages)
FN_RECLAIM, FN_RECLAIM2 = 0x84000077, 0xC4000091
DEFAULT_OUTPUT = R2_DIR / "cost.json"


def _cost_scenarios(ps: int, n: int) -> str:
    """A share of n one-host-page ranges, then (a) FFA_MEM_RECLAIM, (b) RECLAIM2 per batch size."""
    hp, k = ps // 4096, ps // 1024
    tx, rx, mem = 0x80000000, 0x80000000 + ps, 0x80000000 + 2 * ps
    ranges = [(mem + i * ps, hp) for i in range(n)]
    blob = lambda rs: "hex:" + b"".join(struct.pack("<QI", a, p) for a, p in rs).hex()  # noqa: E731
    head = (f"kconform-scenario 1\nabi ffa\nname cost/{{}}\nrequires reclaim2 page_{k}k\nversion\n"
            f"rxtx_map tx={tx:#x} rx={rx:#x} pages={hp}\ntx_mem_desc ranges={blob(ranges)}\nmem_share\n")
    out = [head.format(f"reclaim-{n}") + "mem_reclaim handle=0\n"]
    for b in COST_BATCHES:
        body = head.format(f"reclaim2-{n}-b{b}")
        for i in range(0, n, b):
            part = ranges[i:i + b]
            body += (f"tx_constituents offset=0 ranges={blob(part)}\n"
                     f"mem_reclaim2 handle=0 count={len(part)} total_pages={len(part) * hp}\n")
        out.append(body)
    return "\n".join(out)


def _trace(binary: Path, text: str, tmp: Path) -> dict[str, list[tuple[int, int, int]]]:
    """Per scenario: (host fid, SMCs to EL3, x2 returned) of each RECLAIM/RECLAIM2 host call."""
    f = tmp / "cost.kcs"
    f.write_text(text)
    env = dict(os.environ, KCONFORM_SMC_TRACE="1")
    r = subprocess.run([str(binary), "run", "--target", "el2", str(f)], capture_output=True, text=True, env=env)
    names = [json.loads(l)["scenario"] for l in r.stdout.splitlines()
             if '"type":"op"' in l and '"op":0,' in l]
    calls: dict[str, list] = {n: [] for n in names}
    idx, cur = -1, None
    for line in r.stderr.splitlines():
        w = line.split()
        if w[:2] == ["kc-smc", "host"]:
            fid = int(w[2], 16)
            if fid == 0x84000063:  # FFA_VERSION: each scenario starts with one
                idx += 1
            cur = [fid, 0, 0] if fid in (FN_RECLAIM, FN_RECLAIM2) else None
        elif w[:2] == ["kc-smc", "el3"] and cur is not None:
            cur[1] += 1
        elif w[:2] == ["kc-smc", "ret"] and cur is not None:
            cur[2] = int(w[3], 16)
            calls[names[idx]].append(tuple(cur))
            cur = None
    return calls


def measure(log) -> dict:
    """The cost table: {"format": 1, "tree", "rows": [...], "seconds"}."""
    t0 = time.monotonic()
    base = tree_fetch.fetch(DEFAULT_TREE, progress=log)
    ref, tree_id = el2.resolve_tree(str(patches.apply(base, REFERENCE)), None, log)
    bins = el2.build(ref, tree_id, list(PAGE_SIZES), log=log)
    rows = []
    with tempfile.TemporaryDirectory() as td:
        for ps in PAGE_SIZES:
            hp = ps // 4096
            measured = {n: _trace(bins[ps], _cost_scenarios(ps, n), Path(td)) for n in (1, COST_MEASURED_MAX)}
            # Stock FFA_MEM_RECLAIM: RETRIEVE_REQ + FRAG_RX per further fragment + RECLAIM (+ RX
            # release if any): per-call SMCs = fixed + fragments - 1; fixed is measured at 1 range.
            one = measured[1]["cost/reclaim-1"][0]
            desc = lambda n: 48 + 32 + 16 + 16 * n  # noqa: E731  v1.2: header, one EMAD, composite, ranges
            frags = lambda n: math.ceil(desc(n) / ps)  # noqa: E731  the hypervisor's RX: one host page
            for n in COST_RANGES:
                m = measured.get(n)
                if m:
                    c = m[f"cost/reclaim-{n}"]
                    smcs, pages, src = sum(x[1] for x in c), n * hp, "measured"
                else:
                    smcs, pages, src = one[1] + frags(n) - 1, n * hp, "derived"
                rows.append({"page_size": ps, "ranges": n, "path": "FFA_MEM_RECLAIM (stock)", "batch": None,
                             "host_calls": 1, "smcs": smcs, "max_pages_per_call": pages, "source": src})
                for b in COST_BATCHES:
                    if m:
                        c = m[f"cost/reclaim2-{n}-b{b}"]
                        calls, smcs, mx, src = len(c), sum(x[1] for x in c), max(x[2] for x in c), "measured"
                    else:
                        calls = math.ceil(n / b)
                        smcs, mx, src = calls, min(b, n) * hp, "derived"
                    rows.append({"page_size": ps, "ranges": n, "path": "FFA_MEM_RECLAIM2 (reference)",
                                 "batch": b, "host_calls": calls, "smcs": smcs, "max_pages_per_call": mx,
                                 "source": src})
    return {"format": 1, "tree": f"{DEFAULT_TREE} + {REFERENCE.name}", "rows": rows,
            "seconds": round(time.monotonic() - t0, 1)}
