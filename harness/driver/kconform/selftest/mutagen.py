"""Mutants of every condition and bound check of a tree's ffa.c, generated from its AST.

`kconform selftest mutants --abi ffa --family generated` (selftest/generated.py) runs
them; targets/el2/generated-mutants/README.md says what they are and how the survivors
are reviewed (survivors.json there).

The generator reads the C through libclang (Debian's python3-clang-14, ci/packages.txt
group "mutants"), parsed as the EL2 build compiles it (targets/el2/CMakeLists.txt: the
tree's headers copied out by targets/el2/tools/extract_tree.py, the stand-ins of
targets/el2/shim, gnu11). The AST says what is a condition, a clause, a comparison and
a statement; every edit is made on the file's own tokens, so each mutant changes one
contiguous stretch of text, which the AST located, and nothing inside a macro body or
a macro's arguments (WARN_ON(...), BUILD_BUG_ON(...), PAGE_ALIGNED(...) are atoms).

Operators (each mutant applies exactly one):
  negate          a condition (of if, while, for, ?: or a boolean return) made its
                  opposite: `a != b` -> `a == b`, `!x` -> `x`, `x` -> `!x`, else `!(...)`
  negate-clause   one clause of an `&&`/`||` condition negated the same way
  drop-clause     one clause of an `&&`/`||` chain removed with its operator
  bound-op        `<` <-> `<=`, `>` <-> `>=` in a comparison of a condition
  bound-plus1     the compared constant C (an integer constant expression on one side
  bound-minus1      of a comparison) moved: C + 1, C - 1, C * 2, C / 2; for `==`/`!=`
  bound-double      only when C is a number or a size, not an FF-A function ID or
  bound-half        status code (those are not bounds); `x % C` conditions: C * 2, C / 2
  bound-onesided  an exact check made one-sided: `x != C` -> `x > C` and `x < C`,
                  `x == C` -> `x >= C` and `x <= C` (same constants as above)
  drop-exit       a `goto`, `return`, `break` or `continue` that ends an if's branch
                  removed (the branch falls through)
  drop-error      a statement that sets an FF-A error removed: `X = FFA_RET_...;` or a
                  call with an FFA_RET_... argument (`ffa_to_smccc_res(res, FFA_RET_BUSY);`)
  swap-error      an FFA_RET_... error the code produces (not one it compares with)
                  replaced by another FF-A error code (SWAP_ERROR)

Each mutant has a stable ID, FUNCTION.OPERATOR.HASH, where HASH digests the function,
the operator, the text of the lines the edit touches (before and after) and an anchor:
the condition of the if/loop the edit sits in and the statement before that if (or the
if whose else it is). Line numbers are not in it, so an ID survives unrelated edits
above or below; two identical edits in identical surroundings get #2, #3 in file order.
A mutant that does not compile (clang -fsyntax-only with the build's flags) or repeats
another mutant's text is dropped with the reason.

    python3 -m kconform.selftest.mutagen debian:7.3|PATH|FILE.c [--out DIR] [--format json]
"""

from __future__ import annotations

import argparse
import ctypes
import difflib
import glob
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kconform.core.errors import ToolError
from kconform.core.paths import REPO

FFA_C = "arch/arm64/kvm/hyp/nvhe/ffa.c"
GENERATOR_FORMAT = 1
EL2 = REPO / "targets" / "el2"
# targets/el2/CMakeLists.txt _kc_kernel_cflags (the -W flags that make API drift an error)
KERNEL_CFLAGS = ["-std=gnu11", "-fno-strict-aliasing", "-fno-strict-overflow",
                 "-fno-delete-null-pointer-checks", "-include", "kc_kernel.h",
                 "-Werror=implicit-function-declaration", "-Werror=incompatible-pointer-types",
                 "-Werror=int-conversion", "-Werror=return-type", "-Wno-sign-compare",
                 "-Wno-unused-parameter", "-Wno-missing-field-initializers", "-Wno-unused-function",
                 "-Wno-pointer-arith", "-Wno-gnu-variable-sized-type-not-at-end"]
PAGE_SHIFT = 12   # the parse and the compile check are at 4K (the runs are at 4K and 16K)
ALT_PAGE_SHIFTS = (14,)   # a moved bound counts as no change only if it is one at 16K too

OPERATORS = ("negate", "negate-clause", "drop-clause", "bound-op", "bound-plus1", "bound-minus1",
             "bound-double", "bound-half", "bound-onesided", "drop-exit", "drop-error", "swap-error")
# swap-error: each FF-A error the code produces becomes the one a reader would most
# plausibly confuse it with (DEN0077 Table 12.x: the FFA_ERROR status codes)
SWAP_ERROR = {"FFA_RET_INVALID_PARAMETERS": "FFA_RET_DENIED",
              "FFA_RET_DENIED": "FFA_RET_INVALID_PARAMETERS",
              "FFA_RET_NOT_SUPPORTED": "FFA_RET_INVALID_PARAMETERS",
              "FFA_RET_NO_MEMORY": "FFA_RET_INVALID_PARAMETERS",
              "FFA_RET_ABORTED": "FFA_RET_INVALID_PARAMETERS",
              "FFA_RET_BUSY": "FFA_RET_DENIED",
              "FFA_RET_RETRY": "FFA_RET_BUSY",
              "FFA_RET_INTERRUPTED": "FFA_RET_ABORTED",
              "FFA_RET_NO_DATA": "FFA_RET_INVALID_PARAMETERS"}
