// The in-process scenario runner.
#include "harness/runner/runner.h"

#include <algorithm>

#include "harness/runner/crash_marker.h"
#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "oracles/oracle.h"

namespace kconform {

bool load_all(const std::vector<std::string>& paths, std::vector<LoadedScenario>* out,
              std::string* error) {
  for (const std::string& path : paths) {
    std::vector<Scenario> in_file;
    if (!load_scenario_file(path, &in_file, error)) return false;
    for (size_t i = 0; i < in_file.size(); ++i)
      out->push_back(LoadedScenario{std::move(in_file[i]), path, i});
  }
  return true;
}

namespace {

// Folds the target's broken invariants into the op's verdict (invariants.h).
// Returns true if any was broken.
bool apply_invariants(const InvariantSource* inv, Expectation& expected, Verdict& verdict) {
  if (!inv) return false;
  std::span<const InvariantBreak> breaks = inv->invariant_breaks();
  if (breaks.empty()) return false;
  if (verdict.kind != VerdictKind::kViolation) {
    verdict.kind = VerdictKind::kViolation;
    verdict.violated.clear();
  }
  for (const InvariantBreak& b : breaks) {
    if (std::find(verdict.violated.begin(), verdict.violated.end(), b.rule) == verdict.violated.end())
      verdict.violated.push_back(b.rule);
    expected.hits.push_back({b.rule, true});
    if (!expected.note.empty()) expected.note += "; ";
    expected.note += "invariant: " + b.what;
  }
  return true;
}

}  // namespace

RunStats run_scenarios(const std::vector<LoadedScenario>& scenarios, Model& model, Target& target,
                       VerdictWriter& writer, const InvariantSource* invariants) {
  RunStats stats;
  Expectation expected;
  for (const LoadedScenario& ls : scenarios) {
    const Scenario& s = ls.scenario;
    ScenarioRef ref{&s, ls.file, ls.index};
    ++stats.scenarios;
    stats.ops += s.ops.size();
    uint32_t missing = s.requires_caps & ~target.identity().cap_bits;
    if (missing) {
      for (size_t i = 0; i < s.ops.size(); ++i) writer.unsupported(ref, i, missing);
      stats.unsupported += s.ops.size();
      continue;
    }
    model.begin(s);
    target.begin(s);
    bool diverged = false;
    for (size_t i = 0; i < s.ops.size(); ++i) {
      set_in_flight(s.name, ls.file, ls.index, i, format_op(s, i));
      expected.clear();
      if (diverged) {
        Outcome observed = target.exec(s, i);
        Verdict verdict{VerdictKind::kUnchecked, {}};
        if (apply_invariants(invariants, expected, verdict))
          ++stats.violations;
        else
          ++stats.unchecked;
        writer.op(ref, i, expected, observed, verdict);
        continue;
      }
      model.expect(s, i, expected);
      Outcome observed = target.exec(s, i);
      Verdict verdict = judge(expected, observed);
      const bool model_ok = verdict.kind != VerdictKind::kViolation;
      apply_invariants(invariants, expected, verdict);
      writer.op(ref, i, expected, observed, verdict);
      if (verdict.kind == VerdictKind::kViolation) ++stats.violations;
      else ++stats.pass;
      if (model_ok) {
        // The model still knows the state: a broken invariant alone does not
        // stop the judging of later ops.
        model.commit(s, i, observed);
      } else {
        diverged = true;
      }
    }
    target.end();
  }
  clear_in_flight();
  return stats;
}

}  // namespace kconform
