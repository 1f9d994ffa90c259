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
  kUnchecked,    // the model lost track of the target's state at an earlier op (it
                 // could not adopt what the target did there): run but not judged
};

const char* to_string(VerdictKind k);

struct Verdict {
  VerdictKind kind = VerdictKind::kPass;
  // kViolation: the rules the outcome violates. The rules on whose forbidden
  // side the op was (RuleHit::forbidden) that license an allowed outcome
  // (they demanded what the target did not give); if none, the rules
  // licensing an outcome of the observed kind (they would have had to allow
  // it); if none, every rule licensing an allowed outcome. Never a rule whose
  // allowed side was met while another rule demanded something else.
  std::vector<RuleId> violated;
};

Verdict judge(const Expectation& expected, const Outcome& observed);

}  // namespace kconform