ERROR_RE = re.compile(r"\bFFA_RET_(?!SUCCESS\b)[A-Z_]+\b")
COMPLEMENT = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
BOUND_OP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
ONESIDED = {"!=": (">", "<"), "==": (">=", "<=")}
COMPARE = set(COMPLEMENT)
EXITS = ("GOTO_STMT", "RETURN_STMT", "BREAK_STMT", "CONTINUE_STMT")


@dataclass
class Mutant:
    id: str
    op: str
    function: str
    line: int
    description: str
    start: int                 # the edit: source bytes [start, end) become new
    end: int
    new: str
    patch: str = ""
    anchor: str = ""

    def header(self) -> str:
        return f"kconform generated mutant {self.id} ({self.op}): {self.description}"


@dataclass
class Dropped:
    id: str
    op: str
    function: str
    line: int
    description: str
    reason: str


@dataclass
class Generation:
    path: str                  # the file as named in the patches (a/PATH, b/PATH)
    source_sha256: str
    mutants: list[Mutant] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    def by_id(self) -> dict[str, Mutant]:
        return {m.id: m for m in self.mutants}

    def to_json(self) -> dict:
        return {"format": GENERATOR_FORMAT, "path": self.path, "source_sha256": self.source_sha256,
                "mutants": [asdict(m) for m in self.mutants], "dropped": [asdict(d) for d in self.dropped]}

    @classmethod
    def from_json(cls, doc: dict) -> "Generation":
        return cls(doc["path"], doc["source_sha256"], [Mutant(**m) for m in doc["mutants"]],
                   [Dropped(**d) for d in doc["dropped"]])


# --- libclang -------------------------------------------------------------------

_ci = None


def cindex():
    """clang.cindex with its library loaded (python3-clang-14 names no library path)."""
    global _ci
    if _ci is not None:
        return _ci
    try:
        # on demand, like every group but the driver's own: generated.py installs group
        # "mutants" first (deps.ensure); the driver imports without it (tests/test_bootstrap.py)
        ci = importlib.import_module("clang.cindex")
    except ImportError as e:
        raise ToolError("the mutant generator needs libclang's Python bindings: apt-get install "
                        "python3-clang-14 (ci/packages.txt group mutants)") from e
    if not ci.Config.loaded:
        found = [p for pat in ("/usr/lib/llvm-14/lib/libclang.so.1", "/usr/lib/llvm-*/lib/libclang.so.1",
                               "/usr/lib/*/libclang-14.so.1", "/usr/lib/*/libclang-*.so.1")
                 for p in sorted(glob.glob(pat), reverse=True)]
        if not found:
            raise ToolError("libclang not found (/usr/lib/llvm-14/lib/libclang.so.1): apt-get install libclang1-14")
        ci.Config.set_library_file(found[0])
    lib = ci.conf.lib
    lib.clang_Cursor_Evaluate.argtypes = [ci.Cursor]
    lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
    lib.clang_EvalResult_getKind.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getKind.restype = ctypes.c_int
    lib.clang_EvalResult_getAsLongLong.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsLongLong.restype = ctypes.c_longlong
    lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
    _ci = ci
    return ci


def _evaluate(cursor) -> int | None:
    """The value of an integer constant expression, None for anything else."""
    lib = cindex().conf.lib
    r = lib.clang_Cursor_Evaluate(cursor)
    if not r:
        return None
    try:
        return lib.clang_EvalResult_getAsLongLong(r) if lib.clang_EvalResult_getKind(r) == 1 else None
    finally:
        lib.clang_EvalResult_dispose(r)


# --- the source, its tokens and a small expression model ------------------------------

def _norm(text: str) -> str:
    return " ".join(text.split())


