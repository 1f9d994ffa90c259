"""`kconform run`: scenarios on every available target, judged by the models,
with the baseline applied and a report written."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kconform.core.errors import EXIT_CLEAN, EXIT_VIOLATIONS, ToolError
from kconform.core.paths import new_report_dir, reports_dir, runner_binary
from kconform.engine import baseline, report
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine
from kconform.engine.scenarios import expand, scenario_abi, scenario_files
from kconform.sources import kernel_build
from kconform.sources.trees import DEFAULT_TREE
from kconform.targets import el2
from kconform.targets.qemu.replay import run_target as run_qemu

# Every target kconform knows, in the order `run` tries them, and the ABI each runs.
TARGETS = {"host": "gmem", "el2": "ffa", "qemu": "gmem"}
# Targets a run without --target leaves out (qemu downloads a kernel and boots it).
OPT_IN_TARGETS = ("qemu",)


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


@dataclasses.dataclass
class Plan:
    """One target run: which engine binary, which --target, which files."""
    label: str      # names the run in reports: "host", "el2-debian-7.3.4-16k"
    engine: Engine
    target: str     # kconform-runner --target value
    files: list[str]
    release: str | None = None  # what findings and the baseline call the build under test


def _plan_host(args, log) -> list[Plan]:
    files = scenario_files(args.scenarios, "gmem")
    return [Plan("host", Engine(runner_binary("default")), "host", files)] if files else []


def _plan_el2(args, log) -> list[Plan]:
    files = scenario_files(args.scenarios, "ffa")
    if not files:
        return []
    sizes = [el2.parse_page_size(p) for p in (args.page_size or ["4K", "16K"])]
    tree, tree_id = el2.resolve_tree(args.tree or DEFAULT_TREE, args.apply, log)
    binaries = el2.build(tree, tree_id, sizes, sanitize=args.asan, log=log)
    return [Plan(f"el2-{tree_id}-{p // 1024}k", Engine(binaries[p]), "el2", files,
                 release=f"{tree_id}-{p // 1024}k") for p in sizes]


def _plan_qemu(args, log) -> list[Plan]:
    # The guest probes its own /dev/kvm after booting (targets.qemu.replay.run_target).
    if args.fault:
        raise ToolError("flag --fault: works with target host only (not qemu)")
    files = scenario_files(args.scenarios, "gmem")
    if not files:
        return []
    if getattr(args, "build", False):
        if args.kernel:
            raise ToolError("flag --build: builds a kernel from --tree; not with --kernel")
        # The built bzImage is booted like a --kernel of the user's (KVM built in).
        args.kernel = str(kernel_build.build(args.tree or DEFAULT_TREE, args.apply, progress=log).image)
    elif args.tree and args.target == ["qemu"] or args.apply and args.target == ["qemu"]:
        raise ToolError("flags --tree/--apply: for target qemu they need --build")
    return [Plan("qemu", Engine(runner_binary("default")), "qemu", files)]


PLANNERS = {"host": _plan_host, "el2": _plan_el2, "qemu": _plan_qemu}


def cmd_run(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    wanted = args.target or [t for t in TARGETS if t not in OPT_IN_TARGETS]
    for t in wanted:
        if t not in TARGETS:
            raise ToolError(f"flag --target: unknown target '{t}' (known: {', '.join(TARGETS)})")
    if args.page_size:
        for p in args.page_size:
            el2.parse_page_size(p)
    build_preset("default", log=log)
    main_engine = Engine(runner_binary("default"))
    rules = main_engine.rules()
    entries = baseline.load(Path(args.baseline), {r["id"] for r in rules})
    if args.scenarios:
        given = expand(args.scenarios)
        main_engine.check(given)
        if not any(scenario_abi(f) in (TARGETS[t] for t in wanted) for f in given):
            raise ToolError("none of the given scenarios is for the targets asked for "
                            f"({', '.join(wanted)})")

    plans: list[Plan] = []
    skipped: list[tuple[str, str]] = []
    explicit = bool(args.target)
    for t in wanted:
        try:
            new_plans = PLANNERS[t](args, log)
        except ToolError as e:
            if explicit:
                raise
            skipped.append((t, str(e).splitlines()[0]))
            continue
        for plan in new_plans:
            if plan.target == "qemu":
                plans.append(plan)
                continue
            ident, why = plan.engine.probe(plan.target)
            if ident:
                plans.append(plan)
            else:
                skipped.append((plan.label, why))
    for t, why in skipped:
        log(f"kconform: target {t} skipped: {why}")
    if not plans:
        raise ToolError("no target could run: " + "; ".join(f"{t}: {w}" for t, w in skipped))

    out_dir = new_report_dir(Path(args.report_dir) if args.report_dir else reports_dir())
    runs = []
    for plan in plans:
        raw = out_dir / f"verdicts-{plan.label}.jsonl"
        if plan.target == "qemu":
            runs.append(run_qemu(plan.engine, plan.files, raw, out_dir, args.kernel, args.accel, log))
            continue
        if console.is_terminal and not args.quiet:
            with Progress(TextColumn(f"[bold]{plan.label}[/bold]"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("ops"), TimeElapsedColumn(), console=console, transient=True) as prog:
                task = prog.add_task(plan.label, total=None)
                run = plan.engine.run(plan.target, plan.files, raw, args.fault,
                                      lambda done, total: prog.update(task, completed=done, total=total),
                                      release=plan.release)
        else:
            run = plan.engine.run(plan.target, plan.files, raw, args.fault, release=plan.release)
        runs.append(run)

    stale = baseline.apply(entries, runs)
    saved = save_findings(main_engine, runs, out_dir)
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
