"""`kconform run`: scenarios on the default targets (host, el2, spmc; QEMU in place
of a host without guest_memfd) or those given, judged by the models, with the
baseline applied, a report folder written and the summary of engine/summary.py
printed (what was not tested named, never skipped silently; --strict or
KCONFORM_CI=1: a default target that cannot run is an error).

Every finding (engine/verdicts.py) gets one reproducer file per distinct
finding under <report>/findings/ and a re-run command that reproduces it: the
flags that chose its target build (--target, --tree/--kernel/--build, --apply,
--page-size, --asan, --accel, --fault, --watchdog) and that file. Findings that share the
op, target build and scenario share the file (its name lists their rules);
no file is ever merged with another by name or overwritten.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kconform.core.errors import EXIT_CLEAN, EXIT_VIOLATIONS, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, new_report_dir, reports_dir, runner_binary
from kconform.engine import baseline, report, report_html, summary
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine
from kconform.engine.scenarios import expand, scenario_abi, scenario_files
from kconform.selftest import faults
from kconform.sources import kernel_build, source_trees
from kconform.sources.trees import DEFAULT_TREE
from kconform.targets import el2
from kconform.targets.qemu.replay import run_target as run_qemu
from kconform.targets.qemu_arm64.run import run_target as run_qemu_arm64

# Every target kconform knows, in the order `run` tries them, and the ABI each runs.
TARGETS = {"host": "gmem", "el2": "ffa", "spmc": "ffa", "qemu": "gmem", "qemu-arm64": "ffa"}
# Targets a run without --target leaves out (qemu and qemu-arm64 download a kernel and boot it).
OPT_IN_TARGETS = ("qemu", "qemu-arm64")
# What each opt-in target tests, for the closing verdict of a run without --target.
OPT_IN_WHAT = {"qemu": "guest_memfd of Debian's 7.3 kernel in QEMU",
               "qemu-arm64": "FF-A through real pKVM and TF-A in QEMU"}
# Targets whose plan boots a machine (no runner probe: the guest reports its identity).
BOOTED_TARGETS = ("qemu", "qemu-arm64")


def _slug(text: str, limit: int = 80) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text)[:limit]


def shown_path(path: str | os.PathLike) -> str:
    """A path as a command line should name it: relative to the working folder
    when inside it, else absolute."""
    p = Path(path).resolve()
    cwd = Path.cwd().resolve()
    return os.path.relpath(p, cwd) if p.is_relative_to(cwd) else str(p)


def kconform_command() -> str:
    """How to call kconform from the working folder ("./kconform" in the repository)."""
    c = shown_path(REPO / "kconform")
    return c if c.startswith(("/", ".")) else "./" + c


def rerun_command(flags: list[str], files: list[str]) -> str:
    return shlex.join([kconform_command(), "run", *flags, *files])


def el2_release(tree_id: str, page_size: int) -> str:
    """What findings and the baseline call an EL2 build: debian-7.3.4-16k, patched-..., local-..."""
    return f"{tree_id}-{page_size // 1024}k"


def el2_flags(tree: str, patch: str | None, page_size: int, asan: bool, el3: str = "model") -> list[str]:
    """The `run` flags that select one EL2 build."""
    flags = ["--target", "el2", "--tree", tree if tree.startswith("debian:") else shown_path(tree)]
    if patch:
        flags += ["--apply", shown_path(patch)]
    flags += ["--page-size", f"{page_size // 1024}K"]
    flags += ["--el3", el3] if el3 != "model" else []
    return flags + (["--asan"] if asan else [])


def el2_el3(args) -> tuple[str, str | None]:
    """--el3 of an el2 run: the runner's target family and the TF-A tree to build in."""
    el3 = getattr(args, "el3", None) or "model"
    if el3 == "model":
        return "el2", None
    return "el2-tfa", getattr(args, "spmc_tree", None) or source_trees.DEFAULT_SPMC_TREE


