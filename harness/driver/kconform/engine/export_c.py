"""`kconform export`: a finding as code a kernel developer runs without kconform.

A FINDING is a scenario file with the comment header `run` writes
(`# kconform finding: ... op N: CALL`, `# RULE: expected: ...`,
`# RULE: observed: ...`), or one `kconform triage` minimised (`*.min.kcs`:
`#  at op N: ...`, `#    expected: ...`; or, from `run`'s own triage, a
`# kconform triage: SIG: minimised from REPRODUCER` line whose reproducer has the
header; the op is then the last op of the signature's op kind).

`--as c` (to_c): one C file needing gcc and the kernel's uapi headers only; it
performs the guest_memfd scenario as targets/host_gmem/host_target.cc does
(pattern bytes, src_valid, harness refusals, faults caught by a handler) and
exits 0 / 1 / 4 as kselftests do. `--as kselftest` (to_kselftest): one
`static void test_...(void)` in the shape of
tools/testing/selftests/kvm/guest_memfd_test.c (the selftest library's
vm_create_barebones_type(), __vm_create_guest_memfd(),
__vm_set_user_memory_region2(), TEST_ASSERT). The gmem op table here mirrors
harness/scenario/gmem_abi.cc (tests/test_export.py compares it with
`kconform-runner ops`).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from kconform.core.errors import ToolError

TEMPLATE = Path(__file__).resolve().parent / "templates" / "export_gmem.c"

# name -> (value) of the named arguments (gmem_abi.cc).
VM_TYPES = {"DEFAULT": 0, "SW_PROTECTED": 1}
CREATE_FLAGS = {"MMAP": 1, "INIT_SHARED": 2, "WRITE": 4}
PROT = {"READ": 1, "WRITE": 2}
SHARE = {"SHARED": 1, "PRIVATE": 2}
WHENCE = {"SET": 0, "CUR": 1, "END": 2, "DATA": 3, "HOLE": 4}
FALLOC = {"KEEP_SIZE": 0x01, "PUNCH_HOLE": 0x02, "COLLAPSE_RANGE": 0x08, "ZERO_RANGE": 0x10,
          "INSERT_RANGE": 0x20}
MEM_FLAGS = {"LOG_DIRTY_PAGES": 1, "READONLY": 2, "GUEST_MEMFD": 4}
SRC_VALID = {"all": (1 << 64) - 1}
ALL = (1 << 64) - 1


@dataclasses.dataclass(frozen=True)
class Arg:
    name: str
    names: dict | None = None
    default: int | None = None  # None: required


OPS: dict[str, list[Arg]] = {
    "create_vm": [Arg("type", VM_TYPES, 0)],
    "create_gmem": [Arg("vm"), Arg("size"), Arg("flags", CREATE_FLAGS)],
    "close": [Arg("gmem")],
    "write": [Arg("gmem"), Arg("len"), Arg("pattern", None, 1), Arg("src_valid", SRC_VALID, ALL)],
    "pwrite": [Arg("gmem"), Arg("offset"), Arg("len"), Arg("pattern", None, 1), Arg("src_valid", SRC_VALID, ALL)],
    "pwritev": [Arg("gmem"), Arg("offset"), Arg("len"), Arg("iovcnt", None, 2), Arg("pattern", None, 1)],
    "read": [Arg("gmem"), Arg("len")],
    "pread": [Arg("gmem"), Arg("offset"), Arg("len")],
    "lseek": [Arg("gmem"), Arg("offset"), Arg("whence", WHENCE)],
    "mmap": [Arg("gmem"), Arg("offset"), Arg("len"), Arg("prot", PROT, 3), Arg("share", SHARE, 1)],
    "munmap": [Arg("map")],
    "load": [Arg("map"), Arg("offset"), Arg("len")],
    "store": [Arg("map"), Arg("offset"), Arg("len"), Arg("pattern", None, 1)],
    "fallocate": [Arg("gmem"), Arg("mode", FALLOC), Arg("offset"), Arg("len")],
    "fstat": [Arg("gmem")],
    "bind": [Arg("vm"), Arg("slot"), Arg("gpa"), Arg("size"), Arg("gmem"), Arg("gmem_offset"),
             Arg("flags", MEM_FLAGS, 4)],
    "unbind": [Arg("vm"), Arg("slot")],
    "close_vm": [Arg("vm")],
    "times": [Arg("gmem")],
}
CAPS = ("gmem", "mmap", "init_shared", "write", "user_memory2", "sw_protected_vm")

# errno names the C file prints by name (others as E<number>); no aliases.
ERRNOS = ("EPERM ENOENT ESRCH EINTR EIO ENXIO E2BIG ENOEXEC EBADF ECHILD EAGAIN ENOMEM EACCES EFAULT "
          "EBUSY EEXIST EXDEV ENODEV ENOTDIR EISDIR EINVAL ENFILE EMFILE ENOTTY ETXTBSY EFBIG ENOSPC ESPIPE "
          "EROFS EMLINK EPIPE EDOM ERANGE EDEADLK ENAMETOOLONG ENOSYS EOVERFLOW EOPNOTSUPP EHWPOISON").split()


@dataclasses.dataclass
class Op:
    index: int
    name: str
    args: dict[str, int]
    line: str  # as written in the scenario


@dataclasses.dataclass
class Allowed:
    kind: str  # "ok", "errno", "signal"
    lo: int = 0
    hi: int = 0
    name: str = ""  # errno / signal name
    aux: int | None = None
    text: str = ""


@dataclasses.dataclass
class Finding:
    path: str
    abi: str
    name: str
    requires: list[str]
    ops: list[Op]
    op: int            # the op the finding is at
    rule: str
    expected: str      # as in the header, " | "-separated
    observed: str
    head: list[str]    # the header comment lines
    text: str          # the scenario text (no comments)


# --- Reading a finding --------------------------------------------------------

def _number(path: str, where: str, value: str, names: dict | None) -> int:
    if names and value in names:
        return names[value]
    m = re.fullmatch(r"(0[xX][0-9a-fA-F]+|\d+)([KMG]?)", value)
    if not m:
        raise ToolError(f"{path}: {where}: cannot read '{value}'")
    v = int(m.group(1), 0) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]
    if v > ALL:
        raise ToolError(f"{path}: {where}: '{value}' does not fit 64 bits")
    return v


def parse_scenario(path: str, text: str) -> tuple[str, str, list[str], list[Op]]:
    """(abi, name, requires, ops) of the first scenario of a text form."""
    abi, name, requires, ops = "", "", [], []
    seen_head = 0
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if words[0] == "kconform-scenario":
            seen_head += 1
            if seen_head > 1:
                break
            continue
        if words[0] == "abi":
            abi = words[1] if len(words) > 1 else ""
            continue
        if words[0] == "name":
            name = " ".join(words[1:])
            continue
        if words[0] == "requires":
            requires = words[1:]
            continue
        if words[0] == "repeat" or words[0].startswith("@"):
            raise ToolError(f"{path}: op {len(ops)}: a concurrent group (@T ops, repeat) is not exported: "
                            "its ops run in threads at once; reproduce it with ./kconform run")
        if abi != "gmem":
            ops.append(Op(len(ops), words[0], {}, line))
            continue
        spec = OPS.get(words[0])
        where = f"op {len(ops)} ({words[0]})"
        if spec is None:
            raise ToolError(f"{path}: op {len(ops)}: unknown op '{words[0]}'")
        args: dict[str, int] = {}
        for w in words[1:]:
            key, eq, val = w.partition("=")
            arg = next((a for a in spec if a.name == key), None)
            if not eq or arg is None:
                raise ToolError(f"{path}: {where} field '{key}': no such field")
            acc = 0
            for part in val.split("|"):
                acc |= _number(path, f"{where} field '{key}'", part, arg.names)
            args[key] = acc
        for a in spec:
            if a.name not in args:
                if a.default is None:
                    raise ToolError(f"{path}: {where} field '{a.name}': missing")
                args[a.name] = a.default
        ops.append(Op(len(ops), words[0], args, line))
    if seen_head == 0:
        raise ToolError(f"{path}: no scenario (expected a 'kconform-scenario' line)")
    return abi, name, requires, ops


def _header_facts(lines: list[str]) -> dict:
    """op, rule, expected, observed from a run reproducer's or a triage header."""
    out: dict = {}
    rule = None
    for line in lines:
        body = line[1:].strip()
        m = re.match(r"kconform finding: .*?, op (\d+): ", body)
        if m:
            out.setdefault("op", int(m.group(1)))
            continue
        m = re.match(r"at op (\d+): ", body)
        if m:
            out.setdefault("op", int(m.group(1)))
            continue
        m = re.match(r"kconform triage: (.+?): minimised from (\S+)", body)
        if m:
            out.setdefault("from", m.group(2))
            out.setdefault("signature", m.group(1))
            continue
        m = re.match(r"([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)+): expected: (.*)$", body)
        if m and "expected" not in out:
            out["rule"], out["expected"] = m.group(1), m.group(2)
            continue
        m = re.match(r"([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)+): observed: (.*)$", body)
        if m and "observed" not in out:
            out["observed"] = m.group(2)
            continue
        m = re.match(r"([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)+): ", body)
        if m:
            rule = m.group(1)
            continue
        m = re.match(r"expected: (.*)$", body)
        if m and "expected" not in out:
            out["rule"], out["expected"] = rule or "?", m.group(1)
            continue
        m = re.match(r"observed: (.*)$", body)
        if m and "observed" not in out:
            out["observed"] = m.group(1)
    return out


