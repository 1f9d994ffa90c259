"""End to end on the running kernel: the directed suite, and proof that the
oracle catches a target that gives wrong answers, naming the right rule."""

import json

import pytest

from conftest import REPO, kconform, needs_host_gmem, needs_kvm, skip_for_kernel

pytestmark = [needs_kvm, needs_host_gmem]


def run_json(tmp_path, *extra):
    out = tmp_path / "report.json"
    r = kconform("run", "--target", "host", "--format", "json", "--output", str(out),
                 "--report-dir", str(tmp_path / "reports"), *extra)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(out.read_text())


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return run_json(tmp_path_factory.mktemp("clean"))


def test_directed_suite_runs_and_every_finding_is_reviewed(clean):
    code, doc = clean
    (run,) = doc["runs"]
    assert run["target"]["target"] == "host"
    assert run["counts"]["pass"] > 100
    new = [f for f in run["findings"] if not f["baselined_by"]]
    assert code == (1 if new else 0)
    assert not new, "unreviewed findings on this kernel: " + json.dumps(new, indent=1)


def test_every_rule_of_the_profile_is_exercised(clean):
    _, doc = clean
    (run,) = doc["runs"]
    idle = [r["id"] for r in run["rules"] if r["status"] == "not exercised"]
    profile = run["target"]["profile"]
    # Rules of the other profile cannot be exercised here; those are named "(write ABI)".
    idle = [i for i in idle if not ("write ABI" in next(r["summary"] for r in run["rules"] if r["id"] == i)
                                    and profile != "gmem-write")]
    assert not idle, f"rules no scenario exercises on {profile}: {idle}"


def _violations(report_root):
    (raw,) = list(report_root.rglob("verdicts-host.jsonl"))
    recs = [json.loads(line) for line in raw.read_text().splitlines()]
    return {(r["scenario"], r["op"]): r for r in recs if r.get("verdict") == "violation"}


# One scenario per lie below, where the lie fires once and what it breaks follows from
# the fault's definition (targets/faulty/faulty_target.h) and the rule's text
# (models/gmem/rules.def, SPEC.md), not from the oracle's blame code. The same on the
# base and the write ABI (nothing here depends on write()).
LIES = """kconform-scenario 1
abi gmem
name lie/create-size-zero
requires gmem
create_vm
create_gmem vm=0 size=0 flags=0

kconform-scenario 1
abi gmem
name lie/write-closed
requires gmem
create_vm
create_gmem vm=0 size=0x4000 flags=0
close gmem=0
write gmem=0 len=0x1000

kconform-scenario 1
abi gmem
name lie/punch-unaligned
requires gmem
create_vm
create_gmem vm=0 size=0x4000 flags=0
fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0x800 len=0x1000

kconform-scenario 1
abi gmem
name lie/load-zero-page
requires gmem mmap init_shared
create_vm
create_gmem vm=0 size=0x1000 flags=MMAP|INIT_SHARED
mmap gmem=0 offset=0 len=0x1000
load map=0 offset=0 len=0x1000

kconform-scenario 1
abi gmem
name lie/mmap-without-flag
requires gmem
create_vm
create_gmem vm=0 size=0x1000 flags=0
mmap gmem=0 offset=0 len=0x1000

kconform-scenario 1
abi gmem
name lie/alloc-inside
requires gmem
create_vm
create_gmem vm=0 size=0x4000 flags=0
fallocate gmem=0 mode=KEEP_SIZE offset=0 len=0x1000

kconform-scenario 1
abi gmem
name lie/bind-offset-unaligned
requires gmem user_memory2
create_vm
create_gmem vm=0 size=0x4000 flags=0
bind vm=0 slot=0 gpa=0 size=0x1000 gmem=0 gmem_offset=0x800
"""

# fault -> the one violation its lie must cause in LIES: (scenario, op, what the target
# then reports, the rules broken). By hand:
#   wrong-errno (an errno becomes ENOTRECOVERABLE) breaks the rule that demanded the
#   true errno: size 0 EINVAL (CREATE.SIZE), a closed fd EBADF (FD.BADF), a hole
#   punched at a half page EINVAL (FALLOC.PUNCH_ALIGN);
#   wrong-content (a load's digest inverted) breaks MMAP.CONTENT (a load sees the
#   file's bytes: here a fresh page's zeros);
#   succeed (an error becomes ok 0) breaks the rule that demanded the error: mmap of a
#   file created without MMAP (MMAP.NOT_SUPPORTED), a guest_memfd_offset not
#   PAGE_SIZE-aligned (BIND.OFFSET_ALIGN);
#   fail (a success becomes EIO) breaks the rule that demanded success: a KEEP_SIZE
#   allocation inside the file (FALLOC.ALLOC).
# None for the observed outcome: the inverted digest, checked against the clean run's.
BROKEN = {
    "wrong-errno:create_gmem": ("lie/create-size-zero", 1, "errno ENOTRECOVERABLE", ["GMEM.CREATE.SIZE"]),
    "wrong-errno:write": ("lie/write-closed", 3, "errno ENOTRECOVERABLE", ["GMEM.FD.BADF"]),
    "wrong-errno:fallocate": ("lie/punch-unaligned", 2, "errno ENOTRECOVERABLE", ["GMEM.FALLOC.PUNCH_ALIGN"]),
    "wrong-content:load": ("lie/load-zero-page", 3, None, ["GMEM.MMAP.CONTENT"]),
    "succeed:mmap": ("lie/mmap-without-flag", 2, "ok 0", ["GMEM.MMAP.NOT_SUPPORTED"]),
    "fail:fallocate": ("lie/alloc-inside", 2, "errno EIO", ["GMEM.FALLOC.ALLOC"]),
    "succeed:bind": ("lie/bind-offset-unaligned", 2, "ok 0", ["GMEM.BIND.OFFSET_ALIGN"]),
}


