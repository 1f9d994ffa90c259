"""`kconform ci --tree PATH --base REV [--head REV]`: a pull request's gate for a
kernel tree.

Every applicable target runs the default corpora on both revisions of the user's
git tree (never checked out there: commands/bisect.py evaluate_rev):

  el2   when the tree has arch/arm64/kvm/hyp/nvhe/ffa.c (at each --page-size,
        default 4K and 16K); when none of the files the EL2 build reads differs
        between base and head, the base's runs stand for the head's.
  qemu  when virt/kvm/guest_memfd.c differs between base and head (a kernel built
        from each revision, `run --target qemu --build`; minutes per cold build),
        or when asked for with --target qemu.

The findings of the two revisions are compared by (target and page size, scenario,
signature) (engine/bisect.py run_keys; the signature is triage's "<kind> <RULES>
<op kind>"): only a finding the head has and the base has not fails the check, so a
tree's known background never does. Then a bounded fuzz run (`kconform fuzz`, as a
subprocess, --fuzz-time, default 60 s, 0 off; ended after --fuzz-time plus
--fuzz-grace) seeded with --corpus (e.g. the base's, from a CI cache); its corpus
is left in <out>/fuzz for the next run. Its findings are listed, never compared
with the base and never fail the check: `kconform fuzz` has no --tree, so it fuzzes
Debian 7.3's ffa.c, not the head's.

Writes <out>/ci.json, <out>/ci-summary.md (a short summary for a PR comment, also to
--summary FILE), the head's report.html / report.json and a reproducer per head
finding in <out>/findings. Exit 0 no finding introduced, 1 one is (named), 2
kconform could not run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from kconform.core import procs
from kconform.core.errors import EXIT_CLEAN, EXIT_TOOL_ERROR, EXIT_VIOLATIONS, ToolError
from kconform.core.files import atomic_write
from kconform.core.paths import REPO, new_report_dir, reports_dir, runner_binary
from kconform.engine import bisect as bis
from kconform.engine import report, report_html
from kconform.engine.build import build_preset
from kconform.engine.runner import Engine
from kconform.engine.scenarios import scenario_files
from kconform.engine.triage import signature_of
from kconform.commands.bisect import BISECT_TARGETS, evaluate_rev
from kconform.commands.run import TARGETS, save_findings, shown_path

FUZZ_LABEL = "el2-4k"   # what `kconform fuzz --target el2 --page-size 4K` names its folder
_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str, flag: str = "--fuzz-time") -> int:
    """"60s", "10m", "1h", "90" (seconds) -> seconds; 0 is off."""
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:], None)
    number = t[:-1] if unit else t
    if not number.isdigit():
        raise ToolError(f"flag {flag}: '{text}' is not a duration (60s, 10m, 1h; 0: off)")
    return int(number) * (unit or 1)


def applicable_targets(repo: Path, base: str, head: str, asked: list[str] | None) -> list[tuple[str, str]]:
    """[(target, why)] to run: the asked ones, or those the tree and the change call for."""
    out = []
    if asked:
        for t in asked:
            if t not in BISECT_TARGETS:
                raise ToolError(f"flag --target: '{t}' is not one of {', '.join(BISECT_TARGETS)}")
        return [(t, "asked for") for t in dict.fromkeys(asked)]
    if any(bis.has_path(repo, r, p) for r in (base, head) for p in bis.EL2_PATHS):
        out.append(("el2", "the tree has " + bis.EL2_PATHS[0]))
    if any(bis.has_path(repo, r, p) for r in (base, head) for p in bis.GMEM_PATHS) \
            and bis.paths_differ(repo, base, head, bis.GMEM_PATHS):
        out.append(("qemu", bis.GMEM_PATHS[0] + " differs"))
    if not out:
        raise ToolError(f"flag --tree: {repo} has neither {bis.EL2_PATHS[0]} nor a changed "
                        f"{bis.GMEM_PATHS[0]} at {base[:12]} or {head[:12]}: no target applies")
    return out


def _finding_index(labels, runs) -> dict:
    """key (label, scenario, signature) -> one finding of it (its reproducer and evidence)."""
    out = {}
    for label, run in zip(labels, runs):
        by_op: dict = {}
        for f in run.findings:
            by_op.setdefault((f.file, f.index, f.op), []).append(f)
        for fs in by_op.values():
            for sig in signature_of(fs):
                out.setdefault((label, fs[0].scenario, sig), fs[0])
    return out


def _fuzz(args, out: Path, log) -> dict:
    """The bounded fuzz slice: `kconform fuzz` as a child, seeded with --corpus."""
    seconds = parse_duration(args.fuzz_time)
    if not seconds:
        return {"ran": False, "why": "--fuzz-time 0"}
    root = out / "fuzz"
    corpus = root / FUZZ_LABEL / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    seeded = 0
    if args.corpus:
        for f in sorted(Path(args.corpus).rglob("*")):
            if f.is_file() and not (corpus / f.name).exists():
                shutil.copyfile(f, corpus / f.name)
                seeded += 1
    cmd = [sys.executable, str(REPO / "kconform"), "fuzz", "--engine", "libfuzzer", "--target", "el2",
           "--page-size", "4K", "--time", f"{seconds}s", "--out", str(root), "-q"]
    log(f"kconform: ci: fuzzing for {seconds} s ({seeded} input(s) from --corpus): {' '.join(cmd[1:])}")
    limit = seconds + args.fuzz_grace
    log_path = out / "fuzz.log"
    with open(log_path, "w") as fh, procs.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT) as p:
        try:
            rc = p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            p.end(grace=30)   # SIGTERM first: the fuzz command writes its summary
            log(f"kconform: ci: the fuzz slice did not end within {limit} s (--fuzz-time + --fuzz-grace); "
                f"ended ({shown_path(log_path)})")
            return {"ran": True, "seconds": seconds, "seeded": seeded, "exit": None, "ended": True,
                    "new_findings": False, "corpus": str(corpus), "findings": str(root / FUZZ_LABEL / "findings")}
    r = subprocess.CompletedProcess(cmd, rc, log_path.read_text(errors="replace"), "")
    if r.returncode not in (0, 1):
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-5:])
        raise ToolError(f"the fuzz slice could not run (exit {r.returncode}; {out / 'fuzz.log'}):\n{tail}")
    return {"ran": True, "seconds": seconds, "seeded": seeded, "exit": r.returncode,
            "new_findings": r.returncode == 1, "corpus": str(corpus),
            "findings": str(root / FUZZ_LABEL / "findings")}


def summary_markdown(result: dict) -> str:
    intro, fixed = result["introduced"], result["fixed"]
    lines = [f"### kconform: {'**' + str(len(intro)) + ' finding(s) introduced**' if intro else 'no finding introduced'}",
             "",
             f"base `{result['base'][:12]}` {result['base_subject']}  ",
             f"head `{result['head'][:12]}` {result['head_subject']}",
             ""]
    for t in result["targets"]:
        lines.append(f"- {t['target']} ({t['why']}): base {t['base_findings']} finding(s), head "
                     f"{t['head_findings']}{' (same files: base runs reused)' if t.get('reused') else ''}")
    if intro:
        lines += ["", "| target | scenario | finding | reproducer |", "|---|---|---|---|"]
        for i in intro:
            lines.append(f"| {i['label']} | `{i['scenario']}` | {i['signature']} | `{i.get('reproducer', '')}` |")
    if intro:
        lines += ["", "Reproduce at the head: `kconform run --target el2 --tree <tree at head> --page-size "
                  f"{intro[0]['label'].rsplit('-', 1)[-1].upper()} <reproducer>`; the commit that introduced it: "
                  f"`kconform bisect <reproducer> --tree <tree> --good {result['base'][:12]} "
                  f"--bad {result['head'][:12]}`."]
    if fixed:
        lines += ["", f"{len(fixed)} finding(s) of the base gone at the head: "
                  + "; ".join(f"{f['label']} `{f['scenario']}` {f['signature']}" for f in fixed[:10])]
    fz = result.get("fuzz") or {}
    if fz.get("ran"):
        lines += ["", f"fuzz: {fz['seconds']} s on el2 4K, {fz['seeded']} seed input(s) from the corpus; "
                  + ("did not end in time and was ended (fuzz.log)" if fz.get("ended") else
                     "new fuzz findings stored (not compared with the base): " + fz["findings"]
                     if fz["new_findings"] else "no new fuzz finding")]
    lines += ["", "Full report: `report.html` in the CI artifact."]
    return "\n".join(lines) + "\n"


def cmd_ci(args, console: Console) -> int:
    log = lambda msg: console.print(msg, highlight=False, markup=False)  # noqa: E731
    if not args.tree:
        raise ToolError("flag --tree: give the kernel tree's git folder")
    if not args.base:
        raise ToolError("flag --base: give the base revision (the pull request's target)")
    parse_duration(args.fuzz_time)
    if args.fuzz_grace < 0:
        raise ToolError(f"flag --fuzz-grace: {args.fuzz_grace} is not a non-negative number of seconds")
    if args.corpus and not Path(args.corpus).is_dir():
        raise ToolError(f"flag --corpus: {args.corpus}: no such folder")
    repo = bis.git_repo(args.tree)
    base = bis.resolve_rev(repo, args.base, "--base")
    head = bis.resolve_rev(repo, args.head or "HEAD", "--head")
    targets = applicable_targets(repo, base, head, args.target)
    sizes = args.page_size or ["4K", "16K"]
    build_preset("default", targets=["kconform-runner"], log=log)
    main = Engine(runner_binary("default"))
    rules = main.rules()
    out = new_report_dir(Path(args.out) if args.out else reports_dir().parent / "ci")

    introduced, fixed, per_target = [], [], []
    head_plans, head_runs, head_labels = [], [], []
    for target, why in targets:
        files = scenario_files([], TARGETS[target])
        log(f"kconform: ci: {target} ({why}) at base {base[:12]}")
        b = evaluate_rev(repo, base, target, files, sizes, out, None, args.watchdog, log)
        same = target == "el2" and bis.content_at(repo, base) == bis.content_at(repo, head)
        if same:
            log(f"kconform: ci: {target}: the files its build reads are the same at the head; base runs stand")
            h = b
        else:
            log(f"kconform: ci: {target} at head {head[:12]}")
            h = evaluate_rev(repo, head, target, files, sizes, out, None, args.watchdog, log)
        bk, hk = b.keys(), h.keys()
        if not same:
            save_findings(main, h.plans, h.runs, out)
        index = _finding_index(h.labels, h.runs)
        for key in sorted(hk - bk):
            f = index.get(key)
            introduced.append({"label": key[0], "scenario": key[1], "signature": key[2],
                               "reproducer": f.saved if f else "", "observed": f.observed if f else "",
                               "expected": f.expected if f else []})
        for key in sorted(bk - hk):
            fixed.append({"label": key[0], "scenario": key[1], "signature": key[2]})
        per_target.append({"target": target, "why": why, "reused": same,
                           "base_findings": sum(len(r.findings) for r in b.runs),
                           "head_findings": sum(len(r.findings) for r in h.runs),
                           "base_keys": len(bk), "head_keys": len(hk)})
        head_plans += h.plans
        head_runs += h.runs
        head_labels += h.labels

    code = EXIT_VIOLATIONS if introduced else EXIT_CLEAN
    fuzz = _fuzz(args, out, log) if any(t == "el2" for t, _ in targets) else {"ran": False, "why": "no el2"}
    result = {"tree": str(repo), "base": base, "head": head, "base_subject": bis.subject(repo, base),
              "head_subject": bis.subject(repo, head), "page_sizes": sizes, "targets": per_target,
              "introduced": introduced, "fixed": fixed, "fuzz": fuzz, "exit": code}
    atomic_write(out / "ci.json", json.dumps(result, indent=2) + "\n")
    atomic_write(out / "report.json", report.to_json(head_runs, rules, [], code))
    atomic_write(out / "report.html", report_html.to_html(head_runs, rules, [], code,
                                                          title=f"kconform ci {head[:12]} over {base[:12]}"))
    md = summary_markdown(result)
    atomic_write(out / "ci-summary.md", md)
    if args.summary:
        with open(args.summary, "a") as fh:
            fh.write(md)
    for i in introduced:
        log(f"kconform: ci: INTRODUCED {i['label']} {i['scenario']}: {i['signature']}"
            + (f" (reproducer {i['reproducer']})" if i["reproducer"] else ""))
    log(f"kconform: ci: {len(introduced)} finding(s) introduced, {len(fixed)} gone, head "
        f"{head[:12]} over base {base[:12]}; report in {shown_path(out)}")
    return code


__all__ = ["cmd_ci", "applicable_targets", "summary_markdown", "EXIT_TOOL_ERROR"]
