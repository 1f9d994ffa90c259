#!/usr/bin/env python3
"""check_mutant.py [--target el2-tfa] STOCK_RUNNER MUTANT_RUNNER PATCH CORPUS_DIR

A TF-A mutant (targets/spmc/mutants/*.patch) must be reported: run every FF-A
scenario of CORPUS_DIR on the spmc target (4K) of the stock build and of the
mutant's, and pass only if some op the stock SPMC passes is a violation of the
rule the patch names ("# Caught as: RULE") on the mutant. Prints those ops.
With --target el2-tfa the runners are el2 runners with TF-A behind pKVM's
ffa.c, and the rule is the patch's "# Through pKVM: caught as RULE" line.
Exit 0 caught, 1 not caught, 2 could not run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def crash_marker(stderr: str) -> dict | None:
    """The runner's KCONFORM-CRASH line (harness/runner/crash_marker.h), if any."""
    for line in stderr.splitlines():
        if line.startswith("KCONFORM-CRASH "):
            return json.loads(line[len("KCONFORM-CRASH "):])
    return None


def verdicts(runner: str, files: list[str], out: Path, target: str = "spmc-4k") -> dict:
    """Every op's verdict record by (scenario, op). A crash of the code under test
    (the stock SPMC crashes on corpora/ffa/tfa.kcs) is that op's verdict "crash";
    the runner resumes after its scenario, as `kconform run` does."""
    ops: dict = {}
    start = 0
    while True:
        part = out.with_name(f"{out.stem}.{start}{out.suffix}")
        r = subprocess.run([runner, "run", "--target", target, "--out", str(part),
                            *(["--from", str(start)] if start else []), *files],
                           capture_output=True, text=True)
        if part.exists():
            for line in part.read_text().splitlines():
                rec = json.loads(line)
                if rec.get("type") == "op":
                    ops[(rec["scenario"], rec["op"])] = rec
        crash = crash_marker(r.stderr)
        if r.returncode in (0, 1) and part.exists():
            return ops
        if crash is None or not isinstance(crash.get("at"), int) or crash["at"] + 1 <= start:
            print(f"check_mutant: {runner} failed ({r.returncode}): {r.stderr.strip()[-2000:]}", file=sys.stderr)
            sys.exit(2)
        ops[(crash.get("scenario"), crash.get("op"))] = {"verdict": "crash", **crash}
        start = crash["at"] + 1


def main(argv: list[str]) -> int:
    target = "spmc-4k"
    if len(argv) > 2 and argv[1] == "--target":
        target = argv[2]
        argv = argv[:1] + argv[3:]
    if len(argv) != 5 or target not in ("spmc-4k", "el2-tfa"):
        print(__doc__, file=sys.stderr)
        return 2
    stock, mutant, patch, corpus = argv[1:]
    line = "# Caught as: " if target == "spmc-4k" else "# Through pKVM: caught as "
    m = re.search("^" + re.escape(line) + r"([A-Z0-9_.]+)", Path(patch).read_text(), re.M)
    if not m:
        print(f"check_mutant: {patch}: no '{line}RULE' line", file=sys.stderr)
        return 2
    rule = m.group(1)
    files = sorted(str(p) for p in Path(corpus).glob("*.kcs"))
    if not files:
        print(f"check_mutant: {corpus}: no .kcs files", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        base = verdicts(stock, files, Path(d) / "stock.jsonl", target)
        mut = verdicts(mutant, files, Path(d) / "mutant.jsonl", target)
    caught = [rec for key, rec in mut.items()
              if rec.get("verdict") == "violation" and rule in rec.get("violated", [])
              and base.get(key, {}).get("verdict") == "pass"]
    name = Path(patch).name
    for rec in caught[:10]:
        print(f"{name}: caught: {rec['scenario']} op {rec['op']} {rec['call']}: "
              f"expected {rec.get('expected')}, observed {rec.get('observed')}")
    print(f"{name}: {len(caught)} op(s) where the stock SPMC passes and the mutant violates {rule}")
    return 0 if caught else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