def _short(text: str, limit: int = 110) -> str:
    text = _norm(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass
class Node:
    kind: str                  # and | or | cmp | not | paren | mod | atom
    start: int
    end: int
    kids: list["Node"] = field(default_factory=list)
    op: str = ""
    op_at: tuple[int, int] = (0, 0)
    cursor: object = None
    sides: tuple = ()          # cmp/mod: the cursors of the two operands


class Source:
    def __init__(self, tu, path: str, data: bytes):
        ci = cindex()
        self.ci, self.tu, self.path, self.data = ci, tu, path, data
        self.toks: list[tuple[int, int, str]] = []
        for t in tu.get_tokens(extent=tu.cursor.extent):
            loc = t.extent
            if loc.start.file is None or loc.start.file.name != path:
                continue
            self.toks.append((loc.start.offset, loc.end.offset, t.spelling))
        self.toks.sort()
        self.tok_at = {s: i for i, (s, _, _) in enumerate(self.toks)}
        self.tok_end = {e: i for i, (_, e, _) in enumerate(self.toks)}
        self.line_starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]

    def text(self, a: int, b: int) -> str:
        return self.data[a:b].decode()

    def line(self, off: int) -> int:
        lo, hi = 0, len(self.line_starts)
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if self.line_starts[mid] <= off:
                lo = mid
            else:
                hi = mid
        return lo + 1

    def ext(self, c) -> tuple[int, int] | None:
        """c's extent as file offsets, if it starts and ends on tokens of the file."""
        e = c.extent
        if e.start.file is None or e.start.file.name != self.path:
            return None
        a, b = e.start.offset, e.end.offset
        if a >= b or a not in self.tok_at or b not in self.tok_end:
            return None
        return a, b

    def tokens(self, a: int, b: int) -> list[tuple[int, int, str]]:
        i = self.tok_at.get(a)
        if i is None:
            i = next((k for k, t in enumerate(self.toks) if t[0] >= a), len(self.toks))
        out = []
        while i < len(self.toks) and self.toks[i][1] <= b:
            out.append(self.toks[i])
            i += 1
        return out

    def next_token(self, off: int) -> tuple[int, int, str] | None:
        i = self.tok_end.get(off)
        return self.toks[i + 1] if i is not None and i + 1 < len(self.toks) else None

    def first_token(self, c) -> str:
        e = c.extent
        i = self.tok_at.get(e.start.offset) if e.start.file and e.start.file.name == self.path else None
        return self.toks[i][2] if i is not None else ""

    # -- expressions --

    def strip(self, c):
        CK = self.ci.CursorKind
        while c.kind == CK.UNEXPOSED_EXPR:
            kids = list(c.get_children())
            if len(kids) == 1 and self.ext(kids[0]) and self.ext(kids[0]) == self.ext(c):
                c = kids[0]
            else:
                break
        return c

    def binop(self, c):
        """(operator, its offsets, left, right) of a binary operator spelled in the file."""
        kids = list(c.get_children())
        if len(kids) != 2:
            return None
        el, er, ec = self.ext(kids[0]), self.ext(kids[1]), self.ext(c)
        if not (el and er and ec) or el[1] > er[0] or (el[0], er[1]) != ec:
            return None
        between = self.tokens(el[1], er[0])
        if len(between) != 1:
            return None
        s, e, op = between[0]
        return op, (s, e), kids[0], kids[1]

    def node(self, c) -> Node | None:
        CK = self.ci.CursorKind
        c = self.strip(c)
        ec = self.ext(c)
        if ec is None:
            return None
        if c.kind == CK.BINARY_OPERATOR:
            b = self.binop(c)
            if b:
                op, at, left, right = b
                if op in ("&&", "||"):
                    kids = [self.node(left), self.node(right)]
                    if all(kids):
                        return Node("and" if op == "&&" else "or", *ec, kids=kids, op=op, op_at=at, cursor=c)
                    return Node("atom", *ec, cursor=c)
                if op in COMPARE:
                    return Node("cmp", *ec, op=op, op_at=at, cursor=c, sides=(left, right))
                if op == "%":
                    return Node("mod", *ec, op=op, op_at=at, cursor=c, sides=(left, right))
        if c.kind == CK.UNARY_OPERATOR and self.first_token(c) == "!":
            kids = list(c.get_children())
            ek = self.ext(kids[0]) if len(kids) == 1 else None
            if ek and ek[1] == ec[1] and ek[0] > ec[0]:
                inner = self.node(kids[0])
                if inner:
                    return Node("not", *ec, kids=[inner], cursor=c)
        if c.kind == CK.PAREN_EXPR and self.first_token(c) == "(":
            kids = list(c.get_children())
            inner = self.node(kids[0]) if len(kids) == 1 else None
            if inner and inner.start > ec[0] and inner.end < ec[1]:
                return Node("paren", *ec, kids=[inner], cursor=c)
        return Node("atom", *ec, cursor=c)


def _balanced_call(text: str) -> bool:
    """NAME(...) whose first '(' closes at the end."""
    m = re.match(r"^[A-Za-z_]\w*\s*\(", text)
    if not m or not text.endswith(")"):
        return False
    depth = 0
    for i, ch in enumerate(text[m.end() - 1:], m.end() - 1):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i == len(text) - 1
    return False


def _primary(text: str) -> bool:
    """An identifier, a member chain, a call or a parenthesised expression: safe to
    prefix with `!` or suffix with ` + 1` without parentheses."""
    t = text.strip()
    if re.fullmatch(r"[A-Za-z_]\w*(\s*(\.|->)\s*[A-Za-z_]\w*)*", t) \
            or re.fullmatch(r"\d+[uUlL]*|0[xX][0-9a-fA-F]+[uUlL]*", t):
        return True
    if _balanced_call(t):
        return True
    if t.startswith("(") and t.endswith(")"):
        depth = 0
        for i, ch in enumerate(t):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(t) - 1:
                return False
        return True
    return False


def _literal(text: str) -> int | None:
    m = re.fullmatch(r"(\d+|0[xX][0-9a-fA-F]+)[uUlL]*", text.strip())
    return int(m.group(1), 0) if m else None


# --- the walk ---------------------------------------------------------------------

