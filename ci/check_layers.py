#!/usr/bin/python3
"""Checks that every dependency of the C++ engine points one way (ci/layers.toml).

    ci/check_layers.py [ROOT]

Reads every #include "..." of the repository's C/C++ files, every link of
its CMakeLists.txt files and every import between the Python driver's
sub-packages (target_link_libraries, kconform_unit_test LIBS),
maps both ends to rooms (the longest folder prefix listed in layers.toml) and
prints each edge that the table does not allow, as FILE:LINE: message. Also
refused: a `uses` entry that points to a higher floor, and any CMake file that
calls the Python driver. Exit 0 clean, 1 offenders found, 2 bad table.
"""
from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

SOURCE_SUFFIXES = {".h", ".hh", ".hpp", ".c", ".cc", ".cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Folders whose files are not ours to check: stand-ins for kernel headers and build output.
SKIP_PARTS = {"shim", "build", ".git", "reports"}
DRIVER_CALL = re.compile(r"kconform\.(\w+)|harness/driver")


@dataclass(frozen=True)
class Offence:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class Layers:
    def __init__(self, table: dict):
        self.floors: list[str] = table["floors"]
        self.rooms: dict[str, dict] = table["rooms"]
        # Longest prefix first, so targets/el2 wins over targets.
        self._order = sorted(self.rooms, key=len, reverse=True)
        self.data: list[str] = table.get("data", [])

    def room_of(self, rel: str) -> str | None:
        for room in self._order:
            if rel.startswith(room + "/"):
                return room
        return None

    def floor(self, room: str) -> int:
        return self.floors.index(self.rooms[room]["floor"])

    def allows(self, user: str, used: str) -> bool:
        return user == used or used in self.rooms[user]["uses"]

    def table_errors(self) -> list[Offence]:
        out = []
        for room, spec in self.rooms.items():
            if spec.get("floor") not in self.floors:
                out.append(Offence("ci/layers.toml", f"room {room}: floor {spec.get('floor')!r} is not one of {self.floors}"))
                continue
            for used in spec.get("uses", []):
                if used not in self.rooms:
                    out.append(Offence("ci/layers.toml", f"room {room}: uses unknown room {used!r}"))
                elif self.floor(used) > self.floor(room):
                    out.append(Offence("ci/layers.toml", f"room {room} ({spec['floor']}) uses {used} "
                                                         f"({self.rooms[used]['floor']}): an upward edge"))
        return out


def _skipped(rel: Path) -> bool:
    return any(part in SKIP_PARTS or part.startswith("build") for part in rel.parts)


def include_offences(root: Path, layers: Layers) -> list[Offence]:
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.name in layers.data and not _skipped(rel) and path.is_file():
            for m in INCLUDE.finditer(path.read_text(errors="replace")):
                out.append(Offence(f"{rel}", f"a data file (layers.toml `data`) includes {m.group(1)}"))
            continue
        if path.suffix not in SOURCE_SUFFIXES or _skipped(rel) or not path.is_file():
            continue
        user = layers.room_of(rel.as_posix())
        text = path.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            used = layers.room_of(target)
            if used is None:
                continue  # a sibling file, a kernel header, a stand-in
            if Path(target).name in layers.data:
                continue  # a data file (layers.toml `data`), checked to include nothing
            line = text.count("\n", 0, m.start()) + 1
            if user is None:
                out.append(Offence(f"{rel}:{line}", f"file outside every room includes {target}"))
            elif not layers.allows(user, used):
                out.append(Offence(f"{rel}:{line}", f"{user} ({layers.rooms[user]['floor']}) must not include "
                                                    f"{target} ({used}, {layers.rooms[used]['floor']})"))
    return out


def _cmake_commands(text: str, name: str):
    """Yields (line, [args]) of each call of command `name` (arguments may span lines)."""
    for m in re.finditer(rf"^\s*{name}\s*\(", text, re.M | re.I):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        body = re.sub(r"#[^\n]*", "", text[m.end():i - 1])
        yield text.count("\n", 0, m.start()) + 1, body.split()


def _normal(name: str) -> str:
    return re.sub(r"\$\{[^}]*\}", "*", name)


def _target_room(layers: Layers, folder: Path, args: list[str]) -> str | None:
    """The room of a CMake target: that of its first source file, else of its folder."""
    for a in args:
        if Path(a).suffix in SOURCE_SUFFIXES and "$" not in a:
            return layers.room_of((folder / a).as_posix())
    return layers.room_of((folder / "CMakeLists.txt").as_posix())


def cmake_offences(root: Path, layers: Layers) -> list[Offence]:
    files = [p for p in sorted(root.rglob("CMakeLists.txt")) if not _skipped(p.relative_to(root))]
    declared: dict[str, str | None] = {}  # normalised target name -> room of the folder declaring it
    for f in files:
        text = f.read_text()
        folder = f.parent.relative_to(root)
        for cmd in ("add_library", "add_executable", "kconform_unit_test"):
            for _, args in _cmake_commands(text, cmd):
                if args:
                    declared.setdefault(_normal(args[0]), _target_room(layers, folder, args[1:]))
    out = []
    for f in files:
        rel = f.relative_to(root)
        text = f.read_text()
        for m in DRIVER_CALL.finditer(re.sub(r"#[^\n]*", "", text)):
            out.append(Offence(f"{rel}", f"CMake calls the Python driver ({m.group(0)}): the driver hands CMake a path"))
        links = [(line, args[0], args[1:]) for line, args in _cmake_commands(text, "target_link_libraries") if args]
        for line, args in _cmake_commands(text, "kconform_unit_test"):
            if "LIBS" in args:
                links.append((line, args[0], args[args.index("LIBS") + 1:]))
        for line, user_target, libs in links:
            user = declared.get(_normal(user_target))
            for lib in libs:
                used = declared.get(_normal(lib), "?")
                if used == "?" or used is None or user is None:
                    continue  # a system library, a keyword (PUBLIC), or a top-level target
                if not layers.allows(user, used):
                    out.append(Offence(f"{rel}:{line}", f"{user_target} ({user}) must not link {lib} ({used})"))
    return out


PY_IMPORT = re.compile(r"^\s*(?:from\s+kconform\.(\w+)|import\s+kconform\.(\w+))", re.M)


def driver_offences(root: Path, table: dict) -> list[Offence]:
    """Imports inside the Python driver that run against its sub-package order."""
    spec = table.get("driver")
    if not spec:
        return []
    order: list[str] = spec["order"]
    pkg = root / spec["package"]
    out = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg)
        if len(rel.parts) < 2 or rel.parts[0] not in order:
            continue  # the package's own __init__/__main__
        mine = order.index(rel.parts[0])
        text = path.read_text()
        for m in PY_IMPORT.finditer(text):
            used = m.group(1) or m.group(2)
            if used in order and order.index(used) > mine:
                line = text.count("\n", 0, m.start()) + 1
                out.append(Offence(f"{path.relative_to(root)}:{line}",
                                   f"driver {rel.parts[0]} must not import kconform.{used} (later in {order})"))
    return out


def check(root: Path, table_path: Path | None = None) -> tuple[list[Offence], list[Offence]]:
    """(table errors, offending edges) for the tree at root."""
    table = tomllib.loads((table_path or root / "ci" / "layers.toml").read_text())
    layers = Layers(table)
    errors = layers.table_errors()
    if errors:
        return errors, []
    return [], include_offences(root, layers) + cmake_offences(root, layers) + driver_offences(root, table)


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent)
    try:
        errors, offences = check(root)
    except (OSError, KeyError, tomllib.TOMLDecodeError) as e:
        print(f"check_layers: ci/layers.toml: {e}", file=sys.stderr)
        return 2
    for o in errors + offences:
        print(o)
    if errors:
        return 2
    print(f"check_layers: {len(offences)} upward or undeclared edge(s)", file=sys.stderr)
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
