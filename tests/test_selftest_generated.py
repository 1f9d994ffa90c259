"""The generated ffa.c mutant family (selftest/mutagen.py, selftest/generated.py,
targets/el2/generated-mutants).

- the generator on a small C file with known conditions makes exactly the mutants
  written out by hand below, drops exactly the ones below with their reasons, and its
  IDs survive unrelated edits;
- every generated mutant of Debian 7.3's ffa.c applies (GNU patch, no fuzz) and
  compiles with the EL2 build's flags, which are the generator's;
- survivors.json is well formed and names mutants of 7.3;
- the CI slice (GENERATED_SLICE: one or two mutants of each operator) is killed
  end to end, or, with KCONFORM_NIGHTLY=1, the whole set runs and every survivor is
  reviewed (docs/mutants-generated.md has the measured score).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import REPO, is_nightly, kconform, kill_matrix

SAMPLE = REPO / "tests" / "data" / "mutagen" / "sample.c"
SAMPLE_ARGS = ["-std=gnu11", "-Werror=return-type"]
FFA_C = "arch/arm64/kvm/hyp/nvhe/ffa.c"

# (operator, the sample's lines the mutant removes, the lines it adds): written by hand
# from sample.c, not from the generator's output.
EXPECTED = [
    ("negate", ["\tif (len > MAX_LEN || !count) {"], ["\tif (!(len > MAX_LEN || !count)) {"]),
    ("negate-clause", ["\tif (len > MAX_LEN || !count) {"], ["\tif (len <= MAX_LEN || !count) {"]),
    ("negate-clause", ["\tif (len > MAX_LEN || !count) {"], ["\tif (len > MAX_LEN || count) {"]),
    ("drop-clause", ["\tif (len > MAX_LEN || !count) {"], ["\tif (!count) {"]),
    ("drop-clause", ["\tif (len > MAX_LEN || !count) {"], ["\tif (len > MAX_LEN) {"]),
    ("bound-op", ["\tif (len > MAX_LEN || !count) {"], ["\tif (len >= MAX_LEN || !count) {"]),
    ("bound-plus1", ["\tif (len > MAX_LEN || !count) {"], ["\tif (len > MAX_LEN + 1 || !count) {"]),
    ("bound-minus1", ["\tif (len > MAX_LEN || !count) {"], ["\tif (len > MAX_LEN - 1 || !count) {"]),
    ("bound-double", ["\tif (len > MAX_LEN || !count) {"], ["\tif (len > MAX_LEN * 2 || !count) {"]),
    ("bound-half", ["\tif (len > MAX_LEN || !count) {"], ["\tif (len > MAX_LEN / 2 || !count) {"]),
    ("drop-error", ["\t\tret = FFA_RET_INVALID_PARAMETERS;"], []),
    ("swap-error", ["\t\tret = FFA_RET_INVALID_PARAMETERS;"], ["\t\tret = FFA_RET_DENIED;"]),
    ("drop-exit", ["\t\tgoto out;"], []),
    ("negate", ["\tif (busy)"], ["\tif (!busy)"]),
    ("drop-exit", ["\t\treturn FFA_RET_DENIED;"], ["\t\t;"]),
    ("swap-error", ["\t\treturn FFA_RET_DENIED;"], ["\t\treturn FFA_RET_INVALID_PARAMETERS;"]),
    ("negate", ["\tif (count != 1)"], ["\tif (count == 1)"]),
    ("bound-plus1", ["\tif (count != 1)"], ["\tif (count != 2)"]),
    ("bound-minus1", ["\tif (count != 1)"], ["\tif (count != 0)"]),
    ("bound-onesided", ["\tif (count != 1)"], ["\tif (count > 1)"]),
    ("bound-onesided", ["\tif (count != 1)"], ["\tif (count < 1)"]),
    ("negate", ["\tif (x >= 0)"], ["\tif (x < 0)"]),
    ("bound-op", ["\tif (x >= 0)"], ["\tif (x > 0)"]),
    ("bound-plus1", ["\tif (x >= 0)"], ["\tif (x >= 1)"]),
    ("bound-minus1", ["\tif (x >= 0)"], ["\tif (x >= (-1))"]),
]
# (operator, line, what the reason says): 2 * 1 and 1 / 2 repeat +1 and -1; 0 * 2 and 0 / 2
# change nothing; a branch of sign() without its return leaves a non-void function
# without a value (-Werror=return-type).
EXPECTED_DROPPED = [
    ("bound-double", 20, "the same bound as bound-plus1"),
    ("bound-half", 20, "the same bound as bound-minus1"),
    ("bound-double", 29, "no change"),
    ("bound-half", 29, "no change"),
    ("drop-exit", 30, "does not compile"),
    ("drop-exit", 32, "does not compile"),
]


def _generate(text: bytes, name: str = "sample.c"):
    from kconform.selftest import mutagen
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / name
        f.write_bytes(text)
        return mutagen.generate(str(f), text, SAMPLE_ARGS, compile_args=SAMPLE_ARGS, jobs=1)


def _change(patch: str) -> tuple[list[str], list[str]]:
    body = patch.splitlines()[3:]
    return ([x[1:] for x in body if x.startswith("-")], [x[1:] for x in body if x.startswith("+")])


def test_the_sample_gives_exactly_the_mutants_written_by_hand():
    gen = _generate(SAMPLE.read_bytes())
    got = sorted((m.op, *map(tuple, _change(m.patch))) for m in gen.mutants)
    want = sorted((op, tuple(a), tuple(b)) for op, a, b in EXPECTED)
    assert got == want
    dropped = sorted((d.op, d.line, d.reason) for d in gen.dropped)
    assert [(op, line) for op, line, _ in dropped] == sorted((op, line) for op, line, _ in EXPECTED_DROPPED)
    for (op, line, reason), (_, _, says) in zip(dropped, sorted(EXPECTED_DROPPED)):
        assert says in reason, (op, line, reason)
    for m in gen.mutants:
        assert re.fullmatch(rf"(check|sign)\.{re.escape(m.op)}\.[0-9a-f]{{8}}", m.id), m.id
        head = m.patch.splitlines()[0]
        assert head.startswith(f"kconform generated mutant {m.id} ({m.op}): sample.c:{m.line} {m.function}: "), head
        assert m.patch.splitlines()[1:3] == ["--- a/sample.c", "+++ b/sample.c"]
    assert len({m.id for m in gen.mutants} | {d.id for d in gen.dropped}) == len(gen.mutants) + len(gen.dropped)


def test_ids_survive_unrelated_edits_and_follow_the_line_they_change():
    base = SAMPLE.read_bytes()
    ids = {m.id: m for m in _generate(base).mutants}
    # lines added above, a function with conditions of its own, and a blank line in check()
    moved = base.replace(b"int check(", b"static int other(int y)\n{\n\tif (y < 3)\n\t\treturn 1;\n\treturn 0;\n}\n\n"
                                        b"int check(", 1).replace(b"\tint ret = 0;\n", b"\tint ret = 0;\n\n", 1)
    moved_ids = {m.id: m for m in _generate(moved).mutants}
    assert set(ids) <= set(moved_ids)
    assert all(moved_ids[i].line > ids[i].line for i in ids)
    assert any(i.startswith("other.") for i in moved_ids)
    # a changed line changes the IDs of the mutants of that line, and only those
    edited = base.replace(b"if (count != 1)", b"if (count != 2)")
    edited_ids = {m.id for m in _generate(edited).mutants}
    changed = {i for i, m in ids.items() if m.line == 20}
    assert changed and not (changed & edited_ids)
    assert set(ids) - changed <= edited_ids


# --- Debian 7.3's ffa.c -----------------------------------------------------------------

@pytest.fixture(scope="module")
def tree73():
    from kconform.sources import tree_fetch
    return tree_fetch.fetch("debian:7.3", progress=lambda m: None)


@pytest.fixture(scope="module")
def gen73(tree73):
    from kconform.selftest import mutagen
    return mutagen.generate_tree(tree73)


def _cmake_kernel_cflags() -> list[str]:
    text = (REPO / "targets" / "el2" / "CMakeLists.txt").read_text()
    m = re.search(r"set\(_kc_kernel_cflags\s+(.*?)\)", text, re.S)
    assert m, "targets/el2/CMakeLists.txt: no set(_kc_kernel_cflags ...)"
    return m.group(1).split()


def test_the_generator_compiles_with_the_el2_builds_flags():
    from kconform.selftest import mutagen
    assert mutagen.KERNEL_CFLAGS == _cmake_kernel_cflags()


def test_every_mutant_of_73_applies_and_compiles(tree73, gen73, tmp_path):
    """Each patch applies to 7.3's ffa.c with GNU patch (no fuzz), gives the generator's
    text, and that text compiles as the EL2 build compiles ffa.c, at 4K and 16K."""
    from kconform.selftest import mutagen
    assert len(gen73.mutants) >= 300, len(gen73.mutants)
    assert {m.op for m in gen73.mutants} == set(mutagen.OPERATORS)
    assert len({m.id for m in gen73.mutants}) == len(gen73.mutants)
    assert all(d.reason for d in gen73.dropped)
    pristine = (tree73 / FFA_C).read_bytes()
    inc = tmp_path / "inc"
    subprocess.run(["/usr/bin/python3", str(REPO / "targets/el2/tools/extract_tree.py"), "--tree", str(tree73),
                    "--shim", str(REPO / "targets/el2/shim"), "--out", str(inc)], check=True, capture_output=True)
    flags = {s: [*_cmake_kernel_cflags(), f"-I{REPO / 'targets/el2/shim'}", f"-I{inc}", f"-I{REPO / 'targets/el2'}",
                 f"-DKC_PAGE_SHIFT={s}"] for s in (12, 14)}

    def one(m) -> str:
        with tempfile.TemporaryDirectory(dir=tmp_path) as d:
            root = Path(d)
            (root / FFA_C).parent.mkdir(parents=True)
            (root / FFA_C).write_bytes(pristine)
            (root / "m.patch").write_text(m.patch)
            r = subprocess.run(["patch", "-p1", "--batch", "--forward", "--fuzz=0", "-d", str(root), "-i", "m.patch"],
                               capture_output=True, text=True)
            if r.returncode:
                return f"{m.id}: patch: {r.stdout}{r.stderr}"
            if (root / FFA_C).read_bytes() != mutagen.mutate_text(pristine, m):
                return f"{m.id}: the patch does not give the generator's text"
            for shift, args in flags.items():
                c = subprocess.run(["clang", "-fsyntax-only", "-x", "c", *args, str(root / FFA_C)],
                                   capture_output=True, text=True)
                if c.returncode:
                    return f"{m.id}: does not compile at PAGE_SHIFT {shift}: {c.stderr[:500]}"
        return ""

    with ThreadPoolExecutor(max_workers=2) as pool:
        bad = [x for x in pool.map(one, gen73.mutants) if x]
    assert not bad, bad[:5]


def test_survivors_are_reviewed_mutants_of_73(gen73):
    from kconform.selftest import generated
    reviews = generated.reviews()
    ids = {m.id for m in gen73.mutants}
    assert set(reviews) <= ids, sorted(set(reviews) - ids)
    doc = json.loads(generated.SURVIVORS.read_text())
    assert doc["tree"] == "debian:7.3"


def test_a_review_needs_a_kind_a_reason_and_a_gap_its_scenario(tmp_path):
    from kconform.core.errors import ToolError
    from kconform.selftest import generated
    bad = tmp_path / "survivors.json"
    for entry, says in (({"kind": "fine", "reason": "x"}, "kind must be one of"),
                        ({"kind": "equivalent", "reason": " "}, "needs its reason"),
                        ({"kind": "gap", "reason": "x"}, "names the scenario")):
        bad.write_text(json.dumps({"mutants": {"f.negate.00000000": entry}}))
        with pytest.raises(ToolError, match=says):
            generated.reviews(bad)


def test_tree_is_only_for_the_generated_family(tmp_path):
    r = kconform("selftest", "mutants", "--abi", "ffa", "--family", "stock", "--tree", "debian:7.2",
                 "--report-dir", str(tmp_path), timeout=60)
    assert r.returncode == 2
    assert "flag --tree: only with --family generated" in r.stderr
    assert not list(tmp_path.iterdir())


def test_an_unknown_generated_mutant_is_a_tool_error(tmp_path, gen73):
    r = kconform("selftest", "mutants", "--abi", "ffa", "--family", "generated", "--only", "nothing.negate.00000000",
                 "--report-dir", str(tmp_path), timeout=600)
    assert r.returncode == 2
    assert "no generated mutant nothing.negate.00000000" in r.stderr


# --- end to end ------------------------------------------------------------------------

# CI: a mutant of each operator, each killed on 7.3 within the first scenarios (measured:
# docs/mutants-generated.md), one killed by a crash and one by a handler that does not come
# up (kind INIT), plus one reviewed survivor (equivalent: u32 `id > 0` is `id != 0`), about
# 3 minutes on 2 cores. Mutant ID -> the kind of its kill. Nightly: every mutant.
GENERATED_SLICE = {
    "__do_ffa_mem_xfer.negate.2fa79756": "violation",           # minimum first-fragment length
    "__do_ffa_mem_xfer.negate-clause.42d08c07": "violation",    # x3 (address) MBZ
    "do_ffa_rxtx_map.drop-clause.caecb9c4": "violation",        # RX alignment (stock mutant 02)
    "do_ffa_mem_reclaim.bound-op.2816de99": "violation",        # retrieve response's endpoint bound
    "do_ffa_rxtx_map.bound-plus1.f69806dd": "violation",        # mailbox page count
    "do_ffa_version.bound-minus1.13062b0b": "violation",        # major version
    "do_ffa_mem_reclaim.bound-double.b6f3f70b": "violation",    # retrieve response vs the mailbox
    "do_ffa_rxtx_map.bound-half.42466fde": "violation",         # mailbox page count
    "do_ffa_version.bound-onesided.5dcffb43": "violation",      # major version (stock mutant 21)
    "do_ffa_mem_frag_tx.drop-exit.9ed5ca62": "CRASH",           # FRAG_TX with no TX (stock mutant 07)
    "__do_ffa_mem_xfer.drop-error.d416dd24": "violation",       # composite header past the fragment
    "do_ffa_version.swap-error.ac7f34cd": "violation",          # NOT_SUPPORTED for another major
    "hyp_ffa_init.negate.2343a99c": "INIT",                     # EL3's major version
}
REVIEWED_IN_SLICE = "do_ffa_rxtx_unmap.bound-onesided.09cad3ab"


@pytest.fixture(scope="module")
def generated_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("generated")
    args = ["selftest", "mutants", "--abi", "ffa", "--family", "generated", "--jobs", "2", "--format", "json",
            "--report-dir", str(root)]
    if not is_nightly():
        args += ["--only", ",".join([*GENERATED_SLICE, REVIEWED_IN_SLICE])]
    r = kconform(*args, timeout=7200 if is_nightly() else 1200)
    return r, kill_matrix(root, "ffa", "ffa-generated")


def test_the_slice_or_the_whole_set_is_killed_or_reviewed(generated_run, gen73):
    r, m = generated_run
    assert m["controls"]["unmutated"]["ok"], m["controls"]
    unreviewed = [x["mutant"] for x in m["mutants"] if x["status"] in ("survived", "error")]
    assert r.returncode == 0 and not unreviewed, (unreviewed, r.stderr[-3000:])
    assert not m["stale_reviews"], m["stale_reviews"]
    by = {x["mutant"]: x for x in m["mutants"]}
    if is_nightly():
        assert m["total"] == len(gen73.mutants)
        return
    assert set(by) == {*GENERATED_SLICE, REVIEWED_IN_SLICE}
    from kconform.selftest import mutagen
    assert {x["op"] for x in m["mutants"]} == set(mutagen.OPERATORS)
    for mid, kind in GENERATED_SLICE.items():
        assert by[mid]["status"] == "killed" and by[mid]["kind"] == kind, by[mid]
        assert by[mid]["first"] and by[mid]["rules"], by[mid]
    assert by[REVIEWED_IN_SLICE]["status"] == "equivalent", by[REVIEWED_IN_SLICE]
    assert m["score"]["non_equivalent"] == len(GENERATED_SLICE) and m["score"]["percent"] == 100.0
