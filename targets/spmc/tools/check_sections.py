#!/usr/bin/env python3
"""Fails if a TF-A object file of targets/spmc has state outside the snapshot sections.

kc_spmc_snapshot_save() copies kc_spmc_bss and kc_spmc_data (tfa_unit.c puts
every static of a tree source there); a static that ended up in .data, .bss
or .data.rel.* instead (an explicit __section, a new kind of variable, a
compiler change) would silently escape snapshots. Constant data (.rodata,
.data.rel.ro: read-only after relocation) is not state. Run by ctest on the
tfa_unit objects.

    check_sections.py OBJDUMP OBJECT...
"""
import re
import subprocess
import sys

# What ASan and UBSan add to an object (redzone descriptors, source locations
# with their "already reported" flags): the sanitizers' data, not TF-A's.
SANITIZER_DATA = ("__asan", "__ubsan", "__unnamed_", "___asan_gen")


def main() -> int:
    objdump, objs = sys.argv[1], sys.argv[2:]
    escaped, inside = [], []
    for obj in objs:
        out = subprocess.run([objdump, "-t", obj], check=True, text=True,
                             stdout=subprocess.PIPE).stdout
        for line in out.splitlines():
            # "0000000000000000 l     O kc_spmc_bss     00000000000002b0 sp_desc"
            m = re.match(r"^[0-9a-f]+\s+(\S+)\s+(?:\S+\s+)?O\s+(\S+)\s+[0-9a-f]+\s+(\S+)$", line)
            if not m:
                continue
            section, name = m.group(2), m.group(3)
            if section.startswith("kc_spmc_"):
                inside.append(name)
            elif re.match(r"^\.(data|bss|tdata|tbss)", section) and \
                    not section.startswith(".data.rel.ro") and not name.startswith(SANITIZER_DATA):
                escaped.append(f"{name} ({section}, {obj.rsplit('/', 1)[-1]})")
    if escaped:
        print("TF-A state outside the snapshot sections: " + ", ".join(escaped))
        return 1
    if not inside:
        print("no TF-A state found in kc_spmc_bss/kc_spmc_data: is the pragma in tfa_unit.c applied?")
        return 1
    print("TF-A state in snapshot sections: " + ", ".join(sorted(set(inside))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
