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

namespace {

void add_once(std::vector<RuleId>& rules, RuleId r) {
  if (std::find(rules.begin(), rules.end(), r) == rules.end()) rules.push_back(r);
}

}  // namespace

Verdict judge(const Expectation& expected, const Outcome& observed) {
  Verdict v;
  for (const Allowed& a : expected.allowed)
    if (a.admits(observed)) return v;
  v.kind = VerdictKind::kViolation;
  // Blame exactly. First the rules on whose forbidden side the op was that
  // license an allowed outcome: each demanded an outcome the target did not
  // give. (A forbidden rule that licenses none left the outcome to others,
  // e.g. an FF-A descriptor rule whose rejection the proxy's rollback rule
  // spells out: it is not what the target got wrong.)
  for (const RuleHit& h : expected.hits) {
    if (!h.forbidden) continue;
    for (const Allowed& a : expected.allowed)
      if (a.rule == h.rule) add_once(v.violated, h.rule);
  }
  if (!v.violated.empty()) return v;
  // Otherwise the outcome is outside every allowed set: the rules that would
  // have had to allow it. Those that license an outcome of the observed kind
  // (a wrong count, errno, digest or state) are the ones whose set lacks it;
  // if none does, every licensing rule.
  for (const Allowed& a : expected.allowed)
    if (a.kind == observed.kind) add_once(v.violated, a.rule);
  if (v.violated.empty())
    for (const Allowed& a : expected.allowed) add_once(v.violated, a.rule);
  if (v.violated.empty()) v.violated.push_back(kNoRule);
  return v;
}

}  // namespace kconform
