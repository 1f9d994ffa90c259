#!/usr/bin/env python3
"""Fails if an object file of code under test has state outside its snapshot sections.

The in-process targets build a tree's sources with `#pragma clang section` so every
static sits in sections named PREFIX* (el2: kc_ffa_bss/kc_ffa_data, ffa_unit.c;
spmc: kc_spmc_bss/kc_spmc_data, tfa_unit.c), which their snapshots copy. A static
that ended up in .data, .bss or .data.rel.* instead (an explicit __section, a new
kind of variable, a compiler change) would silently escape snapshots. Constant
data (.rodata, .data.rel.ro: read-only after relocation) is not state. Run by
ctest on the objects.

    check_sections.py PREFIX WHAT OBJDUMP OBJECT...
"""
import re
import subprocess
import sys

# What ASan and UBSan add to an object (redzone descriptors, source locations
# with their "already reported" flags): the sanitizers' data, not the tree's.
SANITIZER_DATA = ("__asan", "__ubsan", "__unnamed_", "___asan_gen")


def main() -> int:
    prefix, what, objdump, objs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    escaped, inside = [], []
    for obj in objs:
        out = subprocess.run([objdump, "-t", obj], check=True, text=True,
                             stdout=subprocess.PIPE).stdout
        for line in out.splitlines():
            # "0000000000000000 l     O kc_ffa_bss     0000000000000018 host_buffers"
            m = re.match(r"^[0-9a-f]+\s+(\S+)\s+(?:\S+\s+)?O\s+(\S+)\s+[0-9a-f]+\s+(\S+)$", line)
            if not m:
                continue
            section, name = m.group(2), m.group(3)
            if section.startswith(prefix):
                inside.append(name)
            elif re.match(r"^\.(data|bss|tdata|tbss)", section) and \
                    not section.startswith(".data.rel.ro") and not name.startswith(SANITIZER_DATA):
                escaped.append(f"{name} ({section}, {obj.rsplit('/', 1)[-1]})")
    if escaped:
        print(f"{what} state outside the snapshot sections: " + ", ".join(escaped))
        return 1
    if not inside:
        print(f"no {what} state found in {prefix}* sections: is the section pragma applied?")
        return 1
    print(f"{what} state in snapshot sections: " + ", ".join(sorted(set(inside))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
