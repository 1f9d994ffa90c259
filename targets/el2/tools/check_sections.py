#!/usr/bin/env python3
"""Fails if ffa.c's object file has data outside the snapshot sections.

el2_snapshot() copies kc_ffa_bss and kc_ffa_data; a static that ended up in
.data, .bss or .data.rel* instead (a new kind of variable, a compiler change)
would silently escape snapshots. Run by ctest on the ffa_unit.c object.

    check_sections.py OBJDUMP OBJECT
"""
import re
import subprocess
import sys


# What ASan and UBSan add to an object (redzone descriptors, source locations
# with their "already reported" flags): the sanitizers' data, not ffa.c's.
SANITIZER_DATA = ("__asan", "__ubsan", "__unnamed_", "___asan_gen")


def main() -> int:
    objdump, obj = sys.argv[1], sys.argv[2]
    out = subprocess.run([objdump, "-t", obj], check=True, text=True,
                         stdout=subprocess.PIPE).stdout
    escaped, inside = [], []
    for line in out.splitlines():
        # "0000000000000000 l     O kc_ffa_bss     0000000000000018 host_buffers"
        m = re.match(r"^[0-9a-f]+\s+(\S+)\s+(?:\S+\s+)?O\s+(\S+)\s+[0-9a-f]+\s+(\S+)$", line)
        if not m:
            continue
        section, name = m.group(2), m.group(3)
        if section.startswith("kc_ffa_"):
            inside.append(name)
        elif re.match(r"^\.(data|bss|tdata|tbss)", section) and \
                not name.startswith(SANITIZER_DATA):
            escaped.append(f"{name} ({section})")
    if escaped:
        print("ffa.c state outside the snapshot sections: " + ", ".join(escaped))
        return 1
    if not inside:
        print("no ffa.c state found in kc_ffa_bss/kc_ffa_data: is the pragma in ffa_unit.c applied?")
        return 1
    print("ffa.c state in snapshot sections: " + ", ".join(sorted(inside)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
