"""`kconform run`'s default output, in the shape of kselftest's totals and
`pytest -q`: what a kernel developer reads in ten seconds.

  - one line per target run: target, release, page size, then scenarios, ops,
    pass, violations, unsupported, unchecked and time (a table, one header);
  - per ABI, the rules exercised, N of M, and those no run exercised;
  - every new finding in full (rule, op, expected, observed, note, reproducer,
    re-run command: report.finding_lines);
  - baselined findings as one line per rule with a count (in full with
    --show-baselined or -v; always in the report files);
  - baseline entries the run covered that no longer occur;
  - "not tested": each target that could not run and why (and what ran
    instead), each ABI none of whose targets ran, the scenarios no target of
    the run could run grouped by the capability they need, with how to test
    it (e.g. FFA_MEM_RECLAIM2: --apply PATCH);
  - the closing verdict, one line: new findings, baselined, what was tested
    and what was not, the report folder.

A clean default run prints at most 60 lines (tests/test_run_summary.py).
Every line is printed as is, never wrapped, so a re-run command copied from a
log runs as is (commands/run.py prints these with soft wrapping only).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from kconform.engine import report
from kconform.engine.baseline import covers
from kconform.engine.report import SECTION_TITLES, baselined_summary, by_class, finding_lines, new_findings

ABI_NAMES = {"gmem": "guest_memfd", "ffa": "FF-A"}
# A capability scenarios may need (kconform-runner's "missing"): what it is in
# words, and how to test the scenarios that need it. {release}: the builds that
# lacked it ("debian-7.3.4").
CAPABILITIES = {
    "reclaim2": ("FFA_MEM_RECLAIM2", "{release} {does} not implement it; to test a patch: --apply PATCH "
                                     "(ours: targets/el2/reclaim2/reclaim2-reference.patch)"),
    "write": ("guest_memfd write()", "{release} {does} not implement it; to test a patch: --target qemu --build "
                                     "--apply PATCH (ours: targets/qemu/write/gmem-write-reference.patch)"),
    "page_64k": ("64K pages", "not among the default page sizes (4K, 16K): --target el2 --page-size 64K"),
    "page_16k": ("16K pages", "--page-size 16K"),
    "page_4k": ("4K pages", "--page-size 4K"),
    "gmem": ("guest_memfd", "{release} {has} no KVM_CAP_GUEST_MEMFD; --target qemu tests it in QEMU"),
    "mmap": ("guest_memfd mmap()", "{release} {has} no GUEST_MEMFD_FLAG_MMAP"),
    "init_shared": ("guest_memfd INIT_SHARED", "{release} {has} no GUEST_MEMFD_FLAG_INIT_SHARED"),
    "sw_protected_vm": ("KVM_X86_SW_PROTECTED_VM", "{release} {is_} built without CONFIG_KVM_SW_PROTECTED_VM; "
                                                   "a kernel with it: --target qemu --build"),
}
# How many rule IDs, capabilities and stale entries a line names before "and N more".
SHOWN = 8
_MISSING = re.compile(r"missing capabilit(?:y|ies): ([^;]+)")


@dataclasses.dataclass
class NotRun:
    """A target (or one build of it) the run wanted and could not run: why, and
    what ran in its place ("" if nothing did)."""
    target: str
    why: str
    instead: str = ""


def abi_of(run) -> str:
    """The ABI a target run judged: gmem for the guest_memfd profiles, else FF-A."""
    return "gmem" if run.target.get("profile", "").startswith("gmem") else "ffa"


def shown(path: str | os.PathLike) -> str:
    """A path as the user would type it: relative to the working folder when inside it."""
    if not path:
        return ""
    p = Path(path)
    try:
        p = p.resolve()
        cwd = Path.cwd().resolve()
    except OSError:
        return str(path)
    return os.path.relpath(p, cwd) if p.is_relative_to(cwd) else str(p)


def page_size(run) -> str:
    ps = (run.target.get("caps") or {}).get("page_size")
    if isinstance(ps, int) and ps > 0:
        return f"{ps // 1024}K"
    m = re.search(r"-(\d+)k(?:\+|$)", run.release)
    return f"{m.group(1)}K" if m else "?"


def _ids(ids: list[str]) -> str:
    """Rule IDs in a line: those sharing a family (FFA.R2.*) and making up 3 or
    more are named by the family and a count."""
    fams: dict[str, list[str]] = {}
    for rid in ids:
        fams.setdefault(rid.rsplit(".", 1)[0], []).append(rid)
    parts = []
    for fam, members in fams.items():
        parts.append(f"{fam}.* ({len(members)})" if len(members) >= 3 else ", ".join(members))
    text = ", ".join(parts)
    words = text.split(", ")
    if len(words) > SHOWN:
        text = ", ".join(words[:SHOWN]) + f" and {len(words) - SHOWN} more (report.json)"
    return text


def _builds(runs) -> list[str]:
    """The builds of some runs without their page size: debian-7.3.4, tf-a-2.12.1."""
    out: list[str] = []
    for r in runs:
        b = re.sub(r"-\d+k(?=\+|$)", "", r.release)
        if b not in out:
            out.append(b)
    return out


def run_table(runs) -> list[str]:
    head = ("target", "release", "page", "scenarios", "ops", "pass", "violations", "unsupported",
            "unchecked", "time")
    rows = [head]
    for r in runs:
        c = r.counts
        rows.append((r.name, r.release, page_size(r), str(len(r.scenarios)), str(sum(c.values())),
                     str(c["pass"]), str(c["violation"]), str(c["unsupported"]), str(c["unchecked"]),
                     f"{r.summary.get('seconds', 0.0):.1f} s"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) if i < 3 else row[i].rjust(widths[i]) for i in range(len(head))]
        out.append("  ".join(cells).rstrip())
    return out


def rule_table(run, rules: list[dict]) -> list[str]:
    """-v: a target run's per-rule rows (report.rows), plain text, one line each."""
    rs = report.rows(run, rules)
    width = max([len(r["id"]) for r in rs] + [4])
    out = [f"{run.name} {run.release} ({run.target.get('profile', '?')}): per rule",
           f"  {'rule'.ljust(width)}  allowed  forbidden  violations  status"]
    for r in rs:
        out.append(f"  {r['id'].ljust(width)}  {r['allowed']:>7}  {r['forbidden']:>9}  {r['violations']:>10}  "
                   f"{r['status']}")
    return out


