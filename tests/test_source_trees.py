"""TF-A trees from Debian source packages (debian-src:): spec parsing, the
showsrc record, checking a tree, the cache, the CLI's errors and one real fetch."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import kconform
from kconform.sources import debian_src, source_trees
from kconform.sources.debian import PrivateApt
from kconform.sources.source_trees import TFA_NEEDED_PATHS
from kconform.sources.trees import STAMP_NAME, TreeError

TFA_MAKEFILE = "#\n# Trusted Firmware Version\n#\nVERSION_MAJOR\t\t\t:= 2\nVERSION_MINOR\t\t\t:= 12\n" \
               "# VERSION_PATCH is only used for LTS releases\nVERSION_PATCH\t\t\t:= 1\n"


def make_tfa_tree(root: Path, skip: tuple[str, ...] = ()) -> Path:
    for rel in TFA_NEEDED_PATHS:
        if rel in skip:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(TFA_MAKEFILE if rel == "Makefile" else "/* */\n")
    return root


# --- specs --------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["debian-src:arm-trusted-firmware", " debian-src:arm-trusted-firmware "])
def test_parse_spec(spec):
    s = source_trees.parse_spec(spec)
    assert (s.package, s.version, s.suites) == ("arm-trusted-firmware", "2.12.1+dfsg-1", ("trixie",))
    assert source_trees.is_source_spec(spec)


@pytest.mark.parametrize("spec", ["debian-src:nope", "debian-src:", "debian-src:arm-trusted-firmware2",
                                  "debian:arm-trusted-firmware", "arm-trusted-firmware"])
def test_parse_spec_rejects_naming_the_spec(spec):
    with pytest.raises(TreeError) as e:
        source_trees.parse_spec(spec)
    msg = str(e.value)
    assert repr(spec) in msg and "debian-src:arm-trusted-firmware" in msg


def test_kernel_specs_are_not_source_specs():
    assert not source_trees.is_source_spec("debian:7.3")
    assert source_trees.cached("debian:7.3") is None


# --- the Sources record -------------------------------------------------------

SHOWSRC = """Package: arm-trusted-firmware
Binary: arm-trusted-firmware, arm-trusted-firmware-tools
Version: 2.12.1+dfsg-1
Checksums-Sha256:
 {a} 1672 arm-trusted-firmware_2.12.1+dfsg-1.dsc
 {b} 8078248 arm-trusted-firmware_2.12.1+dfsg.orig.tar.xz
 {c} 14012 arm-trusted-firmware_2.12.1+dfsg-1.debian.tar.xz
Directory: pool/main/a/arm-trusted-firmware

Package: arm-trusted-firmware
Version: 2.10.0+dfsg-1
Checksums-Sha256:
 {c} 1600 arm-trusted-firmware_2.10.0+dfsg-1.dsc

""".format(a="a" * 64, b="b" * 64, c="c" * 64)


def test_parse_showsrc_keeps_the_file_list():
    recs = debian_src.parse_showsrc(SHOWSRC)
    assert [r["Version"] for r in recs] == ["2.12.1+dfsg-1", "2.10.0+dfsg-1"]
    pkg = debian_src._package_of(recs[0])
    assert pkg.dsc == "arm-trusted-firmware_2.12.1+dfsg-1.dsc" and pkg.dsc_sha256 == "a" * 64
    assert [f for f, _ in pkg.files][1:] == ["arm-trusted-firmware_2.12.1+dfsg.orig.tar.xz",
                                             "arm-trusted-firmware_2.12.1+dfsg-1.debian.tar.xz"]


class FakeApt:
    """PrivateApt's show side, answering apt-cache showsrc with a fixed text."""
    suites, mirror, error = ("trixie",), "http://mirror.example/debian", TreeError

    def __init__(self, text: str):
        self.text = text

    def run(self, *args, **kw):
        import subprocess
        return subprocess.CompletedProcess(args, 0, self.text, "")


def test_show_source_picks_the_pinned_version():
    pkg = debian_src.show_source(FakeApt(SHOWSRC), "arm-trusted-firmware", "2.10.0+dfsg-1", "hint")
    assert pkg.version == "2.10.0+dfsg-1"


def test_show_source_names_the_versions_it_has():
    with pytest.raises(TreeError) as e:
        debian_src.show_source(FakeApt(SHOWSRC), "arm-trusted-firmware", "9.9-1", "the hint")
    msg = str(e.value)
    assert "arm-trusted-firmware 9.9-1 not found" in msg and "2.10.0+dfsg-1, 2.12.1+dfsg-1" in msg
    assert "the hint" in msg


def test_show_source_unknown_package():
    with pytest.raises(TreeError, match="source package nope not found in trixie"):
        debian_src.show_source(FakeApt(""), "nope", "1", "hint")


def test_private_apt_writes_deb_src_lines(tmp_path):
    apt = PrivateApt(tmp_path, ("trixie",), "http://mirror.example/debian", TreeError, kind="deb-src")
    assert apt.sources.name == "sources-src-trixie.list"
    assert apt.sources.read_text().startswith("deb-src [signed-by=")
    binary = PrivateApt(tmp_path, ("trixie",), "http://mirror.example/debian", TreeError)
    assert binary.sources != apt.sources and binary.sources.read_text().startswith("deb [")