def finding_groups(run) -> dict:
    """The distinct findings of a run: its findings grouped by scenario and op (the
    rules violated at one op are one finding with one reproducer)."""
    groups: dict = {}
    for f in run.findings:
        groups.setdefault((f.file, f.index, f.scenario, f.op, f.call), []).append(f)
    return groups


def save_findings(engine: Engine, plans: list, runs, out_dir: Path) -> None:
    """Writes one reproducer per distinct finding to out_dir/findings and sets each
    finding's `saved` and `rerun`. The name is the finding's signature (kind, rules,
    op kind, target build) and a hash of it and the scenario's text, so two findings
    share a file only when they are the same finding."""
    d = out_dir / "findings"
    for plan, run in zip(plans, runs):
        texts: dict = {}  # file -> the text form of each of its scenarios
        for (file, index, scenario, op, call), fs in finding_groups(run).items():
            if file not in texts:
                try:
                    whole = engine.to_text(file) if os.path.isfile(file) else ""
                except ToolError:
                    whole = ""
                texts[file] = ["kconform-scenario" + c for c in whole.split("kconform-scenario")[1:]]
            text = texts[file][index] if 0 <= index < len(texts[file]) else ""
            rules = sorted({f.rule for f in fs})
            kind = fs[0].kind
            build = f"{run.name}-{run.release}"
            if not text:  # no scenario to save: re-run what this run ran
                for f in fs:
                    f.rerun = rerun_command(plan.rerun, [shown_path(x) for x in ([file] if os.path.exists(file)
                                                                              else plan.files)])
                continue
            signature = f"{kind}-{'+'.join(rules)}-{fs[0].op_kind}-{build}"
            digest = hashlib.sha256((signature + "\n" + scenario + "\n" + text).encode()).hexdigest()[:12]
            path = d / f"{_slug(signature, 150)}-{digest}.kcs"
            if not path.exists():
                d.mkdir(exist_ok=True)
                where = f"op {op}: {call}" if op >= 0 else call
                head = [f"# kconform finding: {kind} {', '.join(rules)} on {run.name} {run.release} "
                        f"({run.target.get('profile', '?')}), scenario {scenario} ({file} #{index}), {where}"]
                for f in fs:
                    head += [f"# {f.rule}: expected: {' | '.join(f.expected) or '(nothing)'}",
                             f"# {f.rule}: observed: {f.observed}"]
                    if f.note:
                        head.append(f"# {f.rule}: note: {f.note}")
                head.append("# re-run: " + rerun_command(plan.rerun, [shown_path(path)]))
                atomic_write(path, "\n".join(" ".join(h.splitlines()) for h in head) + "\n" + text,
                             exclusive=True)
            for f in fs:
                f.saved = shown_path(path)
                f.rerun = rerun_command(plan.rerun, [f.saved])


@dataclasses.dataclass
class Plan:
    """One target run: which engine binary, which --target, which files."""
    label: str      # names the run in reports: "host", "el2-debian-7.3.4-16k"
    engine: Engine
    target: str     # kconform-runner --target value
    files: list[str]
    release: str | None = None  # what findings and the baseline call the build under test
    rerun: list[str] = dataclasses.field(default_factory=list)  # the `run` flags that select this build
    watchdog: float | None = None  # kconform-runner --watchdog (None: the runner's default)
    page_size: int = 4096  # qemu-arm64: the booted kernel's PAGE_SIZE (its Debian flavour)
    kernel: object = None  # qemu-arm64: a Kernel built with --build (None: Debian's)


def host_tests_gmem(ident: dict) -> bool:
    """Whether the host target's probe (its identity record) says this kernel has
    guest_memfd: without it every guest_memfd scenario is unsupported there, and a
    run without --target tests guest_memfd in QEMU instead."""
    caps = ident.get("caps") or {}
    return bool(caps.get("KVM_CAP_GUEST_MEMFD") or caps.get("vm0.KVM_CAP_GUEST_MEMFD"))


