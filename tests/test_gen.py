"""The Z3 edge cases: committed files are what the generator writes (so
generation is deterministic and current), every case is labelled with the
condition it targets, and the guest_memfd cases pass on this kernel."""

import json
import re

from conftest import REPO, kconform, needs_host_gmem, needs_kvm

Z3 = REPO / "corpora" / "z3"


def test_committed_cases_are_current_and_generation_is_deterministic():
    r = kconform("gen", "--check", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    counts = {}
    for f in doc["functions"]:
        counts[f["abi"]] = counts.get(f["abi"], 0) + f["cases"]
        assert f["cases"] > f["conditions"], f  # at least one case per condition, plus edges
    assert counts["gmem"] >= 100 and counts["ffa"] >= 200, counts


def test_every_case_is_labelled_with_its_condition(engine):
    files = sorted(str(p) for p in Z3.rglob("*.kcs"))
    assert {p.split("/")[-2] for p in files} == {"gmem", "ffa"}
    engine.check(files)
    for path in files:
        text = open(path).read()
        conds = set(re.findall(r"^#   ([\w-]+): ", text, re.M))
        blocks = text.split("\nkconform-scenario 1\n")[1:]
        prev = text.split("\nkconform-scenario 1\n")
        for i, block in enumerate(blocks):
            name = re.search(r"^name (\S+)$", block, re.M).group(1)
            assert name.startswith("z3/"), (path, name)
            comment = prev[i].rsplit("\n\n", 1)[-1]
            assert comment.startswith("# Z3 "), (path, name, comment)
            assert "breaks:" in comment, (path, name)
            kind, *also = name.rsplit("/", 1)[1].split("+")
            if kind != "valid":
                target = re.sub(r"^(break|edge)-", "", kind)
                assert any(target == c or target.startswith(c + "-") for c in conds), (path, name)
            # the other conditions a case cannot keep are conditions of its file, named in its comment
            assert all(c in conds and c in comment for c in also), (path, name)


@needs_kvm
@needs_host_gmem  # a KVM without guest_memfd runs every case as unsupported; QEMU runs them below
def test_gmem_cases_pass_on_this_kernel(tmp_path):
    out = tmp_path / "report.json"
    r = kconform("run", str(Z3 / "gmem"), "--target", "host", "--format", "json", "--output", str(out),
                 "--report-dir", str(tmp_path / "reports"))
    assert r.returncode in (0, 1), r.stderr
    (run,) = json.loads(out.read_text())["runs"]
    new = [f for f in run["findings"] if not f["baselined_by"]]
    assert not new, json.dumps(new, indent=1)
    assert run["counts"]["pass"] > 100


def test_gmem_cases_pass_on_debian_7_3_in_qemu(tmp_path):
    """The same cases on every machine: guest_memfd of Debian's 7.3 kernel booted in QEMU
    (TCG, no /dev/kvm needed)."""
    out = tmp_path / "report.json"
    r = kconform("run", str(Z3 / "gmem"), "--target", "qemu", "--format", "json", "--output", str(out),
                 "--report-dir", str(tmp_path / "reports"), timeout=1200)
    assert r.returncode in (0, 1), r.stderr
    (run,) = json.loads(out.read_text())["runs"]
    new = [f for f in run["findings"] if not f["baselined_by"]]
    assert not new, json.dumps(new, indent=1)
    assert run["counts"]["pass"] > 100

def test_large_ffa_corpus_is_what_its_generator_writes():
    """corpora/ffa/large.kcs is written by large_corpus.py: the committed file is current."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(REPO / "corpora" / "ffa" / "large_corpus.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
