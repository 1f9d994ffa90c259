"""The command line: help, exit codes, and clear errors for bad input."""

import json

from conftest import kconform


def test_help_lists_the_subcommands_and_exit_codes():
    r = kconform("--help")
    assert r.returncode == 0
    for word in ("run", "rules", "doctor", "test", "scenario", "exit status"):
        assert word in r.stdout


def test_no_command_is_a_tool_error():
    assert kconform().returncode == 2


def test_unknown_flag_is_a_tool_error():
    r = kconform("run", "--colour", "red")
    assert r.returncode == 2
    assert "--colour" in r.stderr


def test_unknown_target_is_named(tmp_path):
    r = kconform("run", "--target", "mainframe", "--report-dir", str(tmp_path))
    assert r.returncode == 2
    assert "flag --target: unknown target 'mainframe'" in r.stderr


def test_malformed_scenario_names_file_line_op_and_field(tmp_path):
    bad = tmp_path / "bad.kcs"
    bad.write_text("kconform-scenario 1\nabi gmem\nname x\ncreate_vm\n"
                   "create_gmem vm=0 size=lots flags=0\n")
    r = kconform("run", str(bad), "--report-dir", str(tmp_path / "reports"))
    assert r.returncode == 2
    assert f"{bad}:5: op 1 (create_gmem) field 'size'" in r.stderr
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_missing_scenario_path_is_named(tmp_path):
    r = kconform("run", str(tmp_path / "nope.kcs"))
    assert r.returncode == 2
    assert "nope.kcs: no such scenario file or folder" in r.stderr


def test_rules_lists_ids_and_citations():
    r = kconform("rules", "--format", "json")
    assert r.returncode == 0
    import json
    rules = json.loads(r.stdout)
    assert len(rules) >= 20
    ids = [x["id"] for x in rules]
    assert len(ids) == len(set(ids)), "rule IDs are unique"
    for x in rules:
        assert x["citation"].strip(), f"{x['id']} has no citation"
        assert x["id"] == x["id"].upper()


def test_scenario_convert_round_trip(tmp_path):
    src = tmp_path / "s.kcs"
    src.write_text("kconform-scenario 1\nabi gmem\nname rt/one\nrequires gmem\ncreate_vm\n"
                   "create_gmem vm=0 size=2M flags=MMAP|INIT_SHARED\nfallocate gmem=0 mode=KEEP_SIZE offset=0 len=4K\n")
    out = tmp_path / "bin"
    out.mkdir()
    assert kconform("scenario", "convert", "--to", "binary", "--out-dir", str(out), str(src)).returncode == 0
    (binary,) = list(out.iterdir())
    assert binary.read_bytes()[:4] == b"KCSN"
    back = kconform("scenario", "convert", "--to", "text", str(binary))
    assert back.returncode == 0
    canon = kconform("scenario", "convert", "--to", "text", str(src)).stdout
    assert back.stdout == canon
    # converting again never overwrites the existing binary
    again = kconform("scenario", "convert", "--to", "binary", "--out-dir", str(out), str(src))
    assert again.returncode == 2 and "not overwriting" in again.stderr


def test_doctor_prints_one_table():
    r = kconform("doctor")
    assert r.returncode == 0
    for word in ("clang++", "/dev/kvm", "host target", "cached trees"):
        assert word in r.stdout


def test_doctor_names_each_built_kernels_architecture_and_page_size(tmp_path):
    from kconform.commands import doctor
    img = tmp_path / "kbuild" / "img"
    for key, st in {"a": {"tree": "debian:7.3", "patch": "/x/reclaim2-reference.patch", "arch": "arm64",
                          "page_size": 16384},
                    "b": {"tree": "debian:7.3", "patch": "/x/reclaim2-reference.patch", "arch": "arm64",
                          "page_size": 4096},
                    "c": {"tree": "debian:7.3"}}.items():
        (img / key).mkdir(parents=True)
        (img / key / "kconform-image.json").write_text(json.dumps(st))
    assert doctor._built_kernels(tmp_path) == (
        "3: debian:7.3+reclaim2-reference.patch (arm64, 16K), debian:7.3+reclaim2-reference.patch (arm64, 4K), "
        "debian:7.3 (x86_64)")