def _plan_host(args, log) -> list[Plan]:
    files = scenario_files(args.scenarios, "gmem")
    if args.fault:
        faults.require(args.fault, "gmem", "host")
    rerun = ["--target", "host"] + (["--fault", args.fault] if args.fault else [])
    return [Plan("host", Engine(runner_binary("default")), "host", files, rerun=rerun)] if files else []


def _plan_el2(args, log) -> list[Plan]:
    files = scenario_files(args.scenarios, "ffa")
    if not files:
        return []
    if args.fault:
        faults.require(args.fault, "ffa", "el2")
    sizes = [el2.parse_page_size(p) for p in (args.page_size or ["4K", "16K"])]
    tree, tree_id = el2.resolve_tree(args.tree or DEFAULT_TREE, args.apply, log)
    family, spmc_tree = el2_el3(args)
    binaries = el2.build(tree, tree_id, sizes, sanitize=args.asan, log=log, spmc_tree=spmc_tree)
    fault = ["--fault", args.fault] if args.fault else []
    watchdog = getattr(args, "watchdog", None)
    if watchdog is not None and not watchdog >= 0:
        raise ToolError(f"flag --watchdog: {watchdog} is not a non-negative number of seconds")
    fault += ["--watchdog", f"{watchdog:g}"] if watchdog is not None else []
    plans = []
    for p in sizes:
        release = el2_release(tree_id, p)
        if family != "el2":  # a real EL3: its release too (the runner's identity: 7.3.4-4k+tf-a-2.12.1)
            ident, why = Engine(binaries[p]).probe(family)
            if not ident:
                raise ToolError(f"target el2 --el3 {args.el3}: {why}")
            release += "+" + ident["release"].split("+", 1)[-1]
        plans.append(Plan(f"el2-{release}", Engine(binaries[p]), family, files, release=release,
                          rerun=el2_flags(args.tree or DEFAULT_TREE, args.apply, p, args.asan,
                                          getattr(args, "el3", None) or "model") + fault,
                          watchdog=watchdog))
    return plans


def _plan_qemu(args, log) -> list[Plan]:
    # The guest probes its own /dev/kvm after booting (targets.qemu.replay.run_target).
    if args.fault:
        raise ToolError(faults.QEMU_MESSAGE)
    files = scenario_files(args.scenarios, "gmem")
    if not files:
        return []
    rerun = ["--target", "qemu"]
    if getattr(args, "arch", None) not in (None, "x86_64"):
        raise ToolError(f"flag --arch: target qemu builds x86_64 kernels, not {args.arch} (arm64: --target qemu-arm64)")
    if getattr(args, "build", False):
        if args.kernel:
            raise ToolError("flag --build: builds a kernel from --tree; not with --kernel")
        tree = args.tree or DEFAULT_TREE
        rerun += ["--build", "--tree", tree if tree.startswith("debian:") else shown_path(tree)]
        rerun += ["--apply", shown_path(args.apply)] if args.apply else []
        # The built bzImage is booted like a --kernel of the user's (KVM built in).
        args.kernel = str(kernel_build.build(tree, args.apply, progress=log).image)
    elif args.tree and args.target == ["qemu"] or args.apply and args.target == ["qemu"]:
        raise ToolError("flags --tree/--apply: for target qemu they need --build")
    elif args.kernel:
        rerun += ["--kernel", shown_path(args.kernel)]
    if args.accel != "tcg":
        rerun += ["--accel", args.accel]
    return [Plan("qemu", Engine(runner_binary("default")), "qemu", files, rerun=rerun)]


def spmc_release(impl: str, version: str, page_size: int) -> str:
    """What findings and the baseline call an SPMC build: tf-a-2.12.1-4k."""
    return f"{impl}-{version}-{page_size // 1024}k"