# --- checking a tree ----------------------------------------------------------

def test_check_complete_tfa_tree(tmp_path):
    info = source_trees.check_tfa(make_tfa_tree(tmp_path))
    assert info.version == "2.12.1" and info.package is None


def test_check_names_every_missing_file(tmp_path):
    missing = ("services/std_svc/spm/el3_spmc/spmc_shared_mem.c", "lib/libfdt/fdt_sw.c")
    with pytest.raises(TreeError) as e:
        source_trees.check_tfa(make_tfa_tree(tmp_path, skip=missing))
    msg = str(e.value)
    assert str(tmp_path) in msg and "2 needed file(s)" in msg and all(m in msg for m in missing)


def test_check_makefile_without_version(tmp_path):
    make_tfa_tree(tmp_path)
    (tmp_path / "Makefile").write_text("all:\n")
    with pytest.raises(TreeError, match="VERSION_MAJOR"):
        source_trees.check_tfa(tmp_path)


# --- the cache ----------------------------------------------------------------

def _stamped(cache: Path, paths=TFA_NEEDED_PATHS) -> Path:
    tree = make_tfa_tree(cache / "trees" / "debian-src-arm-trusted-firmware-2.12.1+dfsg-1")
    (tree / STAMP_NAME).write_text(json.dumps({
        "kind": "debian-src", "package": "arm-trusted-firmware", "package_version": "2.12.1+dfsg-1",
        "sha256": "0" * 64, "paths": list(paths)}))
    return tree


def test_cached_tree_is_returned_without_network(tmp_path, monkeypatch):
    tree = _stamped(tmp_path)
    monkeypatch.setattr(source_trees, "_download", lambda *a: pytest.fail("fetch went to the network"))
    assert source_trees.fetch("debian-src:arm-trusted-firmware", tmp_path, progress=lambda m: None) == tree
    assert source_trees.cached("debian-src:arm-trusted-firmware", tmp_path) == tree


def test_stale_stamp_is_not_reused(tmp_path, monkeypatch):
    _stamped(tmp_path, paths=["Makefile"])  # made with an older needed-file list
    monkeypatch.setattr(source_trees, "_download", lambda *a: "refetched")
    assert source_trees.cached("debian-src:arm-trusted-firmware", tmp_path) is None
    assert source_trees.fetch("debian-src:arm-trusted-firmware", tmp_path, progress=lambda m: None) == "refetched"


# --- the command line ---------------------------------------------------------

def test_cli_unknown_source_package_exits_2_naming_it():
    r = kconform("tree", "fetch", "debian-src:nope")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "'debian-src:nope'" in r.stderr and "debian-src:arm-trusted-firmware" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_cli_unknown_spec_names_both_kinds():
    r = kconform("tree", "fetch", "ubuntu:7.3")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "'ubuntu:7.3'" in r.stderr and "debian:7.3" in r.stderr
    assert "debian-src:arm-trusted-firmware" in r.stderr


def test_cli_check_tfa_tree(tmp_path):
    r = kconform("tree", "check", str(make_tfa_tree(tmp_path)))
    assert r.returncode == 0 and "TF-A 2.12.1" in r.stdout, r.stdout + r.stderr
    (tmp_path / "common" / "uuid.c").unlink()
    r = kconform("tree", "check", str(tmp_path))
    assert r.returncode == 2 and "common/uuid.c" in r.stderr, r.stdout + r.stderr


def test_cli_patch_refuses_a_firmware_tree(tmp_path):
    patch = tmp_path / "p.patch"
    patch.write_text("")
    r = kconform("tree", "patch", "debian-src:arm-trusted-firmware", str(patch))
    assert r.returncode == 2 and "firmware tree" in r.stderr, r.stdout + r.stderr


# --- a real fetch ------------------------------------------------------------

@pytest.mark.network
def test_fetch_tfa_source_package(tmp_path):
    from test_trees import _mirror_reachable
    if not _mirror_reachable():
        pytest.skip("Debian mirror unreachable (or KCONFORM_OFFLINE set)")
    messages: list[str] = []
    t0 = time.monotonic()
    tree = source_trees.fetch("debian-src:arm-trusted-firmware", tmp_path / "cache", progress=messages.append)
    first = time.monotonic() - t0
    assert first < 300, f"fetch took {first:.0f} s"

    info = source_trees.check_tfa(tree)
    assert info.version == "2.12.1" and info.package_version == "2.12.1+dfsg-1" and len(info.sha256) == 64
    assert tree == tmp_path / "cache" / "trees" / "debian-src-arm-trusted-firmware-2.12.1+dfsg-1"
    assert "spmc_smc_handler" in (tree / "services/std_svc/spm/el3_spmc/spmc_main.c").read_text()
    assert (tree / "debian" / "changelog").read_text().startswith("arm-trusted-firmware (2.12.1+dfsg-1)")
    # The downloads are gone; only the unpacked tree stays.
    cache = tmp_path / "cache"
    left = [p for p in cache.rglob("*") if p.is_file() and p.name.endswith((".dsc", ".tar.xz"))]
    assert left == []

    t0 = time.monotonic()
    assert source_trees.fetch("debian-src:arm-trusted-firmware", cache, progress=messages.append) == tree
    assert time.monotonic() - t0 < 1 and messages[-1].endswith("(cached)")