def exercised(runs, rules: list[dict], abi: str) -> tuple[list[str], list[str]]:
    """(rules of the ABI some run exercised, those none did), in rule order."""
    hit: set[str] = set()
    for r in runs:
        for rid, t in r.rules.items():
            if t.allowed or t.forbidden or t.violations:
                hit.add(rid)
        hit |= {f.rule for f in r.findings}
    ids = [x["id"] for x in rules if x["abi"] == abi]
    return [i for i in ids if i in hit], [i for i in ids if i not in hit]


def _missing(reason: str) -> set[str]:
    m = _MISSING.search(reason)
    return {c.strip() for c in m.group(1).split(",")} if m else set()


def never_ran(runs) -> dict[str, list]:
    """The scenarios no run of these (one ABI's) could run, by what kept every run
    from it: a capability all of them lacked ("reclaim2"), or the reason in words."""
    keys = None
    for r in runs:
        k = set(r.unsupported)
        keys = k if keys is None else keys & k
    out: dict[str, list] = {}
    for key in sorted(keys or ()):
        reasons = [r.unsupported[key].reason for r in runs]
        caps = set.intersection(*(_missing(x) for x in reasons))
        if caps:
            for cap in sorted(caps):
                out.setdefault(cap, []).append(key)
        else:
            out.setdefault(reasons[0], []).append(key)
    return out


def _capability_line(cap: str, n: int, runs, abi_rules_missed: list[str]) -> str:
    name, how = CAPABILITIES.get(cap, (None, None))
    if name is None:
        if cap.startswith(("missing", "the target")) or " " in cap:
            return f"{n} {ABI_NAMES.get(abi_of(runs[0]), '')} scenario(s): {cap}"
        return f"{cap}: {n} scenario(s) need it and no target of this run has it"
    rules = ""
    if cap == "reclaim2":
        r2 = [x for x in abi_rules_missed if x.startswith("FFA.R2.")]
        rules = f", {len(r2)} FFA.R2.* rules" if r2 else ""
    builds = _builds(runs)
    one = len(builds) == 1
    how = how.format(release=", ".join(builds[:-1]) + " and " + builds[-1] if not one else builds[0],
                     does="does" if one else "do", has="has" if one else "have", is_="is" if one else "are")
    return f"{name}: {how} ({n} scenario(s){rules})"


