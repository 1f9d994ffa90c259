"""`kconform run`'s default output (issue 39; engine/summary.py): one line per target
run, rules exercised per ABI, every new finding in full, baselined findings one line
per rule, what was not tested and why, the verdict last; at most 60 lines for a clean
run; never wrapped, so a re-run command copied from a log runs as is."""

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from conftest import REPO, kconform, reclaim2_on_stock
from kconform.commands import cli
from kconform.commands import run as run_cmd
from kconform.engine import summary
from kconform.engine.verdicts import Finding, RuleTally, TargetRun, Unsupported

FFA = [f"FFA.{fam}.{i}" for fam, n in (("DESC", 22), ("PROXY", 18), ("R2", 17), ("SPMC", 15), ("MBOX", 9),
                                          ("HARNESS", 5), ("VERSION", 3)) for i in range(n)]
GMEM = [f"GMEM.{fam}.{i}" for fam, n in (("BIND", 14), ("MMAP", 11), ("WRITE", 9), ("FALLOC", 8),
                                            ("LSEEK", 7), ("CREATE", 6)) for i in range(n)]
RULES = ([{"id": r, "abi": "ffa", "summary": r, "citation": "SPEC.md"} for r in FFA]
         + [{"id": r, "abi": "gmem", "summary": r, "citation": "SPEC.md"} for r in GMEM])


def target_run(name, release, profile, page, rules_hit, unsupported=(), findings=()):
    run = TargetRun(target={"target": name, "release": release, "profile": profile,
                            "caps": {"page_size": page}})
    run.counts.update({"pass": 2000, "violation": len(findings), "unsupported": 300, "unchecked": 3})
    run.summary["seconds"] = 10.94
    for rid in rules_hit:
        run.rules[rid] = RuleTally(allowed=3, forbidden=1)
    for i in range(900):
        run.scenarios.add(f"s{i}")
    for key, reason in unsupported:
        run.unsupported[key] = Unsupported(f"scenario-{key[1]}", key[0], key[1], reason)
    run.findings = list(findings)
    return run


def finding(rule, target, release, baselined=None, n=0):
    return Finding(rule=rule, target=target, release=release, scenario=f"ffa/share/x{n}",
                   file=str(REPO / "corpora/ffa/share_lend.kcs"), index=n, op=3, call="mem_share len=48",
                   expected=["ok [FFA.PROXY.0]"], observed="error INVALID_PARAMETERS", note="the model says",
                   baselined_by=baselined, saved=f"reports/out/x/findings/f{n}.kcs",
                   rerun=f"./kconform run --target el2 --tree debian:7.3 --page-size 4K reports/out/x/findings/f{n}.kcs")


ENTRY = {"kind": "deviation", "reason": "reviewed", "date": "2026-12-02", "rule": "X", "target": "el2",
         "release": "*"}


