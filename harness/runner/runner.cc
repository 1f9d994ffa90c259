// The in-process scenario runner: the scenario loop around step() (step.h).
#include "harness/runner/runner.h"

#include "harness/runner/crash_marker.h"
#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"

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
                       VerdictWriter& writer, const InvariantSource* invariants, const StepObserver& on_step) {
  RunStats stats;
  StepResult r;
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
    bool model_knows = true;
    for (size_t i = 0; i < s.ops.size(); ++i) {
      set_in_flight(s.name, ls.file, ls.index, i, format_op(s, i));
      step(model, target, invariants, s, i, model_knows, &r);
      model_knows = r.model_knows;
      writer.op(ref, i, r.expected, r.observed, r.verdict, &r.contents, r.adopted);
      switch (r.verdict.kind) {
        case VerdictKind::kViolation: ++stats.violations; break;
        case VerdictKind::kUnchecked: ++stats.unchecked; break;
        default: ++stats.pass; break;
      }
      if (on_step) on_step(ls, i, r);
    }
    target.end();
  }
  clear_in_flight();
  return stats;
}

}  // namespace kconform