def lines(runs, rules: list[dict], stale: list[dict], *, not_run: list[NotRun], report_dir: str,
          show_baselined: bool = False, abis_wanted: list[str] | None = None,
          opt_in: list[str] | None = None) -> list[str]:
    """Every line of the default output after the run, the closing verdict last."""
    out = run_table(runs) if runs else []
    by_abi: dict[str, list] = {}
    for r in runs:
        by_abi.setdefault(abi_of(r), []).append(r)
    missed_by_abi: dict[str, list[str]] = {}
    for abi, rs in by_abi.items():
        hit, missed = exercised(rs, rules, abi)
        missed_by_abi[abi] = missed
        names = ", ".join(dict.fromkeys(r.name for r in rs))
        line = f"{ABI_NAMES.get(abi, abi)}: rules exercised {len(hit)} of {len(hit) + len(missed)} ({names})"
        if missed:
            line += "; not exercised: " + _ids(missed)
        out.append(line)

    new = new_findings(runs)
    for cls, found in by_class(new):
        out += ["", f"new {SECTION_TITLES[cls]} ({len(found)}):"]
        for f in found:
            out += [_title("FAIL", f)] + ["    " + x for x in finding_lines(f)]

    old = [f for r in runs for f in r.findings if f.baselined_by]
    if old:
        per: dict[str, list] = {}
        for f in old:
            per.setdefault(f.rule, []).append(f)
        more = "" if show_baselined else "; in full: --show-baselined, and in the report"
        out += [""] * bool(new) + [f"{baselined_summary(runs)} (known, reviewed: ci/known-findings.json{more}), "
                                   "by rule:"]
        width = max(len(r) for r in per)
        for rid, fs in sorted(per.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            kinds = "/".join(sorted({f.baselined_by.get("kind") or "?" for f in fs}))
            where = ", ".join(dict.fromkeys(f.target for f in fs))
            out.append(f"{len(fs):>6}  {rid.ljust(width)}  {kinds}, {where}")
        if show_baselined:
            for cls, found in by_class(old):
                out += ["", f"baselined {SECTION_TITLES[cls]} ({len(found)}):"]
                for f in found:
                    out += [_title("BASELINED", f)] + ["    " + x for x in finding_lines(f)]

    gone = [e for e in stale if any(covers(e, r) for r in runs)]
    if gone:
        named = [f"{e['rule']} on {e['target']} {e['release']} ({e.get('scenario', '*')})" for e in gone]
        more = f" and {len(named) - 3} more (report.json: stale_baseline)" if len(named) > 3 else ""
        out.append(f"{len(gone)} baseline entr{'y' if len(gone) == 1 else 'ies'} no longer occur (remove or "
                   f"narrow in ci/known-findings.json): {'; '.join(named[:3])}{more}")

    untested: list[str] = []   # the closing section's lines
    short: list[str] = []      # what the last line names
    for n in not_run:
        untested.append(f"{n.target}: {n.why}" + (f"; {n.instead}" if n.instead else ""))
        short.append(n.target)
    for abi in abis_wanted or []:
        if abi not in by_abi:
            untested.append(f"{ABI_NAMES.get(abi, abi)}: no target of this run could test it")
            short.append(ABI_NAMES.get(abi, abi))
    for abi, rs in by_abi.items():
        for cap, keys in never_ran(rs).items():
            untested.append(_capability_line(cap, len(keys), rs, missed_by_abi.get(abi, [])))
            short.append(CAPABILITIES.get(cap, (None,))[0] or f"{len(keys)} {ABI_NAMES.get(abi, abi)} scenarios")
    if untested or opt_in:
        out += ["not tested" + (f" (opt-in, not run: {', '.join(opt_in)})" if opt_in else "") + ":"]
        out += ["    " + u for u in untested]

    tested = "; ".join(f"{ABI_NAMES.get(a, a)} on {', '.join(dict.fromkeys(r.name for r in rs))}"
                       for a, rs in by_abi.items())
    verdict = "FAIL" if new else "PASS"
    last = f"kconform: {verdict}: {len(new)} new finding(s), {baselined_summary(runs)}"
    if gone:
        last += f", {len(gone)} baseline entr{'y' if len(gone) == 1 else 'ies'} no longer occurring"
    last += f"; tested {tested or 'nothing'}"
    if short:
        last += "; not tested: " + ", ".join(dict.fromkeys(short))
    last += f"; report: {report_dir}"
    return out + ["", last]


def _title(tag: str, f) -> str:
    where = f"op {f.op}: {f.call}" if f.op >= 0 else f.call
    return f"{tag} {f.kind} {f.rule} on {f.target} {f.release} in {f.scenario} ({shown(f.file)} #{f.index}) {where}"
