"""kconform-gen (harness/gen): the Z3 edge cases corpora/z3/<abi>/*.kcs, written or checked."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import CORPORA, build_dir
from kconform.engine.build import build_preset

Z3_CORPUS = CORPORA / "z3"


def gen_binary(preset: str = "default") -> Path:
    return build_dir(preset) / "harness" / "gen" / "kconform-gen"


def generate(out: Path = Z3_CORPUS, abi: str = "all", check: bool = False, log=print) -> dict:
    """Runs kconform-gen; returns {"functions": [...], "summary": {...}, "differs": bool}."""
    build_preset("default", targets=["kconform-gen"], log=log)
    binary = gen_binary()
    if not binary.exists():
        raise ToolError(f"{binary} was not built: is libz3-dev installed? (ci/packages.txt group 'build')")
    cmd = [str(binary), "--out", str(out), "--abi", abi] + (["--check"] if check else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise ToolError(f"kconform-gen failed ({' '.join(cmd)}):\n{r.stderr.strip()}")
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    summary = next((x for x in lines if x.get("summary")), {})
    return {"functions": [x for x in lines if not x.get("summary")], "summary": summary,
            "differs": r.returncode == 1, "stderr": r.stderr}