def _plan_spmc(args, log) -> list[Plan]:
    """FF-A scenarios straight into a real SPMC (targets/spmc: TF-A's; targets/optee with
    --spmc op-tee: OP-TEE's), judged by the SPMC-side model: one plan per --page-size, all
    in the default build's kconform-runner-spmc (kconform-runner-optee)."""
    files = scenario_files(args.scenarios, "ffa")
    if not files:
        return []
    if args.fault:
        raise ToolError("flag --fault: the spmc target has no fault wrappers (the SPMC is EL3 itself)")
    impl = getattr(args, "spmc", None) or "tf-a"
    if impl == "op-tee":  # OP-TEE's S-EL1 SPMC (targets/optee), its own runner and families
        binary = runner_binary("default").with_name("kconform-runner-optee")
        family = "spmc-optee"
        if not binary.exists():
            raise ToolError(f"target spmc --spmc op-tee: {shown_path(binary)} was not built: the default build "
                            "has no OP-TEE tree (./kconform build fetches debian-src:optee-os, which only "
                            "Debian sid has; see its warning)")
    else:
        binary = runner_binary("default").with_name("kconform-runner-spmc")
        family = "spmc"
        if not binary.exists():
            raise ToolError(f"target spmc: {shown_path(binary)} was not built: the default build has no TF-A "
                            "tree (./kconform build fetches debian-src:arm-trusted-firmware; see its warning)")
    sizes = [el2.parse_page_size(p) for p in (args.page_size or ["4K", "16K"])]
    watchdog = getattr(args, "watchdog", None)
    if watchdog is not None and not watchdog >= 0:
        raise ToolError(f"flag --watchdog: {watchdog} is not a non-negative number of seconds")
    extra = ["--watchdog", f"{watchdog:g}"] if watchdog is not None else []
    engine = Engine(binary)
    plans = []
    for p in sizes:
        ident, why = engine.probe(f"{family}-{p // 1024}k")
        if not ident:
            raise ToolError(f"target spmc: {why}")
        plans.append(Plan(f"spmc-{ident['release']}", engine, f"{family}-{p // 1024}k", files,
                          release=ident["release"],
                          rerun=["--target", "spmc", "--spmc", impl, "--page-size", f"{p // 1024}K"] + extra,
                          watchdog=watchdog))
    return plans


def _plan_qemu_arm64(args, log) -> list[Plan]:
    """FF-A scenarios from the host of Debian's arm64 kernel in pKVM protected mode, through
    real pKVM and TF-A's EL3 SPMC under QEMU (targets/qemu_arm64); 4K (`-arm64`) or 16K
    (`-arm64-16k`) pages, one plan each. With --build: an arm64 kernel built from --tree
    (default debian:7.3) with --apply's patch, at each page size, instead."""
    from kconform.targets.qemu_arm64.run import built_kernel, flavour_of
    if args.fault:
        raise ToolError("flag --fault: target qemu-arm64 has no fault wrappers (real pKVM and TF-A)")
    build = getattr(args, "build", False)
    if getattr(args, "arch", None) not in (None, "arm64"):
        raise ToolError(f"flag --arch: target qemu-arm64 builds arm64 kernels, not {args.arch}")
    if args.kernel:
        raise ToolError("flag --kernel: target qemu-arm64 boots Debian's arm64 7.3 kernel or one it builds "
                        "(--build [--tree T] [--apply P]): a kernel Image of yours would need our kcffa module "
                        "built against its own build output (targets/qemu_arm64/README.md)")
    if (args.tree or args.apply) and not build:
        raise ToolError("flags --tree/--apply: for target qemu-arm64 they need --build")
    sizes = [el2.parse_page_size(p) for p in (args.page_size or ["4K"])]
    for p in sizes:
        flavour_of(p)
    files = scenario_files(args.scenarios, "ffa")
    if not files:
        return []
    plans = []
    for p in sizes:
        rerun = ["--target", "qemu-arm64", "--page-size", f"{p // 1024}K"]
        kernel = None
        if build:
            tree = args.tree or DEFAULT_TREE
            rerun += ["--build", "--tree", tree if tree.startswith("debian:") else shown_path(tree)]
            rerun += ["--apply", shown_path(args.apply)] if args.apply else []
            kernel = built_kernel(tree, args.apply, p, log)
        plans.append(Plan("qemu-arm64" if p == 4096 else f"qemu-arm64-{p // 1024}k", Engine(runner_binary("default")),
                          "qemu-arm64", files, rerun=rerun, page_size=p, kernel=kernel))
    return plans


