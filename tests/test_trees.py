"""Kernel trees: spec parsing, checking local trees, and one real Debian fetch."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness" / "driver"))

from kconform.sources import debian, tree_fetch, trees  # noqa: E402
from kconform.sources.trees import NEEDED_PATHS, TreeError  # noqa: E402

MAKEFILE = "# SPDX\nVERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 4\nEXTRAVERSION = -rc1\nNAME = Baby Opossum\n"


def make_tree(root: Path, skip: tuple[str, ...] = ()) -> Path:
    for rel in NEEDED_PATHS:
        if rel in skip:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(MAKEFILE if rel == "Makefile" else "/* */\n")
    return root


# --- specs --------------------------------------------------------------------

@pytest.mark.parametrize("spec,package,suites", [
    ("debian:7.3", "linux-source-7.3", ("trixie-backports",)),
    ("debian:7.2", "linux-source-7.2", ("trixie-backports",)),
    ("debian:6.12", "linux-source-6.12", ("trixie",)),
    (" debian:7.3 ", "linux-source-7.3", ("trixie-backports",)),
])
def test_parse_spec(spec, package, suites):
    s = trees.parse_spec(spec)
    assert (s.package, s.suites) == (package, suites)


@pytest.mark.parametrize("spec", ["ubuntu:7.3", "debian:7", "debian:5.10", "7.3", "debian:7.3.4", ""])
def test_parse_spec_rejects(spec):
    with pytest.raises(TreeError) as e:
        trees.parse_spec(spec)
    msg = str(e.value)
    assert repr(spec) in msg and "debian:7.3" in msg and "--tree" in msg


# --- local trees --------------------------------------------------------------

def test_check_complete_tree(tmp_path):
    info = trees.check(make_tree(tmp_path))
    assert info.version == "7.3.4-rc1"
    assert info.present == NEEDED_PATHS and info.missing == ()
    assert info.package is None  # not a fetched tree: no stamp


def test_check_names_every_missing_file_and_the_tree(tmp_path):
    missing = ("arch/arm64/kvm/hyp/nvhe/ffa.c", "include/linux/arm_ffa.h")
    with pytest.raises(TreeError) as e:
        trees.check(make_tree(tmp_path, skip=missing))
    msg = str(e.value)
    assert str(tmp_path) in msg and "2 needed file(s)" in msg
    for rel in missing:
        assert rel in msg
    assert "Makefile" not in msg.split("lacks")[1].split("(")[0]


def test_check_not_a_directory(tmp_path):
    with pytest.raises(TreeError, match="does not exist"):
        trees.check(tmp_path / "nope")


def test_check_makefile_without_version(tmp_path):
    make_tree(tmp_path)
    (tmp_path / "Makefile").write_text("all:\n")
    with pytest.raises(TreeError, match="VERSION"):
        trees.check(tmp_path)


# --- mirror -------------------------------------------------------------------

def test_mirror_from_deb822_skips_security(tmp_path):
    src = tmp_path / "debian.sources"
    src.write_text("Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n"
                   "Components: main\n\n"
                   "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\nComponents: main\n")
    assert debian.system_mirror([src], TreeError) == "http://mirror.example/debian"


def test_mirror_from_one_line_format(tmp_path):
    src = tmp_path / "sources.list"
    src.write_text("# comment\ndeb [arch=amd64] https://mirror.example/debian bookworm main\n")
    assert debian.system_mirror([tmp_path / "missing.sources", src], TreeError) == "https://mirror.example/debian"


def test_no_mirror_is_an_error(tmp_path):
    with pytest.raises(TreeError, match="no Debian mirror"):
        debian.system_mirror([tmp_path / "missing.sources"], TreeError)


# --- the cache ----------------------------------------------------------------

def test_cached_tree_is_returned_without_network(tmp_path, monkeypatch):
    tree = make_tree(tmp_path / "trees" / "debian-7.3.4")
    (tree / trees.STAMP_NAME).write_text(json.dumps({
        "package": "linux-source-7.3", "package_version": "7.3.4-1~bpo13+1",
        "sha256": "0" * 64, "paths": list(NEEDED_PATHS)}))
    monkeypatch.setattr(tree_fetch, "download_tree", lambda *a: pytest.fail("fetch went to the network"))
    assert tree_fetch.fetch("debian:7.3", tmp_path, progress=lambda m: None) == tree


def test_stale_stamp_is_not_reused(tmp_path, monkeypatch):
    tree = make_tree(tmp_path / "trees" / "debian-7.3.4")
    (tree / trees.STAMP_NAME).write_text(json.dumps({
        "package": "linux-source-7.3", "package_version": "7.3.4-1~bpo13+1",
        "sha256": "0" * 64, "paths": ["Makefile"]}))  # made with an older NEEDED_PATHS
    monkeypatch.setattr(tree_fetch, "download_tree", lambda *a: "refetched")
    assert tree_fetch.fetch("debian:7.3", tmp_path, progress=lambda m: None) == "refetched"


# --- a real fetch ------------------------------------------------------------

def _mirror_reachable() -> bool:
    if os.environ.get("KCONFORM_OFFLINE"):
        return False
    try:
        url = urllib.parse.urlparse(debian.system_mirror(error=TreeError))
        socket.create_connection((url.hostname, url.port or 80), timeout=3).close()
        return True
    except (OSError, TreeError):
        return False


@pytest.mark.network
@pytest.mark.skipif(not _mirror_reachable(), reason="Debian mirror unreachable (or KCONFORM_OFFLINE set)")
def test_fetch_debian_7_3(tmp_path):
    messages: list[str] = []
    t0 = time.monotonic()
    tree = tree_fetch.fetch("debian:7.3", tmp_path / "cache", progress=messages.append)
    first = time.monotonic() - t0

    info = trees.check(tree)
    assert info.version.startswith("7.3.")
    assert tree.name == f"debian-{info.version}"
    assert info.package == "linux-source-7.3"
    assert len(info.sha256) == 64
    assert "kvm_host_ffa_handler" in (tree / "arch/arm64/kvm/hyp/nvhe/ffa.c").read_text()
    # Only the needed files, and no .deb left behind.
    files = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()}
    assert files == set(NEEDED_PATHS) | {trees.STAMP_NAME}
    assert not list((tmp_path / "cache").rglob("*.deb"))
    assert first < 120, f"fetch took {first:.0f} s"

    t0 = time.monotonic()
    assert tree_fetch.fetch("debian:7.3", tmp_path / "cache", progress=messages.append) == tree
    assert time.monotonic() - t0 < 1
    assert messages[-1].endswith("(cached)")
