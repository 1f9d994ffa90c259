"""`kconform bisect FINDING...`: the first revision where a finding appears (or
disappears).

Two forms of --tree:

  debian:6.12..debian:7.3   the Debian series kconform knows, in version order
                            (engine/bisect.py debian_range); the finding runs on each
                            in turn and the first series whose findings differ from the
                            first one's is named.
  PATH --good REV --bad REV a user's git tree: both ends are run first (the finding's
                            signatures at one end and not the other are what is
                            bisected); then `git bisect run` in a private linked
                            worktree (--no-checkout: the user's checkout is never
                            touched) calls `kconform bisect --step PLAN` for each
                            commit it picks, which writes that commit's files into one
                            cached tree, builds and runs the finding there, and answers
                            0 (old), 1 (new) or 125 (could not build: skipped).

Targets: el2 (default; the tree's ffa.c, rebuilt by content: ffa.c only between
commits) and qemu (`--target qemu`: a small kernel built from the tree, run --build;
cold builds take minutes, incremental ones less).

Exit status: 1 the commit (or series) that introduced the finding was named; 0 the
one that fixed it was named (the finding is at the old end only); 2 kconform could
not say (ends alike, only skipped commits left, build or input errors).

`evaluate` (one tree, one target, some scenario files -> the runs) is shared with
`kconform ci`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

from rich.console import Console

from kconform.core import locks, procs
from kconform.core.errors import EXIT_CLEAN, EXIT_TOOL_ERROR, EXIT_VIOLATIONS, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, new_report_dir, reports_dir, runner_binary
from kconform.engine import bisect as bis
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine
from kconform.commands.run import PLANNERS, shown_path

STEP_OLD, STEP_NEW, STEP_SKIP, STEP_ABORT = 0, 1, 125, 128
BISECT_TARGETS = ("el2", "qemu")


class RunArgs:
    """The attributes `run`'s planners read."""

    def __init__(self, target: str, tree: str, files: list[str], page_sizes: list[str],
                 apply: str | None = None, watchdog: float | None = None, accel: str = "tcg"):
        self.target = [target]
        self.scenarios = list(files)
        self.fault = None
        self.tree = tree
        self.apply = apply
        self.page_size = list(page_sizes)
        self.asan = False
        self.watchdog = watchdog
        self.kernel = None
        self.build = target == "qemu"
        self.accel = accel


@dataclasses.dataclass
class Evaluated:
    """The runs of one tree (a revision or a Debian series) on one target."""
    plans: list
    runs: list
    labels: list[str]    # per run: "el2-4k", "el2-16k", "qemu"

    def keys(self) -> set[tuple[str, str, str]]:
        out: set = set()
        for label, run in zip(self.labels, self.runs):
            out |= bis.run_keys(label, run.findings)
        return out


def _label(plan) -> str:
    return "qemu" if plan.target == "qemu" else "el2-" + plan.label.rsplit("-", 1)[1]


def evaluate(target: str, tree: str, files: list[str], page_sizes: list[str], out: Path, name: str,
             apply: str | None = None, watchdog: float | None = None, log=print) -> Evaluated:
    """Builds tree's target (run's planners) and runs files on it; verdicts go to
    out/verdicts-<name>-<label>.jsonl."""
    from kconform.targets.qemu.replay import run_target as run_qemu
    ns = RunArgs(target, tree, files, page_sizes, apply, watchdog)
    plans = PLANNERS[target](ns, log)
    if not plans:
        raise ToolError(f"target {target}: none of the scenarios is for its ABI")
    runs, labels = [], []
    for plan in plans:
        label = _label(plan)
        raw = out / f"verdicts-{name}-{label}.jsonl"
        if plan.target == "qemu":
            d = out / f"qemu-{name}"
            d.mkdir(exist_ok=True)
            runs.append(run_qemu(plan.engine, plan.files, raw, d, ns.kernel, ns.accel, log))
        else:
            ident, why = plan.engine.probe(plan.target)
            if not ident:
                raise ToolError(f"target {plan.label} cannot run: {why}")
            runs.append(plan.engine.run(plan.target, plan.files, raw, release=plan.release,
                                        watchdog=plan.watchdog))
        labels.append(label)
    return Evaluated(plans, runs, labels)


def qemu_checkout(repo: Path, rev: str) -> Path:
    """A full checkout of rev for a kernel build (one linked worktree per repository,
    kept between runs so the kernel build stays incremental)."""
    import hashlib
    from kconform.core.paths import cache_dir
    key = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]
    wt = cache_dir() / "bisect" / f"full-{key}"
    if not (wt / ".git").exists():
        wt.parent.mkdir(parents=True, exist_ok=True)
        bis.git(repo, "worktree", "prune", check=False)
        bis.git(repo, "worktree", "add", "--detach", str(wt), rev, what="git worktree add")
    else:
        bis.git(wt, "checkout", "--detach", "--force", rev, what=f"git checkout {rev}")
    return wt


