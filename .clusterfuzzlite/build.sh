#!/bin/bash -eu
# ClusterFuzzLite build of kconform's libFuzzer targets (harness/fuzz), through the
# CMake preset fuzz-libfuzzer (CMakePresets.json). ClusterFuzzLite sets $CC, $CXX,
# $CFLAGS and $CXXFLAGS (its sanitizer and -fsanitize=fuzzer-no-link), $SRC, $WORK
# and $OUT: the preset's compilers and flags are replaced by those, and its own
# sanitizer option is off (ClusterFuzzLite chooses the sanitizer). The targets link
# with -fsanitize=fuzzer, which is what $LIB_FUZZING_ENGINE is for libFuzzer.
#
# Built: kconform-fuzz-host always; kconform-fuzz-el2-4k and -16k when
# KCONFORM_KERNEL_TREE names a kernel tree (./kconform tree fetch debian:7.3).
# Each binary lands in $OUT with its dictionary (<binary>.dict).
src="${KCONFORM_SRC:-$SRC/kconform}"
build="${WORK:-/tmp}/kconform-fuzz-libfuzzer"
preset=fuzz-libfuzzer
targets=(kconform-fuzz-host)
extra=()
if [ -n "${KCONFORM_KERNEL_TREE:-}" ]; then
  extra+=("-DKCONFORM_KERNEL_TREE=$KCONFORM_KERNEL_TREE")
  targets+=(kconform-fuzz-el2-4k kconform-fuzz-el2-16k)
fi
cd "$src"
cmake --preset "$preset" -B "$build" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DKCONFORM_SANITIZE=OFF -DKCONFORM_TESTS=OFF "${extra[@]}"
cmake --build "$build" --parallel "${KCONFORM_JOBS:-$(nproc)}" --target "${targets[@]}"
for t in "${targets[@]}"; do
  cp "$build/harness/fuzz/$t" "$OUT/$t"
  case "$t" in
    kconform-fuzz-host) cp harness/fuzz/gmem.dict "$OUT/$t.dict" ;;
    kconform-fuzz-el2-*) cp harness/fuzz/ffa.dict "$OUT/$t.dict" ;;
  esac
done
