// Running and judging a concurrent group (Op::thread): the group's ops run
// through Target::exec_group, the main-sequence ops after it (up to the next
// group or the scenario's end) one by one, and the whole stretch is judged by
// the interleaving search (linearize.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/runner/linearize.h"
#include "harness/runner/runner.h"
#include "harness/runner/step.h"
#include "models/model.h"
#include "targets/target.h"

namespace kconform {

// Runs ops [first, end) of s, first the start of a concurrent group, and
// judges them into results (one per op); returns end. model_knows: as for
// step(). A model that cannot judge groups (not a ConcurrentModel) leaves
// them unchecked. file/index name the scenario for the crash marker.
// KCONFORM_REPEAT_SCALE=K (a longer run, e.g. nightly): each scenario with
// `repeat N` (N > 1) is to run N*K times (at most kMaxRepeat). `run` and
// `pack` (hence QEMU) apply it; false with the error for a value that is not
// a number 1..1000.
bool scale_repeats(std::vector<Scenario*> scenarios, std::string* error);
inline std::vector<Scenario*> scenario_ptrs(std::vector<LoadedScenario>& all) {
  std::vector<Scenario*> out;
  for (LoadedScenario& ls : all) out.push_back(&ls.scenario);
  return out;
}

size_t run_group(Model& model, Target& target, const Scenario& s, const std::string& file, size_t index,
                 size_t first, bool model_knows, uint64_t seed, std::vector<StepResult>* results,
                 LinearizeStats* stats = nullptr);

}  // namespace kconform
