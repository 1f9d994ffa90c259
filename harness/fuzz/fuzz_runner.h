// The fuzz runner, shared by every engine (libFuzzer, AFL++) and every
// target: decode one input, bound it, and run it op by op through the one
// step (harness/runner/step.h) that `run` and `replay` use, so one input is
// judged and blamed the same way everywhere. The oracle is the crash
// condition: an op whose blamed rules (StepResult::blamed) the baseline does
// not all know ends the process with one SUMMARY line naming them; a known
// finding (KCONFORM_FUZZ_KNOWN_RULES) is recorded and the input goes on, as
// in `run`: judged while the model knows the state (also after a broken
// invariant alone), unchecked but invariant-checked after a model violation.
// Nothing here knows an ABI: what bounds an input comes from the ABI tables
// (harness/scenario/abi.h, EngineHints and OpSpec::bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "harness/fuzz/mutator.h"
#include "harness/runner/target_registry.h"
#include "models/common/rules.h"

namespace kconform::fuzz {

// Environment of a fuzz process (set by `kconform fuzz`):
//   KCONFORM_FUZZ_KNOWN_RULES  comma-separated rule IDs baselined for this target
//   KCONFORM_FUZZ_KNOWN_LOG    file to append "KNOWN <rules> <op call>" lines to (first per rule set)
inline constexpr const char* kEnvKnownRules = "KCONFORM_FUZZ_KNOWN_RULES";
inline constexpr const char* kEnvKnownLog = "KCONFORM_FUZZ_KNOWN_LOG";

struct FuzzConfig {
  Abi abi = Abi::kGmem;
  Limits limits;
  // Inputs with an op that would materialise more than this many bytes (but
  // not more than the ABI's refusal limit, EngineHints::refused_bytes_above)
  // are skipped, for speed.
  uint64_t max_op_bytes = 1u << 20;
  // At most this many creations of the ABI's costly resource (a VM).
  size_t max_costly = 2;
};

// The config of a fuzz target of an ABI (limits from its table).
FuzzConfig fuzz_config_for(Abi abi);

// One op that a step blamed rules for.
struct Finding {
  size_t op = 0;
  std::vector<RuleId> blamed;  // StepResult::blamed
  std::string rules;           // their IDs, comma-separated: the finding's name
  bool known = false;          // every blamed rule is baselined
  std::string detail;          // observed, expected, the model's and invariants' notes
};

class FuzzRunner {
 public:
  enum class Mode {
    kAbortOnFinding,  // an unknown finding prints SUMMARY and aborts (the fuzz targets)
    kCollect,         // findings are only returned (tests)
  };
  // Opens the target family; exits with status 2 and a message if it cannot run.
  FuzzRunner(const TargetFamily& family, const FuzzConfig& cfg, Mode mode = Mode::kAbortOnFinding);
  // Runs on an opened target (its model and invariants).
  FuzzRunner(OpenTarget opened, const FuzzConfig& cfg, Mode mode);

  // 0: ran; -1: the input is not one this runner runs (libFuzzer: do not add to the corpus).
  int run(const uint8_t* data, size_t size);
  // Whether run() runs a decoded input: the config's ABI, at most
  // limits.max_ops ops, max_costly costly resources, and no op over max_op_bytes
  // that the ABI's targets would not refuse anyway.
  bool bounded(const Scenario& s) const;
  // Runs s (unbounded) op by op through step() and returns every finding, in
  // op order. Mode::kAbortOnFinding: the first unknown one ends the process.
  std::vector<Finding> run_scenario(const Scenario& s);

  const FuzzConfig& config() const { return cfg_; }

 private:
  void report(const Scenario& s, const Finding& f);

  FuzzConfig cfg_;
  Mode mode_;
  OpenTarget t_;
  std::set<std::string> known_;
  std::set<std::string> known_seen_;
  std::string known_log_;
};

}  // namespace kconform::fuzz
