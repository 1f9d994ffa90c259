// One op: expect, exec, judge, invariants, commit or diverge (step.h).
#include "harness/runner/step.h"

#include <algorithm>
#include <span>

namespace kconform {
namespace {

void add_once(std::vector<RuleId>& rules, RuleId r) {
  if (std::find(rules.begin(), rules.end(), r) == rules.end()) rules.push_back(r);
}

// Folds the target's broken invariants into the op's verdict (invariants.h)
// and blames their rules.
void apply_invariants(std::span<const InvariantBreak> breaks, StepResult& r) {
  if (breaks.empty()) return;
  if (r.verdict.kind != VerdictKind::kViolation) {
    r.verdict.kind = VerdictKind::kViolation;
    r.verdict.violated.clear();
  }
  for (const InvariantBreak& b : breaks) {
    add_once(r.verdict.violated, b.rule);
    add_once(r.blamed, b.rule);
    r.expected.hits.push_back({b.rule, true});
    if (!r.expected.note.empty()) r.expected.note += "; ";
    r.expected.note += "invariant: " + b.what;
  }
}

// The model's share of the blame for a violation: the violated rules the op
// was on the forbidden side of (a rule that only allowed an error is listed
// by the oracle too, but did not demand it), else all of them.
void blame_model(const Verdict& v, const Expectation& expected, std::vector<RuleId>& blamed) {
  for (RuleId r : v.violated)
    for (const RuleHit& h : expected.hits)
      if (h.rule == r && h.forbidden) add_once(blamed, r);
  if (blamed.empty())
    for (RuleId r : v.violated) add_once(blamed, r);
}

}  // namespace

void step(Model& model, Target& source, const InvariantSource* invariants, const Scenario& s, size_t i,
          bool model_knows, StepResult* out) {
  StepResult& r = *out;
  r.expected.clear();
  r.blamed.clear();
  if (!model_knows) {
    r.observed = source.exec(s, i);
    r.verdict = Verdict{VerdictKind::kUnchecked, {}};
    r.model_knows = false;
  } else {
    model.expect(s, i, r.expected);
    r.observed = source.exec(s, i);
    r.verdict = judge(r.expected, r.observed);
    r.model_knows = r.verdict.kind != VerdictKind::kViolation;
    if (!r.model_knows) blame_model(r.verdict, r.expected, r.blamed);
  }
  if (invariants) apply_invariants(invariants->invariant_breaks(), r);
  // The model still knows the state: a broken invariant alone does not stop
  // the judging of later ops.
  if (r.model_knows) model.commit(s, i, r.observed);
}

}  // namespace kconform
