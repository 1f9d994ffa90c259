// One op: expect, exec, judge, adopt or commit, contents, invariants (step.h).
#include "harness/runner/step.h"

#include <algorithm>
#include <span>

namespace kconform {
namespace {

void add_once(std::vector<RuleId>& rules, RuleId r) {
  if (std::find(rules.begin(), rules.end(), r) == rules.end()) rules.push_back(r);
}

void add_note(std::string& note, const std::string& line) {
  if (line.empty()) return;
  if (!note.empty()) note += "; ";
  note += line;
}

// Makes the op a violation of rule r (keeping the rules already violated
// when it was one).
void violate(StepResult& r, RuleId rule) {
  if (r.verdict.kind != VerdictKind::kViolation) {
    r.verdict.kind = VerdictKind::kViolation;
    r.verdict.violated.clear();
  }
  add_once(r.verdict.violated, rule);
  add_once(r.blamed, rule);
}

// Folds the target's broken invariants into the op's verdict (invariants.h).
void apply_invariants(std::span<const InvariantBreak> breaks, StepResult& r) {
  for (const InvariantBreak& b : breaks) {
    violate(r, b.rule);
    r.expected.hits.push_back({b.rule, true});
    add_note(r.expected.note, "invariant: " + b.what);
  }
}

// The content oracle: the target re-reads what the scenario can read and the
// model judges it, then goes on from it.
void check_contents(Model& model, Target& source, const Scenario& s, size_t i, StepResult& r) {
  if (!source.observe(s, i, &r.seen)) return;
  model.check_contents(s, i, r.seen, &r.contents);
  r.contents.taken = true;
  for (const RuleHit& h : r.contents.hits) r.expected.hits.push_back(h);
  for (RuleId rule : r.contents.violated) violate(r, rule);
  if (!r.contents.violated.empty()) add_note(r.expected.note, "contents: " + r.contents.note);
}

}  // namespace

void step(Model& model, Target& source, const InvariantSource* invariants, const Scenario& s, size_t i,
          bool model_knows, StepResult* out) {
  StepResult& r = *out;
  r.expected.clear();
  r.blamed.clear();
  r.contents.clear();
  r.adopted = false;
  if (!model_knows) {
    r.observed = source.exec(s, i);
    r.verdict = Verdict{VerdictKind::kUnchecked, {}};
    r.model_knows = false;
    r.expected.note = "unchecked: the model lost track of the target at op " + std::to_string(r.lost_at) +
                      ": " + r.lost_reason;
  } else {
    model.expect(s, i, r.expected);
    r.observed = source.exec(s, i);
    r.verdict = judge(r.expected, r.observed);
    r.model_knows = true;
    if (r.verdict.kind == VerdictKind::kViolation) {
      r.blamed = r.verdict.violated;
      // Judge every op: go on from what the target did where the model can.
      std::string note;
      r.adopted = model.adopt(s, i, r.observed, &note);
      if (r.adopted) {
        add_note(r.expected.note, "adopted: " + note);
      } else {
        r.model_knows = false;
        r.lost_at = i;
        r.lost_reason = note;
      }
    } else {
      model.commit(s, i, r.observed);
    }
    // After an adopted violation the model re-reads too: the target may
    // have done more than the outcome says.
    if (r.model_knows && (r.adopted || model.wants_contents(s, i))) check_contents(model, source, s, i, r);
  }
  if (invariants) apply_invariants(invariants->invariant_breaks(), r);
}

}  // namespace kconform
