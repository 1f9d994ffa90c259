"""./kconform installs the driver's own Debian packages on first use. A fresh
machine failed once because report_html.py imported jinja2 and the bootstrap only
checked rich: every third-party module the driver imports must be checked by the
bootstrap and installed by a group of ci/packages.txt it reads."""

import ast
import re
import sys

from conftest import REPO

DRIVER = REPO / "harness" / "driver" / "kconform"
# Debian package that provides each third-party module the driver may import.
PROVIDERS = {"rich": "python3-rich", "jinja2": "python3-jinja2", "markupsafe": "python3-jinja2",  # a dependency of it
             "z3": "python3-z3"}


def third_party_imports(root=DRIVER) -> set:
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                top = n.split(".")[0]
                if top != "kconform" and top not in sys.stdlib_module_names:
                    found.add(top)
    return found


def driver_group() -> set:
    groups = {}
    for line in (REPO / "ci" / "packages.txt").read_text().splitlines():
        group, sep, names = line.split("#", 1)[0].partition(":")
        if sep:
            groups[group.strip()] = names.split()
    return set(groups.get("driver", [])) | set(groups.get("test", []))


def test_every_third_party_import_is_bootstrapped():
    imports = third_party_imports()
    unknown = imports - PROVIDERS.keys()
    assert not unknown, f"the driver imports {sorted(unknown)}: add its Debian package to PROVIDERS and ci/packages.txt"
    boot = (REPO / "kconform").read_text()
    for module in imports:
        assert PROVIDERS[module] in driver_group(), f"{module}: {PROVIDERS[module]} not in the driver group"
        assert re.search(rf"^\s*import {module}\b", boot, re.M), f"./kconform does not check for {module}"
    assert "ci\", \"packages.txt\"" in boot or "packages.txt" in boot


def test_the_scan_finds_a_module_outside_the_providers(tmp_path):
    # the test above can fail: a third-party import it does not know is found
    (tmp_path / "x.py").write_text("import os\nfrom not_a_debian_module.sub import y\nfrom . import z\n")
    assert third_party_imports(tmp_path) == {"not_a_debian_module"}
