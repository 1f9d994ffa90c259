"""`kconform baseline audit`: what each baseline entry absorbed, and what no longer holds.

The audit reads report folders that `kconform run` wrote (their report.json: the
target, the findings, the per-rule tallies and the scenarios that ran) and applies
the baseline given (ci/known-findings.json by default) to their findings as `run`
would (the first matching entry takes a finding: engine/baseline.py). Only the last
run of each target build counts (target, release, plain or sanitized; the newest
report.json), and runs under `--fault` are left out (their findings are the lie's).

Per entry it prints the findings and distinct scenarios it absorbed in each of those
runs, and flags:

  error    scenario-star   scenario "*" while the kind is not `limit`: only a platform
                           limit may accept every scenario of its rule (any other such
                           entry would also accept every future finding of the rule)
  error    stale-quote     the reason quotes code (`path/file.c:NNN` or `:NNN-MMM`, or a
                           bare `:NNN` after such a quote, same file) that the cached tree
                           (~/.cache/kconform/trees: the kernel trees, TF-A's and OP-TEE's
                           source) does not hold there: the line is past the end of the
                           file, or none of the identifiers the reason names beside the
                           quote (calls, names with `_` or `->`, 'quoted strings') is
                           within QUOTE_SLACK lines of it
  warning  never-hit       a run that could have hit the entry (baseline.covers) did
                           not: the finding no longer occurs
  warning  wider           the scenario pattern matches scenarios that ran and in which
                           the entry absorbed nothing: the narrowest patterns covering
                           what it absorbed are proposed (each scenario with its page
                           size as `*`, merged while no other scenario that ran matches)

A quote of a file no cached tree holds is not checked (counted as such). A version
named beside the quote ("6.12 arch/...", "ffa.c:646 in 7.3") or in the entry's release
(debian-6.12.*) picks the kernel tree of that version. Exit 1 on an error, or (with
--strict) on a warning, else 0.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.engine import baseline
from kconform.engine.verdicts import Finding, TargetRun

QUOTE_SLACK = 5  # lines either side of a quoted line (range) where its identifier may sit
SHOWN = 8        # scenarios shown per run in the text form (all in --format json)

_FINDING_FIELDS = {f.name for f in dataclasses.fields(Finding)} - {"baselined_by", "rerun", "saved", "minimised"}


@dataclasses.dataclass
class AuditRun:
    """The last run of one target build, as a report folder holds it."""
    folder: Path
    run: TargetRun
    new: int = 0  # findings no entry of the audited baseline takes (set by audit)

    @property
    def label(self) -> str:
        sanitized = " (sanitized)" if _sanitized(self.run) else ""
        return f"{self.run.name} {self.run.release}{sanitized}"


@dataclasses.dataclass
class Problem:
    severity: str  # error, warning
    code: str      # scenario-star, stale-quote, never-hit, wider
    message: str


@dataclasses.dataclass
class EntryAudit:
    index: int
    entry: dict
    absorbed: dict = dataclasses.field(default_factory=dict)  # run label -> {"findings": n, "scenarios": [...]}
    shadowed: int = 0          # findings it matches that an earlier entry took
    covered_by: list = dataclasses.field(default_factory=list)  # labels of the runs that could have hit it
    proposal: list | None = None
    quotes: list = dataclasses.field(default_factory=list)     # {"quote", "status", "detail"}
    problems: list = dataclasses.field(default_factory=list)


def _sanitized(run: TargetRun) -> bool:
    return bool(run.target.get("caps", {}).get("sanitized"))


# --- report folders -------------------------------------------------------------------------

def report_folders(dirs: list[Path]) -> list[Path]:
    """Each DIR: a report folder (it holds report.json) or a folder of them (reports/out)."""
    out: list[Path] = []
    for d in dirs:
        if not d.exists():
            raise ToolError(f"flag --report-dir: {d}: no such folder")
        if not d.is_dir():
            raise ToolError(f"flag --report-dir: {d}: not a folder")
        if (d / "report.json").is_file():
            out.append(d)
        else:
            out += sorted(x for x in d.iterdir() if x.is_dir() and (x / "report.json").is_file())
    return out


def _ran_from_streams(folder: Path) -> dict[tuple[str, str], set[str]]:
    """(target, runner's release) -> the scenarios with an op not `unsupported`, from the
    folder's verdict streams (report.json of an older kconform has no "ran")."""
    out: dict[tuple[str, str], set[str]] = {}
    for stream in sorted(folder.glob("verdicts-*.jsonl")):
        key = None
        try:
            lines = stream.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if rec.get("type") == "target":
                key = (rec.get("target", "?"), rec.get("release", "?"))
                out.setdefault(key, set())
            elif rec.get("type") == "op" and key and rec.get("verdict") != "unsupported":
                out[key].add(rec.get("scenario", ""))
    return out


def load_runs(folder: Path) -> tuple[list[TargetRun], list[str]]:
    """The runs of one report folder (its report.json), and why any was left out."""
    where = folder / "report.json"
    try:
        doc = json.loads(where.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ToolError(f"{where}: not a report of kconform run: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise ToolError(f"{where}: field 'runs': expected a list (a report.json of kconform run)")
    runs, notes, streams = [], [], None
    for n, r in enumerate(doc["runs"]):
        target = r.get("target") or {}
        label = f"{target.get('target', '?')} {target.get('release', '?')}"
        if "fault" in (r.get("summary") or {}):
            notes.append(f"{folder}: {label}: left out (a --fault run: its findings are the lie's)")
            continue
        run = TargetRun(target=target, summary=r.get("summary") or {})
        for row in r.get("rules", []):
            t = run.rules[row["id"]]
            t.allowed, t.forbidden, t.violations = row.get("allowed", 0), row.get("forbidden", 0), row.get("violations", 0)
        for f in r.get("findings", []):
            fields = {k: v for k, v in f.items() if k in _FINDING_FIELDS}
            fields["finding_class"] = f.get("class", "conformance")
            try:
                run.findings.append(Finding(**fields))
            except TypeError as e:
                raise ToolError(f"{where}: runs[{n}]: a finding without its fields: {e}") from None
        if "ran" in r:
            run.ran = set(r["ran"])
        else:
            if streams is None:
                streams = _ran_from_streams(folder)
            key = (target.get("target", "?"), target.get("runner_release", target.get("release", "?")))
            run.ran = set(streams.get(key, ()))
        run.ran |= {f.scenario for f in run.findings}
        runs.append(run)
    return runs, notes


def last_runs(folders: list[Path]) -> tuple[list[AuditRun], list[str]]:
    """The newest run of each target build (target, release, plain or sanitized) among the
    folders; folders still being written or left INCOMPLETE are skipped (said in the notes)."""
    latest: dict[tuple, tuple[float, str, AuditRun]] = {}
    notes: list[str] = []
    for folder in folders:
        if (folder / "INCOMPLETE").exists():
            notes.append(f"{folder}: skipped (INCOMPLETE: the run did not finish, or is still running)")
            continue
        runs, why = load_runs(folder)
        notes += why
        stamp = (folder / "report.json").stat().st_mtime
        for run in runs:
            key = (run.name, run.release, _sanitized(run))
            if key not in latest or (stamp, folder.name) > latest[key][:2]:
                latest[key] = (stamp, folder.name, AuditRun(folder, run))
    return [v[2] for _, v in sorted(latest.items())], notes


# --- narrowest patterns ---------------------------------------------------------------------

_PAGE = re.compile(r"-(?:4|16|64)k(?=/|$)")


def _common_prefix(a: str, b: str) -> str:
    return os.path.commonprefix([a, b])


def propose(absorbed: set[str], avoid: set[str]) -> list[str]:
    """Fewest fnmatch patterns that match every absorbed scenario and none of avoid
    (scenarios that ran where the entry absorbed nothing): each scenario with its page
    size as `*` (ffa/share/perms-x-4k -> ffa/share/perms-x-*), or as `[0-9]*k` where that
    matches one of avoid (ffa/share/emad-flags-[0-9]*k beside ffa/share/emad-flags-nrb-4k),
    or itself; then neighbours merged into prefix* while none of avoid matches."""
    def clean(p: str) -> bool:
        return not any(fnmatch.fnmatchcase(s, p) for s in avoid)

    pats: set[str] = set()
    for s in absorbed:
        g = _PAGE.sub("-*", s)
        g_page = _PAGE.sub("-[0-9]*k", s)  # the page size only (emad-flags-4k, not emad-flags-nrb-4k)
        pats.add(g if clean(g) else g_page if clean(g_page) else s)
    pats = sorted(pats)
    while len(pats) > 1:
        best = None
        for a, b in zip(pats, pats[1:]):
            prefix = _common_prefix(a.split("*")[0].split("[")[0], b.split("*")[0].split("[")[0])
            prefix = prefix[:max(prefix.rfind(c) for c in "-/_") + 1]  # at a word's end
            if not prefix or (best and len(prefix) <= len(best[0])):
                continue
            merged = prefix + "*"
            if clean(merged):
                best = (prefix, a, b, merged)
        if not best:
            break
        merged = best[3]
        pats = sorted({p for p in pats if not fnmatch.fnmatchcase(p.replace("*", ""), merged)
                       and p not in (best[1], best[2])} | {merged})
    return pats


# --- code quotes ----------------------------------------------------------------------------

_QUOTE = re.compile(r"(?<![\w/.+-])((?:[\w.+-]+/)*[\w+-][\w.+-]*\.(?:c|h|S|cc|cpp)):(\d+)(?:-(\d+))?(?![\d])")
_RELATIVE = re.compile(r"(?<=[\s(,]):(\d+)(?:-(\d+))?(?![\d:])")
_STRING = re.compile(r"(?<!\w)'([^']{4,100})'(?!\w)")  # not an apostrophe (OP-TEE's)
# A function definition's line: [return type] name( without ";" (K&R-style name at column 0 too).
_DEFINITION = re.compile(r"^(?:[A-Za-z_][^;=(]*?[\s*])?([A-Za-z_]\w*)\s*\([^;]*$")
_IDENT = re.compile(r"[A-Za-z_]\w*(?:->\w+)+|[A-Za-z_]\w*_\w*|[A-Za-z_]\w*(?=\()")
_KERNEL_TREE = re.compile(r"debian-\d")
_ABI_NAME = re.compile(r"FFA_[A-Z0-9_]*|[A-Z]+_PARAMETERS|NO_MEMORY|NOT_SUPPORTED|SMC_UNK")


class Trees:
    """The cached source trees (cache/trees/*) and an index of their files by name."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.trees = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) \
            if root.is_dir() else []
        self._names: dict[Path, dict[str, list[str]]] = {}
        self._lines: dict[Path, list[str] | None] = {}

    def _index(self, tree: Path) -> dict[str, list[str]]:
        if tree not in self._names:
            names: dict[str, list[str]] = {}
            for dirpath, dirnames, filenames in os.walk(tree):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                rel = os.path.relpath(dirpath, tree)
                for f in filenames:
                    names.setdefault(f, []).append(f if rel == "." else f"{rel}/{f}")
            self._names[tree] = names
        return self._names[tree]

    def holding(self, path: str) -> list[Path]:
        """Files named path (or, for a bare or partial path, ending with it) in any tree."""
        out = []
        for tree in self.trees:
            if "/" in path and (tree / path).is_file():
                out.append(tree / path)
                continue
            for rel in self._index(tree).get(path.rsplit("/", 1)[-1], []):
                if rel == path or rel.endswith("/" + path):
                    out.append(tree / rel)
        return out

    def lines(self, path: Path) -> list[str] | None:
        if path not in self._lines:
            try:
                self._lines[path] = path.read_text(errors="replace").splitlines()
            except OSError:
                self._lines[path] = None
        return self._lines[path]


def _version_hint(reason: str, start: int, end: int, release: str) -> str | None:
    before = re.search(r"(\d+\.\d+)\s+$", reason[max(0, start - 12):start])
    if before:
        return before.group(1)
    after = re.match(r"\s+in\s+(\d+\.\d+)\b", reason[end:end + 12])
    if after:
        return after.group(1)
    m = re.search(r"debian-(\d+\.\d+)", release)
    return m.group(1) if m else None


def quotes(reason: str) -> list[dict]:
    """Every code quote of a reason: file, first and last line, where it sits in the text."""
    found = []
    for m in _QUOTE.finditer(reason):
        first = int(m.group(2))
        found.append({"file": m.group(1), "first": first, "last": int(m.group(3) or first),
                      "start": m.start(), "end": m.end(), "text": m.group(0)})
    for m in _RELATIVE.finditer(reason):
        before = [q for q in found if q["end"] <= m.start() and "relative" not in q]
        if not before or any(q["start"] <= m.start() < q["end"] for q in found):
            continue
        q = max(before, key=lambda q: q["end"])
        first = int(m.group(1))
        found.append({"file": q["file"], "first": first, "last": int(m.group(2) or first), "start": m.start(),
                      "end": m.end(), "text": f"{q['file']}{m.group(0)}", "relative": True, "parent": q})
    return sorted(found, key=lambda q: q["start"])


def identifiers(reason: str, q: dict, all_quotes: list[dict]) -> list[str]:
    """What the reason names beside a quote: its clause before it and the rest of its
    parenthesis after it (code-like names and 'quoted strings'), the quotes blanked out."""
    if q.get("parent") is not None:  # ":1282-1283" after "thread_spmc.c:1326-1327 and": its clause too
        parent = q["parent"]
        return list(dict.fromkeys(identifiers(reason, parent, all_quotes)
                                  + identifiers(reason, dict(q, parent=None), all_quotes)))
    prev_end = max([o["end"] for o in all_quotes if o["end"] <= q["start"]] or [0])
    next_start = min([o["start"] for o in all_quotes if o["start"] >= q["end"]] or [len(reason)])
    lo = max(prev_end, q["start"] - 200)
    close = reason.find(")", q["end"])  # after the quote: the rest of its parenthesis
    hi = min(next_start, q["end"] + 120, close + 1 if close >= 0 else len(reason))
    window = list(reason[lo:hi])
    for o in all_quotes:
        for i in range(max(o["start"], lo), min(o["end"], hi)):
            window[i - lo] = " "
    text = "".join(window)
    out = [m.group(1) for m in _STRING.finditer(text)]
    text = _STRING.sub(lambda m: " " * len(m.group(0)), text)
    out += [m.group(0) for m in _IDENT.finditer(text)]
    return list(dict.fromkeys(x for x in out if x.strip()))


def check_quote(trees: Trees, reason: str, q: dict, all_quotes: list[dict], release: str) -> dict:
    """{"quote", "status": ok | stale | unchecked, "detail"} for one quote."""
    out = {"quote": q["text"], "status": "unchecked", "detail": ""}
    files = trees.holding(q["file"])
    if not files:
        out["detail"] = f"no cached tree holds {q['file']}"
        return out
    hint = _version_hint(reason, q["start"], q["end"], release)
    if hint:
        files = [f for f in files if not _KERNEL_TREE.match(f.relative_to(trees.root).parts[0])
                 or re.search(rf"-{re.escape(hint)}(\.|$)", f.relative_to(trees.root).parts[0])]
        if not files:
            out["detail"] = f"no cached {hint} tree holds {q['file']}"
            return out
    names = identifiers(reason, q, all_quotes)
    problems = []
    for f in files:
        tree = f.relative_to(trees.root).parts[0]
        lines = trees.lines(f) or []
        if q["last"] > len(lines) or q["first"] < 1:
            problems.append(f"{tree} {f.relative_to(trees.root / tree)} has {len(lines)} lines")
            continue
        if not names:
            out.update(status="ok", detail=f"{tree}: in the file (no identifier named beside it)")
            return out
        whole = "\n".join(lines)
        named = [n for n in names if _found(n, whole)]  # what the reason names of this file
        # FF-A's own names (FFA_PARTITION_INFO_GET, FFA_SUCCESS) say what a reason is about more
        # than where: they count where they are near, but alone they cannot make a quote stale.
        if not [n for n in named if not _ABI_NAME.fullmatch(n)]:
            named = [n for n in named if _found(n, "\n".join(lines[max(0, q["first"] - 1 - QUOTE_SLACK):
                                                                   q["last"] + QUOTE_SLACK]))]
        if not named:
            out.update(status="ok", detail=f"{tree}: in the file (nothing beside it names code of the file)")
            return out
        lo, hi = max(0, q["first"] - 1 - QUOTE_SLACK), min(len(lines), q["last"] + QUOTE_SLACK)
        near = "\n".join(lines[lo:hi])
        hit = next((n for n in named if _found(n, near)), None)
        if hit:
            out.update(status="ok", detail=f"{tree}: '{hit}' near line {q['first']}")
            return out
        function = enclosing(lines, q["first"])
        if function in named:
            out.update(status="ok", detail=f"{tree}: line {q['first']} is in {function}()")
            return out
        if q.get("parent") is not None and not [
                n for n in identifiers(reason, dict(q, parent=None), all_quotes)
                if not _ABI_NAME.fullmatch(n) and _found(n, whole)]:
            # ", :217" after another quote, naming nothing of its own: the names are the other's
            out.update(status="ok", detail=f"{tree}: in the file (nothing beside it names code of the file)")
            return out
        elsewhere = min((i + 1, n) for n in named for i, line in enumerate(lines) if _found(n, line))
        problems.append(f"{tree}: none of {', '.join(repr(n) for n in named[:6])} within {QUOTE_SLACK} lines "
                        f"of it (nor is it in a function of that name: "
                        f"{function + '()' if function else 'in none'}); '{elsewhere[1]}' is at line {elsewhere[0]}")
    out.update(status="stale", detail="; ".join(problems))
    return out


def enclosing(lines: list[str], line: int) -> str | None:
    """The function whose definition starts last at or before line (1-based): its first line
    starts at column 0 with a name and "(" and no ";" (the kernel's, TF-A's and OP-TEE's style)."""
    for i in range(min(line, len(lines)) - 1, -1, -1):
        text = lines[i]
        if text[:1] == "}" and i < line - 1:
            return None  # a function ended between its definition and the line
        m = _DEFINITION.match(text)
        if m and not text.startswith(("#", "static_assert", "CASSERT")):
            return m.group(1)
    return None


def _found(name: str, text: str) -> bool:
    if re.fullmatch(r"[A-Za-z_]\w*(?:->\w+)*", name):
        return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None
    return name in text


# --- the audit ------------------------------------------------------------------------------

def audit(entries: list[dict], runs: list[AuditRun], trees: Trees) -> list[EntryAudit]:
    out = [EntryAudit(i, e) for i, e in enumerate(entries)]
    matched_scenarios: list[set[str]] = [set() for _ in entries]
    for ar in runs:
        ar.new = 0
        for f in ar.run.findings:
            ar.new += not any(baseline.matches(e, f) for e in entries)
            first = True
            for i, e in enumerate(entries):
                if not baseline.matches(e, f):
                    continue
                matched_scenarios[i].add(f.scenario)
                if first:
                    a = out[i].absorbed.setdefault(ar.label, {"findings": 0, "scenarios": set()})
                    a["findings"] += 1
                    a["scenarios"].add(f.scenario)
                    first = False
                else:
                    out[i].shadowed += 1
    for ea in out:
        e = ea.entry
        pattern = e.get("scenario", "*")
        ea.covered_by = [ar.label for ar in runs if baseline.covers(e, ar.run)]
        for a in ea.absorbed.values():
            a["scenarios"] = sorted(a["scenarios"])
        absorbed = {s for a in ea.absorbed.values() for s in a["scenarios"]}
        if ea.covered_by and not absorbed:
            ea.problems.append(Problem("warning", "never-hit",
                                       f"never hit in a run that could have hit it ({', '.join(ea.covered_by)})"))
        if absorbed and any(c in pattern for c in "*?["):
            ran = set()
            for ar in runs:
                if ar.run.name == e["target"] and baseline.release_matches(ar.run.name, ar.run.release, e["release"]):
                    ran |= ar.run.ran
            avoid = ran - matched_scenarios[ea.index]
            extra = sorted(s for s in avoid if fnmatch.fnmatchcase(s, pattern))
            if extra:
                ea.proposal = propose(absorbed, avoid)
                shown = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
                ea.problems.append(Problem("warning", "wider",
                                           f"'{pattern}' also matches {len(extra)} scenario(s) that ran where it "
                                           f"absorbed nothing ({shown}); narrowest covering what it absorbed: "
                                           f"{', '.join(ea.proposal)}"))
        if pattern == "*" and e.get("kind") != "limit":
            ea.problems.insert(0, Problem("error", "scenario-star",
                                          f"scenario '*' with kind {e.get('kind', '?')}: only a limit may accept "
                                          f"every scenario of its rule" + (
                                              f"; narrowest covering what it absorbed: {', '.join(ea.proposal)}"
                                              if ea.proposal else "")))
        all_quotes = quotes(e["reason"])
        for q in all_quotes:
            result = check_quote(trees, e["reason"], q, all_quotes, e["release"])
            ea.quotes.append(result)
            if result["status"] == "stale":
                ea.problems.append(Problem("error", "stale-quote", f"{result['quote']}: {result['detail']}"))
    return out


def exit_code(results: list[EntryAudit], strict: bool) -> int:
    severities = {p.severity for r in results for p in r.problems}
    return 1 if "error" in severities or (strict and "warning" in severities) else 0


def counts(results: list[EntryAudit]) -> dict:
    c: dict = {"error": 0, "warning": 0}
    for r in results:
        for p in r.problems:
            c[p.severity] += 1
            c[p.code] = c.get(p.code, 0) + 1
    q = [x["status"] for r in results for x in r.quotes]
    c["quotes"] = {s: q.count(s) for s in ("ok", "stale", "unchecked")}
    return c


def to_json(path: Path, runs: list[AuditRun], results: list[EntryAudit], notes: list[str], code: int) -> str:
    doc = {"format": 1, "baseline": str(path), "exit": code, "counts": counts(results), "notes": notes,
           "runs": [{"folder": str(ar.folder), "target": ar.run.name, "release": ar.run.release,
                     "sanitized": _sanitized(ar.run), "findings": len(ar.run.findings), "not_baselined": ar.new,
                     "ran": len(ar.run.ran)} for ar in runs],
           "entries": [{"index": r.index, "rule": r.entry["rule"], "target": r.entry["target"],
                        "release": r.entry["release"], "scenario": r.entry.get("scenario", "*"),
                        "kind": r.entry.get("kind"), "absorbed": r.absorbed, "shadowed": r.shadowed,
                        "covered_by": r.covered_by, "proposal": r.proposal, "quotes": r.quotes,
                        "problems": [dataclasses.asdict(p) for p in r.problems]} for r in results]}
    return json.dumps(doc, indent=2) + "\n"


def to_lines(path: Path, runs: list[AuditRun], results: list[EntryAudit], notes: list[str]) -> list[str]:
    out = [f"baseline audit of {path} ({len(results)} entries) against the last run of each target build:"]
    out += [f"  {ar.label}: {len(ar.run.findings)} finding(s) ({ar.new} that no entry takes), "
            f"{len(ar.run.ran)} scenario(s) ran ({ar.folder})" for ar in runs] or [
        "  (no report folder with a finished run)"]
    out += [f"  note: {n}" for n in notes]
    for r in results:
        e = r.entry
        out.append(f"[{r.index}] {e['rule']} on {e['target']} {e['release']} ({e.get('scenario', '*')}), "
                   f"{e.get('kind', '?')}")
        for label, a in r.absorbed.items():
            s = a["scenarios"]
            shown = ", ".join(s[:SHOWN]) + (f" and {len(s) - SHOWN} more" if len(s) > SHOWN else "")
            out.append(f"    {label}: {a['findings']} finding(s) in {len(s)} scenario(s): {shown}")
        if r.shadowed:
            out.append(f"    matches {r.shadowed} finding(s) an earlier entry took")
        if not r.absorbed and not r.covered_by:
            same = [ar for ar in runs if ar.run.name == e["target"]
                    and baseline.release_matches(ar.run.name, ar.run.release, e["release"])]
            out.append("    not covered: " + (f"no run of {e['target']} {e['release']} in the report folders"
                                              if not same else "no scenario it names ran (for scenario '*': its "
                                              "rule never came up on its forbidden side)"))
        for p in r.problems:
            out.append(f"    {p.severity.upper()} {p.code}: {p.message}")
    return out
