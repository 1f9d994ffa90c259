// Rule sides as coverage features, for every engine. Each (rule, side) the
// model evaluates (StepResult::expected.hits: RuleHit) runs one basic block of
// its own in rule_side_feature(), a function compiled with the fuzz build's
// coverage instrumentation like the code under test (libFuzzer:
// -fsanitize=fuzzer-no-link, so inline 8-bit counters; AFL++: afl-clang-fast's
// edge map). An input that reaches a new side of a rule thus reaches new
// coverage and the engine keeps it, whichever engine it is: libFuzzer's
// __libfuzzer_extra_counters would be seen by libFuzzer only.
// KCONFORM_FUZZ_NO_RULE_FEATURES=1 turns the calls off (FuzzRunner), to
// compare; in a build without instrumentation the function is a no-op switch.
#pragma once

#include "models/common/rules.h"

namespace kconform::fuzz {

inline constexpr const char* kEnvNoRuleFeatures = "KCONFORM_FUZZ_NO_RULE_FEATURES";

// Whether the environment leaves rule-side features on (KCONFORM_FUZZ_NO_RULE_FEATURES
// unset, empty or "0").
bool rule_features_enabled();

// Runs the basic block of (rule, forbidden side); a rule outside the registry runs none.
void rule_side_feature(RuleId rule, bool forbidden);

}  // namespace kconform::fuzz
