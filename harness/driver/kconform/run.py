"""`kconform run`: scenarios on every available target, judged by the models,
with the baseline applied and a report written."""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kconform import baseline, build, report
from kconform.engine import Engine
from kconform.errors import EXIT_CLEAN, EXIT_VIOLATIONS, ToolError
from kconform.paths import CORPORA, DEFAULT_BASELINE, REPO, reports_dir, runner_binary

# Every target kconform knows, in the order `run` tries them.
TARGETS = ("host",)
SCENARIO_SUFFIXES = (".kcs", ".kcsb")


def scenario_files(paths: list[str]) -> list[str]:
    """Expands folders into their scenario files (sorted); default: the gmem corpus."""
    if not paths:
        paths = [str(CORPORA / "gmem")]
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.suffix in SCENARIO_SUFFIXES)
            if not found:
                raise ToolError(f"{p}: no scenario files (*.kcs, *.kcsb) in this folder")
            out += found
        elif path.is_file():
            out.append(str(path))
        else:
            raise ToolError(f"{p}: no such scenario file or folder")
    return out


def new_report_dir(root: Path) -> Path:
    """A fresh folder per run; an existing one is never reused or overwritten."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        d = root / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise ToolError(f"{root}: cannot make a new report folder")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:80]


def save_findings(engine: Engine, runs, out_dir: Path) -> dict:
    """Writes each finding's scenario as violation-<rule>-<scenario>.kcs (libFuzzer-style)."""
    saved = {}
    for run in runs:
        for f in run.findings:
            d = out_dir / "findings"
            d.mkdir(exist_ok=True)
            path = d / f"violation-{_slug(f.rule)}-{_slug(run.name)}-{_slug(f.scenario)}.kcs"
            if not path.exists():
                path.write_text(f"# {f.rule} violated on {run.name} {run.release} at op {f.op}: {f.call}\n"
                                f"# expected: {' | '.join(f.expected)}\n# observed: {f.observed}\n"
                                + engine.scenario_text(f.file, f.index))
            saved[f.key()] = os.path.relpath(path, Path.cwd())
    return saved


def cmd_run(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    build.build("default", log=log)
    engine = Engine(runner_binary("default"))
    rules = engine.rules()
    known_rules = {r["id"] for r in rules}
    entries = baseline.load(Path(args.baseline), known_rules)
    wanted = args.target or list(TARGETS)
    for t in wanted:
        if t not in TARGETS:
            raise ToolError(f"flag --target: unknown target '{t}' (known: {', '.join(TARGETS)})")
    files = scenario_files(args.scenarios)
    engine.check(files)
    runnable, skipped = [], []
    for t in wanted:
        ident, why = engine.probe(t)
        (runnable if ident else skipped).append(t if ident else (t, why))
    for t, why in skipped:
        log(f"kconform: target {t} skipped: {why}")
    if not runnable:
        raise ToolError("no target could run: " + "; ".join(f"{t}: {w}" for t, w in skipped))

    out_dir = new_report_dir(Path(args.report_dir) if args.report_dir else reports_dir())
    runs = []
    for t in runnable:
        raw = out_dir / f"verdicts-{t}.jsonl"
        if console.is_terminal and not args.quiet:
            with Progress(TextColumn(f"[bold]{t}[/bold]"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("ops"), TimeElapsedColumn(), console=console, transient=True) as prog:
                task = prog.add_task(t, total=None)
                run = engine.run(t, files, raw, args.fault,
                                 lambda done, total: prog.update(task, completed=done, total=total))
        else:
            run = engine.run(t, files, raw, args.fault)
        runs.append(run)

    stale = baseline.apply(entries, runs)
    saved = save_findings(engine, runs, out_dir)
    new = [f for r in runs for f in r.findings if not f.baselined_by]
    code = EXIT_VIOLATIONS if new else EXIT_CLEAN

    (out_dir / "report.json").write_text(report.to_json(runs, rules, stale, code))
    (out_dir / "report.ktap").write_text(report.to_ktap(runs, rules))
    (out_dir / "report.junit.xml").write_text(report.to_junit(runs, rules))
    rendered = {"json": lambda: report.to_json(runs, rules, stale, code),
                "ktap": lambda: report.to_ktap(runs, rules),
                "junit": lambda: report.to_junit(runs, rules)}
    if args.format == "table":
        for run in runs:
            report.print_table(console, run, rules, saved, stale)
        log(f"kconform: {len(new)} new finding(s), "
            f"{sum(1 for r in runs for f in r.findings if f.baselined_by)} baselined, "
            f"{len(stale)} baselined no longer occurring; report in {os.path.relpath(out_dir, Path.cwd())}")
    else:
        text = rendered[args.format]()
        if args.output:
            Path(args.output).write_text(text)
        else:
            print(text, end="")
    return code
