#!/usr/bin/env python3
"""check_stage1.py: the EL2 target's hypervisor view of memory, end to end
(targets/el2/README.md "ffa.c's view of memory"), through the driver's own
crash handling (kconform.engine.runner: a crash is a finding at the op in
flight, a fresh runner resumes after it).

  check_stage1.py corpus --runner RUNNER CORPUS_DIR
      Every op of CORPUS_DIR (corpora/ffa) has a verdict; no op faults in the
      hypervisor's view but the one stock ffa.c has there (a lying EL3's
      0xfffffff0-byte fragment copied into the descriptor buffer,
      ffa/el3-reclaim/frag1-huge-*), whose finding names the region: past
      the end of the proxy's descriptor buffer. (Other crashes and hangs are
      the code's own findings, judged by the baseline, not this check's.)

  check_stage1.py planted --runner RUNNER --planted PLANTED KCS
      KCS (stage1/planted.kcs) on the planted ffa.c (stage1/planted.patch):
      a crash finding at the op of each scenario, naming the region the access
      missed and the kind of access; on the stock runner the first two pass
      (the calls are refused) and the third crashes the same way.

Under ASan the runner dies of the sanitizer's report (CRASH.SANITIZER) with the
same description, but for the descriptor buffer's overrun, which ASan reports
first as memcpy-param-overlap. Exit 0 pass, 1 fail."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "harness" / "driver"))

from kconform.engine.runner import Engine  # noqa: E402

DESC_BUF = "past the end of the proxy's descriptor buffer"
WATCHDOG = 1.0  # stock ffa.c's two FRAG_RX stalls in corpora/ffa hang until it fires

# scenario -> (op, access, region) on the planted ffa.c
PLANTED = {
    "ffa/stage1/tx-overread-4k": (2, "EL2 read at ", "host page 0x80002000 not shared with the hypervisor (host-owned)"),
    "ffa/stage1/rx-overwrite-4k": (3, "EL2 write at ", "host page 0x80003000 not shared with the hypervisor (host-owned)"),
    "ffa/stage1/desc-buf-overrun-4k": (6, "EL2 ", DESC_BUF),
}


def run(runner: str, files: list[str], tmp: Path, name: str):
    return Engine(Path(runner)).run("el2", files, tmp / f"{name}.jsonl", watchdog=WATCHDOG)


def crashes(r) -> dict:
    return {f.scenario: f for f in r.findings if f.rule.startswith("CRASH.")}


def sanitized(r) -> bool:
    return bool(r.target.get("caps", {}).get("sanitized"))


def show(f) -> str:
    return f"{f.scenario} op {f.op} {f.rule}: {f.observed}"


def check_corpus(args, tmp: Path) -> list[str]:
    files = sorted(str(p) for p in Path(args.corpus).glob("*.kcs"))
    r = run(args.runner, files, tmp, "corpus")
    bad = []
    total = r.plan.get("ops", 0) if not r.summary.get("crashed") else r.summary.get("ops", 0)
    if sum(r.counts.values()) != total:
        bad.append(f"{sum(r.counts.values())} ops have a verdict of {total} planned")
    for name, f in sorted(crashes(r).items()):
        print(f"check_stage1: {show(f)}")
        described = "in the hypervisor's view of memory" in f.observed
        if "/frag1-huge-" in name:
            if f.rule == "CRASH.SIGNAL" or described:
                if DESC_BUF not in f.observed:
                    bad.append(f"{name}: the fault does not name the descriptor buffer: {f.observed}")
            elif not (sanitized(r) and "memcpy-param-overlap" in f.observed):
                bad.append(f"{name}: neither a described fault nor ASan's memcpy-param-overlap: {f.observed}")
        elif described:
            bad.append(f"{name} op {f.op}: a fault in the hypervisor's view of memory: {f.observed}")
    print(f"check_stage1: corpus: {len(r.ran)} scenarios ran, {sum(r.counts.values())} ops, "
          f"{len(crashes(r))} crash findings")
    return bad


def check_planted(args, tmp: Path) -> list[str]:
    bad = []
    got = crashes(run(args.planted, [args.kcs], tmp, "planted"))
    stock = run(args.runner, [args.kcs], tmp, "stock")
    for name, (op, access, region) in PLANTED.items():
        f = got.get(name)
        if f is None:
            bad.append(f"{name}: no crash finding on the planted ffa.c")
            continue
        print(f"check_stage1: planted: {show(f)}")
        if f.op != op:
            bad.append(f"{name}: the crash is at op {f.op}, not {op}")
        asan_overlap = sanitized(stock) and region == DESC_BUF and "memcpy-param-overlap" in f.observed
        if not asan_overlap and (access not in f.observed or region not in f.observed):
            bad.append(f"{name}: the finding does not say '{access}...{region}': {f.observed}")
    s = crashes(stock)
    for name in PLANTED:
        if name.endswith("desc-buf-overrun-4k"):
            if name not in s:
                bad.append(f"{name}: stock ffa.c does not crash on it")
        elif name in s:
            bad.append(f"{name}: stock ffa.c crashes on it: {show(s[name])}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--runner", required=True)
    c.add_argument("corpus")
    p = sub.add_parser("planted")
    p.add_argument("--runner", required=True)
    p.add_argument("--planted", required=True)
    p.add_argument("kcs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kc-stage1-") as d:
        bad = (check_corpus if args.mode == "corpus" else check_planted)(args, Path(d))
    for b in bad:
        print(f"check_stage1: FAIL: {b}", file=sys.stderr)
    if not bad:
        print(f"check_stage1: {args.mode}: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
