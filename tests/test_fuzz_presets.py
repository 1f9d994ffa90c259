"""Every fuzz build kconform fuzz can ask for is a CMake preset (configure and build)
whose sanitizer setting is what its name says."""

from __future__ import annotations

import json

from conftest import REPO
from kconform.engine.fuzzers import fuzz_binary, fuzz_preset


def test_each_engine_has_a_sanitized_and_a_plain_preset():
    doc = json.loads((REPO / "CMakePresets.json").read_text())
    configure = {p["name"]: p for p in doc["configurePresets"]}
    build = {p["name"] for p in doc["buildPresets"]}

    def cache(name):  # a preset's cache variables, inherited ones included
        p = configure[name]
        base = cache(p["inherits"]) if "inherits" in p else {}
        return {**base, **p.get("cacheVariables", {})}
    for engine in ("libfuzzer", "afl"):
        for plain in (False, True):
            name = fuzz_preset(engine, plain)
            assert name in configure and name in build, name
            c = cache(name)
            assert c["KCONFORM_FUZZ_ENGINE"] == engine
            assert c["KCONFORM_SANITIZE"] == ("OFF" if plain else "ON"), (name, c)
            assert configure[name]["binaryDir"].endswith("/build/" + name)
            assert fuzz_binary(engine, "el2-4k", plain).parts[-4] == name