def a_default_run(new=0):
    """The shape of a default run on a machine like this one: host without guest_memfd (QEMU
    in its place), el2 and spmc at 4K and 16K, 35 rules with baselined findings."""
    r2 = [r for r in FFA if ".R2." in r]
    ffa_hit = [r for r in FFA if r not in r2[2:]]
    no_r2 = [(("corpora/ffa/reclaim2.kcs", i), "missing capability: reclaim2") for i in range(200)]
    no_64k = [(("corpora/ffa/large.kcs", i), "missing capability: page_64k") for i in range(11)]
    base = dict(ENTRY)
    runs = [target_run("qemu", "7.3.4+deb13-amd64", "gmem-base", 4096, GMEM[:60],
                       [(("corpora/gmem/write.kcs", i), "missing capability: write") for i in range(60)])]
    bl = [finding(rid, "el2", "debian-7.3.4-4k", base, i) for i, rid in enumerate(FFA[:35]) for _ in range(3)]
    bl += [finding(FFA[0], "el2", "debian-7.3.4-4k", None, 99)] * new
    for name, rel, prof, page, fs in (("el2", "debian-7.3.4-4k", "ffa-4k", 4096, bl),
                                      ("el2", "debian-7.3.4-16k", "ffa-16k", 16384, []),
                                      ("spmc", "tf-a-2.12.1-4k", "spmc-4k-sp1-v1.2", 4096, []),
                                      ("spmc", "tf-a-2.12.1-16k", "spmc-16k-sp1-v1.2", 16384, [])):
        runs.append(target_run(name, rel, prof, page, ffa_hit, no_r2 + no_64k, fs))
    not_run = [summary.NotRun("host", "this kernel (6.18.44-fc) has no KVM_CAP_GUEST_MEMFD",
                              "guest_memfd ran in QEMU instead")]
    stale = [dict(ENTRY, rule=FFA[40], release="debian-7.3.4-*")] * 3
    return summary.lines(runs, RULES, stale, not_run=not_run, report_dir="reports/out/20261206-000331",
                         abis_wanted=["gmem", "ffa"], opt_in=["qemu-arm64 (FF-A in QEMU: --target qemu-arm64)"])


def test_a_clean_default_run_fits_in_60_lines_with_room_for_its_progress_lines():
    out = a_default_run()
    # The run's own progress lines come before these, at most 8 on a warm run: host's
    # replacement, the EL2 build, QEMU's boot, one line per 30 s of it, its timing.
    assert len(out) <= 52, "\n".join(out)
    assert out[-1].startswith("kconform: PASS: 0 new finding(s), 105 baselined: 105 deviation")


def test_one_line_per_target_run_with_its_counts():
    out = a_default_run()
    assert out[0].split() == ["target", "release", "page", "scenarios", "ops", "pass", "violations",
                              "unsupported", "unchecked", "time"]
    el2 = next(x for x in out if x.startswith("el2") and "debian-7.3.4-16k" in x)
    assert el2.split() == ["el2", "debian-7.3.4-16k", "16K", "900", "2303", "2000", "0", "300", "3", "10.9", "s"]


def test_rules_exercised_per_abi_name_what_was_not():
    out = a_default_run()
    (ffa,) = [x for x in out if x.startswith("FF-A: rules exercised")]
    assert ffa.startswith("FF-A: rules exercised 74 of 89 (el2, spmc); not exercised: FFA.R2.* (15)"), ffa
    (gmem,) = [x for x in out if x.startswith("guest_memfd: rules exercised")]
    assert "60 of 55" not in gmem and "(qemu)" in gmem


def test_baselined_findings_are_one_line_per_rule_with_a_count():
    out = a_default_run()
    rows = [x for x in out if re.match(r"\s+3  FFA\.", x)]
    assert len(rows) == 35 and all(x.endswith("deviation, el2") for x in rows), rows
    assert not any(x.startswith("BASELINED") for x in out)
    assert any("--show-baselined" in x for x in out)


def test_show_baselined_prints_each_in_full():
    r2 = [r for r in FFA if ".R2." in r]
    run = target_run("el2", "debian-7.3.4-4k", "ffa-4k", 4096, FFA[:3],
                     findings=[finding(r2[0], "el2", "debian-7.3.4-4k", dict(ENTRY), 1)])
    out = summary.lines([run], RULES, [], not_run=[], report_dir="r", show_baselined=True)
    i = next(i for i, x in enumerate(out) if x.startswith("BASELINED violation FFA.R2.0 on el2"))
    assert "(corpora/ffa/share_lend.kcs #1) op 3: mem_share len=48" in out[i], out[i]
    assert out[i + 1:i + 7] == ["    expected: ok [FFA.PROXY.0]", "    observed: error INVALID_PARAMETERS",
                                "    note:     the model says",
                                "    accepted: [deviation] reviewed (2026-12-02)",
                                "    scenario: reports/out/x/findings/f1.kcs",
                                "    re-run:   ./kconform run --target el2 --tree debian:7.3 --page-size 4K "
                                "reports/out/x/findings/f1.kcs"]