class _Walker:
    def __init__(self, src: Source, alt_values: list[dict] = ()):
        self.src = src
        self.CK = src.ci.CursorKind
        self.alt_values = list(alt_values)   # per other parse (page size): extent -> value
        self.found: list[tuple[Mutant, str, str]] = []   # (mutant, id key, why it is dropped or "")
        self.function = ""

    def values(self, cursor) -> tuple[int, ...] | None:
        """The value of an integer constant expression in this parse and in every other
        one (the build's other page sizes), None if it is not one in all of them."""
        v = _evaluate(cursor)
        e = self.src.ext(cursor)
        if v is None or e is None:
            return None
        out = [v]
        for alt in self.alt_values:
            if alt.get(e) is None:
                return None
            out.append(alt[e])
        return tuple(out)

    @staticmethod
    def shown(values: tuple[int, ...]) -> str:
        return str(values[0]) if len(set(values)) == 1 else " / ".join(str(v) for v in values)

    # the anchor: what an edit's ID keeps of its surroundings, besides its own lines
    def stmt_anchor(self, stack: list, c) -> str:
        """The statement before c in its block, or the if whose else c is, or its parent's kind."""
        if not stack:
            return ""
        parent = stack[-1]
        if parent.kind == self.CK.COMPOUND_STMT:
            prev = None
            for k in parent.get_children():
                if self.src.ext(k) == self.src.ext(c):
                    break
                prev = k
            if prev is not None and self.src.ext(prev):
                return "after " + _norm(self.src.text(*self.src.ext(prev)))
            return "first in " + self.enclosing(stack[:-1])
        if parent.kind == self.CK.IF_STMT:
            cond = self.if_cond(parent)
            return ("in " if cond else "") + (_norm(self.src.text(*cond)) if cond else parent.kind.name)
        return parent.kind.name

    def enclosing(self, stack: list) -> str:
        """The condition of the innermost if/loop around (its text and anchor)."""
        for i in range(len(stack) - 1, -1, -1):
            s = stack[i]
            if s.kind in (self.CK.IF_STMT, self.CK.WHILE_STMT, self.CK.FOR_STMT, self.CK.DO_STMT):
                cond = self.if_cond(s) if s.kind != self.CK.FOR_STMT else self.for_cond(s)
                if cond:
                    return f"{s.kind.name.split('_')[0].lower()} ({_norm(self.src.text(*cond))}) " \
                           f"{self.stmt_anchor(stack[:i], s)}"
            if s.kind == self.CK.FUNCTION_DECL:
                break
        return "function " + self.function

    def keyword_parens(self, c, word: str) -> tuple[int, int] | None:
        """The offsets inside the parentheses after c's keyword, if c is spelled in the file."""
        e = c.extent
        i = self.src.tok_at.get(e.start.offset)
        if i is None or self.src.toks[i][2] != word or i + 1 >= len(self.src.toks) or self.src.toks[i + 1][2] != "(":
            return None
        depth, j = 0, i + 1
        while j < len(self.src.toks):
            t = self.src.toks[j][2]
            depth += t == "("
            depth -= t == ")"
            if depth == 0:
                return self.src.toks[i + 1][1], self.src.toks[j][0]
            j += 1
        return None

    def if_cond(self, c) -> tuple[int, int] | None:
        word = {"IF_STMT": "if", "WHILE_STMT": "while"}.get(c.kind.name)
        if c.kind == self.CK.DO_STMT:
            return self.do_cond(c)
        inside = self.keyword_parens(c, word) if word else None
        if not inside:
            return None
        toks = self.src.tokens(*inside)
        return (toks[0][0], toks[-1][1]) if toks else None

    def do_cond(self, c) -> tuple[int, int] | None:
        kids = list(c.get_children())
        if self.src.first_token(c) != "do" or len(kids) != 2:
            return None
        e = self.src.ext(kids[1])
        return e

    def for_cond(self, c) -> tuple[int, int] | None:
        inside = self.keyword_parens(c, "for")
        if not inside:
            return None
        toks = self.src.tokens(*inside)
        depth, semis = 0, []
        for k, t in enumerate(toks):
            depth += t[2] in "([{" and len(t[2]) == 1
            depth -= t[2] in ")]}" and len(t[2]) == 1
            if t[2] == ";" and depth == 0:
                semis.append(k)
        if len(semis) != 2 or semis[1] == semis[0] + 1:
            return None
        return toks[semis[0] + 1][0], toks[semis[1] - 1][1]

    def cond_node(self, c, rng: tuple[int, int]) -> Node | None:
        """The expression child of c that spans rng."""
        for k in c.get_children():
            n = self.src.node(k)
            if n and (n.start, n.end) == rng:
                return n
        return None

    # -- emitting --

    def emit(self, op: str, start: int, end: int, new: str, what: str, anchor: str, drop: str = "",
             at: int | None = None) -> None:
        src = self.src
        line = src.line(start if at is None else at)
        a = src.line_starts[src.line(start) - 1]
        b_line = src.line(max(start, end - 1) if end > start else start)
        b = src.line_starts[b_line] if b_line < len(src.line_starts) else len(src.data)
        before = src.text(a, b)
        after = src.text(a, start) + new + src.text(end, b)
        key = "\0".join((self.function, op, _norm(anchor), _norm(before), _norm(after)))
        m = Mutant("", op, self.function, line, f"{Path(src.path).name}:{line} {self.function}: {what}",
                   start, end, new, anchor=_norm(anchor))
        self.found.append((m, key, drop))

    def remove_statement(self, op: str, c, body_of_if: bool, what: str, anchor: str) -> None:
        """Removes statement c with its ';': the whole line(s) when nothing else is on them,
        `;` when c is an if's body without braces."""
        src = self.src
        e = src.ext(c)
        if not e:
            return
        start, end = e
        if src.toks[src.tok_end[end]][2] != ";":
            nxt = src.next_token(end)
            if not nxt or nxt[2] != ";":
                return
            end = nxt[1]
        text = src.text(start, end)
        if body_of_if:
            self.emit(op, start, end, ";", what.format(stmt=_short(text)), anchor)
            return
        a = src.line_starts[src.line(start) - 1]
        nl = src.data.find(b"\n", end)
        b = len(src.data) if nl < 0 else nl + 1
        if src.text(a, start).strip() == "" and src.text(end, b).strip() == "":
            self.emit(op, a, b, "", what.format(stmt=_short(text)), anchor)
        else:
            self.emit(op, start, end, "", what.format(stmt=_short(text)), anchor)

    # -- conditions --

    def condition(self, root: Node, where: str, anchor: str) -> None:
        src = self.src
        ctext = src.text(root.start, root.end)
        # negate the whole condition
        new, shown = self.negated(root)
        self.emit("negate", root.start, root.end, new, f"negate {where}: `{_short(ctext)}` -> `{_short(new)}`", anchor)
        leaves = self.leaves(root)
        if len(leaves) > 1:
            for leaf in leaves:
                new_leaf, _ = self.negated(leaf)
                ltext = src.text(leaf.start, leaf.end)
                self.emit("negate-clause", leaf.start, leaf.end, new_leaf,
                          f"negate the clause `{_short(ltext)}` of {where}: -> `{_short(new_leaf)}`", anchor)
        for chain in self.chains(root):
            for i, clause in enumerate(chain):
                if i + 1 < len(chain):
                    a, b = clause.start, chain[i + 1].start
                else:
                    a, b = chain[i - 1].end, clause.end
                ctext2 = src.text(clause.start, clause.end)
                self.emit("drop-clause", a, b, "",
                          f"drop the clause `{_short(ctext2)}` of {where}", anchor, at=clause.start)
        for n in self.compares(root):
            self.bounds(n, where, anchor)

    def negated(self, n: Node) -> tuple[str, str]:
        src = self.src
        text = src.text(n.start, n.end)
        if n.kind == "cmp":
            return src.text(n.start, n.op_at[0]) + COMPLEMENT[n.op] + src.text(n.op_at[1], n.end), "op"
        if n.kind == "not":
            return src.text(n.kids[0].start, n.end), "not"
        if n.kind == "paren" or (n.kind in ("atom", "mod") and _primary(text) and n.kind != "mod"):
            return "!" + text, "prefix"
        return "!(" + text + ")", "wrap"

    def leaves(self, n: Node) -> list[Node]:
        if n.kind in ("and", "or"):
            return [x for k in n.kids for x in self.leaves(k)]
        if n.kind == "paren" and n.kids[0].kind in ("and", "or", "paren"):
            return self.leaves(n.kids[0])
        return [n]

    def chains(self, n: Node, parent_op: str = "") -> list[list[Node]]:
        out: list[list[Node]] = []
        if n.kind in ("and", "or"):
            if n.op != parent_op:
                out.append(self.clauses(n, n.op))
            for k in n.kids:
                out += self.chains(k, n.op)
        elif n.kind in ("paren", "not"):
            out += self.chains(n.kids[0], "")
        return out

    def clauses(self, n: Node, op: str) -> list[Node]:
        if n.kind in ("and", "or") and n.op == op:
            return [x for k in n.kids for x in self.clauses(k, op)]
        return [n]

    def compares(self, n: Node) -> list[Node]:
        if n.kind in ("cmp", "mod"):
            return [n]
        return [x for k in n.kids for x in self.compares(k)]

    def bounds(self, n: Node, where: str, anchor: str) -> None:
        src = self.src
        text = src.text(n.start, n.end)
        if n.kind == "cmp" and n.op in BOUND_OP:
            new = src.text(n.start, n.op_at[0]) + BOUND_OP[n.op] + src.text(n.op_at[1], n.end)
            self.emit("bound-op", n.start, n.end, new, f"`{_short(text)}` -> `{_short(new)}` in {where}", anchor)
        left, right = n.sides
        values = [self.values(left), self.values(right)]
        if n.kind == "mod":
            if values[1] is None:
                return
            side = right
        elif (values[0] is None) == (values[1] is None):
            return                                  # no constant side, or two
        else:
            side = left if values[0] is not None else right
        value = values[0] if side is left else values[1]
        se = src.ext(side)
        if not se:
            return
        ctext = src.text(*se)
        if n.kind == "cmp" and n.op in ("==", "!="):
            if any(v >= 0x80000000 or v < 0 for v in value) or re.match(r"^\(?\s*FFA_RET_", ctext):
                return                              # a function ID or status code is no bound
        lit = _literal(ctext)
        moves = ([("bound-double", "* 2", lambda v: v * 2), ("bound-half", "/ 2", lambda v: v // 2)]
                 if n.kind == "mod" else
                 [("bound-plus1", "+ 1", lambda v: v + 1), ("bound-minus1", "- 1", lambda v: v - 1),
                  ("bound-double", "* 2", lambda v: v * 2), ("bound-half", "/ 2", lambda v: v // 2)])
        made: dict[tuple, str] = {}
        for op, suffix, f in moves:
            moved = tuple(f(v) for v in value)
            if lit is not None:
                repl = (hex(moved[0]) if ctext.lower().startswith("0x") else str(moved[0])) if moved[0] >= 0 \
                    else f"({moved[0]})"
            else:
                repl = (ctext if _primary(ctext) else f"({ctext})") + " " + suffix
                if n.kind == "mod":
                    repl = f"({repl})"
            new = src.text(n.start, se[0]) + repl + src.text(se[1], n.end)
            drop = ""
            if moved == value:
                drop = f"no change: {_short(ctext, 40)} is {self.shown(value)}, so {suffix} leaves it"
            elif moved in made:
                drop = f"the same bound as {made[moved]} ({self.shown(moved)})"
            made.setdefault(moved, op)
            self.emit(op, n.start, n.end, new, f"`{_short(text)}` -> `{_short(new)}` in {where}", anchor, drop)
        if n.kind == "cmp" and n.op in ONESIDED:
            for rel in ONESIDED[n.op]:
                new = src.text(n.start, n.op_at[0]) + rel + src.text(n.op_at[1], n.end)
                self.emit("bound-onesided", n.start, n.end, new,
                          f"`{_short(text)}` -> `{_short(new)}` in {where}", anchor)

    # -- statements --

    def statements(self, c, stack: list) -> None:
        """drop-exit, drop-error and swap-error on the statements of a block or an if's branch."""
        CK = self.CK
        src = self.src
        parent = stack[-1] if stack else None
        in_if = parent is not None and parent.kind == CK.IF_STMT
        anchor = self.enclosing(stack) + " | " + self.stmt_anchor(stack, c)
        kind = c.kind.name
        if kind in EXITS and src.ext(c) and src.first_token(c) in ("goto", "return", "break", "continue"):
            if in_if or (parent is not None and parent.kind == CK.COMPOUND_STMT and len(stack) >= 2
                         and stack[-2].kind == CK.IF_STMT):
                self.remove_statement("drop-exit", c, in_if, "drop `{stmt}` (the exit of its if's branch)", anchor)
        e = src.ext(c)
        if not e:
            return
        text = src.text(*e)
        sets_error = False
        if c.kind == CK.BINARY_OPERATOR:
            b = src.binop(c)
            if b and b[0] == "=" and ERROR_RE.fullmatch(_norm(src.text(b[1][1], e[1])).strip("() ")):
                sets_error = True
        elif c.kind == CK.CALL_EXPR and src.first_token(c) == c.spelling and ERROR_RE.search(text):
            sets_error = True
        if sets_error:
            self.remove_statement("drop-error", c, in_if, "drop `{stmt}` (an FF-A error set)", anchor)

    def swap_errors(self, fn, body_ext: tuple[int, int], cond_ranges: list[tuple[int, int]],
                    stack_of: dict) -> None:
        src = self.src
        for s, e, t in src.tokens(*body_ext):
            if t not in SWAP_ERROR:
                continue
            if any(a <= s and e <= b for a, b in cond_ranges):
                continue                       # compared with, not produced
            repl = SWAP_ERROR[t]
            nl = src.data.rfind(b"\n", 0, s) + 1
            end_nl = src.data.find(b"\n", e)
            line_text = src.text(nl, end_nl if end_nl >= 0 else len(src.data))
            anchor = stack_of.get(s, "")
            self.emit("swap-error", s, e, repl, f"`{t}` -> `{repl}` in `{_short(line_text)}`", anchor)

    def walk_function(self, fn) -> None:
        CK = self.CK
        self.function = fn.spelling
        body = next((k for k in fn.get_children() if k.kind == CK.COMPOUND_STMT), None)
        if body is None or not self.src.ext(body):
            return
        cond_ranges: list[tuple[int, int]] = []   # comparisons: an error code there is compared with
        token_anchor: dict[int, str] = {}

        def visit(c, stack):
            k = c.kind
            src = self.src
            if k in (CK.IF_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.FOR_STMT):
                rng = self.for_cond(c) if k == CK.FOR_STMT else self.if_cond(c)
                root = self.cond_node(c, rng) if rng else None
                if root:
                    word = {"IF_STMT": "if", "WHILE_STMT": "while", "DO_STMT": "while", "FOR_STMT": "for"}[k.name]
                    shown = _short(src.text(*rng), 60)
                    where = f"`for (...; {shown}; ...)`" if k == CK.FOR_STMT else f"`{word} ({shown})`"
                    self.condition(root, where, self.stmt_anchor(stack, c))
            elif k == CK.CONDITIONAL_OPERATOR:
                kids = list(c.get_children())
                if len(kids) == 3 and src.ext(c) and src.ext(kids[0]) and src.ext(kids[1]):
                    q = src.tokens(src.ext(kids[0])[1], src.ext(kids[1])[0])
                    root = src.node(kids[0])
                    if len(q) == 1 and q[0][2] == "?" and root:
                        where = f"`{_short(src.text(*src.ext(c)), 60)}`"
                        self.condition(root, where, self.enclosing(stack) + " | " + self.stmt_anchor(stack, c))
            elif k == CK.RETURN_STMT and src.first_token(c) == "return":
                kids = list(c.get_children())
                root = src.node(kids[0]) if len(kids) == 1 else None
                if root and root.kind in ("and", "or", "cmp", "not"):
                    where = f"`return {_short(src.text(root.start, root.end), 60)}`"
                    self.condition(root, where, self.enclosing(stack) + " | " + self.stmt_anchor(stack, c))
            if k == CK.BINARY_OPERATOR:
                b = src.binop(c)
                if b and b[0] in COMPARE:
                    cond_ranges.append(src.ext(c))
            parent = stack[-1] if stack else None
            if parent is not None and parent.kind in (CK.COMPOUND_STMT, CK.IF_STMT) and src.ext(c):
                is_branch = parent.kind != CK.IF_STMT or (
                    self.if_cond(parent) is not None and src.ext(c)[0] >= self.if_cond(parent)[1])
                if is_branch and k != CK.COMPOUND_STMT:
                    self.statements(c, stack)
                    a, b = src.ext(c)
                    anchor = self.enclosing(stack) + " | " + self.stmt_anchor(stack, c)
                    for s, _, t in src.tokens(a, b):
                        token_anchor.setdefault(s, anchor)
            for ch in c.get_children():
                visit(ch, stack + [c])

        visit(body, [fn])
        self.swap_errors(fn, self.src.ext(body), cond_ranges, token_anchor)


def constant_values(path: str, data: bytes, args: list[str]) -> dict[tuple[int, int], int]:
    """Offsets of each operand of a binary operator spelled in the file -> its value, where it
    is an integer constant expression, in a parse with args (another page size)."""
    tu = parse(path, data, args)
    src = Source(tu, path, data)
    out: dict[tuple[int, int], int] = {}
    for c in tu.cursor.walk_preorder():
        if c.kind == src.ci.CursorKind.BINARY_OPERATOR and src.binop(c):
            for k in c.get_children():
                e = src.ext(k)
                v = _evaluate(k) if e else None
                if v is not None:
                    out[e] = v
    return out


def parse(path: str, data: bytes, args: list[str]):
    ci = cindex()
    index = ci.Index.create()
    tu = index.parse(path, args=["-x", "c", *args], unsaved_files=[(path, data.decode())],
                     options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        raise ToolError(f"{path}: libclang cannot parse it ({len(errors)} error(s)); the first: "
                        f"{errors[0].location.file}:{errors[0].location.line}: {errors[0].spelling}")
    return tu


def mutate_text(data: bytes, m: Mutant) -> bytes:
    return data[:m.start] + m.new.encode() + data[m.end:]


def unified_diff(path: str, before: bytes, after: bytes) -> str:
    a = before.decode().splitlines(keepends=True)
    b = after.decode().splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", n=3))


def generate(path: str, data: bytes, args: list[str], patch_path: str | None = None,
             compile_args: list[str] | None = None, jobs: int = 2,
             alt_args: list[list[str]] = ()) -> Generation:
    """Every mutant of the C file path (its bytes data), parsed with args. patch_path names
    the file in the patches (default: path's name). With compile_args, each mutant is
    compiled (clang -fsyntax-only) and dropped if it does not. alt_args: other parses
    (the other page sizes) whose constants count too when a moved bound is compared
    with the original and with the other moves."""
    ci = cindex()
    tu = parse(path, data, args)
    src = Source(tu, path, data)
    walker = _Walker(src, [constant_values(path, data, a) for a in alt_args])
    for c in tu.cursor.get_children():
        if c.kind == ci.CursorKind.FUNCTION_DECL and c.is_definition() and c.location.file \
                and c.location.file.name == path:
            walker.walk_function(c)
    gen = Generation(patch_path or Path(path).name, hashlib.sha256(data).hexdigest())
    seen_keys: dict[str, int] = {}
    seen_text: dict[bytes, str] = {}
    for m, key, drop in walker.found:
        n = seen_keys.get(key, 0) + 1
        seen_keys[key] = n
        digest = hashlib.sha256((key + (f"\0#{n}" if n > 1 else "")).encode()).hexdigest()[:8]
        m.id = f"{m.function}.{m.op}.{digest}"
        if drop:
            gen.dropped.append(Dropped(m.id, m.op, m.function, m.line, m.description, drop))
            continue
        after = mutate_text(data, m)
        if after == data:
            gen.dropped.append(Dropped(m.id, m.op, m.function, m.line, m.description, "changes nothing"))
            continue
        if after in seen_text:
            gen.dropped.append(Dropped(m.id, m.op, m.function, m.line, m.description,
                                       f"the same text as {seen_text[after]}"))
            continue
        seen_text[after] = m.id
        m.patch = m.header() + "\n" + unified_diff(gen.path, data, after)
        gen.mutants.append(m)
    if compile_args is not None:
        _compile_check(gen, path, data, compile_args, jobs)
    return gen


def _compile_check(gen: Generation, path: str, data: bytes, compile_args: list[str], jobs: int) -> None:
    clang = "clang"

    def one(m: Mutant) -> str | None:
        with tempfile.TemporaryDirectory(prefix="kconform-mutagen-") as d:
            f = Path(d) / Path(path).name
            f.write_bytes(mutate_text(data, m))
            r = subprocess.run([clang, "-fsyntax-only", "-x", "c", *compile_args, str(f)],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return None
            first = next((ln for ln in r.stderr.splitlines() if "error:" in ln), r.stderr.strip()[:200])
            return "does not compile: " + first.replace(str(f), Path(path).name)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        verdicts = list(pool.map(one, gen.mutants))
    kept = []
    for m, why in zip(gen.mutants, verdicts):
        if why:
            gen.dropped.append(Dropped(m.id, m.op, m.function, m.line, m.description, why))
        else:
            kept.append(m)
    gen.mutants = kept


# --- a kernel tree's ffa.c --------------------------------------------------------

def tree_args(include_dir: Path, page_shift: int = PAGE_SHIFT) -> list[str]:
    return [*KERNEL_CFLAGS, f"-I{EL2 / 'shim'}", f"-I{include_dir}", f"-I{EL2}", f"-DKC_PAGE_SHIFT={page_shift}"]


def generator_key() -> str:
    """What a cached generation depends on besides the tree: this file and the shims."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    for p in sorted((EL2 / "shim").rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(EL2)).encode() + b"\0" + p.read_bytes())
    h.update((EL2 / "tools" / "extract_tree.py").read_bytes())
    return h.hexdigest()


def generate_tree(tree: Path, cache: Path | None = None, jobs: int = 2, log=lambda m: None) -> Generation:
    """Every mutant of tree's ffa.c, compiled as the EL2 build compiles it; cached under
    cache (by the content of the tree files the build reads and of the generator)."""
    from kconform.sources import patches
    from kconform.sources.trees import NEEDED_PATHS
    tree = Path(tree)
    ffa = tree / FFA_C
    if not ffa.is_file():
        raise ToolError(f"{tree} has no {FFA_C}")
    key = hashlib.sha256((patches.content_key(tree, list(NEEDED_PATHS)) + generator_key()).encode()).hexdigest()[:24]
    hit = cache / f"{key}.json" if cache else None
    if hit and hit.is_file():
        try:
            return Generation.from_json(json.loads(hit.read_text()))
        except (ValueError, KeyError, TypeError):
            pass
    with tempfile.TemporaryDirectory(prefix="kconform-mutagen-inc-") as inc:
        r = subprocess.run([sys.executable, str(EL2 / "tools" / "extract_tree.py"), "--tree", str(tree),
                            "--shim", str(EL2 / "shim"), "--out", inc], capture_output=True, text=True)
        if r.returncode != 0:
            raise ToolError(f"{tree}: its headers cannot be extracted for the generator: {r.stderr.strip()}")
        args = tree_args(Path(inc))
        log(f"kconform: generating the mutants of {ffa}")
        gen = generate(str(ffa), ffa.read_bytes(), args, patch_path=FFA_C, compile_args=args, jobs=jobs,
                       alt_args=[tree_args(Path(inc), shift) for shift in ALT_PAGE_SHIFTS])
    if hit:
        hit.parent.mkdir(parents=True, exist_ok=True)
        tmp = hit.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(gen.to_json()) + "\n")
        os.replace(tmp, hit)
    return gen


def write_patches(gen: Generation, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for m in gen.mutants:
        (folder / f"{m.id}.patch").write_text(m.patch)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kconform.selftest.mutagen", description=__doc__.split("\n")[0])
    ap.add_argument("source", help="a tree spec (debian:7.3), a kernel tree, or one C file (parsed with --arg)")
    ap.add_argument("--arg", action="append", default=[], help="a C file's compiler argument (repeatable)")
    ap.add_argument("--out", type=Path, help="write each mutant's patch here (ID.patch)")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    args = ap.parse_args(argv)
    try:
        p = Path(args.source)
        if p.is_file():
            gen = generate(str(p), p.read_bytes(), args.arg, compile_args=args.arg)
        else:
            from kconform.sources import tree_fetch
            tree = tree_fetch.resolve(args.source, progress=lambda m: print(m, file=sys.stderr)).path
            gen = generate_tree(tree)
        if args.out:
            write_patches(gen, args.out)
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(gen.to_json(), indent=2))
        return 0
    for m in gen.mutants:
        print(f"{m.id}  {m.description}")
    for d in gen.dropped:
        print(f"dropped {d.id}  {d.description}: {d.reason}")
    print(f"{len(gen.mutants)} mutants, {len(gen.dropped)} dropped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