def evaluate_rev(repo: Path, rev: str, target: str, files: list[str], page_sizes: list[str], out: Path,
                 apply: str | None = None, watchdog: float | None = None, log=print) -> Evaluated:
    """evaluate() on the tree as it is at commit rev of repo (written to the cache, never
    checked out in repo). Locked: one revision at a time uses the cached tree."""
    lock = bis.el2_tree_dir().parent / (("el2-tree" if target == "el2" else "full") + ".lock")
    with locks.locked(lock, f"the bisect tree ({target})", log):
        if target == "el2":
            tree = bis.export_el2_tree(repo, rev)
        else:
            tree = qemu_checkout(repo, rev)
        try:
            return evaluate(target, str(tree), files, page_sizes, out, rev[:12], apply, watchdog, log)
        except ToolError as e:
            # name the user's tree and commit, not only the cached copy it was written to
            raise ToolError(f"{repo} at {rev[:12]} ({target}, written to {tree}): {e}") from None


def _show(keys) -> str:
    return "; ".join(f"{label} {scenario}: {sig}" for label, scenario, sig in sorted(keys)) or "none"


def _wanted(old: set, new: set, only: str | None) -> tuple[set, str]:
    """The keys bisected and the direction: 'introduced' (at the new end only) or 'fixed'."""
    def pick(keys):
        return {k for k in keys if not only or only in k[2] or only in k[1]}
    introduced, fixed = pick(new - old), pick(old - new)
    if introduced:
        return introduced, "introduced"
    if fixed:
        return fixed, "fixed"
    raise ToolError("the finding shows the same signatures at both ends"
                    + (f" (matching --signature '{only}')" if only else "")
                    + f": {_show(pick(old))}; nothing to bisect")


def _check_findings(files: list[str], log) -> list[str]:
    if not files:
        raise ToolError("give the FINDING to bisect: a scenario file (e.g. a reproducer from "
                        "<report>/findings)")
    for f in files:
        if not Path(f).is_file():
            raise ToolError(f"{f}: no such finding file")
    build_preset("default", targets=["kconform-runner"], log=log)
    Engine(runner_binary("default")).check(files)
    return [str(Path(f).resolve()) for f in files]


