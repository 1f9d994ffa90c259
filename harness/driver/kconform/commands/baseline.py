"""`kconform baseline audit`: per baseline entry, what it absorbed in the last run of each
target build (report folders of `kconform run`), and the entries that are wider than
that, never hit, accept every scenario without being a limit, or quote code the cached
trees do not hold (engine/baseline_audit.py)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from kconform.core.errors import EXIT_CLEAN
from kconform.core.paths import DEFAULT_BASELINE, cache_dir, reports_dir
from kconform.engine import baseline, baseline_audit


def cmd_baseline(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False, soft_wrap=True)  # noqa: E731
    path = Path(args.baseline) if args.baseline else DEFAULT_BASELINE
    entries = baseline.load(path)
    dirs = [Path(d) for d in args.report_dir] if args.report_dir else [reports_dir()]
    folders = baseline_audit.report_folders([d for d in dirs if args.report_dir or d.exists()])
    runs, notes = baseline_audit.last_runs(folders)
    trees = baseline_audit.Trees(Path(args.trees) if args.trees else cache_dir() / "trees")
    results = baseline_audit.audit(entries, runs, trees)
    code = baseline_audit.exit_code(results, args.strict)
    if args.format == "json":
        print(baseline_audit.to_json(path, runs, results, notes, code), end="")
        return code
    for line in baseline_audit.to_lines(path, runs, results, notes):
        log(line)
    c = baseline_audit.counts(results)
    q = c["quotes"]
    verdict = "fails" if code != EXIT_CLEAN else "passes"
    log(f"kconform: baseline audit {verdict}: {c['error']} error(s) ({c.get('scenario-star', 0)} scenario '*' "
        f"not of kind limit, {c.get('stale-quote', 0)} stale code quote(s)), {c['warning']} warning(s) "
        f"({c.get('never-hit', 0)} never hit, {c.get('wider', 0)} wider than what they absorbed"
        f"{', errors with --strict' if args.strict else ''}); {len(entries)} entries, {len(runs)} run(s); "
        f"code quotes: {q['ok']} hold, {q['stale']} stale, {q['unchecked']} not checked (no cached tree)")
    return code
