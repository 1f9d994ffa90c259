"""The kconform command line: subcommands, --help, exit codes.

Exit status of every subcommand: 0 clean, 1 violations found, 2 kconform
itself could not run (bad input, missing dependency, build failure).
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from kconform import __version__
from kconform.core.errors import EXIT_TOOL_ERROR, ToolError

DESCRIPTION = """\
kconform: differential conformance and fuzz testing of hypervisor memory ABIs
(guest_memfd write() population; FF-A FFA_MEM_RECLAIM2 through pKVM's EL2 proxy).

A reference model of each ABI, written from the specification, judges every
operation a real target performs. Findings are reported by rule ID.

exit status: 0 clean, 1 violations found, 2 kconform could not run.
"""

RUN_EPILOG = """\
examples:
  ./kconform run                         the directed suite on every available target
  ./kconform run --format ktap           KTAP on stdout (kernel CI)
  ./kconform run corpora/gmem/write.kcs  one file
  ./kconform run --fault wrong-errno:write
                                         self-test: a target that lies must be caught
"""


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run scenarios on targets and judge them against the models",
                       description="Run scenarios on every available target (or those given with "
                                   "--target), judge each op against the reference model, apply the "
                                   "baseline of known findings and write a report folder.",
                       epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenarios", nargs="*",
                   help="scenario files or folders (default: corpora/gmem)")
    p.add_argument("--target", action="append", metavar="NAME",
                   help="run only this target (repeatable; known: host = the running kernel's "
                        "guest_memfd, el2 = pKVM's ffa.c from a kernel tree compiled for this machine, "
                        "qemu = guest_memfd of Debian's 7.3 kernel booted in QEMU; not run by default)")
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
                        "(default debian:7.3) with --apply's patch, incrementally, and boot it")
    p.add_argument("--page-size", action="append", metavar="SIZE",
                   help="el2: host PAGE_SIZE of the build, 4K, 16K or 64K (repeatable; default 4K and 16K)")
    p.add_argument("--apply", metavar="PATCH",
                   help="el2: apply this patch to a copy of the tree first (e.g. the suite's RECLAIM2 "
                        "reference implementation, targets/el2/reclaim2/reclaim2-reference.patch); "
                        "qemu with --build: patch the kernel (targets/qemu/write/gmem-write-reference.patch)")
    p.add_argument("--asan", action="store_true",
                   help="el2: build the handler with ASan+UBSan (a memory error in kernel code is a finding)")
    p.add_argument("--format", choices=("table", "json", "ktap", "junit"), default="table",
                   help="what to print: a per-rule table (default) or a machine-readable report")
    p.add_argument("--output", metavar="FILE", help="write the --format report to FILE instead of stdout")
    p.add_argument("--baseline", metavar="FILE", default=None,
                   help="the reviewed known findings (default: ci/known-findings.json)")
    p.add_argument("--report-dir", metavar="DIR",
                   help="where to make this run's report folder (default: reports/out)")
    p.add_argument("--fault", metavar="SPEC", default="",
                   help="self-test: wrap the target so it gives wrong answers "
                        "(wrong-errno:OP, wrong-content:OP, succeed:OP, fail:OP, wrong-count:OP)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _add_bench(p) -> None:
    from kconform.commands.bench import DEFAULT_SELECTORS, SELECTORS
    from kconform.selftest.mutant_ttf import TTF_DEFAULT_MUTANTS
    p.add_argument("--repetitions", type=int, default=5, metavar="N", help="runs per benchmark (median; default 5)")
    p.add_argument("--output", metavar="FILE", help="JSON file (default: reports/bench/<time>.json)")
    p.add_argument("--only", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], metavar="NAME,NAME",
                   help=f"only these benchmarks ({', '.join(SELECTORS)}; default: {', '.join(DEFAULT_SELECTORS)})")
    p.add_argument("--mutants", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], metavar="NN,NN",
                   help=f"mutant-ttf: these mutants (default {','.join(TTF_DEFAULT_MUTANTS)})")
    p.add_argument("--mutant-budget", type=int, default=60, metavar="S",
                   help="mutant-ttf: seconds of fuzzing per run (and for the reference's background; default 60)")
    p.add_argument("--mutant-runs", type=int, default=3, metavar="N",
                   help="mutant-ttf: runs per mutant, seeds 101.. (median; default 3)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kconform", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kconform {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)

    p = sub.add_parser("rules", help="list every rule with its ID and citation")
    p.add_argument("--abi", choices=("gmem",), help="only this ABI's rules")
    p.add_argument("--format", choices=("table", "json"), default="table")

    sub.add_parser("doctor", help="compilers, /dev/kvm, capabilities, QEMU, cached kernels: one table")

    p = sub.add_parser("test", help="the project's test suite (GoogleTest in plain and ASan builds, pytest)")
    p.add_argument("--no-asan", action="store_true", help="skip the ASan+UBSan build")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments after --")

    p = sub.add_parser("build", help="build the C++ engine (incremental)")
    p.add_argument("--preset", choices=("default", "asan"), default="default")

    p = sub.add_parser("tree", help="fetch a Debian kernel tree into the cache, or check a local one",
                       description="Kernel trees hold the kernel code kconform compiles and reads "
                                   "(never stored in this repository). fetch: download Debian's "
                                   "linux-source package through a private apt state and extract only "
                                   "the needed files; check: see that a local tree has them; list: "
                                   "the cached trees; patch: a patched copy of a tree.")
    tsub = p.add_subparsers(dest="tree_command", metavar="ACTION", required=True)
    c = tsub.add_parser("fetch", help="download debian:7.3, debian:7.2 or debian:6.12")
    c.add_argument("spec")
    c.add_argument("--refresh", action="store_true", help="look for a newer package version")
    c = tsub.add_parser("check", help="check a local tree (your own, with your patches)")
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
                                   "break it alone and its boundary cases (just inside, just outside, "
                                   "unsigned wrap-around) to corpora/z3/<abi>/*.kcs. Deterministic: "
                                   "the same conditions give the same files.")
    p.add_argument("--abi", choices=("gmem", "ffa", "all"), default="all")
    p.add_argument("--out", metavar="DIR", help="where to write (default: corpora/z3)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if the files differ from what would be written")
    p.add_argument("--format", choices=("table", "json"), default="table")

    p = sub.add_parser("fuzz", help="coverage-guided, structure-aware fuzzing with libFuzzer or AFL++",
                       description="Build the fuzz runner (harness/fuzz) for the engine, seed it with the "
                                   "directed suite and the Z3 cases, and fuzz the target with the oracle as "
                                   "the crash condition. Resumes from reports/fuzz/<target>/corpus, merges and "
                                   "minimises it at the end, and stores every distinct finding with its "
                                   "scenario under reports/fuzz/<target>/findings/ (never overwritten). "
                                   "Findings the baseline knows for the target are recorded, not crashes. "
                                   "Exit 1 if a new finding was stored.",
                       epilog="examples:\n  ./kconform fuzz --engine libfuzzer --target host --time 8h --jobs 2\n"
                              "  ./kconform fuzz --engine afl --target el2 --page-size 16K --time 1h",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", choices=("libfuzzer", "afl"), default="libfuzzer")
    p.add_argument("--target", choices=("host", "el2"), default="host",
                   help="host = the running kernel's guest_memfd; el2 = pKVM's ffa.c in process (debian:7.3)")
    p.add_argument("--page-size", default="4K", metavar="SIZE", help="el2: host PAGE_SIZE of the build (4K, 16K)")
    p.add_argument("--time", default="10m", metavar="DURATION", help="how long to fuzz: 30s, 10m, 8h (default 10m)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel fuzzing processes (default 1)")
    p.add_argument("--max-len", type=int, default=8192, metavar="BYTES", help="largest input (default 8192)")
    p.add_argument("--known", action="append", metavar="RULE",
                   help="also treat this rule as baselined for this run (repeatable)")
    p.add_argument("--baseline", metavar="FILE", help="known findings (default: ci/known-findings.json)")
    p.add_argument("--out", metavar="DIR", help="instead of reports/fuzz: DIR/<target>/...")
    p.add_argument("--no-merge", action="store_true", help="skip merging and minimising the corpus at the end")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")

    p = sub.add_parser("bench", help="benchmarks (medians): EL2 differential, host guest_memfd, Z3 generation; opt-in: mutant-ttf, qemu")
    _add_bench(p)

    p = sub.add_parser("selftest", help="the suite's self-tests: kill the mutants of our reference implementations",
                       description="mutants: per ABI, controls first, then every single-fault mutant of our\n"
                                   "own reference implementation; the suite must kill each one.\n"
                                   "  ffa   stock debian:7.3 fails FFA.R2.NOT_IMPLEMENTED, the reference RECLAIM2\n"
                                   "        handler runs clean; each mutant in targets/el2/reclaim2/mutants is\n"
                                   "        built at 4K and 16K and runs the RECLAIM2 suite in-process.\n"
                                   "  gmem  Debian's 7.3 kernel reports the base profile, the reference write()\n"
                                   "        patch built into a kernel passes every write rule; each mutant in\n"
                                   "        targets/qemu/write/mutants is built, booted in QEMU and runs the\n"
                                   "        guest_memfd suite.\n"
                                   "Prints the kill matrices and writes reports/out/<time>/kill-matrix.json.\n"
                                   "Exit 0 all killed, 1 a mutant survived, 2 a control failed or a mutant\n"
                                   "could not be built or run.",
                       epilog="examples:\n  ./kconform selftest mutants                  both ABIs (~10 min warm)\n"
                              "  ./kconform selftest mutants --abi ffa --only 09,21\n"
                              "  ./kconform selftest mutants --abi gmem --only 04\n"
                              "  ./kconform selftest cost",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("selftest_command", choices=("mutants", "cost"), metavar="mutants|cost",
                   help="mutants: the kill matrices; cost: SMC round trips of FFA_MEM_RECLAIM vs RECLAIM2 "
                        "through the real handler (targets/el2/reclaim2/COST.md)")
    p.add_argument("--abi", choices=("ffa", "gmem", "all"), default="all",
                   help="mutants: whose mutants (ffa: RECLAIM2 at EL2; gmem: guest_memfd write() in QEMU; "
                        "default all)")
    p.add_argument("--only", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], metavar="NN,NN",
                   help="only these mutants (numbers or names; with --abi ffa or gmem)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--report-dir", metavar="DIR", help="where to make the report folder (default: reports/out)")
    p.add_argument("--output", metavar="FILE", help="cost: JSON file (default: targets/el2/reclaim2/cost.json)")

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
}


def _command(name: str):
    import importlib
    module, function = COMMANDS[name]
    return getattr(importlib.import_module(module), function)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Machine-readable output owns stdout: progress and logs then go to stderr.
    to_stderr = getattr(args, "format", "table") not in ("table", None)
    console = Console(stderr=to_stderr)
    if not console.is_terminal:
        console = Console(width=132, stderr=to_stderr)  # logs and CI: never truncate rule IDs
    if not args.command:
        parser.print_help()
        return EXIT_TOOL_ERROR
    try:
        if args.command == "run":
            from kconform.core.paths import DEFAULT_BASELINE
            if args.baseline is None:
                args.baseline = str(DEFAULT_BASELINE)
        if args.command == "test" and args.pytest_args and args.pytest_args[0] == "--":
            args.pytest_args = args.pytest_args[1:]
        return _command(args.command)(args, console)
    except ToolError as e:
        print(f"kconform: error: {e}", file=sys.stderr)
        return EXIT_TOOL_ERROR
    except KeyboardInterrupt:
        print("kconform: interrupted", file=sys.stderr)
        return EXIT_TOOL_ERROR
