"""Why a test may be skipped, for C++ (GTEST_SKIP) and Python (pytest.skip) alike.

Under KCONFORM_CI=1 (.ci/run) a skip is a failure unless its reason starts with
one of ACCEPTED's prefixes: something the machine cannot change (no /dev/kvm; a
behaviour or capability of the running kernel) or a test of the nightly matrix
(run when KCONFORM_NIGHTLY=1; CI runs its slice elsewhere). A missing package,
a tree that could not be fetched or a build that failed is never accepted: the
project's own files install and fetch everything it needs.

The C++ tests spell the same prefixes (targets/skip_reasons.h); tests/conftest.py
(pytest) and commands/test.py (the ctest JUnit file) apply the one policy, and
`kconform test`'s summary counts skips by ACCEPTED's names.
"""

from __future__ import annotations

import os
import re

# name (what the summary prints) -> the prefix a skip reason starts with
ACCEPTED: dict[str, str] = {
    "no /dev/kvm": "no /dev/kvm: ",
    "not for this kernel": "not for this kernel: ",
    "nightly": "nightly (KCONFORM_NIGHTLY=1): ",
}
NO_KVM = ACCEPTED["no /dev/kvm"]
KERNEL = ACCEPTED["not for this kernel"]
NIGHTLY = ACCEPTED["nightly"]


_LOCATION = re.compile(r"^\S+:\d+: ")


def category(reason: str) -> str | None:
    """The ACCEPTED name a skip reason falls under, or None (then CI fails it).
    The reason must start with the prefix, after at most the location and the
    word pytest or GoogleTest put first ("tests/a.py:12: Skipped: no /dev/kvm: ...");
    a prefix anywhere else in the text does not count."""
    text = _LOCATION.sub("", reason.strip(), count=1)
    text = text.removeprefix("Skipped: ")
    for name, prefix in ACCEPTED.items():
        if text.startswith(prefix):
            return name
    return None


def ci_mode() -> bool:
    """KCONFORM_CI=1 (.ci/run): skips outside ACCEPTED fail."""
    return os.environ.get("KCONFORM_CI", "") not in ("", "0")
