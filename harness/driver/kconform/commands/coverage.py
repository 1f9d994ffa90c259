"""`kconform coverage --target el2`: line, branch and function coverage of the
tree's ffa.c reached by the directed suite, the Z3 cases and a fuzz corpus, each
separately and together (engine/coverage.py)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kconform.core import procs
from kconform.core.errors import EXIT_CLEAN, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, new_report_dir
from kconform.engine import coverage
from kconform.engine.runner import Engine
from kconform.engine.scenarios import expand
from kconform.sources.trees import DEFAULT_TREE
from kconform.targets import el2

CORPORA = {
    "directed": [REPO / "corpora" / "ffa"],
    "z3": [REPO / "corpora" / "z3" / "ffa"],
    "fuzz": [REPO / "reports" / "fuzz" / "el2" / "corpus"],
}


def _files(engine: Engine, label: str, dirs: list[Path], log) -> list[str]:
    """The scenario files of a corpus; a fuzz corpus may hold inputs that do not
    decode (the engine keeps only those it ran, but other tools may add): those are
    left out and counted."""
    files: list[str] = []
    for d in dirs:
        if not d.exists():
            raise ToolError(f"corpus {label}: {d} does not exist")
        if d.is_dir() and label in ("fuzz",) or (d.is_dir() and not any(d.glob("*.kcs"))):
            files += sorted(str(p) for p in d.iterdir() if p.is_file() and not p.name.startswith("."))
        else:
            files += expand([str(d)])
    if not files:
        raise ToolError(f"corpus {label}: no scenario files in {', '.join(map(str, dirs))}")
    try:
        engine.check(files)
        return files
    except ToolError:
        good = []
        for f in files:
            try:
                engine.check([f])
                good.append(f)
            except ToolError:
                pass
        log(f"kconform: corpus {label}: {len(files) - len(good)} of {len(files)} files are not scenarios, left out")
        if not good:
            raise ToolError(f"corpus {label}: none of its {len(files)} files is a scenario") from None
        return good


def cmd_coverage(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    if args.target != "el2":
        raise ToolError("flag --target: only el2 is measured here (guest_memfd coverage needs a kernel built "
                        "with gcov inside QEMU, not yet)")
    page = el2.parse_page_size(args.page_size)
    wanted: dict[str, list[Path]] = {}
    for spec in args.corpus or ["directed", "z3", "fuzz"]:
        label, _, path = spec.partition("=")
        if path:
            wanted[label] = [Path(p) for p in path.split(",")]
        elif label in CORPORA:
            if label == "fuzz" and not args.corpus and not CORPORA["fuzz"][0].exists():
                log(f"kconform: no fuzz corpus at {CORPORA['fuzz'][0]} (./kconform fuzz --target el2 makes it); "
                    "measuring the others")
                continue
            wanted[label] = CORPORA[label]
        else:
            raise ToolError(f"flag --corpus: '{spec}' is not directed, z3, fuzz or NAME=PATH[,PATH]")
    tree, tree_id = el2.resolve_tree(args.tree or DEFAULT_TREE, args.apply, log)
    binary = el2.build(tree, tree_id, [page], log=log, coverage=True)[page]
    engine = Engine(binary)
    out_dir = new_report_dir(Path(args.out) if args.out else REPO / "reports" / "coverage")
    results = []
    with tempfile.TemporaryDirectory(prefix="kconform-cov-") as tmp:
        work = Path(tmp)
        profiles = []
        total = 0
        for label, dirs in wanted.items():
            files = _files(engine, label, dirs, log)
            log(f"kconform: coverage: corpus {label}: {len(files)} files")
            prof = coverage.run_corpus(engine, files, work, label)
            profiles.append(prof)
            n = sum(len(engine.scenario_names(f)) for f in files) if len(files) < 200 else len(files)
            total += n
            results.append(coverage.file_coverage(binary, prof, label, n))
        if len(profiles) > 1:
            allp = coverage.merge(profiles, work / "all.profdata")
            results.append(coverage.file_coverage(binary, allp, "all", total))
        else:
            allp = profiles[0]
        if args.html:
            html_dir = out_dir / "html"
            r = procs.run([coverage.llvm_tool("llvm-cov"), "show", "-format=html", f"-instr-profile={allp}",
                           f"-output-dir={html_dir}", str(binary), str(tree / coverage.FFA_C)],
                          capture_output=True, text=True)
            if r.returncode != 0:
                raise ToolError(f"llvm-cov show failed: {r.stderr.strip()[-800:]}")
            log(f"kconform: line-by-line view: {html_dir / 'index.html'}")
    doc = {"format": 1, "target": f"el2-{tree_id}-{page // 1024}k", "file": coverage.FFA_C,
           "tree": str(tree), "corpora": [r.to_json() for r in results]}
    atomic_write(out_dir / "coverage.json", json.dumps(doc, indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        t = Table(title=f"coverage of {coverage.FFA_C} ({doc['target']})", title_justify="left")
        for col in ("corpus", "scenarios", "lines", "branches", "functions", "never reached"):
            t.add_column(col)
        for r in results:
            t.add_row(r.corpus, str(r.scenarios),
                      f"{r.lines[0]}/{r.lines[1]} {r.pct(r.lines)}",
                      f"{r.branches[0]}/{r.branches[1]} {r.pct(r.branches)}",
                      f"{r.functions[0]}/{r.functions[1]} {r.pct(r.functions)}",
                      ", ".join(r.unreached_functions) or "-")
        console.print(t)
        last = results[-1]
        if last.untaken_branches:
            lines = ", ".join(f"{b['line']}({'T' if b['true'] == 0 else ''}{'F' if b['false'] == 0 else ''})"
                              for b in last.untaken_branches[:60])
            log(f"branch sides never taken ({last.corpus}; line(T: true side, F: false side)): {lines}"
                + (" ..." if len(last.untaken_branches) > 60 else ""))
    log(f"kconform coverage: report in {os.path.relpath(out_dir, Path.cwd())}")
    return EXIT_CLEAN
