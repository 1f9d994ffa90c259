// Drives many scenarios through one model and one target in one process,
// judging every op and writing the verdict stream.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "harness/runner/step.h"
#include "harness/scenario/scenario.h"
#include "targets/invariants.h"
#include "models/model.h"
#include "oracles/verdict_json.h"
#include "targets/target.h"

namespace kconform {

struct LoadedScenario {
  Scenario scenario;
  std::string file;
  size_t index = 0;     // position within its file
  size_t position = 0;  // position in the run's load order (what `run --from` counts)
};

struct RunStats {
  size_t scenarios = 0, ops = 0, pass = 0, violations = 0, unsupported = 0, unchecked = 0;
};

// Loads every file (text or binary); on the first malformed file returns
// false with the error naming file, line or byte, op and field.
bool load_all(const std::vector<std::string>& paths, std::vector<LoadedScenario>* out,
              std::string* error);

// Called after each judged op with what step() made of it.
using StepObserver = std::function<void(const LoadedScenario& ls, size_t op, const StepResult& r)>;

// Runs every scenario the target has the capabilities for (the others'
// ops are written "unsupported"), op by op through step() (step.h), and
// writes each op's verdict. With invariants (the target's, or of the target a
// wrapper wraps), a broken invariant makes the op a violation of the
// invariant's rule (invariants.h), also on ops left unchecked after an earlier
// violation. Before each op the op is recorded for the crash marker
// (crash_marker.h). on_step, if given, sees every op step() ran.
RunStats run_scenarios(const std::vector<LoadedScenario>& scenarios, Model& model, Target& target,
                       VerdictWriter& writer, const InvariantSource* invariants = nullptr,
                       const StepObserver& on_step = {});

}  // namespace kconform