def test_a_new_finding_is_printed_in_full_and_fails():
    out = a_default_run(new=1)
    i = out.index("new conformance findings (1):")
    assert out[i + 1].startswith("FAIL violation FFA.DESC.0 on el2 debian-7.3.4-4k in ffa/share/x99")
    assert [x.split(":")[0].strip() for x in out[i + 2:i + 7]] == ["expected", "observed", "note", "scenario",
                                                                    "re-run"]
    assert out[-1].startswith("kconform: FAIL: 1 new finding(s)")


def test_not_tested_says_what_and_why_and_how_to_test_it():
    out = a_default_run()
    i = next(i for i, x in enumerate(out) if x.startswith("not tested"))
    assert out[i] == "not tested (opt-in, not run: qemu-arm64 (FF-A in QEMU: --target qemu-arm64)):"
    nt = out[i + 1:-2]
    assert nt[0] == ("    host: this kernel (6.18.44-fc) has no KVM_CAP_GUEST_MEMFD; guest_memfd ran in QEMU "
                     "instead")
    assert ("    FFA_MEM_RECLAIM2: debian-7.3.4 and tf-a-2.12.1 do not implement it; to test a patch: --apply "
            "PATCH (ours: targets/el2/reclaim2/reclaim2-reference.patch) (200 scenario(s), 15 FFA.R2.* rules)"
            in nt), nt
    assert any(x.startswith("    guest_memfd write(): 7.3.4+deb13-amd64 does not implement it") for x in nt)
    assert any(x.startswith("    64K pages: not among the default page sizes (4K, 16K): --target el2 --page-size 64K") for x in nt)
    last = out[-1]
    assert "tested guest_memfd on qemu; FF-A on el2, spmc" in last
    assert "not tested: host, guest_memfd write(), 64K pages, FFA_MEM_RECLAIM2;" in last
    assert last.endswith("report: reports/out/20261206-000331")


def test_an_abi_no_target_ran_is_named():
    run = target_run("el2", "debian-7.3.4-4k", "ffa-4k", 4096, FFA)
    out = summary.lines([run], RULES, [], not_run=[summary.NotRun("host", "/dev/kvm: No such file")],
                        report_dir="r", abis_wanted=["gmem", "ffa"])
    assert "    guest_memfd: no target of this run could test it" in out
    assert "not tested: host, guest_memfd;" in out[-1]


def test_host_without_guest_memfd_is_replaced_by_qemu():
    caps = {"KVM_CAP_GUEST_MEMFD": 0, "vm0.KVM_CAP_GUEST_MEMFD": 0, "KVM_CAP_USER_MEMORY2": 1}
    assert not run_cmd.host_tests_gmem({"caps": caps})
    assert run_cmd.host_tests_gmem({"caps": dict(caps, **{"vm0.KVM_CAP_GUEST_MEMFD": 1})})


def test_run_flags_of_the_summary_exist():
    args = cli.build_parser().parse_args(["run", "--show-baselined", "-v", "--strict"])
    assert args.show_baselined and args.verbose and args.strict
    assert cli.build_parser().parse_args(["rules", "--abi", "ffa"]).abi == "ffa"


def test_rules_abi_ffa_lists_only_ffa_rules():
    r = kconform("rules", "--abi", "ffa", "--format", "json")
    assert r.returncode == 0, r.stderr
    rules = json.loads(r.stdout)
    assert rules and {x["abi"] for x in rules} == {"ffa"} and all(x["id"].startswith("FFA.") for x in rules)


