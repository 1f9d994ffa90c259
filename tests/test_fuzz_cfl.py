"""The ClusterFuzzLite build integration (.clusterfuzzlite/): its files agree with
the project (the preset build.sh configures exists and is the libFuzzer one, the
targets it builds are fuzz targets of harness/fuzz/CMakeLists.txt, the
dictionaries it copies exist, the Dockerfile copies build.sh where ClusterFuzzLite
runs it). The real build (build.sh with $OUT, $SRC, $WORK, $CC, $CXX, $CFLAGS and
$CXXFLAGS set as ClusterFuzzLite sets them for an ASan build) runs every time: it
builds the host fuzz target only (no kernel tree is given), about a minute here."""

import json
import os
import re
import subprocess


from conftest import REPO, have_kvm

CFL = REPO / ".clusterfuzzlite"


def build_sh() -> str:
    return (CFL / "build.sh").read_text()


def test_project_yaml_and_dockerfile():
    assert re.search(r"^language:\s*c\+\+\s*$", (CFL / "project.yaml").read_text(), re.M)
    docker = (CFL / "Dockerfile").read_text()
    assert re.search(r"^FROM gcr\.io/oss-fuzz-base/base-builder\s*$", docker, re.M)
    assert re.search(r"^COPY \.clusterfuzzlite/build\.sh \$SRC/\s*$", docker, re.M)
    assert re.search(r"^COPY \. \$SRC/kconform\s*$", docker, re.M) and "$SRC/kconform" in build_sh()
    for pkg in ("ninja-build", "nlohmann-json3-dev"):  # what CMakeLists.txt needs beyond base-builder
        assert pkg in docker


def test_build_sh_uses_an_existing_libfuzzer_preset_and_existing_targets():
    text = build_sh()
    assert os.access(CFL / "build.sh", os.X_OK)
    assert subprocess.run(["bash", "-n", str(CFL / "build.sh")]).returncode == 0
    preset = re.search(r"^preset=(\S+)$", text, re.M).group(1)
    presets = {p["name"]: p for p in json.loads((REPO / "CMakePresets.json").read_text())["configurePresets"]}
    assert preset in presets and presets[preset]["cacheVariables"]["KCONFORM_FUZZ_ENGINE"] == "libfuzzer"
    assert 'cmake --preset "$preset"' in text
    for flag in ('-DCMAKE_C_COMPILER="$CC"', '-DCMAKE_CXX_COMPILER="$CXX"', '-DCMAKE_C_FLAGS="$CFLAGS"',
                 '-DCMAKE_CXX_FLAGS="$CXXFLAGS"', '"$OUT/$t"'):
        assert flag in text
    cmake = (REPO / "harness" / "fuzz" / "CMakeLists.txt").read_text()
    assert "add_executable(kconform-fuzz-host " in cmake and "add_executable(kconform-fuzz-el2-${_v} " in cmake
    page_sizes = presets["default"]["cacheVariables"]["KCONFORM_PAGE_SIZE"].split(";")
    el2 = {f"kconform-fuzz-el2-{int(p) // 1024}k" for p in page_sizes}
    named = set(re.findall(r"\bkconform-fuzz-[\w-]+", text))
    assert "kconform-fuzz-host" in named and named - {"kconform-fuzz-host", "kconform-fuzz-libfuzzer"} <= el2 | {
        "kconform-fuzz-el2-"}, named
    for d in re.findall(r"harness/fuzz/(\w+\.dict)", text):
        assert (REPO / "harness" / "fuzz" / d).exists(), d


def test_build_sh_builds_a_fuzz_binary_into_out(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    work.mkdir()
    flags = "-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=address -fsanitize-address-use-after-scope " \
            "-fsanitize=fuzzer-no-link"
    env = dict(os.environ, OUT=str(out), WORK=str(work), SRC=str(REPO.parent), KCONFORM_SRC=str(REPO),
               CC="clang", CXX="clang++", CFLAGS=flags, CXXFLAGS=flags, LIB_FUZZING_ENGINE="-fsanitize=fuzzer",
               SANITIZER="address", FUZZING_ENGINE="libfuzzer", KCONFORM_JOBS="2")
    env.pop("KCONFORM_KERNEL_TREE", None)
    r = subprocess.run(["bash", str(CFL / "build.sh")], env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    binary = out / "kconform-fuzz-host"
    assert binary.exists() and os.access(binary, os.X_OK) and (out / "kconform-fuzz-host.dict").exists()
    # A libFuzzer binary: its entry point linked in (nm), and where the host target can
    # open /dev/kvm, libFuzzer's own help. Without /dev/kvm the target refuses before
    # libFuzzer starts, and says why.
    syms = subprocess.run(["nm", "--defined-only", str(binary)], capture_output=True, text=True, timeout=120)
    assert " T LLVMFuzzerTestOneInput" in syms.stdout and "fuzzer::FuzzerDriver" in subprocess.run(
        ["nm", "-C", "--defined-only", str(binary)], capture_output=True, text=True, timeout=120).stdout
    h = subprocess.run([str(binary), "-help=1"], capture_output=True, text=True, timeout=60)
    if have_kvm():
        assert h.returncode == 0 and "libFuzzer" in (h.stdout + h.stderr)
    else:
        assert h.returncode != 0 and "cannot open /dev/kvm" in h.stderr, h.stderr
