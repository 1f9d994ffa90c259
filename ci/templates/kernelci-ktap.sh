#!/bin/sh
# kconform as a KernelCI-style test: KTAP on stdout for the kernel tree checked out
# in KCONFORM_TREE (default: the working folder), or, with KCONFORM_BASE set, the
# PR-style check (`kconform ci`) whose summary and report go to KCONFORM_OUT.
#
#   KCONFORM_DIR         kconform's checkout (default: ./kconform)
#   KCONFORM_TREE        the kernel tree (default: .)
#   KCONFORM_PAGE_SIZES  host page sizes of the EL2 builds (default: "4K 16K 64K")
#   KCONFORM_OUT         report folder root (default: kconform-ktap)
#   KCONFORM_BASE        if set: also `kconform ci --base $KCONFORM_BASE --head HEAD`
#                        after the KTAP run (its exit status then decides)
#
# Exit status: kconform's (0 clean, 1 findings, 2 could not run). Progress goes to
# stderr; stdout is KTAP only (ci/templates/README.md).
set -u
KCONFORM_DIR=${KCONFORM_DIR:-./kconform}
KCONFORM_TREE=${KCONFORM_TREE:-.}
KCONFORM_PAGE_SIZES=${KCONFORM_PAGE_SIZES:-4K 16K 64K}
KCONFORM_OUT=${KCONFORM_OUT:-kconform-ktap}
sizes=""
for s in $KCONFORM_PAGE_SIZES; do sizes="$sizes --page-size $s"; done
# shellcheck disable=SC2086
"$KCONFORM_DIR/kconform" run --target el2 --tree "$KCONFORM_TREE" $sizes --format ktap --report-dir "$KCONFORM_OUT"
status=$?
if [ -n "${KCONFORM_BASE:-}" ] && [ "$status" -le 1 ]; then
    # shellcheck disable=SC2086
    "$KCONFORM_DIR/kconform" ci --tree "$KCONFORM_TREE" --base "$KCONFORM_BASE" --head HEAD $sizes --fuzz-time 0 --out "$KCONFORM_OUT" >&2
    status=$?
fi
exit $status
