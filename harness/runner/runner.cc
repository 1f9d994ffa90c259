// The in-process scenario runner: the scenario loop around step() (step.h).
#include "harness/runner/runner.h"

#include "harness/runner/crash_marker.h"
#include "harness/runner/group.h"
#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "oracles/json_text.h"

namespace kconform {

bool load_all(const std::vector<std::string>& paths, std::vector<LoadedScenario>* out,
              std::string* error) {
  for (const std::string& path : paths) {
    std::vector<Scenario> in_file;
    if (!load_scenario_file(path, &in_file, error)) return false;
    for (size_t i = 0; i < in_file.size(); ++i)
      out->push_back(LoadedScenario{std::move(in_file[i]), path, i, out->size()});
  }
  return true;
}

RunStats run_scenarios(const std::vector<LoadedScenario>& scenarios, Model& model, Target& target,
                       VerdictWriter& writer, const InvariantSource* invariants, const StepObserver& on_step) {
  RunStats stats;
  StepResult r;
  std::string call;       // the op in flight, as format_op prints it
  std::string call_json;  // and quoted, for its marker and its record
  std::vector<StepResult> group;
  for (const LoadedScenario& ls : scenarios) {
    const Scenario& s = ls.scenario;
    ScenarioRef ref{&s, ls.file, ls.index};
    set_in_flight_scenario(ls.position, s.ops.size());
    ++stats.scenarios;
    stats.ops += s.ops.size();
    uint32_t missing = s.requires_caps & ~target.identity().cap_bits;
    if (std::string why = target.unsupported(s); missing || !why.empty()) {
      for (size_t i = 0; i < s.ops.size(); ++i) writer.unsupported(ref, i, missing, why);
      stats.unsupported += s.ops.size();
      continue;
    }
    auto emit = [&](size_t i, const StepResult& res, const std::string* call_json = nullptr) {
      writer.op(ref, i, res.expected, res.observed, res.verdict, &res.contents, res.adopted, call_json);
      switch (res.verdict.kind) {
        case VerdictKind::kViolation: ++stats.violations; break;
        case VerdictKind::kUnchecked: ++stats.unchecked; break;
        default: ++stats.pass; break;
      }
      if (on_step) on_step(ls, i, res);
    };
    // A scenario with `repeat N` runs N times (group.h: varied timing); its
    // verdicts are those of the first run with a violation, else of the last.
    std::vector<StepResult> kept;
    for (uint32_t rep = 0; rep < s.repeat; ++rep) {
      const bool buffer = s.repeat > 1;
      if (buffer) kept.clear();
      bool violated = false;
      model.begin(s);
      target.begin(s);
      bool model_knows = true;
      for (size_t i = 0; i < s.ops.size();) {
        if (s.ops[i].thread != 0) {  // a concurrent group and the ops after it
          size_t end = run_group(model, target, s, ls.file, ls.index, i, model_knows, jitter_seed(s, rep), &group);
          for (size_t k = 0; k < end - i; ++k) {
            violated = violated || group[k].verdict.kind == VerdictKind::kViolation;
            buffer ? kept.push_back(group[k]) : emit(i + k, group[k]);
          }
          model_knows = group.back().model_knows;
          if (!model_knows) {  // for the unchecked ops after it (step.h)
            r.lost_at = end - 1;
            r.lost_reason = "no interleaving of the concurrent group explains what the target did";
          }
          i = end;
          continue;
        }
        format_op(s, i, &call);
        call_json.clear();
        json_put_string(call_json, call);
        set_in_flight(s.name, ls.file, ls.index, i, call, call_json);
        step(model, target, invariants, s, i, model_knows, &r);
        model_knows = r.model_knows;
        violated = violated || r.verdict.kind == VerdictKind::kViolation;
        buffer ? kept.push_back(r) : emit(i, r, &call_json);
        ++i;
      }
      target.end();
      if (buffer && (violated || rep + 1 == s.repeat)) {
        for (size_t i = 0; i < kept.size(); ++i) {
          std::string& note = kept[i].expected.note;
          if (kept[i].verdict.kind == VerdictKind::kViolation)
            note = "repetition " + std::to_string(rep + 1) + " of " + std::to_string(s.repeat) +
                   (forces_window(jitter_seed(s, rep)) ? " (a forced window, HARNESS:WINDOW)" : " (jitter only)") +
                   (note.empty() ? "" : "; ") + note;
          emit(i, kept[i]);
        }
        break;
      }
    }
    writer.flush();  // the scenario's records, in one write
  }
  clear_in_flight();
  return stats;
}

}  // namespace kconform