def cmd_bisect(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    if args.step:
        try:
            return step(Path(args.step), log)
        except (ToolError, OSError, ValueError, KeyError) as e:
            # Never 1..127 here: git bisect would take it for an answer. 128 ends the bisect.
            log(f"kconform: bisect step: {e}")
            return STEP_ABORT
    if args.target not in BISECT_TARGETS:
        raise ToolError(f"flag --target: '{args.target}' is not one of {', '.join(BISECT_TARGETS)}")
    if not args.tree:
        raise ToolError("flag --tree: give debian:A..debian:B or a git tree PATH with --good and --bad")
    series = bis.debian_range(args.tree)
    if series is None:
        if not args.good or not args.bad:
            raise ToolError("flags --good/--bad: a git tree needs both (the old and the new end)")
        repo = bis.git_repo(args.tree)
        good = bis.resolve_rev(repo, args.good, "--good")
        bad = bis.resolve_rev(repo, args.bad, "--bad")
    elif args.good or args.bad:
        raise ToolError("flags --good/--bad: only with a git tree; a Debian range is its own ends")
    if args.apply and not Path(args.apply).is_file():
        raise ToolError(f"flag --apply: {args.apply}: no such patch file")
    files = _check_findings(args.findings, log)
    sizes = args.page_size or ["4K"]
    out = new_report_dir(Path(args.out) if args.out else reports_dir().parent / "bisect")
    try:
        if series is not None:
            result = _bisect_series(series, args, files, sizes, out, log)
        else:
            result = _bisect_git(repo, good, bad, args, files, sizes, out, log)
    except ToolError as e:
        if "nothing to bisect" in str(e) and args.target == "el2":
            raise ToolError(f"{e} (run at page size {', '.join(sizes)}: a scenario that requires another "
                            f"page size needs --page-size)") from None
        raise
    atomic_write(out / "bisect.json", json.dumps(result, indent=2) + "\n")
    log(f"kconform: bisect report in {shown_path(out / 'bisect.json')}")
    if result.get("first") is None:
        return EXIT_TOOL_ERROR
    return EXIT_VIOLATIONS if result["direction"] == "introduced" else EXIT_CLEAN


def _bisect_series(series: list[str], args, files, sizes, out: Path, log) -> dict:
    tried = []
    states: list[set] = []
    for spec in series:
        log(f"kconform: bisect: running the finding on {spec}")
        ev = evaluate(args.target, spec, files, sizes, out, spec.replace(":", "-"), args.apply,
                      args.watchdog, log)
        states.append(ev.keys())
        tried.append({"tree": spec, "signatures": sorted(map(list, ev.keys()))})
    wanted, direction = _wanted(states[0], states[-1], args.signature)
    present = [bool(wanted & s) for s in states]
    at = bis.first_change(present)
    for t, p in zip(tried, present):
        t["present"] = p
        log(f"  {t['tree']:14} {'present' if p else 'absent '}")
    first = series[at] if at is not None else None
    verb = "appears" if direction == "introduced" else "disappears"
    log(f"kconform: {_show(wanted)} first {verb} in {first} (after {series[at - 1]})")
    return {"form": "debian", "target": args.target, "direction": direction, "wanted": sorted(map(list, wanted)),
            "first": first, "previous": series[at - 1], "tried": tried}


def _bisect_git(repo: Path, good: str, bad: str, args, files, sizes, out: Path, log) -> dict:
    log(f"kconform: bisect: running the finding at both ends ({good[:12]}, {bad[:12]})")
    at_good = evaluate_rev(repo, good, args.target, files, sizes, out, args.apply, args.watchdog, log).keys()
    at_bad = evaluate_rev(repo, bad, args.target, files, sizes, out, args.apply, args.watchdog, log).keys()
    wanted, direction = _wanted(at_good, at_bad, args.signature)
    log(f"kconform: bisect: {direction} between {good[:12]} and {bad[:12]}: {_show(wanted)}")
    plan = {"repo": str(repo), "files": files, "target": args.target, "page_sizes": sizes,
            "apply": str(Path(args.apply).resolve()) if args.apply else None, "watchdog": args.watchdog,
            "wanted": sorted(map(list, wanted)), "new_when": "present" if direction == "introduced" else "absent",
            "out": str(out)}
    plan_path = out / "bisect-plan.json"
    atomic_write(plan_path, json.dumps(plan, indent=2) + "\n")
    wt = bis.bisect_worktree(repo)
    try:
        plan["worktree"] = str(wt)
        atomic_write(plan_path, json.dumps(plan, indent=2) + "\n")
        start = bis.git(wt, "bisect", "start", "--no-checkout", bad, good, what="git bisect start")
        text = start.stdout
        if "is the first bad commit" not in text:
            cmd = [sys.executable, str(REPO / "kconform"), "bisect", "--step", str(plan_path)]
            r = procs.run(["git", "-C", str(wt), "bisect", "run", *cmd], capture_output=True, text=True)
            text = r.stdout + r.stderr
            atomic_write(out / "git-bisect-run.log", text)
        m = re.search(r"^([0-9a-f]{40}) is the first bad commit", text, re.M)
        log_text = bis.git(wt, "bisect", "log", check=False).stdout
        atomic_write(out / "git-bisect.log", log_text)
    finally:
        bis.remove_worktree(repo, wt)
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()] \
        if (out / "steps.jsonl").exists() else []
    result = {"form": "git", "tree": str(repo), "target": args.target, "direction": direction,
              "good": good, "bad": bad, "wanted": sorted(map(list, wanted)), "steps": steps, "first": None}
    if not m:
        tail = "\n".join(text.strip().splitlines()[-8:])
        log(f"kconform: git bisect named no commit:\n{tail}")
        result["git"] = tail
        return result
    first = m.group(1)
    result.update(first=first, subject=bis.subject(repo, first))
    what = "introduced" if direction == "introduced" else "fixed"
    log(f"kconform: first {'bad' if what == 'introduced' else 'fixed'} commit: "
        f"{bis.short(repo, first)} {result['subject']}")
    log(f"kconform: it {what} {_show(wanted)}")
    return result


def step(plan_path: Path, log) -> int:
    """One commit of `git bisect run`: 0 old, 1 new, 125 could not build or run (skip)."""
    plan = json.loads(plan_path.read_text())
    repo, wt, out = Path(plan["repo"]), Path(plan["worktree"]), Path(plan["out"])
    rev = bis.git(wt, "rev-parse", "BISECT_HEAD").stdout.strip()
    wanted = {tuple(k) for k in plan["wanted"]}
    record = {"commit": rev, "subject": bis.subject(repo, rev)}
    try:
        keys = evaluate_rev(repo, rev, plan["target"], plan["files"], plan["page_sizes"], out,
                            plan["apply"], plan["watchdog"], log).keys()
    except ToolError as e:
        record.update(state="skipped", reason=str(e).splitlines()[0])
        code = STEP_SKIP
    else:
        present = bool(wanted & keys)
        record["state"] = "present" if present else "absent"
        code = STEP_NEW if present == (plan["new_when"] == "present") else STEP_OLD
    with open(out / "steps.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")
    log(f"kconform: bisect step {rev[:12]} {record['subject']}: {record['state']}")
    return code