def test_a_default_target_that_cannot_run_is_named_and_with_strict_exit_2(tmp_path):
    """el2 cannot build a tree that does not exist: a default run says so under 'not
    tested' and still runs spmc; with KCONFORM_CI=1 (or --strict) it exits 2."""
    args = ["run", "--tree", str(tmp_path / "no-such-tree"), "corpora/ffa/smoke.kcs", "-q"]
    lenient = {k: v for k, v in os.environ.items() if k != "KCONFORM_CI"}  # CI sets it
    r = subprocess.run([str(REPO / "kconform"), *args, "--report-dir", str(tmp_path / "a")], cwd=REPO,
                       capture_output=True, text=True, env=lenient, timeout=600)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    lines = r.stdout.splitlines()
    nt = lines[next(i for i, x in enumerate(lines) if x.startswith("not tested")) + 1:]
    assert nt[0].startswith("    el2: ") and "no-such-tree" in nt[0], r.stdout
    assert re.search(r"tested FF-A on spmc; not tested: el2", lines[-1]), lines[-1]
    (doc,) = [json.loads(f.read_text()) for f in (tmp_path / "a").rglob("report.json")]
    assert [n["target"] for n in doc["not_run"]] == ["el2"] and "no-such-tree" in doc["not_run"][0]["why"]
    env = dict(os.environ, KCONFORM_CI="1")
    r = subprocess.run([str(REPO / "kconform"), *args, "--report-dir", str(tmp_path / "b")], cwd=REPO,
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--strict (or KCONFORM_CI=1): a default target could not run: el2: " in r.stderr
    r = subprocess.run([str(REPO / "kconform"), *args, "--strict", "--report-dir", str(tmp_path / "c")],
                       cwd=REPO, capture_output=True, text=True, env=lenient, timeout=600)
    assert r.returncode == 2 and "a default target could not run: el2" in r.stderr


RECLAIM2_ON_STOCK = reclaim2_on_stock("summary/reclaim2-on-stock")


def test_a_rerun_command_copied_from_a_non_terminal_log_runs_as_is(tmp_path):
    """The log of a run whose stdout is a pipe, with a report folder deep enough that
    every re-run command is longer than the 132 columns logs were once wrapped at:
    each re-run line is whole, and its command, run as it stands (the default
    baseline then accepts the finding), reproduces the finding."""
    import shutil
    deep = tmp_path / ("a-report-folder-whose-name-is-long-enough-to-push-every-path-past-the-old-"
                       "132-column-wrap-" * 2)
    f = tmp_path / "finding.kcs"
    f.write_text(RECLAIM2_ON_STOCK)
    empty = tmp_path / "baseline.json"
    empty.write_text('{"format": 1, "findings": []}\n')
    r = kconform("run", "--target", "el2", "--page-size", "4K", "--baseline", str(empty), "--report-dir",
                 str(deep), str(f), timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr
    reruns = [ln.split("re-run:", 1)[1].strip() for ln in r.stdout.splitlines() if ln.strip().startswith("re-run:")]
    assert reruns and all(len(c) > 132 for c in reruns), r.stdout
    cmd = reruns[0]
    argv = shlex.split(cmd)
    assert argv[:2] == ["./kconform", "run"] and Path(argv[-1]).is_file(), cmd
    again = subprocess.run(cmd, shell=True, cwd=REPO, capture_output=True, text=True, timeout=900)
    last = again.stdout.splitlines()[-1] if again.stdout else ""
    folder = last.rsplit("report: ", 1)[-1]
    if folder and (REPO / folder).is_dir() and (REPO / folder).parent == REPO / "reports" / "out":
        shutil.rmtree(REPO / folder)
    # The default baseline applies now: the finding is new again (exit 1) or, if an entry
    # covers it, baselined (exit 0); either way the same rule on the same build.
    assert again.returncode in (0, 1), again.stdout + again.stderr
    out = again.stdout.splitlines()
    assert (any(ln.startswith("FAIL violation FFA.R2.NOT_IMPLEMENTED on el2 debian-7.3.4-4k in summary/") for ln in out)
            or any(re.match(r"\s+1  FFA\.R2\.NOT_IMPLEMENTED\s.*, el2$", ln) for ln in out)), again.stdout