@pytest.fixture(scope="module")
def lies_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("lies") / "lies.kcs"
    f.write_text(LIES)
    return f


@pytest.fixture(scope="module")
def clean_records(tmp_path_factory, lies_file):
    """The clean run's op records, of the directed suite and LIES: (scenario, op) -> record."""
    d = tmp_path_factory.mktemp("clean-raw")
    run_json(d, str(REPO / "corpora" / "gmem"), str(lies_file))
    (raw,) = list((d / "reports").rglob("verdicts-host.jsonl"))
    recs = [json.loads(line) for line in raw.read_text().splitlines()]
    return {(r["scenario"], r["op"]): r for r in recs if r.get("type") == "op"}


# fault, and the ops where its lie can show: a faked mmap success the model may
# allow (mmap "may fail" cases) is caught at the first access to the mapping.
@pytest.mark.parametrize("fault,ops", [
    ("wrong-errno:create_gmem", {"create_gmem"}),
    ("wrong-errno:write", {"write"}),
    ("wrong-errno:fallocate", {"fallocate"}),
    ("wrong-content:load", {"load"}),
    ("succeed:mmap", {"mmap", "load", "store", "munmap"}),
    ("fail:fallocate", {"fallocate"}),
    ("succeed:bind", {"bind"}),
])
def test_a_lying_target_is_caught_with_the_right_rule(tmp_path, lies_file, clean_records, fault, ops):
    clean = {k: r for k, r in clean_records.items() if r.get("verdict") == "violation"}
    scenario, op, observed, rules = BROKEN[fault]
    if clean_records[(scenario, op)]["verdict"] == "unsupported":
        skip_for_kernel(f"{scenario} needs guest_memfd capabilities this kernel lacks: "
                        f"{clean_records[(scenario, op)].get('missing')}")
    # LIES create their files on a VM of the default type: where only another type has
    # guest_memfd (a 6.8-6.17 kernel with KVM_SW_PROTECTED_VM), every create_gmem fails.
    made = clean_records[("lie/alloc-inside", 1)]
    if made["verdict"] == "pass" and not made["observed"].startswith("ok "):
        skip_for_kernel(f"guest_memfd on a VM of the default type fails here: {made['observed']}")
    # Without the lie, LIES pass (where the kernel has what they need): the truth the table assumes.
    lie_records = [r for k, r in clean_records.items() if k[0].startswith("lie/")]
    assert all(r["verdict"] in ("pass", "unsupported") for r in lie_records), lie_records
    assert clean_records[(scenario, op)]["verdict"] == "pass", clean_records[(scenario, op)]
    code, doc = run_json(tmp_path, "--fault", fault, str(REPO / "corpora" / "gmem"), str(lies_file))
    assert code == 1, f"{fault}: the oracle did not catch the wrong answer"
    new = {k: v for k, v in _violations(tmp_path / "reports").items() if k not in clean}
    assert new, f"{fault}: no violation beyond those of the clean run"
    for v in new.values():
        assert v["call"].split()[0] in ops, f"{fault} blamed an op it did not touch: {v['call']}"
    # In LIES: exactly the one violation the lie must cause, naming exactly the rules it breaks.
    mine = {k: v for k, v in new.items() if k[0].startswith("lie/")}
    assert {k: sorted(v["violated"]) for k, v in mine.items()} == {(scenario, op): rules}, mine
    got = mine[(scenario, op)]["observed"]
    if observed is None:  # the digest inverted: ok 0 aux=~A where the clean run saw ok 0 aux=A
        truth = clean_records[(scenario, op)]["observed"]
        assert truth.startswith("ok 0 aux=") and got.startswith("ok 0 aux="), (truth, got)
        assert int(got.split("=")[1], 16) == int(truth.split("=")[1], 16) ^ (2**64 - 1), (truth, got)
    else:
        assert got == observed
