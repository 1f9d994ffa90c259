"""The reviewed baseline of known findings.

A finding a user has triaged (a genuine kernel bug they track elsewhere, say)
is accepted here so that their CI stays green until something new appears.
The report still lists baselined findings, and an entry that matches nothing
in a run that could have produced it is reported as no longer occurring: a run
of its target whose release its pattern matches, in which a scenario its
scenario pattern matches ran (a run of a subset of the corpus says nothing
about the entries for the rest).

The same entries decide what `kconform fuzz` stores (commands/fuzz.py):
`fuzz_entries` hands the fuzz runner those of one target build.

File format (JSON, ci/known-findings.json by default):
  {"format": 1,
   "findings": [
     {"rule": "GMEM.X.Y",            required, exact rule ID
      "target": "host",              required
      "release": "6.18.*",           required, fnmatch pattern on the kernel release (el2: the
                                     build's name; with a real EL3, "<build>+<el3>", e.g.
                                     debian-7.3.4-4k+tf-a-2.12.1, matched only by a pattern
                                     with a "+": release_matches)
      "scenario": "gmem/write/*",    optional fnmatch pattern (default "*")
      "kind": "bug",                 required, one of KINDS (below)
      "report": "https://...",       optional, the upstream report of a bug (a path or URL)
      "reason": "...",               required, why this is accepted
      "date": "2026-11-30",          required, YYYY-MM-DD of the review
      "reviewer": "..."}]}           optional

An entry's kind says what it accepts:
  bug         a defect in the code under test (the kernel's ffa.c or guest_memfd; on the
              spmc target TF-A's or OP-TEE's SPMC); names its upstream report in "report"
              when one exists
  deviation   a third-party implementation (TF-A, OP-TEE) differs from the spec, by design
              or by reading (an error code, a field it does not check)
  limit       a platform cannot do it (our stand-ins, the model's own bounds, a pair of
              implementations that cannot work together): the reason says which op every
              matching scenario hits. Only a limit may have scenario "*" (every scenario of
              its rule): any other such entry would also accept every future finding of the
              rule on its target (tests/test_baseline.py fails on one)
  robustness  only under an injected EL3 fault (el3_misbehave: pKVM trusts the SPMD)
A missing or unknown kind is an error naming the file, the entry's index and the field
(exit 2), as for every other field. `kconform run` counts baselined findings by kind
(report.baselined_by_kind: its last line and report.json's "baselined_by_kind").

`kconform baseline audit` (engine/baseline_audit.py, commands/baseline.py) prints, per
entry, the findings and distinct scenarios it absorbed in the last run of each target
build (report folders of `kconform run`) and flags entries wider than what they
absorbed (with the narrowest patterns that cover it), never hit in a run that could
have hit them (warnings; errors with --strict), of scenario "*" without kind limit, and
whose reason quotes code (file.c:NNN or :NNN-MMM) the cached trees do not hold there
(errors: exit 1). The whole-corpus spmc and el2 --el3 tf-a tests run it on their own
report folders (tests/test_e2e_spmc.py, tests/test_e2e_el2_tfa.py).
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import re
from pathlib import Path

from kconform.core.errors import ToolError

REQUIRED = ("rule", "target", "release", "kind", "reason", "date")
# What an entry accepts (the "kind" field): see the module's docstring.
KINDS = ("bug", "deviation", "limit", "robustness")
# Findings that are not rule violations: the code under test crashed
# (CRASH.SANITIZER, CRASH.SIGNAL), hung (CRASH.HANG) or a booted kernel did (QEMU.PANIC, ...).
CRASH_PREFIXES = ("CRASH.", "QEMU.")
KNOWN = set(REQUIRED) | {"scenario", "reviewer", "report"}


def load(path: Path, known_rules: set[str] | None = None) -> list[dict]:
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ToolError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != 1:
        raise ToolError(f"{path}: field 'format': expected 1")
    entries = doc.get("findings")
    if not isinstance(entries, list):
        raise ToolError(f"{path}: field 'findings': expected a list")
    for i, e in enumerate(entries):
        where = f"{path}: findings[{i}]"
        if not isinstance(e, dict):
            raise ToolError(f"{where}: expected an object")
        for field in REQUIRED:
            if not isinstance(e.get(field), str) or not e[field].strip():
                what = f"one of {', '.join(KINDS)}" if field == "kind" else "a non-empty string"
                raise ToolError(f"{where}: field '{field}': required, {what}")
        if e["kind"] not in KINDS:
            raise ToolError(f"{where}: field 'kind': '{e['kind']}' is not one of {', '.join(KINDS)}")
        if "report" in e and (not isinstance(e["report"], str) or not e["report"].strip()):
            raise ToolError(f"{where}: field 'report': a non-empty string (a path or URL), when given")
        for field in e:
            if field not in KNOWN:
                raise ToolError(f"{where}: field '{field}': unknown (known: {', '.join(sorted(KNOWN))})")
        try:
            datetime.date.fromisoformat(e["date"])
        except ValueError:
            raise ToolError(f"{where}: field 'date': '{e['date']}' is not YYYY-MM-DD") from None
        if (known_rules is not None and e["rule"] not in known_rules
                and not e["rule"].startswith(CRASH_PREFIXES)):
            raise ToolError(f"{where}: field 'rule': '{e['rule']}' is not a rule of this kconform")
    return entries


def release_matches(target: str, release: str, pattern: str) -> bool:
    """Whether an entry's release pattern names this build. An el2 build with a real
    EL3 behind ffa.c (`run --target el2 --el3 tf-a`: release "<build>+<el3>") is another
    system than the same build with the model's EL3: an entry reviewed for one says
    nothing of the other, so only a pattern with a "+" matches it (and only such one)."""
    if target == "el2" and ("+" in release) != ("+" in pattern):
        return False
    return fnmatch.fnmatchcase(release, pattern)


def matches(entry: dict, finding) -> bool:
    return (entry["rule"] == finding.rule and entry["target"] == finding.target
            and release_matches(finding.target, finding.release, entry["release"])
            and fnmatch.fnmatchcase(finding.scenario, entry.get("scenario", "*")))


def covers(entry: dict, run) -> bool:
    """Whether run could have produced what entry names: its target, a release the
    pattern matches, a sanitized build for CRASH.SANITIZER (a plain one for
    CRASH.SIGNAL), and at least one
    scenario the scenario pattern matches that ran there (TargetRun.ran, plus
    the scenarios of its findings)."""
    if run.name != entry["target"] or not release_matches(run.name, run.release, entry["release"]):
        return False
    # A sanitizer report needs a sanitized build (`run --asan`), and in one a
    # fatal signal is the sanitizer's report: a run of the other kind says
    # nothing about such an entry.
    sanitized = bool(run.target.get("caps", {}).get("sanitized"))
    if (entry["rule"] == "CRASH.SANITIZER" and not sanitized) or (entry["rule"] == "CRASH.SIGNAL" and sanitized):
        return False
    pattern = entry.get("scenario", "*")
    if pattern == "*" and not entry["rule"].startswith(CRASH_PREFIXES):
        # An entry for every scenario (a deviation of the rule as such: a field
        # an implementation never checks) is judged only by a run in which the
        # rule's forbidden side came up: a subset of the corpus that never
        # reached it says nothing about it.
        tally = getattr(run, "rules", {}).get(entry["rule"])
        return tally is not None and (tally.forbidden + tally.violations) > 0
    ran = set(getattr(run, "ran", ())) | {f.scenario for f in run.findings}
    return any(fnmatch.fnmatchcase(s, pattern) for s in ran)


def apply(entries: list[dict], runs) -> list[dict]:
    """Marks findings covered by an entry; returns the entries that matched
    nothing although the runs covered what they name (covers)."""
    used = [False] * len(entries)
    for run in runs:
        for f in run.findings:
            for i, e in enumerate(entries):
                if matches(e, f):
                    f.baselined_by = e
                    used[i] = True
                    break
    return [e for i, e in enumerate(entries)
            if not used[i] and any(covers(e, r) for r in runs)]


# Scenario patterns the fuzz runner matches exactly as fnmatch.fnmatchcase does
# (harness/fuzz/fuzz_runner.h glob_match): `*` and `?` only, printable ASCII.
_FUZZ_SAFE = re.compile(r"[ -~]*")


def fuzz_entries(entries: list[dict], target: str, release: str) -> list[tuple[str, str]]:
    """(rule, scenario pattern) of the entries that apply to one target build,
    for the fuzz runner (KCONFORM_FUZZ_BASELINE). An entry whose pattern the fuzz
    runner cannot match exactly ([...] classes, tabs, non-ASCII) is left out: the
    fuzz runner then stops at such a finding and the driver's replay decides."""
    out = []
    for e in entries:
        pattern = e.get("scenario", "*")
        if (e["target"] == target and release_matches(target, release, e["release"])
                and _FUZZ_SAFE.fullmatch(pattern) and "[" not in pattern and "]" not in pattern
                and "\t" not in e["rule"] and "\n" not in e["rule"]):
            out.append((e["rule"], pattern))
    return out