PLANNERS = {"host": _plan_host, "el2": _plan_el2, "spmc": _plan_spmc, "qemu": _plan_qemu,
            "qemu-arm64": _plan_qemu_arm64}


def cmd_run(args, console: Console) -> int:
    verbose = bool(getattr(args, "verbose", False))

    def log(msg: str) -> None:
        # A warm run's cache hits ("tree debian:7.3: ... (cached)") tell nothing new: -v shows them.
        if verbose or args.format != "table" or not msg.endswith("(cached)"):
            console.print(msg, highlight=False, markup=False)
    wanted = args.target or [t for t in TARGETS if t not in OPT_IN_TARGETS]
    for t in wanted:
        if t not in TARGETS:
            raise ToolError(f"flag --target: unknown target '{t}' (known: {', '.join(TARGETS)})")
    if args.page_size:
        for p in args.page_size:
            el2.parse_page_size(p)
    if getattr(args, "el3", "model") != "model" and "el2" not in wanted:
        raise ToolError(f"flag --el3: says what answers the el2 target's SMCs; not with --target "
                        f"{', '.join(wanted)} (add --target el2)")
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
    not_run: list[summary.NotRun] = []
    explicit = bool(args.target)
    strict = bool(getattr(args, "strict", False)) or os.environ.get("KCONFORM_CI", "") not in ("", "0")
    fallback = None  # the qemu plan that tests guest_memfd in place of host
    for t in wanted:
        try:
            new_plans = PLANNERS[t](args, log)
        except ToolError as e:
            if explicit:
                raise
            not_run.append(summary.NotRun(t, str(e).splitlines()[0]))
            continue
        for plan in new_plans:
            if plan.target in BOOTED_TARGETS:
                plans.append(plan)
                continue
            ident, why = plan.engine.probe(plan.target)
            if ident and (explicit or plan.target != "host" or host_tests_gmem(ident)):
                plans.append(plan)
                continue
            if plan.target == "host" and not explicit:
                # No guest_memfd here (no /dev/kvm, or a kernel without it): QEMU runs it instead.
                why = why or f"this kernel ({ident.get('release', '?')}) has no KVM_CAP_GUEST_MEMFD"
                try:
                    fallback = _plan_qemu(args, log)
                except ToolError as e:
                    fallback, why = [], f"{why}; QEMU could not take its place: {str(e).splitlines()[0]}"
                not_run.append(summary.NotRun("host", why, "guest_memfd ran in QEMU on Debian's 7.3 kernel "
                                              "instead (TCG; --target qemu)" if fallback else ""))
                if fallback:
                    log(f"kconform: host: {why}: guest_memfd runs in QEMU on Debian's 7.3 kernel instead")
                plans += fallback
            else:
                not_run.append(summary.NotRun(plan.label, why))
    if strict and (failed := [n for n in not_run if not n.instead]):
        raise ToolError("--strict (or KCONFORM_CI=1): a default target could not run: "
                        + "; ".join(f"{n.target}: {n.why}" for n in failed))
    if not plans:
        raise ToolError("no target could run: " + "; ".join(f"{n.target}: {n.why}" for n in not_run))

    out_dir = new_report_dir(Path(args.report_dir) if args.report_dir else reports_dir())
    runs = []
    for plan in plans:
        raw = out_dir / f"verdicts-{plan.label}.jsonl"
        if plan.target == "qemu":
            try:
                runs.append(run_qemu(plan.engine, plan.files, raw, out_dir, args.kernel, args.accel, log))
            except ToolError as e:
                if not fallback or strict:
                    raise
                # In place of host: the run goes on without guest_memfd, and says so.
                for n in not_run:
                    n.instead = "" if n.target == "host" else n.instead
                not_run.append(summary.NotRun("qemu", str(e).splitlines()[0] + " (it was to test guest_memfd "
                                              "in place of host)"))
                plans = [p for p in plans if p is not plan]
            continue
        if plan.target == "qemu-arm64":
            runs.append(run_qemu_arm64(plan.engine, plan.files, raw, out_dir, log, plan.page_size, plan.kernel))
            continue
        if console.is_terminal and not args.quiet:
            with Progress(TextColumn(f"[bold]{plan.label}[/bold]"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("ops"), TimeElapsedColumn(), console=console, transient=True) as prog:
                task = prog.add_task(plan.label, total=None)
                run = plan.engine.run(plan.target, plan.files, raw, args.fault,
                                      lambda done, total: prog.update(task, completed=done, total=total),
                                      release=plan.release, watchdog=plan.watchdog)
        else:
            run = plan.engine.run(plan.target, plan.files, raw, args.fault, release=plan.release,
                                  watchdog=plan.watchdog)
        runs.append(run)

    stale = baseline.apply(entries, runs)
    save_findings(main_engine, plans, runs, out_dir)
    new = report.new_findings(runs)
    code = EXIT_VIOLATIONS if new else EXIT_CLEAN
    if args.fault:  # judged by the lie, against a run without it (selftest/faults.py)
        code, fault_lines = faults.judge_run(plans, runs, out_dir, args.fault)

    minimised = {}
    budget = getattr(args, "triage_budget", 0) or 0
    if new and budget > 0 and not args.fault:
        from kconform.commands.triage import auto_triage
        minimised = auto_triage(plans, runs, args, out_dir, budget, log)
        for f in new:
            if f.saved in minimised:
                f.minimised = minimised[f.saved]["path"]
    def to_json() -> str:
        # What the run wanted and could not run, for CI as for the summary's "not tested".
        doc = json.loads(report.to_json(runs, rules, stale, code))
        doc["not_run"] = [dataclasses.asdict(n) for n in not_run]
        return json.dumps(doc, indent=2)

    atomic_write(out_dir / "report.json", to_json())
    atomic_write(out_dir / "report.ktap", report.to_ktap(runs, rules, stale))
    atomic_write(out_dir / "report.junit.xml", report.to_junit(runs, rules))
    html = report_html.to_html(runs, rules, stale, code, title=out_dir.name, minimised=minimised)
    atomic_write(out_dir / "report.html", html)
    rendered = {"json": to_json,
                "ktap": lambda: report.to_ktap(runs, rules, stale),
                "junit": lambda: report.to_junit(runs, rules),
                "html": lambda: html}
    if args.format == "table":
        out = []
        if verbose:
            for run in runs:
                out += summary.rule_table(run, rules) + [""]
        abis = [a for a in dict.fromkeys(TARGETS[t] for t in wanted) if scenario_files(args.scenarios, a)]
        opt_in = [] if explicit else [f"{t} = {OPT_IN_WHAT[t]}" for t in OPT_IN_TARGETS
                                      if not (t == "qemu" and fallback)]
        out += summary.lines(runs, rules, stale, not_run=not_run, report_dir=shown_path(out_dir),
                             show_baselined=verbose or bool(getattr(args, "show_baselined", False)),
                             abis_wanted=abis, opt_in=opt_in)
        for line in out:
            # Never wrapped (a terminal wraps it on screen only): every line, re-run commands
            # included, copies from a terminal or a log as one line.
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    else:
        text = rendered[args.format]()
        if args.output:
            atomic_write(args.output, text)
        else:
            print(text, end="")
    if args.fault:
        for line in fault_lines:
            log(line)
    return code
