"""`kconform triage FINDING...`: reproduce, minimise, explain and group findings.

A FINDING is a scenario file, text or binary: a reproducer `run` saved
(<report>/findings/*.kcs), a finding `fuzz` stored (reports/fuzz/<target>/
findings/*.kcs or .kcsb), or any scenario. Each of its scenarios is run once on
the target (the same flags as `run`); every distinct signature it shows is
reproduced N times, minimised within the budget, explained, and recorded in the
triage index (reports/triage/index.json). The minimised scenario is written next
to the report as <stem>.min.kcs with the explanation as a comment header; the
input file is never changed. The logic is engine/triage.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path

from rich.console import Console

from kconform.core.errors import EXIT_CLEAN, EXIT_VIOLATIONS, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, new_report_dir, runner_binary
from kconform.engine import triage
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine
from kconform.engine.scenarios import scenario_abi
from kconform.commands.run import PLANNERS, rerun_command, shown_path

TARGET_OF_ABI = {"ffa": "el2", "gmem": "host"}


def _plan(args, abi: str, log):
    target = args.target or TARGET_OF_ABI[abi]
    ns = _RunArgs(args, target)
    plans = PLANNERS[target](ns, log)
    if not plans:
        raise ToolError(f"target {target}: nothing to run")
    return plans[0], ns


class _RunArgs:
    """The attributes `run`'s planners read, from triage's flags."""

    def __init__(self, args, target: str):
        self.target = [target]
        self.scenarios = [str(f) for f in args.findings]
        self.fault = None
        self.tree = args.tree
        self.apply = args.apply
        self.page_size = [args.page_size] if args.page_size else ["4K"]
        self.asan = args.asan
        self.watchdog = None
        self.kernel = args.kernel
        self.build = args.build
        self.accel = args.accel


def _runner(plan, ns, work: Path, log):
    """run(text) -> findings of running that one scenario on the plan's target."""
    def run(text: str) -> list:
        # A folder of its own per try: several runners (one per plan) share work.
        d = Path(tempfile.mkdtemp(prefix="try-", dir=work))
        f = d / "scenario.kcs"
        f.write_text(text)
        raw = d / "verdicts.jsonl"
        if plan.target == "qemu":
            from kconform.targets.qemu.replay import run_target
            plan.engine.check([str(f)])  # ToolError before a boot: does not parse or validate
            r = run_target(plan.engine, [str(f)], raw, d, ns.kernel, ns.accel, lambda m: None)
        else:
            r = plan.engine.run(plan.target, [str(f)], raw, release=plan.release, watchdog=plan.watchdog)
        return r.findings

    return run


