"""The README is one page and tells the truth (issue 39): at most 15 KB; every
`./kconform ...` command and every `--flag` it (or docs/commands.md) shows exists in
the command line (checked against the argparse parser, nothing is run); every relative
link of README.md and docs/*.md resolves, anchors included."""

import argparse
import re
from pathlib import Path

import pytest

from conftest import REPO
from kconform.commands import cli

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
COMMAND_PAGES = [README, REPO / "docs" / "commands.md"]
LIMIT = 15 * 1024


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def _flags(p: argparse.ArgumentParser) -> set[str]:
    return {o for a in p._actions for o in a.option_strings}


def _all_flags(p: argparse.ArgumentParser) -> set[str]:
    out = _flags(p)
    for sp in _subparsers(p).values():
        out |= _all_flags(sp)
    return out


PARSER = cli.build_parser()
FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*$")


def code_texts(text: str) -> list[str]:
    """Every inline code span and every line of a fenced code block."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            out.append(line)
        else:
            out += re.findall(r"`([^`]+)`", line)
    return out


def commands(text: str) -> list[str]:
    """The kconform command lines shown: from `./kconform` (or a span starting with
    `kconform `) to the end of the span or line, a shell comment or a shell operator."""
    out = []
    for code in code_texts(text):
        code = code.replace("\\|", "|")
        m = re.search(r"(?:^|[\s;(=])\./kconform(\s.*|$)", code) or re.match(r"^kconform(\s.*)$", code)
        if not m:
            continue
        rest = re.split(r"\s#\s|\s&&\s|\s\|\|\s|\s;\s|\s\|\s", m.group(1))[0]
        out.append(rest.strip())
    return out


def check_command(rest: str) -> list[str]:
    """What is wrong with `kconform REST` against the parser: [] when nothing."""
    words = [w.strip("[](),") for w in rest.split()]
    words = [w for w in words if w and w != "..."]
    if not words:
        return []
    chain = [PARSER]
    subs = _subparsers(PARSER)
    problems = []
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 1
    if i < len(words):
        if words[i] not in subs:
            return [f"'{words[i]}' is not a kconform command (kconform {rest})"]
        chain.append(subs[words[i]])
        i += 1
        while (subs := _subparsers(chain[-1])) and i < len(words) and words[i] in subs:
            chain.append(subs[words[i]])
            i += 1
    allowed = set().union(*(_flags(p) for p in chain))
    for w in words:
        flag = w.split("=", 1)[0]
        if w == "--" or not FLAG.match(flag):
            continue
        if flag not in allowed:
            problems.append(f"flag {flag} does not exist for `kconform {' '.join(words[:i])}` "
                            f"(shown: kconform {rest})")
    return problems


def test_the_readme_is_one_page():
    size = len(README.read_bytes())
    assert size <= LIMIT, f"README.md is {size} bytes, more than {LIMIT}: move detail into docs/"


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=lambda p: p.name)
def test_every_command_shown_exists(page):
    shown = commands(page.read_text())
    assert shown, f"{page.name} shows no ./kconform command"
    problems = [p for c in shown for p in check_command(c)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=lambda p: p.name)
def test_every_flag_shown_exists(page):
    """A code span that is a flag (`--tree`, `--apply PATCH`, `-v`) names one kconform has."""
    known = _all_flags(PARSER)
    problems = []
    for code in code_texts(page.read_text()):
        first = code.split()[0] if code.split() else ""
        if FLAG.match(first.split("=", 1)[0]) and first != "--" and (first.startswith("--") or len(first) == 2):
            if first.split("=", 1)[0] not in known:
                problems.append(f"`{code}`: {first} is no flag of any kconform command")
    assert not problems, "\n".join(problems)


def test_the_checker_catches_what_does_not_exist():
    assert check_command("run --target el2 --apply X.patch") == []
    assert check_command("fuzz status --json DIR") == []
    assert check_command("tree fetch debian:7.3") == []
    assert check_command("rules --abi ffa") == []
    assert check_command("frobnicate --x")[0].startswith("'frobnicate' is not a kconform command")
    assert "flag --colour does not exist" in check_command("run --colour red")[0]
    assert "flag --json does not exist" in check_command("run --json")[0]
    assert commands("a `./kconform run --tree T` b\n```\n./kconform test     # the tests\n```\n") == \
        ["run --tree T", "test"]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    h = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    out: set[str] = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not (m := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)):
            continue
        slug, n = _slug(m.group(1)), 1
        base = slug
        while slug in out:
            slug, n = f"{base}-{n}", n + 1
        out.add(slug)
    return out


def links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)


@pytest.mark.parametrize("page", [README] + DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    problems = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            problems.append(f"{target}: {dest} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading '#{anchor}' in {dest.relative_to(REPO)}")
    assert not problems, "\n".join(problems)


def test_docs_exist_and_the_readme_points_at_each():
    text = README.read_text()
    assert DOCS, "docs/ is empty"
    for d in DOCS:
        assert f"docs/{d.name}" in text, f"README.md does not point at docs/{d.name}"
