// The in-process scenario runner.
#include "harness/runner/runner.h"

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

RunStats run_scenarios(const std::vector<LoadedScenario>& scenarios, Model& model, Target& target,
                       VerdictWriter& writer) {
  RunStats stats;
  Expectation expected;
  const Expectation kNothing;
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
      if (diverged) {
        Outcome observed = target.exec(s, i);
        writer.op(ref, i, kNothing, observed, Verdict{VerdictKind::kUnchecked, {}});
        ++stats.unchecked;
        continue;
      }
      expected.clear();
      model.expect(s, i, expected);
      Outcome observed = target.exec(s, i);
      Verdict verdict = judge(expected, observed);
      writer.op(ref, i, expected, observed, verdict);
      if (verdict.kind == VerdictKind::kViolation) {
        ++stats.violations;
        diverged = true;
      } else {
        ++stats.pass;
        model.commit(s, i, observed);
      }
    }
    target.end();
  }
  return stats;
}

}  // namespace kconform