def cmd_triage(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    if args.runs < 1:
        raise ToolError(f"flag --runs: {args.runs} is not at least 1")
    if not args.budget > 0:
        raise ToolError(f"flag --budget: {args.budget} is not a positive number of seconds")
    build_preset("default", log=log)
    main = Engine(runner_binary("default"))
    rules = {r["id"]: r for r in main.rules()}
    for f in args.findings:
        if not Path(f).is_file():
            raise ToolError(f"{f}: no such finding file")
    main.check([str(f) for f in args.findings])
    out_dir = new_report_dir(Path(args.out) if args.out else REPO / "reports" / "triage")
    index = Path(args.index) if args.index else REPO / "reports" / "triage" / "index.json"
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    results = []
    with tempfile.TemporaryDirectory(prefix="kconform-triage-") as tmp:
        work = Path(tmp)
        for path in args.findings:
            abi = scenario_abi(str(path))
            plan, ns = _plan(args, abi, log)
            run = _runner(plan, ns, work, log)
            texts = ["kconform-scenario" + c for c in main.to_text(str(path)).split("kconform-scenario")[1:]]
            for i, text in enumerate(texts):
                first = run(text)
                sigs = triage.signature_of(first)
                if args.signature:
                    sigs = [s for s in sigs if args.signature in s]
                if not sigs:
                    log(f"{shown_path(path)} #{i}: no finding on {plan.label} (nothing to triage)")
                    results.append({"file": shown_path(path), "index": i, "target": plan.label, "signatures": []})
                    continue
                entry = {"file": shown_path(path), "index": i, "target": plan.label, "signatures": []}
                for sig in sigs:
                    log(f"{shown_path(path)} #{i} on {plan.label}: {sig}")
                    reps = triage.reproduce(text, sig, run, args.runs)
                    det = all(reps)
                    log(f"  reproduced {sum(reps)}/{len(reps)}: {'deterministic' if det else 'NOT deterministic'}")
                    mini = None
                    if any(reps):
                        mini = triage.minimise(text, sig, run, args.budget, args.max_runs)
                        log(f"  minimised: {mini.ops_before} -> {mini.ops_after} ops, {mini.size_before} -> "
                            f"{mini.size_after} bytes, {mini.runs} runs in {mini.seconds:.1f} s"
                            + ("" if mini.complete else " (budget reached: smaller may exist)"))
                    expl = triage.explain(run(mini.text if mini else text), sig, rules)
                    if plan.target == "el2" and expl.get("rules") and not args.no_lines:
                        expl["kernel_lines"] = _op_lines(args, plan, mini.text if mini else text, expl["op"],
                                                         work, log)
                    for line in triage.explanation_text(expl):
                        log(line)
                    saved = None
                    if mini:
                        stem = f"{len(results):03d}-{i}-{triage_slug(sig)}"
                        saved = out_dir / f"{stem}.min.kcs"
                        head = [f"# kconform triage: {sig} on {plan.label} ({plan.release or ''})",
                                f"# from {shown_path(path)} #{i}: {mini.ops_before} ops -> {mini.ops_after}"]
                        head += ["#" + line for line in triage.explanation_text(expl)]
                        head.append("# re-run: " + rerun_command(plan.rerun, [shown_path(saved)]))
                        atomic_write(saved, "\n".join(" ".join(h.splitlines()) for h in head) + "\n" + mini.text,
                                     exclusive=True)
                        log(f"  minimised reproducer: {shown_path(saved)}")
                    group = triage.record(index, plan.label, sig, f"{shown_path(path)}#{i}",
                                          shown_path(saved) if saved else None, now)
                    log(f"  seen {group['count']} time(s) since {group['first_seen']}")
                    entry["signatures"].append({
                        "signature": sig, "reproduced": sum(reps), "runs": len(reps), "deterministic": det,
                        "minimised": dataclass_dict(mini), "saved": shown_path(saved) if saved else None,
                        "explanation": expl, "group": group})
                results.append(entry)
    doc = {"format": 1, "triage": results, "index": shown_path(index)}
    atomic_write(out_dir / "triage.json", json.dumps(doc, indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    log(f"kconform triage: report in {os.path.relpath(out_dir, Path.cwd())}")
    found = any(s["reproduced"] for r in results for s in r["signatures"])
    return EXIT_VIOLATIONS if found else EXIT_CLEAN


def triage_slug(sig: str) -> str:
    import re
    return re.sub(r"[^A-Za-z0-9._-]+", "-", sig)[:120].strip("-")


def dataclass_dict(m) -> dict | None:
    if m is None:
        return None
    import dataclasses
    d = dataclasses.asdict(m)
    d.pop("text", None)
    return d


def auto_triage(plans, runs, args, out_dir: Path, budget: float, log) -> dict:
    """`run`'s triage of its new findings, bounded in time: each distinct new finding
    with a saved reproducer (host and el2 targets; a QEMU boot per candidate is left
    to `kconform triage --target qemu`) is minimised within what is left of budget
    seconds, and the result written next to it as <reproducer>.min.kcs. Returns
    reproducer path -> {"text", "note"} for the HTML report."""
    import time
    from kconform.commands.run import finding_groups
    out: dict = {}
    deadline = time.monotonic() + budget
    with tempfile.TemporaryDirectory(prefix="kconform-triage-") as tmp:
        for plan, run in zip(plans, runs):
            if plan.target in ("qemu", "qemu-arm64"):  # each try is a boot: triage them on their own
                continue
            ns = _RunArgs(args, plan.target) if hasattr(args, "findings") else None
            runner = _runner(plan, ns, Path(tmp), log)
            for (_file, _index, _scenario, _op, _call), fs in finding_groups(run).items():
                left = deadline - time.monotonic()
                if left <= 1:
                    return out
                saved = fs[0].saved
                if any(f.baselined_by for f in fs) or not saved or saved in out or not saved.endswith(".kcs"):
                    continue
                text = Path(saved).read_text()
                sigs = triage.signature_of(fs)
                try:
                    m = triage.minimise(text, sigs[0], runner, budget_s=left)
                except ToolError as e:
                    log(f"kconform: triage of {saved}: {str(e).splitlines()[0]}")
                    continue
                note = (f"{m.ops_before} -> {m.ops_after} ops, {m.runs} runs in {m.seconds:.1f} s"
                        + ("" if m.complete else ", budget reached"))
                mpath = Path(saved).with_suffix(".min.kcs")
                if not mpath.exists():
                    atomic_write(mpath, f"# kconform triage: {sigs[0]}: minimised from {saved} ({note})\n"
                                 + m.text, exclusive=True)
                out[saved] = {"text": m.text, "note": note, "path": shown_path(mpath)}
                log(f"kconform: triage: {shown_path(mpath)} ({note})")
    return out


def _op_lines(args, plan, text: str, op: int, work: Path, log) -> list[dict]:
    """The lines of the tree's ffa.c the diverging op executed (the EL2 runner built
    with coverage: engine/coverage.py lines_of_op)."""
    from kconform.engine import coverage
    from kconform.sources.trees import DEFAULT_TREE
    from kconform.targets import el2
    page = el2.parse_page_size(args.page_size or "4K")
    tree, tree_id = el2.resolve_tree(args.tree or DEFAULT_TREE, args.apply, log)
    binary = el2.build(tree, tree_id, [page], log=log, coverage=True)[page]
    head, ops = triage.split_scenario(text)
    d = work / f"lines-{len(list(work.iterdir()))}"
    d.mkdir()
    return coverage.lines_of_op(Engine(binary), binary, head, ops, op, d, tree / coverage.FFA_C)
