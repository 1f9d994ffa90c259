// The oracle: is what the target did one of the outcomes the model allows?
// And, if not, which rules does the difference violate.
#pragma once

#include <vector>

#include "models/common/outcome.h"

namespace kconform {

enum class VerdictKind : uint8_t {
  kPass,         // the observed outcome is one of the allowed ones
  kViolation,    // it is not: the rules licensing the allowed outcomes are violated
  kUnsupported,  // the target lacks a capability the scenario requires
  kUnchecked,    // an earlier op of the scenario violated a rule; the model no longer
                 // knows the target's state, so later ops are run but not judged
};

const char* to_string(VerdictKind k);

struct Verdict {
  VerdictKind kind = VerdictKind::kPass;
  std::vector<RuleId> violated;  // kViolation: distinct rules of the allowed outcomes
};

Verdict judge(const Expectation& expected, const Outcome& observed);

}  // namespace kconform
