"""The kconform command line: subcommands, --help, exit codes, and the one place
where every error ends: a one-line message and exit 2 (the traceback only with
KCONFORM_DEBUG=1), or, on SIGINT/SIGTERM/SIGHUP, every child ended and 128 + the
signal number.

Exit status of every subcommand: 0 clean, 1 violations found, 2 kconform
itself could not run (bad input, missing dependency, build failure, an
operating-system error), 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from rich.console import Console

from kconform import __version__
from kconform.core import procs
from kconform.core.errors import EXIT_TOOL_ERROR, Interrupted, ToolError, os_error_message, printable
from kconform.core.paths import INCOMPLETE, close_report_dirs

DEBUG_VARIABLE = "KCONFORM_DEBUG"

DESCRIPTION = """\
kconform: differential conformance and fuzz testing of hypervisor memory ABIs
(guest_memfd write() population; FF-A FFA_MEM_RECLAIM2 through pKVM's EL2 proxy).

A reference model of each ABI, written from the specification, judges every
operation a real target performs. Findings are reported by rule ID.
"""

EXIT_STATUS = """\
exit status: 0 clean, 1 violations found, 2 kconform could not run (bad input,
missing dependency, build failure, an operating-system error: one line naming the
path and the reason; KCONFORM_DEBUG=1 adds the traceback), 128 + the signal
(130 SIGINT, 143 SIGTERM, 129 SIGHUP) when interrupted: every child process (QEMU,
fuzzers, builds, kconform-runner) is ended within a few seconds and the report
folder keeps what it had, marked by a file INCOMPLETE ("status": "interrupted";
"incomplete" after an error).
"""

RUN_EPILOG = """\
examples:
  ./kconform run                         the default targets, their ABIs' corpora (directed + Z3)
  ./kconform run --target el2 --tree ~/linux --apply my.patch
                                         your tree's ffa.c, with a patch, at 4K and 16K
  ./kconform run --target qemu --build --tree ~/linux
                                         a kernel built from your tree, booted in QEMU
  ./kconform run --format ktap           KTAP on stdout (kernel CI)
  ./kconform run corpora/gmem/write.kcs  one file
  ./kconform run -v                      also every per-rule table and baselined finding
  ./kconform run --fault wrong-errno:write
                                         self-test: a target that lies must be caught

output (--format table, the default): one line per target run; per ABI the rules
exercised; every new finding in full with its reproducer and re-run command;
baselined findings one line per rule with a count (--show-baselined: in full);
what was not tested and why; the verdict last. Lines are never wrapped.

--fault KIND:OP[:NTH] (targets host and el2): the target lies about OP's results
(targets/faulty/faulty_target.h lists the kinds and the ops each applies to; one
that does not apply to the target's ABI exits 2). The run is then judged by the
lie: the same scenarios also run without it, and the summary and exit status say
  1  detected: the lie fired and caused a violation the clean run does not have
  0  not detected: it fired, but no violation beyond the clean run's
  2  never fired: it changed no outcome, so nothing was tested
(fault.json in the report folder; every cell: ./kconform selftest faults).
"""

INTERRUPTED_EPILOG = """
interrupted (SIGINT, SIGTERM, SIGHUP): children ended, the report folder marked
INCOMPLETE with what it had, exit 130, 143 or 129 (128 + the signal).
"""


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run scenarios on targets and judge them against the models",
                       description="Run scenarios on the default targets (or those given with --target), judge\n"
                                   "each op against the reference model, apply the baseline of known findings and\n"
                                   "write a report folder (report.html, .json, .ktap, .junit.xml, the findings'\n"
                                   "reproducers). Without --target:\n"
                                   "  host  the running kernel's guest_memfd; where it has none (or there is no\n"
                                   "        /dev/kvm), guest_memfd runs in QEMU on Debian's 7.3 kernel (TCG)\n"
                                   "        instead, and the output says so\n"
                                   "  el2   pKVM's ffa.c of Debian 7.3 (or --tree, --apply) at 4K and 16K\n"
                                   "  spmc  TF-A's EL3 SPMC (Debian's 2.12.1) at 4K and 16K\n"
                                   "A default target that cannot run is named under 'not tested' (with --strict\n"
                                   "or KCONFORM_CI=1: exit 2).",
                       epilog=RUN_EPILOG + INTERRUPTED_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenarios", nargs="*",
                   help="scenario files or folders (default: each target's ABI's corpora, corpora/<abi> and "
                        "corpora/z3/<abi>: gmem for host and qemu, ffa for el2, spmc and qemu-arm64)")
    p.add_argument("--target", action="append", metavar="NAME",
                   help="run only this target (repeatable; known: host = the running kernel's "
                        "guest_memfd, el2 = pKVM's ffa.c from a kernel tree compiled for this machine, "
                        "qemu = guest_memfd of Debian's 7.3 kernel booted in QEMU; by default only in "
                        "place of a host without guest_memfd; "
                        "spmc = FF-A straight into a real SPMC compiled for this machine, see --spmc; "
                        "qemu-arm64 = FF-A from the host of Debian's arm64 7.3 kernel through real pKVM and "
                        "TF-A's EL3 SPMC in QEMU, 4K, not run by default)")
    p.add_argument("--spmc", choices=("tf-a", "op-tee"), default="tf-a",
                   help="spmc: which SPMC implementation (tf-a: TF-A's EL3 SPMC from the TF-A tree "
                        "./kconform build fetched, debian-src:arm-trusted-firmware, or its --spmc-tree; "
                        "op-tee: OP-TEE's S-EL1 SPMC behind a stand-in of TF-A's SPMD, from "
                        "debian-src:optee-os, which ./kconform build fetches when it can)")
    p.add_argument("--el3", choices=("model", "tf-a"), default="model",
                   help="el2: what answers ffa.c's SMCs (model: the FF-A model's SPMC, the default; "
                        "tf-a: TF-A's EL3 SPMC from debian-src:arm-trusted-firmware, built into the "
                        "el2 runner; the model then judges the whole path with a real EL3)")
    p.add_argument("--kernel", metavar="PATH",
                   help="qemu: boot this bzImage (KVM built in) instead of Debian's 7.3 kernel "
                        "(target qemu runs the gmem suite inside a kernel booted in QEMU; "
                        "only with --target qemu)")
    p.add_argument("--accel", choices=("tcg", "kvm"), default="tcg",
                   help="qemu: accelerator (default tcg with emulated SVM; kvm where nested KVM works)")
    p.add_argument("--tree", metavar="SPEC|PATH",
                   help="el2: the kernel tree whose ffa.c is tested: debian:7.3 (default), debian:7.2, "
                        "debian:6.12, or a local tree (yours, with your patches); qemu with --build: "
                        "the full tree to build a kernel from (debian:7.3 or a path)")
    p.add_argument("--build", action="store_true",
                   help="qemu: build a small KVM kernel (targets/qemu/kernel.config) from --tree "
                        "(default debian:7.3) with --apply's patch, incrementally, and boot it; "
                        "qemu-arm64: the same for arm64 (targets/qemu_arm64/kernel.config, cross-built, "
                        "at each --page-size, our kcffa module built against it)")
    p.add_argument("--arch", choices=("x86_64", "arm64"),
                   help="with --build: the kernel's architecture; x86_64 for target qemu, arm64 for "
                        "qemu-arm64 (each target's own; a different one is an error)")
    p.add_argument("--page-size", action="append", metavar="SIZE",
                   help="el2, spmc: host PAGE_SIZE of the build (el2) or of the scenarios (spmc), 4K, 16K "
                        "or 64K (repeatable; default 4K and 16K)")
    p.add_argument("--apply", metavar="PATCH",
                   help="el2: apply this patch to a copy of the tree first (e.g. the suite's RECLAIM2 "
                        "reference implementation, targets/el2/reclaim2/reclaim2-reference.patch); "
                        "qemu, qemu-arm64 with --build: patch the kernel (targets/qemu/write/gmem-write-reference.patch, "
                        "targets/el2/reclaim2/reclaim2-reference.patch)")
    p.add_argument("--asan", action="store_true",
                   help="el2: build the handler with ASan and the kernel's arm64 UBSan checks (a memory error "
                        "in kernel code is a finding; the run resumes with the next scenario)")
    p.add_argument("--watchdog", type=float, metavar="SECONDS", default=None,
                   help="el2, spmc: an op still running after SECONDS is a hang finding (CRASH.HANG) and the run "
                        "resumes with the next scenario (default 5; 0: no watchdog)")
    p.add_argument("--format", choices=("table", "json", "ktap", "junit", "html"), default="table",
                   help="what to print: the summary (table, the default: one line per target run, rules "
                        "exercised per ABI, every new finding in full, baselined findings one line per rule, "
                        "what was not tested and why; -v adds each run's per-rule table), a machine-readable "
                        "report, or the self-contained HTML report (every run writes every format to its folder)")
    p.add_argument("--show-baselined", action="store_true",
                   help="table: also every baselined finding in full (expected, observed, the baseline's "
                        "reason, re-run command); without it one line per rule with a count")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="table: each target run's per-rule table and every baselined finding in full")
    p.add_argument("--strict", action="store_true",
                   help="a default target that cannot run is an error (exit 2), not a line under 'not "
                        "tested' (KCONFORM_CI=1 sets it); host without guest_memfd is not one of them when "
                        "QEMU tests guest_memfd in its place")
    p.add_argument("--output", metavar="FILE", help="write the --format report to FILE instead of stdout")
    p.add_argument("--triage-budget", type=float, metavar="SECONDS",
                   default=float(os.environ.get("KCONFORM_TRIAGE_BUDGET", "30") or 0),
                   help="minimise each new finding (host, el2) within this many seconds in all, writing "
                        "<reproducer>.min.kcs beside it (kconform triage; default 30, or "
                        "$KCONFORM_TRIAGE_BUDGET; 0: off)")
    p.add_argument("--baseline", metavar="FILE", default=None,
                   help="the reviewed known findings (default: ci/known-findings.json)")
    p.add_argument("--report-dir", metavar="DIR",
                   help="where to make this run's report folder (default: reports/out)")
    p.add_argument("--fault", metavar="SPEC", default="",
                   help="self-test: wrap the target (host, el2) so it gives wrong answers "
                        "(wrong-errno:OP, succeed:OP, fail:OP; gmem wrong-content:OP, wrong-page:OP, wrong-count:OP; FF-A "
                        "wrong-reg:OP, wrong-state:OP); exit 1 detected, 0 not detected, 2 never fired (below)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _add_bench(p) -> None:
    from kconform.commands.bench import DEFAULT_SELECTORS, SELECTORS
    from kconform.selftest.mutant_ttf import FAMILIES, NIGHTLY, SLICE, SLICE_MUTANTS, START_CORPORA
    p.add_argument("--repetitions", type=int, default=5, metavar="N", help="runs per benchmark (median; default 5)")
    p.add_argument("--output", metavar="FILE", help="JSON file (default: reports/bench/<time>.json)")
    p.add_argument("--only", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], metavar="NAME,NAME",
                   help=f"only these benchmarks ({', '.join(SELECTORS)}; default: {', '.join(DEFAULT_SELECTORS)})")
    csv = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    p.add_argument("--mutants", type=csv, metavar="NN,NN",
                   help="mutant-ttf: these mutants (NN or name in each --mutant-family, or family:NN; default: "
                        f"the slice {','.join(SLICE_MUTANTS)}, or every mutant of the families given)")
    p.add_argument("--mutant-family", type=csv, metavar="F,F",
                   help=f"mutant-ttf: families ({', '.join(FAMILIES)}; default both)")
    p.add_argument("--mutant-corpus", type=csv, metavar="C,C",
                   help=f"mutant-ttf: start corpora ({', '.join(START_CORPORA)}; default seeds, --nightly both)")
    p.add_argument("--mutant-budget", type=int, default=None, metavar="S",
                   help=f"mutant-ttf: seconds of fuzzing per run (default {SLICE['budget']}, --nightly "
                        f"{NIGHTLY['budget']})")
    p.add_argument("--mutant-runs", type=int, default=None, metavar="N",
                   help=f"mutant-ttf: runs per mutant and start corpus, seeds 101.. (median; default "
                        f"{SLICE['runs']}, --nightly {NIGHTLY['runs']})")
    p.add_argument("--nightly", action="store_true",
                   help="mutant-ttf: the full matrix (every mutant of both families, both start corpora, "
                        f"{NIGHTLY['runs']} runs of {NIGHTLY['budget']} s); explicit flags still apply")
    p.add_argument("--fuzz-time", default="60s", metavar="T",
                   help="fuzz-el2: how long `kconform fuzz` runs (default 60s; the issue's figure is 10m)")
    p.add_argument("--fuzz-jobs", type=int, default=1, metavar="N", help="fuzz-el2: its --jobs (default 1)")
    p.add_argument("--fuzz-sanitizers", default="none", choices=("asan", "none"),
                   help="fuzz-el2: its --sanitizers (default none: the issue's figure is the plain build's; "
                        "asan for the ASan+UBSan build `kconform fuzz` uses by default)")


def _add_bisect_ci(sub) -> None:
    p = sub.add_parser("bisect", help="the first commit (or Debian series) where a finding appears or disappears",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="FINDING is a scenario file (a reproducer `run` saved in <report>/findings). "
                                   "Both ends are run first: the finding's signatures (kind, rules, op kind) at "
                                   "one end and not the other are what is bisected. With a git tree, "
                                   "`git bisect run` (in a private linked worktree, --no-checkout: your checkout "
                                   "is never touched) builds and runs the finding at each commit it picks "
                                   "(EL2: that commit's ffa.c, rebuilt by content); a commit that does not "
                                   "build is skipped. With a Debian range, each series in version order.",
                       epilog="examples:\n"
                              "  ./kconform bisect finding.kcs --tree debian:6.12..debian:7.3\n"
                              "  ./kconform bisect finding.kcs --tree ~/linux --good v7.2 --bad HEAD\n"
                              "  ./kconform bisect finding.kcs --tree ~/linux --good A --bad B --target qemu\n"
                              "\nexit status: 1 the commit that introduced the finding was named, 0 the commit "
                              "that fixed it\n(present at --good, gone at --bad) was named, 2 kconform could "
                              "not say (ends alike,\nonly skipped commits left, bad input)." + INTERRUPTED_EPILOG)
    p.add_argument("findings", nargs="*", metavar="FINDING", help="scenario files (text or binary)")
    p.add_argument("--tree", metavar="RANGE|PATH",
                   help="debian:A..debian:B (series kconform knows, in version order) or a git tree")
    p.add_argument("--good", metavar="REV", help="git tree: the old end (where the finding's state is the old one)")
    p.add_argument("--bad", metavar="REV", help="git tree: the new end")
    p.add_argument("--target", default="el2", metavar="el2|qemu",
                   help="el2 (default): the tree's ffa.c in process; qemu: a small kernel built from the "
                        "tree (run --target qemu --build; minutes per cold build)")
    p.add_argument("--page-size", action="append", metavar="SIZE", help="el2: host PAGE_SIZE (repeatable; default 4K)")
    p.add_argument("--apply", metavar="PATCH", help="apply this patch to every revision first")
    p.add_argument("--signature", metavar="TEXT",
                   help="bisect only the signatures (or scenarios) containing TEXT, e.g. a rule ID")
    p.add_argument("--watchdog", type=float, default=2.0, metavar="SECONDS",
                   help="el2: an op running longer is a hang finding (default 2; 0 off)")
    p.add_argument("--out", metavar="DIR", help="where to make the report folder (default: reports/bisect)")
    p.add_argument("--step", metavar="PLAN", help=argparse.SUPPRESS)  # what git bisect run calls

    p = sub.add_parser("ci", help="a pull request's check for a kernel tree: findings the head introduces over the base",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Runs every applicable target on both revisions of a git tree (EL2 when the "
                                   "tree has ffa.c; QEMU when virt/kvm/guest_memfd.c differs), compares their "
                                   "findings by (target and page size, scenario, signature) and fails only on "
                                   "findings the head introduces; then a bounded fuzz run seeded with --corpus. "
                                   "Writes ci-summary.md (for a PR comment), ci.json, report.html and the "
                                   "head's reproducers to the report folder. Templates for GitHub Actions, "
                                   "GitLab CI and KernelCI: ci/templates.",
                       epilog="examples:\n"
                              "  ./kconform ci --tree ~/linux --base origin/master --head HEAD\n"
                              "  ./kconform ci --tree . --base $BASE --fuzz-time 0 --page-size 4K\n"
                              "\nexit status: 0 no finding introduced, 1 a finding introduced (named), "
                              "2 kconform could not run." + INTERRUPTED_EPILOG)
    p.add_argument("--tree", metavar="PATH", help="the kernel tree (a git folder)")
    p.add_argument("--base", metavar="REV", help="the revision the change is judged against")
    p.add_argument("--head", metavar="REV", help="the revision judged (default HEAD)")
    p.add_argument("--target", action="append", metavar="el2|qemu",
                   help="only these targets (repeatable; default: every one the tree and change call for)")
    p.add_argument("--page-size", action="append", metavar="SIZE", help="el2: host PAGE_SIZE (repeatable; default 4K and 16K)")
    p.add_argument("--watchdog", type=float, default=2.0, metavar="SECONDS",
                   help="el2: an op running longer is a hang finding (default 2; 0 off)")
    p.add_argument("--fuzz-time", default="60s", metavar="DURATION",
                   help="the bounded fuzz run after the comparison (kconform fuzz, el2 4K; default 60s; 0: off)")
    p.add_argument("--corpus", metavar="DIR", help="seed the fuzz run with this corpus (e.g. the base's, cached)")
    p.add_argument("--fuzz-grace", type=int, default=1200, metavar="SECONDS",
                   help="the fuzz run is ended after --fuzz-time plus this (its build, seeding, merging; "
                        "default 1200)")
    p.add_argument("--out", metavar="DIR", help="where to make the report folder (default: reports/ci)")
    p.add_argument("--summary", metavar="FILE",
                   help="also append the summary to FILE (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kconform", description=DESCRIPTION, epilog=EXIT_STATUS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kconform {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)

    p = sub.add_parser("rules", help="list every rule with its ID and citation",
                       description="Every rule of the reference models: its ID (stable: findings, the baseline "
                                   "and reports name rules by it), statement and citation (a clause of "
                                   "models/<abi>/SPEC.md). --abi ffa or gmem: one ABI's rules only.")
    p.add_argument("--abi", choices=("ffa", "gmem"), help="only this ABI's rules (ffa: FF-A; gmem: guest_memfd)")
    p.add_argument("--format", choices=("table", "json"), default="table")

    sub.add_parser("doctor", help="compilers, /dev/kvm, capabilities, QEMU, cached kernels: one table",
                   description="One table of what kconform needs and found: compilers, Debian packages, "
                               "/dev/kvm and the guest_memfd capabilities the host target probes (without "
                               "KVM_CAP_GUEST_MEMFD a run without --target tests guest_memfd in QEMU instead), "
                               "QEMU, the cached kernel trees, kernels and firmware.")

    p = sub.add_parser("qemu-arm64", help="the arm64 stack in QEMU (TF-A's EL3 SPMC, pKVM protected mode): "
                                          "boot it once and say whether it came up",
                       description="check: build (cached) TF-A 2.12.1 with the SPMC at EL3 and our secure "
                                   "partition, fetch Debian's arm64 7.3 kernel, boot both under "
                                   "qemu-system-aarch64 (TCG) and print whether pKVM came up in protected "
                                   "mode, the FF-A version the kernel's driver found and the boot time. "
                                   "Exit 0 it came up, 1 it came up wrong, 2 it could not run.")
    qsub = p.add_subparsers(dest="qemu_arm64_command", metavar="ACTION", required=True)
    c = qsub.add_parser("check", help="boot the stack once and check it came up")
    c.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS",
                   help="QEMU start to the end of the boot (default 180)")
    c.add_argument("--out", metavar="DIR", help="report root (default reports/qemu-arm64); "
                                                "each check writes a new folder in it")

    p = sub.add_parser("test", help="the project's test suite (GoogleTest in plain and ASan builds, pytest)",
                       description="The project's test suite: GoogleTest in the plain and ASan+UBSan builds, "
                                   "the RECLAIM2 reference handler's tests (Debian 7.3 + our patch), then "
                                   "pytest. Exit 1 when a runner exits non-zero, writes no JUnit file, runs "
                                   "fewer tests than it collected, when a *_test.cc of the tree is not built "
                                   "into a program ctest runs, or (KCONFORM_CI=1) when a test skips for a "
                                   "reason the machine does not explain (no /dev/kvm, the running kernel, "
                                   "nightly: harness/driver/kconform/core/skips.py). The last line counts "
                                   "skips by reason.")
    p.add_argument("--no-asan", action="store_true", help="skip the ASan+UBSan build")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments after --")

    p = sub.add_parser("build", help="build the C++ engine (incremental)")
    p.add_argument("--preset", choices=("default", "asan"), default="default")
    p.add_argument("--spmc-tree", metavar="SPEC|PATH",
                   help="targets/spmc: the TF-A tree, your checkout (PATH) or "
                        "debian-src:arm-trusted-firmware (the default, fetched on first use); later "
                        "builds of the preset keep the one given")

    p = sub.add_parser("tree", help="fetch a Debian kernel (or TF-A) tree into the cache, or check a local one",
                       description="Kernel trees hold the kernel code kconform compiles and reads "
                                   "(never stored in this repository). fetch: download Debian's "
                                   "linux-source package through a private apt state and extract only "
                                   "the needed files, or (debian-src:arm-trusted-firmware) Debian's TF-A "
                                   "source package, unpacked with dpkg-source -x, for targets/spmc; "
                                   "check: see that a local tree (kernel or TF-A) has them; list: "
                                   "the cached trees; patch: a patched copy of a kernel tree.")
    tsub = p.add_subparsers(dest="tree_command", metavar="ACTION", required=True)
    c = tsub.add_parser("fetch", help="download debian:7.3, debian:7.2, debian:6.12 or "
                                      "debian-src:arm-trusted-firmware")
    c.add_argument("spec")
    c.add_argument("--refresh", action="store_true", help="look for a newer package version")
    c = tsub.add_parser("check", help="check a local tree (your own, with your patches; a kernel or a TF-A tree)")
    c.add_argument("path")
    tsub.add_parser("list", help="the trees in the cache")
    c = tsub.add_parser("patch", help="apply patches in order to a copy of a tree in the cache; print its path",
                        description="SPEC is debian:X.Y (fetched first) or a local tree; each PATCH is "
                                    "applied with patch -p1 to a copy of the one before, cached by content. "
                                    "Prints the patched tree's path, e.g. for "
                                    "cmake -DKCONFORM_KERNEL_TREE=$(./kconform tree patch debian:7.3 P).")
    c.add_argument("spec", metavar="SPEC|PATH")
    c.add_argument("patches", metavar="PATCH", nargs="+")

    p = sub.add_parser("gen", help="regenerate the Z3 edge cases (corpora/z3) from each ABI's conditions",
                       description="Encode each ABI's validity conditions as Z3 constraints "
                                   "(harness/gen) and write, per atomic condition, the cases that "
                                   "break it alone (or with the fewest others they must, named in the "
                                   "case) and its boundary cases (just inside, just outside, "
                                   "unsigned wrap-around) to corpora/z3/<abi>/*.kcs. Deterministic: "
                                   "the same conditions give the same files.")
    p.add_argument("--abi", choices=("gmem", "ffa", "all"), default="all")
    p.add_argument("--out", metavar="DIR", help="where to write (default: corpora/z3)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if the files differ from what would be written")
    p.add_argument("--format", choices=("table", "json"), default="table")

    p = sub.add_parser("fuzz", help="coverage-guided, structure-aware fuzzing with libFuzzer or AFL++",
                       description="Build the fuzz runner (harness/fuzz) for the engine, seed it with the "
                                   "directed suite and the Z3 cases, and fuzz the target with the oracle judging "
                                   "every op. Findings never stop the fuzzer: each is recorded under its "
                                   "signature (rule IDs + op kind + target build; for a crash of the process, "
                                   "which goes through the engine's crash path, the frames in the code under "
                                   "test), stored once under reports/fuzz/<target>/findings/ (never "
                                   "overwritten) and counted every time. Resumes from "
                                   "reports/fuzz/<target>/corpus, merges and minimises it at the end, and "
                                   "prints a summary (also on Ctrl-C/SIGTERM): executions, restarts, findings "
                                   "new/known per signature and where they are. "
                                   "A finding is stored unless `run` on that input would baseline it (same entries, release "
                                   "and scenario patterns); those are counted and recorded in known.log. "
                                   "Exit 1 if a new finding was stored.",
                       epilog="examples:\n  ./kconform fuzz --engine libfuzzer --target host --time 8h --jobs 2\n"
                              "  ./kconform fuzz --engine afl --target el2 --page-size 16K --time 1h\n"
                              "  ./kconform fuzz status reports/fuzz/host        # a running or finished campaign\n"
                              "  ./kconform fuzz status --json reports/fuzz\n"
                              + INTERRUPTED_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", choices=("libfuzzer", "afl"), default="libfuzzer")
    p.add_argument("--target", choices=("host", "el2", "spmc"), default="host",
                   help="host = the running kernel's guest_memfd; el2 = pKVM's ffa.c in process (debian:7.3); "
                        "spmc = TF-A's EL3 SPMC straight from the Normal world")
    p.add_argument("--el3", choices=("model", "tf-a"), default="model",
                   help="el2: what answers ffa.c's SMCs (model, the default, or tf-a: TF-A's EL3 SPMC; "
                        "the campaign is reports/fuzz/el2-tfa-<size>)")
    p.add_argument("--page-size", default="4K", metavar="SIZE",
                   help="el2: host PAGE_SIZE of the build (4K, 16K or 64K); spmc: of the scenarios")
    p.add_argument("--time", default="10m", metavar="DURATION", help="how long to fuzz: 30s, 10m, 8h (default 10m)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel fuzzing processes (default 1)")
    p.add_argument("--max-len", type=int, default=8192, metavar="BYTES", help="largest input (default 8192)")
    p.add_argument("--known", action="append", metavar="RULE",
                   help="also treat this rule as baselined for this build, in any scenario, for this run (repeatable)")
    p.add_argument("--baseline", metavar="FILE", help="known findings (default: ci/known-findings.json)")
    p.add_argument("--out", metavar="DIR", help="instead of reports/fuzz: DIR/<target>/...")
    p.add_argument("--no-merge", action="store_true", help="skip merging and minimising the corpus at the end")
    p.add_argument("--sanitizers", choices=("asan", "none"), default="asan",
                   help="asan (default): ASan+UBSan catch memory errors in the code under test; none: "
                        "the oracle is the only crash condition, several times the executions per second "
                        "(presets fuzz-<engine> and fuzz-<engine>-plain)")
    p.add_argument("--rss-limit", type=int, default=2048, metavar="MB",
                   help="memory limit of each fuzzing process (libFuzzer -rss_limit_mb/-malloc_limit_mb; "
                        "AFL++: ASan's hard_rss_limit_mb; default 2048)")
    p.add_argument("--max-corpus", type=int, default=1024, metavar="MB",
                   help="minimise the corpus as soon as it passes this size (0: no limit; default 1024)")
    p.add_argument("--minimize-every", default="1h", metavar="DURATION",
                   help="minimise the corpus this often during the run (0: only at the end; default 1h)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    fsub = p.add_subparsers(dest="fuzz_command", metavar="[status DIR]", required=False)
    c = fsub.add_parser("status", help="a running or finished campaign: executions, exec/s, corpus, rule sides "
                                       "reached, findings new/known, time left, disk used, running or not",
                        description="The state of a fuzz campaign from its folder: running (its pid is "
                                    "alive), ended, or INCOMPLETE (its process is gone); executions, exec/s, "
                                    "corpus (files, bytes), rule sides reached (N of 2 x the ABI's rules), "
                                    "findings new/stored before/known per signature, time left, disk used.")
    c.add_argument("dir", metavar="DIR", help="the --out folder or reports/fuzz/<target>")
    c.add_argument("--json", action="store_true", help="machine-readable")

    p = sub.add_parser("bench", help="benchmarks (medians): EL2 differential, host guest_memfd, Z3 generation; opt-in: mutant-ttf, fuzz-el2, qemu, qemu-arm64")
    _add_bench(p)

    p = sub.add_parser("selftest", help="the suite's self-tests: kill the mutants of our reference implementations; "
                                       "catch a lying target (faults)",
                       description="mutants: per ABI, controls first, then every single-fault mutant of our\n"
                                   "own reference implementation; the suite must kill each one.\n"
                                   "  ffa   stock debian:7.3 fails FFA.R2.NOT_IMPLEMENTED, the reference RECLAIM2\n"
                                   "        handler runs clean; each mutant in targets/el2/reclaim2/mutants is\n"
                                   "        built at 4K and 16K and runs the RECLAIM2 suite in-process.\n"
                                   "  ffa   (family stock) each single-line mutant of stock 7.3 ffa.c in\n"
                                   "        targets/el2/stock-mutants runs the directed and Z3 FF-A corpora at\n"
                                   "        4K and 16K; killed by a finding the stock tree does not have.\n"
                                   "  ffa   (family generated, only when named) every condition and bound\n"
                                   "        check of --tree's ffa.c mutated from its AST (negated, a clause\n"
                                   "        dropped, a bound moved, an exit or error dropped, an error code\n"
                                   "        swapped), judged like stock; survivors reviewed in\n"
                                   "        targets/el2/generated-mutants/survivors.json; prints the score.\n"
                                   "  gmem  Debian's 7.3 kernel reports the base profile, the reference write()\n"
                                   "        patch built into a kernel passes every write rule; each mutant in\n"
                                   "        targets/qemu/write/mutants is built, booted in QEMU and runs the\n"
                                   "        guest_memfd suite.\n"
                                   "Prints the kill matrices and writes reports/out/<time>/kill-matrix.json.\n"
                                   "Exit 0 all killed, 1 a mutant survived, 2 a control failed or a mutant\n"
                                   "could not be built or run.\n"
                                   "faults: the oracle's self-test. Every fault KIND:OP that applies to the ABI of\n"
                                   "host and el2 (debian:7.3, 4K) runs the target's default corpora on the same\n"
                                   "build with and without the lie; a fault passes only if it fired (changed an\n"
                                   "outcome) and caused a violation the clean run does not have. 'never fired'\n"
                                   "and 'not detected' are reported apart; either passes only as a known blind\n"
                                   "spot (targets/faulty/blind_spots.json, with its reason). Prints the matrix,\n"
                                   "writes reports/out/<time>/fault-matrix.json. Exit 0 every fault detected or a\n"
                                   "known blind spot, 1 one is not, 2 the self-test could not run.",
                       epilog="examples:\n  ./kconform selftest mutants                  both ABIs, both ffa families (~16 min warm)\n"
                              "  ./kconform selftest mutants --abi ffa --family reclaim2 --only 09,21\n"
                              "  ./kconform selftest mutants --abi ffa --family stock\n"
                              "  ./kconform selftest mutants --abi ffa --family generated --tree debian:6.12 --jobs 2\n"
                              "  ./kconform selftest mutants --abi ffa --family generated --only 'do_ffa_version.*'\n"
                              "  ./kconform selftest mutants --abi gmem --only 04\n"
                              "  ./kconform selftest faults                   host and el2 (~1-2 min)\n"
                              "  ./kconform selftest faults --target el2 --only wrong-reg:version,fail:mem_share\n"
                              "  ./kconform selftest cost",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("selftest_command", choices=("mutants", "faults", "cost"), metavar="mutants|faults|cost",
                   help="mutants: the kill matrices; faults: the oracle's self-test against a lying target; "
                        "cost: SMC round trips of FFA_MEM_RECLAIM vs RECLAIM2 "
                        "through the real handler (targets/el2/reclaim2/COST.md)")
    p.add_argument("--target", choices=("host", "el2"),
                   help="faults: only this target (default: host and el2)")
    p.add_argument("--abi", choices=("ffa", "gmem", "all"), default="all",
                   help="mutants: whose mutants (ffa: RECLAIM2 at EL2; gmem: guest_memfd write() in QEMU; "
                        "default all)")
    p.add_argument("--family", choices=("reclaim2", "stock", "generated", "write", "all"), default="all",
                   help="mutants: which family of the ABI's mutants (ffa: reclaim2, our RECLAIM2 patch's, and "
                        "stock, single-line mutants of stock 7.3 ffa.c in targets/el2/stock-mutants; "
                        "generated, every condition and bound check of a tree's ffa.c mutated by libclang "
                        "(targets/el2/generated-mutants), run only when named; gmem: write; default all)")
    p.add_argument("--tree", metavar="SPEC|PATH",
                   help="mutants --family generated: the kernel tree whose ffa.c is mutated (debian:7.3, the "
                        "default, debian:7.2, debian:6.12, or a path)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="mutants --family generated: mutants run side by side (builds take turns; "
                        "default min(2, CPUs))")
    p.add_argument("--only", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], metavar="NN,NN",
                   help="mutants: only these mutants (numbers or names; with --abi ffa or gmem); "
                        "faults: only these faults (KIND:OP or KIND:OP:NTH, comma-separated)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--report-dir", metavar="DIR", help="where to make the report folder (default: reports/out)")
    p.add_argument("--output", metavar="FILE", help="cost: JSON file (default: targets/el2/reclaim2/cost.json)")

    p = sub.add_parser("triage", help="reproduce, minimise, explain and group findings",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Each FINDING is a scenario file (a reproducer `run` saved in <report>/findings, "
                                   "a finding `fuzz` stored, .kcs or .kcsb). Every distinct signature it shows on the "
                                   "target (kind, rules violated at one op, that op's kind) is reproduced --runs times "
                                   "(deterministic or not), minimised by delta debugging over the scenario's structure "
                                   "(fewest ops, then arguments left out or made smaller, keeping the signature; "
                                   "bounded by --budget), explained (each rule's statement, citation and SPEC.md clause "
                                   "quoted, expected against observed, the model's note) and recorded in the triage "
                                   "index, which groups signatures across runs and campaigns with counts and first/last "
                                   "seen. The minimised reproducer is written to the report folder; the input is never "
                                   "changed.",
                       epilog="examples:\n"
                              "  ./kconform triage reports/out/<run>/findings/*.kcs\n"
                              "  ./kconform triage --target el2 --tree debian:7.2 --page-size 16K finding.kcs\n"
                              "  ./kconform triage --target qemu --budget 600 reports/out/<run>/findings/x.kcs\n"
                              "\nexit status: 0 nothing reproduced, 1 a finding reproduced, 2 kconform could not run")
    p.add_argument("findings", nargs="+", metavar="FINDING", help="scenario files (text or binary)")
    p.add_argument("--target", choices=("host", "el2", "qemu"),
                   help="where to run them (default: el2 for FF-A scenarios, host for guest_memfd)")
    p.add_argument("--tree", metavar="SPEC|PATH", help="el2 (and qemu --build): the kernel tree, as for run")
    p.add_argument("--apply", metavar="PATCH", help="apply this patch to the tree first, as for run")
    p.add_argument("--page-size", metavar="SIZE", help="el2: the host PAGE_SIZE (default 4K)")
    p.add_argument("--asan", action="store_true", help="el2: the ASan+UBSan build")
    p.add_argument("--kernel", metavar="PATH", help="qemu: boot this kernel")
    p.add_argument("--build", action="store_true", help="qemu: build the kernel from --tree (+ --apply)")
    p.add_argument("--accel", choices=("tcg", "kvm"), default="tcg", help="qemu: accelerator (default tcg)")
    p.add_argument("--runs", type=int, default=3, metavar="N", help="reproduce each signature N times (default 3)")
    p.add_argument("--budget", type=float, default=120.0, metavar="SECONDS",
                   help="minimising time per signature (default 120)")
    p.add_argument("--max-runs", type=int, default=2000, metavar="N",
                   help="at most N candidate runs per signature while minimising (default 2000)")
    p.add_argument("--signature", metavar="TEXT", help="only signatures containing TEXT (e.g. a rule ID)")
    p.add_argument("--no-lines", action="store_true",
                   help="el2: skip listing the lines of ffa.c the diverging op executed (needs a coverage build)")
    p.add_argument("--out", metavar="DIR", help="where to make the report folder (default: reports/triage)")
    p.add_argument("--index", metavar="FILE", help="the triage index (default: reports/triage/index.json)")
    p.add_argument("--format", choices=("table", "json"), default="table")

    p = sub.add_parser("coverage", help="line/branch coverage of the tree's ffa.c by each corpus",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Builds the EL2 runner of the tree with clang's source-based coverage "
                                   "(build/el2/<tree>-cov) and runs each corpus through it: the directed suite "
                                   "(corpora/ffa), the Z3 cases (corpora/z3/ffa) and the fuzz corpus "
                                   "(reports/fuzz/el2/corpus), each separately and then together. Prints line, "
                                   "branch and function coverage of arch/arm64/kvm/hyp/nvhe/ffa.c (with --apply, "
                                   "the patched ffa.c, e.g. our RECLAIM2 implementation), the functions never "
                                   "reached and the branch sides never taken; coverage.json in the report folder.",
                       epilog="examples:\n"
                              "  ./kconform coverage --target el2\n"
                              "  ./kconform coverage --target el2 --apply targets/el2/reclaim2/reclaim2.patch --html\n"
                              "  ./kconform coverage --target el2 --corpus directed --corpus mine=path/to/dir")
    p.add_argument("--target", choices=("el2",), default="el2", help="the target (el2: the tree's ffa.c)")
    p.add_argument("--tree", metavar="SPEC|PATH", help="the kernel tree (default debian:7.3)")
    p.add_argument("--apply", metavar="PATCH", help="apply this patch to the tree first")
    p.add_argument("--page-size", default="4K", metavar="SIZE", help="host PAGE_SIZE of the build (default 4K)")
    p.add_argument("--corpus", action="append", metavar="NAME|NAME=PATH[,PATH]",
                   help="a corpus to measure: directed, z3, fuzz, or a name for your own files/folders "
                        "(repeatable; default: directed, z3 and fuzz when it exists)")
    p.add_argument("--html", action="store_true", help="also llvm-cov's line-by-line HTML view of ffa.c")
    p.add_argument("--out", metavar="DIR", help="where to make the report folder (default: reports/coverage)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p = sub.add_parser("export", help="a finding as a standalone C reproducer, a kselftest, or an EL2 build",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="FINDING is a reproducer `run` saved (<report>/findings/*.kcs) or one `triage` "
                                   "minimised (*.min.kcs): its header names the op and the outcomes the model allows. "
                                   "--as c: one C file that needs only gcc and the kernel's uapi headers; it performs "
                                   "the guest_memfd scenario as the host target does, prints every op, the expected and "
                                   "the observed outcome, and exits 1 when the finding reproduces, 0 when the kernel "
                                   "behaves as expected, 4 when it lacks guest_memfd (kselftest codes). --as kselftest: "
                                   "one static test function in the shape of tools/testing/selftests/kvm/"
                                   "guest_memfd_test.c. --as el2 (FF-A findings): a folder with the scenario and a "
                                   "build.sh that builds the tree's ffa.c with kconform's stand-ins (CMake) and runs it.",
                       epilog="examples:\n"
                              "  ./kconform export --as c reports/out/<run>/findings/x.kcs -o repro.c\n"
                              "  gcc -O2 -o repro repro.c && ./repro\n"
                              "  ./kconform export --as kselftest x.min.kcs\n"
                              "  ./kconform export --as el2 reports/out/<run>/findings/y.kcs -o repro-el2 && "
                              "repro-el2/build.sh\n"
                              "  ./kconform export --as c x.kcs -o repro.c --qemu   (run it in a guest)\n"
                              "\nexit status: 0 written, 2 kconform could not export (no such file, not a finding, "
                              "an ABI or op --as cannot express)")
    p.add_argument("finding", metavar="FINDING", help="the finding's scenario file (text or binary)")
    p.add_argument("--as", dest="as_", choices=("c", "kselftest", "el2"), required=True,
                   help="c: standalone reproducer; kselftest: a test function; el2: an FF-A build folder")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="c, kselftest: the file to write (default stdout); el2: the folder to make (required)")
    p.add_argument("--tree", metavar="SPEC|PATH",
                   help="el2: the kernel tree (default: the one in the finding's re-run line, else debian:7.3)")
    p.add_argument("--page-size", metavar="SIZE",
                   help="el2: host PAGE_SIZE (default: the finding's, else 4K)")
    p.add_argument("--qemu", action="store_true",
                   help="c: also build it with gcc -static and run it inside a kernel booted in QEMU (Debian's "
                        "7.3, or --kernel), printing its output; the exit status is then the reproducer's "
                        "(0 as expected, 1 the finding reproduces; its skip, 4, exits 2)")
    p.add_argument("--kernel", metavar="PATH", help="with --qemu: boot this bzImage (KVM built in)")
    p.add_argument("--accel", choices=("tcg", "kvm"), default="tcg", help="with --qemu: accelerator (default tcg)")
    _add_bisect_ci(sub)

    p = sub.add_parser("baseline", help="the baseline of known findings: audit what each entry absorbs",
                       description="audit: per entry of the baseline (ci/known-findings.json), the findings "
                                   "and distinct scenarios it absorbed in the last run of each target build "
                                   "(the report folders kconform run wrote, reports/out by default); flags "
                                   "entries wider than what they absorbed (the narrowest patterns proposed), "
                                   "never hit in a run that could have hit them, of scenario '*' without "
                                   "kind limit, and whose reason quotes code (file.c:NNN) the cached trees "
                                   "do not hold there. Exit 1 on the last two (errors), or with --strict on "
                                   "any flag; 0 otherwise.")
    bsub = p.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    c = bsub.add_parser("audit", help="what each entry absorbed, and the entries to narrow, drop or fix")
    c.add_argument("--report-dir", metavar="DIR", action="append",
                   help="a report folder of kconform run, or a folder of them (repeatable; default reports/out)")
    c.add_argument("--baseline", metavar="FILE", help="the baseline (default: ci/known-findings.json)")
    c.add_argument("--format", choices=("table", "json"), default="table")
    c.add_argument("--strict", action="store_true",
                   help="never-hit and wider entries are errors too (exit 1)")
    c.add_argument("--trees", metavar="DIR",
                   help="the cached source trees code quotes are checked against (default ~/.cache/kconform/trees)")

    p = sub.add_parser("scenario", help="check or convert scenario files",
                       description="check: parse files and report the first malformed one; "
                                   "convert: text to binary (--to binary --out-dir DIR) or back (--to text)")
    ssub = p.add_subparsers(dest="scenario_command", metavar="ACTION", required=True)
    c = ssub.add_parser("check", help="parse scenario files")
    c.add_argument("files", nargs="+")
    c = ssub.add_parser("convert", help="convert between the text and binary forms")
    c.add_argument("--to", choices=("text", "binary"), required=True)
    c.add_argument("--out-dir", help="folder for binary files (files are never overwritten)")
    c.add_argument("files", nargs="+")
    return parser


# Subcommand -> (module, function), imported on use so that `--help` and light
# commands never import the heavier parts of the driver.
COMMANDS = {
    "run": ("kconform.commands.run", "cmd_run"),
    "rules": ("kconform.commands.rules", "cmd_rules"),
    "doctor": ("kconform.commands.doctor", "cmd_doctor"),
    "test": ("kconform.commands.test", "cmd_test"),
    "build": ("kconform.commands.build", "cmd_build"),
    "scenario": ("kconform.commands.scenario", "cmd_scenario"),
    "bench": ("kconform.commands.bench", "cmd_bench"),
    "fuzz": ("kconform.commands.fuzz", "cmd_fuzz"),
    "gen": ("kconform.commands.gen", "cmd_gen"),
    "tree": ("kconform.commands.tree", "cmd_tree"),
    "selftest": ("kconform.commands.selftest", "cmd_selftest"),
    "triage": ("kconform.commands.triage", "cmd_triage"),
    "coverage": ("kconform.commands.coverage", "cmd_coverage"),
    "export": ("kconform.commands.export", "cmd_export"),
    "bisect": ("kconform.commands.bisect", "cmd_bisect"),
    "ci": ("kconform.commands.ci", "cmd_ci"),
    "qemu-arm64": ("kconform.commands.qemu_arm64", "cmd_qemu_arm64"),
    "baseline": ("kconform.commands.baseline", "cmd_baseline"),
}


def _command(name: str):
    import importlib
    module, function = COMMANDS[name]
    return getattr(importlib.import_module(module), function)


def _error(message: str) -> None:
    try:
        print(f"kconform: error: {printable(message)}", file=sys.stderr, flush=True)
    except OSError:
        pass


def _note(message: str) -> None:
    try:
        print(f"kconform: {printable(message)}", file=sys.stderr, flush=True)
    except OSError:
        pass


def _dedup(values: list[str] | None, flag: str, key, what: str) -> list[str] | None:
    """values without repeats (by key: 4K == 4096), each repeat said in one line."""
    if not values:
        return values
    out: list[str] = []
    seen: dict = {}
    for v in values:
        k = key(v)
        if k in seen:
            same = f"'{v}' is '{seen[k]}' again" if v != seen[k] else f"'{v}' given more than once"
            _note(f"flag {flag}: {same}; {what} once")
            continue
        seen[k] = v
        out.append(v)
    return out


def _check_baseline(text: str, required: bool) -> None:
    """The baseline file exists (if required), is a text file and loads (before any build)."""
    from kconform.engine import baseline
    p = Path(text)
    if not p.exists():
        if required:
            raise ToolError(f"flag --baseline: {p}: no such file")
        return
    if p.is_dir():
        raise ToolError(f"flag --baseline: {p}: is a folder, not a baseline file")
    if not p.is_file():
        raise ToolError(f"flag --baseline: {p}: not a regular file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ToolError(os_error_message(e, "flag --baseline")) from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(f"flag --baseline: {p}: not a text file (byte 0x{data[e.start]:02x} at offset "
                        f"{e.start} is not UTF-8); expected the JSON of ci/known-findings.json") from None
    try:
        baseline.load(p)
    except ToolError as e:
        raise ToolError(f"flag --baseline: {e}") from None


def _say_skipped(files: list[str], wanted: list[str]) -> None:
    """Given scenario files that no target of this run runs: one line per ABI, with the files."""
    from kconform.commands.run import TARGETS
    from kconform.engine.scenarios import scenario_abi
    abis = {TARGETS[t] for t in wanted if t in TARGETS}
    skipped: dict[str, list[str]] = {}
    for f in files:
        abi = scenario_abi(f)
        if abi not in abis:
            skipped.setdefault(abi, []).append(f)
    for abi, fs in skipped.items():
        shown = ", ".join(fs[:10]) + (f" and {len(fs) - 10} more" if len(fs) > 10 else "")
        _note(f"{len(fs)} {abi} scenario file(s) skipped: no target of this run "
              f"({', '.join(wanted)}) runs the {abi} ABI: {shown}")


def _validate(args) -> None:
    """The flags that name files and folders, and repeated flags, checked before anything
    is built or run: a bad one is an error naming the flag, the path and the reason."""
    from kconform.core.files import check_output_file, check_writable_dir
    from kconform.core.paths import DEFAULT_BASELINE, reports_dir
    cmd = args.command
    if cmd == "run":
        from kconform.commands.run import OPT_IN_TARGETS, TARGETS
        from kconform.engine.scenarios import expand
        from kconform.targets.el2 import parse_page_size
        args.target = _dedup(args.target, "--target", str, "running it")
        args.page_size = _dedup(args.page_size, "--page-size", parse_page_size, "building it")
        if args.output and args.format == "table":
            raise ToolError("flag --output: writes the --format json, ktap or junit report; with --format "
                            "table (the default) the summary goes to the terminal (every format is in the "
                            "report folder)")
        if args.output:
            check_output_file(args.output, "--output")
        check_writable_dir(args.report_dir or reports_dir(), "--report-dir")
        _check_baseline(args.baseline or str(DEFAULT_BASELINE), required=args.baseline is not None)
        if args.baseline is None:
            args.baseline = str(DEFAULT_BASELINE)
        if args.scenarios:
            files = expand(args.scenarios)
            wanted = args.target or [t for t in TARGETS if t not in OPT_IN_TARGETS]
            if all(t in TARGETS for t in wanted):
                _say_skipped(files, wanted)
    elif cmd == "fuzz":
        _check_baseline(args.baseline or str(DEFAULT_BASELINE), required=args.baseline is not None)
        if args.out:
            check_writable_dir(args.out, "--out")
    elif cmd == "selftest":
        if args.report_dir:
            check_writable_dir(args.report_dir, "--report-dir")
        if args.output:
            check_output_file(args.output, "--output")
    elif cmd in ("bisect", "ci"):
        from kconform.targets.el2 import parse_page_size
        args.page_size = _dedup(args.page_size, "--page-size", parse_page_size, "building it")
        for p in args.page_size or []:
            parse_page_size(p)
        if args.watchdog is not None and not args.watchdog >= 0:
            raise ToolError(f"flag --watchdog: {args.watchdog} is not a non-negative number of seconds")
        if args.out:
            check_writable_dir(args.out, "--out")
        if cmd == "ci" and args.summary:
            check_output_file(args.summary, "--summary")
    elif cmd == "bench" and args.output:
        check_output_file(args.output, "--output")
    elif cmd == "gen" and args.out and not args.check:
        check_writable_dir(args.out, "--out")
    elif cmd == "baseline":
        _check_baseline(args.baseline or str(DEFAULT_BASELINE), required=True)
    elif cmd == "qemu-arm64" and args.out:
        check_writable_dir(args.out, "--out")


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Machine-readable output owns stdout: progress and logs then go to stderr.
    to_stderr = getattr(args, "format", "table") not in ("table", None)
    console = Console(stderr=to_stderr)
    if not console.is_terminal:
        # Logs and CI: tables 132 wide (rule IDs never truncated), and no line is ever wrapped,
        # so a path or a re-run command copied from a log is whole.
        console = Console(width=132, soft_wrap=True, stderr=to_stderr)
    if not args.command:
        parser.print_help()
        return EXIT_TOOL_ERROR
    if args.command == "test" and args.pytest_args and args.pytest_args[0] == "--":
        args.pytest_args = args.pytest_args[1:]
    _validate(args)
    return _command(args.command)(args, console)


def _stop(status: str, reason: str) -> None:
    """After an error or a signal: every child ended, every open report folder marked."""
    procs.closing()
    ended = [g for g in procs.live()]
    procs.end_all()
    if ended:
        _note(f"ended {len(ended)} child process group(s) still running ({', '.join(map(str, ended))})")
    for d, what in close_report_dirs(status, reason):
        shown = str(d.relative_to(Path.cwd())) if d.is_absolute() and d.is_relative_to(Path.cwd()) else str(d)
        if what == "marked":
            _note(f"the report folder {shown} is {status}: it keeps what the run had, "
                  f"marked by {shown}/{INCOMPLETE}")
        else:
            _note(f"the report folder {shown} is {status} and could not be marked: {what}")


def main(argv: list[str] | None = None) -> int:
    """Runs one command; every error ends here as one line and exit 2 (see DESCRIPTION)."""
    debug = bool(os.environ.get(DEBUG_VARIABLE))
    procs.install_signal_handlers()
    try:
        code = _run(argv)
        procs.closing()
        procs.end_all()
        close_report_dirs(None)
        return code
    except Interrupted as e:
        _note(f"interrupted by {e.name}")
        _stop("interrupted", f"{e.name} received")
        return e.exit_code
    except KeyboardInterrupt:  # where the handler is not ours (not the main thread)
        _note("interrupted by SIGINT")
        _stop("interrupted", "SIGINT received")
        return 130
    except ToolError as e:
        _error(str(e))
        _stop("incomplete", str(e).splitlines()[0] if str(e) else "error")
        return EXIT_TOOL_ERROR
    except OSError as e:
        if debug:
            traceback.print_exc()
        if isinstance(e, BrokenPipeError) and e.filename is None:
            message = "standard output: the reader closed it early (Broken pipe)"
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except OSError:
                pass
        else:
            message = os_error_message(e)
            if e.filename is None and not debug:
                message += f" ({DEBUG_VARIABLE}=1 shows where)"
        _error(message)
        _stop("incomplete", message)
        return EXIT_TOOL_ERROR
    except Exception as e:  # a bug in kconform: still one line and exit 2
        if debug:
            traceback.print_exc()
        message = f"internal error: {type(e).__name__}: {e}".splitlines()[0]
        _error(message + ("" if debug else f" (a bug in kconform; {DEBUG_VARIABLE}=1 shows the traceback)"))
        _stop("incomplete", message)
        return EXIT_TOOL_ERROR
