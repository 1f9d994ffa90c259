// Membership check of an observed outcome in the model's allowed set.
#include "oracles/oracle.h"

#include <algorithm>

namespace kconform {

const char* to_string(VerdictKind k) {
  switch (k) {
    case VerdictKind::kPass:
      return "pass";
    case VerdictKind::kViolation:
      return "violation";
    case VerdictKind::kUnsupported:
      return "unsupported";
    case VerdictKind::kUnchecked:
      return "unchecked";
  }
  return "?";
}

Verdict judge(const Expectation& expected, const Outcome& observed) {
  Verdict v;
  for (const Allowed& a : expected.allowed)
    if (a.admits(observed)) return v;
  v.kind = VerdictKind::kViolation;
  // Blame the rules whose outcomes were expected. When the target failed
  // with an errno that a broken rule did not license, or succeeded where a
  // rule demanded an error, those are the rules the difference violates.
  for (const Allowed& a : expected.allowed)
    if (std::find(v.violated.begin(), v.violated.end(), a.rule) == v.violated.end())
      v.violated.push_back(a.rule);
  if (v.violated.empty()) v.violated.push_back(kNoRule);
  return v;
}

}  // namespace kconform