def load_finding(path: str, text: str, repo: Path) -> Finding:
    """text: the file's content in the text form (a binary file converted)."""
    head = [line for line in text.splitlines() if line.startswith("#")]
    abi, name, requires, ops = parse_scenario(path, text)
    if not abi:
        raise ToolError(f"{path}: field 'abi': missing")
    facts = _header_facts(head)
    if "expected" not in facts and "from" in facts:
        src = Path(facts["from"])
        for cand in (src, repo / src, Path(path).parent / src.name):
            if cand.is_file():
                facts.update({k: v for k, v in _header_facts(
                    [x for x in cand.read_text().splitlines() if x.startswith("#")]).items() if k != "op"})
                break
        else:
            raise ToolError(f"{path}: the reproducer it was minimised from, {facts['from']}, is not there: "
                            "its header has the expected outcome")
        kind = facts["signature"].split()[-1]
        at = [op.index for op in ops if op.name == kind]
        if not at:
            raise ToolError(f"{path}: no '{kind}' op (the signature's op kind)")
        facts["op"] = at[-1]
    if "expected" not in facts or "op" not in facts:
        raise ToolError(f"{path}: not a finding: no header naming the op and its expected outcome "
                        "('# kconform finding: ... op N: ...' and '# RULE: expected: ...', as run and triage write)")
    if not 0 <= facts["op"] < len(ops):
        raise ToolError(f"{path}: the header's op {facts['op']} is not in the scenario ({len(ops)} ops)")
    body = "\n".join(x for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#"))
    return Finding(path, abi, name, requires, ops, facts["op"], facts.get("rule", "?"), facts["expected"],
                   facts.get("observed", "?"), head, body + "\n")


def parse_allowed(path: str, expected: str) -> list[Allowed]:
    if expected.strip() == "(nothing)":
        return []
    out = []
    for alt in expected.split(" | "):
        alt = alt.strip()
        text = alt
        core = re.sub(r"\s*\[[^\]]*\]$", "", alt)
        m = re.fullmatch(r"ok (-?\d+)(?:\.\.(-?\d+))?(?: aux=(0x[0-9a-f]+))?", core)
        if m:
            lo = int(m.group(1))
            out.append(Allowed("ok", lo, int(m.group(2)) if m.group(2) else lo,
                               aux=int(m.group(3), 16) if m.group(3) else None, text=text))
            continue
        m = re.fullmatch(r"(errno|signal) (E[A-Z0-9]+|SIG[A-Z0-9]+)", core)
        if m:
            out.append(Allowed(m.group(1), name=m.group(2), text=text))
            continue
        raise ToolError(f"{path}: field 'expected': '{alt}' is not an outcome a C reproducer can check "
                        "(ok N, errno ENAME, signal SIGNAME; content and FF-A findings are not exported as C)")
    return out


# --- C ------------------------------------------------------------------------

def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _u(v: int) -> str:
    return f"{v:#x}ULL"


def _title(f: Finding) -> str:
    return f"kconform finding {f.rule}: {f.ops[f.op].line} (scenario {f.name})"


def _call_c(op: Op, track_times: bool) -> str:
    a = op.args
    n = op.name
    if n == "create_vm":
        return f"op_create_vm({_u(a['type'])})"
    if n == "create_gmem":
        return f"op_create_gmem({a['vm']}ULL, {_u(a['size'])}, {_u(a['flags'])}, {int(track_times)})"
    if n == "close":
        return f"op_close(gmems, NGMEM, {a['gmem']}ULL)"
    if n == "close_vm":
        return f"op_close(vms, NVM, {a['vm']}ULL)"
    if n == "write":
        return f"op_write({a['gmem']}ULL, 0, 0, {_u(a['len'])}, {_u(a['pattern'])}, {_u(a['src_valid'])})"
    if n == "pwrite":
        return (f"op_write({a['gmem']}ULL, 1, {_u(a['offset'])}, {_u(a['len'])}, {_u(a['pattern'])}, "
                f"{_u(a['src_valid'])})")
    if n == "pwritev":
        return (f"op_pwritev({a['gmem']}ULL, {_u(a['offset'])}, {_u(a['len'])}, {_u(a['iovcnt'])}, "
                f"{_u(a['pattern'])})")
    if n == "read":
        return f"op_read({a['gmem']}ULL, 0, 0, {_u(a['len'])})"
    if n == "pread":
        return f"op_read({a['gmem']}ULL, 1, {_u(a['offset'])}, {_u(a['len'])})"
    if n == "lseek":
        return f"result(lseek(GMEM({a['gmem']}ULL), (off_t){_u(a['offset'])}, sat_int({_u(a['whence'])})))"
    if n == "mmap":
        return f"op_mmap({a['gmem']}ULL, {_u(a['offset'])}, {_u(a['len'])}, {_u(a['prot'])}, {_u(a['share'])})"
    if n == "munmap":
        return f"op_munmap({a['map']}ULL)"
    if n == "load":
        return f"access_map({a['map']}ULL, {_u(a['offset'])}, {_u(a['len'])}, 0, 0)"
    if n == "store":
        return f"access_map({a['map']}ULL, {_u(a['offset'])}, {_u(a['len'])}, 1, {_u(a['pattern'])})"
    if n == "fallocate":
        return f"op_fallocate({a['gmem']}ULL, {_u(a['mode'])}, {_u(a['offset'])}, {_u(a['len'])})"
    if n == "fstat":
        return f"op_fstat({a['gmem']}ULL)"
    if n == "bind":
        return (f"op_bind({a['vm']}ULL, {_u(a['slot'])}, {_u(a['gpa'])}, {_u(a['size'])}, {a['gmem']}ULL, "
                f"{_u(a['gmem_offset'])}, {_u(a['flags'])})")
    if n == "unbind":
        return f"op_unbind({a['vm']}ULL, {_u(a['slot'])})"
    if n == "times":
        return f"op_times({a['gmem']}ULL)"
    raise ToolError(f"op {op.index}: unknown op '{n}'")


def _allowed_c(a: Allowed) -> str:
    kind = {"ok": "OK", "errno": "ERRNO", "signal": "SIG"}[a.kind]
    if a.kind == "ok":
        lo, hi = str(a.lo) + "LL", str(a.hi) + "LL"
    else:
        m = re.fullmatch(r"E(\d+)", a.name)
        lo = hi = m.group(1) if m else a.name
    aux = "1, " + _u(a.aux) if a.aux is not None else "0, 0"
    return f"{{ {kind}, {lo}, {hi}, {aux}, {_c_string(a.text)} }}"


REQUIRE_C = {
    "user_memory2": ('ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_USER_MEMORY2) <= 0',
                     "the kernel lacks KVM_CAP_USER_MEMORY2"),
    "sw_protected_vm": ('!(ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_VM_TYPES) & 2)',
                        "the kernel lacks KVM_X86_SW_PROTECTED_VM (KVM_CAP_VM_TYPES)"),
    "mmap": ("!(flags & GUEST_MEMFD_FLAG_MMAP)", "guest_memfd lacks GUEST_MEMFD_FLAG_MMAP"),
    "init_shared": ("!(flags & GUEST_MEMFD_FLAG_INIT_SHARED)", "guest_memfd lacks GUEST_MEMFD_FLAG_INIT_SHARED"),
    "write": ("!(flags & GUEST_MEMFD_FLAG_WRITE)", "guest_memfd lacks GUEST_MEMFD_FLAG_WRITE (write() population)"),
}


def to_c(f: Finding, source: str) -> str:
    if f.abi != "gmem":
        raise ToolError(f"{f.path}: abi {f.abi}: --as c and --as kselftest export guest_memfd findings; "
                        "an FF-A finding exports with --as el2")
    allowed = parse_allowed(f.path, f.expected)
    track = any(op.name == "times" for op in f.ops)
    counts = {k: max(1, sum(op.name == c for op in f.ops)) for k, c in
              (("vm", "create_vm"), ("gmem", "create_gmem"), ("map", "mmap"))}
    req = []
    if any(c in f.requires for c in ("mmap", "init_shared", "write")):
        req.append("\tvm = ioctl(kvm_fd, KVM_CREATE_VM, 0);")
        req.append("\tflags = vm < 0 ? 0 : ioctl(vm, KVM_CHECK_EXTENSION, KVM_CAP_GUEST_MEMFD_FLAGS);")
        req.append("\tif (vm >= 0)\n\t\tclose(vm);")
    else:
        req.append("\tvm = flags = 0;\n\t(void)vm;\n\t(void)flags;")
    for c in f.requires:
        if c in REQUIRE_C:
            cond, why = REQUIRE_C[c]
            req.append(f"\tif ({cond})\n\t\treturn skip({_c_string(why)});")
        elif c not in CAPS:
            raise ToolError(f"{f.path}: field 'requires': unknown capability '{c}'")
    body = []
    for op in f.ops:
        call = _call_c(op, track)
        if op.index == f.op:
            body.append("\t{\n\t\tstatic const struct allowed a[] = {")
            body += [f"\t\t\t{_allowed_c(x)}," for x in allowed] or ["\t\t\t{ OK, 1, 0, 0, 0, \"\" },"]
            body.append("\t\t};")
            body.append(f"\t\to = {call};")
            body.append(f"\t\treport({op.index}, {_c_string(op.line)}, o, a, {len(allowed)}, "
                        f"{_c_string(f.rule)}, {_c_string(f.observed)});")
            body.append("\t}")
        else:
            body.append(f"\to = {call};")
            body.append(f"\treport({op.index}, {_c_string(op.line)}, o, NULL, 0, NULL, NULL);")
    cases = "\n".join(f"#ifdef {e}\n\tcase {e}:\n\t\treturn \"{e}\";\n#endif" for e in ERRNOS)
    c = TEMPLATE.read_text()
    title = _title(f).replace("*/", "* /")
    subst = {"@@TITLE_C@@": _c_string(title), "@@TITLE@@": title, "@@SOURCE@@": source.replace("*/", "* /"),
             "@@NVM@@": "NVM", "@@NGMEM@@": "NGMEM", "@@NMAP@@": "NMAP", "@@ERRNO_CASES@@": cases,
             "@@REQUIRES@@": "\n".join(req), "@@NJUDGED@@": "1", "@@OPS@@": "\n".join(body)}
    for k, v in subst.items():
        c = c.replace(k, v)
    defs = (f"#define NVM {counts['vm']}\n#define NGMEM {counts['gmem']}\n#define NMAP {counts['map']}\n")
    return c.replace("#define KSFT_PASS 0\n", defs + "#define KSFT_PASS 0\n", 1)


# --- kselftest ----------------------------------------------------------------

def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")[:60] or "finding"


def _ks_cond(a: Allowed, op: Op) -> str:
    success = {"create_gmem": "r >= 0", "mmap": "r == 0"}
    if a.kind == "errno":
        m = re.fullmatch(r"E(\d+)", a.name)
        return f"(r == -1 && errno == {m.group(1) if m else a.name})"
    if a.kind == "ok":
        if op.name in success and a.lo == 0 == a.hi:
            return f"({success[op.name]})"
        if a.aux is not None:
            raise ToolError(f"op {op.index}: the expected '{a.text}' checks a digest or size: use --as c")
        return f"(r >= {a.lo} && r <= {a.hi})" if a.lo != a.hi else f"(r == {a.lo})"
    raise ToolError(f"op {op.index}: a signal outcome ('{a.text}') is not exported as a kselftest: use --as c")


def to_kselftest(f: Finding, source: str) -> str:
    if f.abi != "gmem":
        raise ToolError(f"{f.path}: abi {f.abi}: --as kselftest exports guest_memfd findings; "
                        "an FF-A finding exports with --as el2")
    allowed = parse_allowed(f.path, f.expected)
    target = f.ops[f.op]
    lines = []
    vm_n = gm_n = map_n = 0
    uses_buf = False

    def vm(s):
        return f"vm{s}"

    def gm(s):
        return f"gmem{s}" if s < gm_n else "-1"

    def fill(seed_expr: str, len_expr: str, ptr: str) -> list[str]:
        return [f"\tfor (i = 0; i < {len_expr}; i++) {{",
                f"\t\tu64 z = {seed_expr} * 0x9e3779b97f4a7c15ull + (i >> 3) * 0xbf58476d1ce4e5b9ull;",
                "",
                "\t\tz = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;",
                "\t\tz = (z ^ (z >> 27)) * 0x94d049bb133111ebull;",
                "\t\tz ^= z >> 31;",
                f"\t\t{ptr}[i] = {seed_expr} ? (u8)(z >> ((i & 7) * 8)) : 0;",
                "\t}"]

    for op in f.ops:
        a = op.args
        lines.append(f"\t/* op {op.index}: {op.line} */")
        n = op.name
        if n in ("times",) or (n in ("write", "pwrite") and a["src_valid"] < a["len"]):
            raise ToolError(f"{f.path}: op {op.index} ({n}): not expressible as a kselftest here: use --as c")
        if n == "create_vm":
            if op.index == f.op:
                raise ToolError(f"{f.path}: op {op.index}: a finding at create_vm: use --as c")
            lines.append(f"\tstruct kvm_vm *{vm(vm_n)} = vm_create_barebones_type({a['type']});")
            vm_n += 1
            continue
        if n == "create_gmem":
            lines.append(f"\tint gmem{gm_n} = __vm_create_guest_memfd({vm(a['vm'])}, {a['size']:#x}, {a['flags']:#x});")
            lines.append(f"\tr = gmem{gm_n};")
            gm_n += 1
        elif n in ("write", "pwrite", "pwritev"):
            uses_buf = True
            lines.append(f"\tbuf = mmap(NULL, {a['len']:#x} ? {a['len']:#x} : 1, PROT_READ | PROT_WRITE, "
                         "MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);")
            lines.append("\tTEST_ASSERT(buf != MAP_FAILED, \"mmap of the source buffer\");")
            lines += fill(f"{a['pattern']:#x}ull", f"{a['len']:#x}", "buf")
            if n == "write":
                lines.append(f"\tr = write({gm(a['gmem'])}, buf, {a['len']:#x});")
            elif n == "pwrite":
                lines.append(f"\tr = pwrite({gm(a['gmem'])}, buf, {a['len']:#x}, {a['offset']:#x});")
            else:
                k = a["iovcnt"]
                if not 1 <= k <= 1024:
                    raise ToolError(f"{f.path}: op {op.index}: iovcnt {k}: use --as c")
                lines.append(f"\t{{\n\t\tstruct iovec iov[{k}];\n")
                lines.append(f"\t\tfor (i = 0; i < {k}; i++) {{")
                lines.append(f"\t\t\tiov[i].iov_base = buf + i * ({a['len']:#x} / {k});")
                lines.append(f"\t\t\tiov[i].iov_len = i + 1 == {k} ? {a['len']:#x} - i * ({a['len']:#x} / {k}) "
                             f": {a['len']:#x} / {k};")
                lines.append("\t\t}")
                lines.append(f"\t\tr = pwritev({gm(a['gmem'])}, iov, {k}, {a['offset']:#x});\n\t}}")
            lines.append(f"\tmunmap(buf, {a['len']:#x} ? {a['len']:#x} : 1);")
        elif n in ("read", "pread"):
            uses_buf = True
            lines.append(f"\tbuf = mmap(NULL, {a['len']:#x} ? {a['len']:#x} : 1, PROT_READ | PROT_WRITE, "
                         "MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);")
            lines.append(f"\tr = {'pread' if n == 'pread' else 'read'}({gm(a['gmem'])}, buf, {a['len']:#x}"
                         + (f", {a['offset']:#x});" if n == "pread" else ");"))
            lines.append(f"\tmunmap(buf, {a['len']:#x} ? {a['len']:#x} : 1);")
        elif n == "lseek":
            lines.append(f"\tr = lseek({gm(a['gmem'])}, {a['offset']:#x}, {min(a['whence'], 0x7fffffff)});")
        elif n == "mmap":
            lines.append(f"\tmap{map_n} = mmap(NULL, {a['len']:#x}, {a['prot']:#x}, {a['share']:#x}, "
                         f"{gm(a['gmem'])}, {a['offset']:#x});")
            lines.append(f"\tr = map{map_n} == MAP_FAILED ? -1 : 0;")
            map_n += 1
        elif n == "munmap":
            lines.append(f"\tr = munmap(map{a['map']}, {_map_len(f, a['map']):#x});")
        elif n in ("load", "store"):
            lines.append(f"\tfor (i = 0; i < {a['len']:#x}; i++)")
            if n == "load":
                lines.append(f"\t\tsink ^= READ_ONCE(((u8 *)map{a['map']})[{a['offset']:#x} + i]);")
            else:
                lines.append(f"\t\tWRITE_ONCE(((u8 *)map{a['map']})[{a['offset']:#x} + i], (u8)i);")
            lines.append("\tr = 0;")
        elif n == "fallocate":
            lines.append(f"\tr = fallocate({gm(a['gmem'])}, {a['mode']:#x}, {a['offset']:#x}, {a['len']:#x});")
        elif n == "fstat":
            lines.append(f"\tr = fstat({gm(a['gmem'])}, &st);")
        elif n == "close":
            lines.append(f"\tr = close({gm(a['gmem'])});")
        elif n == "bind":
            size = a["size"]
            lines.append(f"\tmem = mmap(NULL, {size:#x} ? {size:#x} : getpagesize(), "
                         f"{'PROT_READ | PROT_WRITE' if size <= 64 << 20 else 'PROT_NONE'}, "
                         "MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);")
            lines.append(f"\tr = __vm_set_user_memory_region2({vm(a['vm'])}, {a['slot'] & 0xffffffff:#x}, "
                         f"{a['flags'] & 0xffffffff:#x}, {a['gpa']:#x}, {size:#x}, mem, {gm(a['gmem'])}, "
                         f"{a['gmem_offset']:#x});")
        elif n == "unbind":
            lines.append(f"\tr = __vm_set_user_memory_region2({vm(a['vm'])}, {a['slot'] & 0xffffffff:#x}, "
                         "0, 0, 0, NULL, 0, 0);")
        elif n == "close_vm":
            if op.index == f.op:
                raise ToolError(f"{f.path}: op {op.index}: a finding at close_vm: use --as c")
            lines.append(f"\tkvm_vm_free({vm(a['vm'])});")
            continue
        if op.index == f.op:
            cond = " || ".join(_ks_cond(x, op) for x in allowed) or "0"
            lines.append(f"\tTEST_ASSERT({cond},")
            lines.append(f"\t\t    \"{f.rule}: {target.name} should give {f.expected.replace(chr(34), '')}, "
                         "got r = %ld, errno = %d\", (long)r, errno);")
    fn = f"test_{_slug(f.rule)}_{_slug(f.name.split('/')[-1])}"
    decls = ["\tlong r;", "\tu64 i;"]
    if uses_buf:
        decls.append("\tu8 *buf;")
    if any(op.name == "bind" for op in f.ops):
        decls.append("\tvoid *mem;")
    if any(op.name == "fstat" for op in f.ops):
        decls.append("\tstruct stat st;")
    if any(op.name == "load" for op in f.ops):
        decls.append("\tu8 sink = 0;")
    for m in range(map_n):
        decls.append(f"\tvoid *map{m};")
    head = ["/*", f" * {f.rule}: {target.line}", f" * expected: {f.expected}",
            f" * observed when found: {f.observed}",
            f" * Scenario {f.name}, exported by `kconform export --as kselftest` from",
            f" * {source}.", " * Needs KVM_CAP_GUEST_MEMFD" + (
                f" and {', '.join(f.requires)}" if f.requires else "") + "; call it from main().", " */"]
    tail = ["\t(void)i;"] + (["\t(void)sink;"] if any(op.name == "load" for op in f.ops) else [])
    return "\n".join(head + [f"static void {fn}(void)", "{"] + decls + [""] + lines + tail + ["}"]) + "\n"


def _map_len(f: Finding, slot: int) -> int:
    maps = [op for op in f.ops if op.name == "mmap"]
    return maps[slot].args["len"] if slot < len(maps) else 0
