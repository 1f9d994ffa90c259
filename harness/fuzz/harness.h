// The fuzz harness core, shared by every engine (libFuzzer, AFL++) and every
// target: decode one input, bound it, run it through the model and the
// target op by op, and judge. The oracle is the crash condition: a rule
// violation (or a broken target invariant) that the baseline does not know
// ends the process with one SUMMARY line naming the rule; a known one
// (KCONFORM_FUZZ_KNOWN_RULES) is recorded and fuzzing goes on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "harness/fuzz/mutator.h"
#include "harness/runner/target_registry.h"

namespace kconform::fuzz {

// Environment of a fuzz process (set by `kconform fuzz`):
//   KCONFORM_FUZZ_KNOWN_RULES  comma-separated rule IDs baselined for this target
//   KCONFORM_FUZZ_KNOWN_LOG    file to append "KNOWN <rule> <op call>" lines to (first per rule)
inline constexpr const char* kEnvKnownRules = "KCONFORM_FUZZ_KNOWN_RULES";
inline constexpr const char* kEnvKnownLog = "KCONFORM_FUZZ_KNOWN_LOG";

struct HarnessConfig {
  Abi abi = Abi::kGmem;
  Limits limits;
  // Inputs whose ops would materialise more than this many bytes (but not
  // more than the target's own refusal limit) are skipped, for speed.
  uint64_t max_op_bytes = 1u << 20;
  size_t max_vms = 2;
};

class Harness {
 public:
  // Opens the target family; exits with status 2 and a message if it cannot run.
  Harness(const TargetFamily& family, const HarnessConfig& cfg);
  // 0: ran; -1: the input is not one this harness runs (libFuzzer: do not add to the corpus).
  int run(const uint8_t* data, size_t size);
  const HarnessConfig& config() const { return cfg_; }

 private:
  bool bounded(const Scenario& s) const;
  void finding(const Scenario& s, size_t op, const std::string& rules, const std::string& detail);

  HarnessConfig cfg_;
  OpenTarget t_;
  std::set<std::string> known_;
  std::set<std::string> known_seen_;
  std::string known_log_;
};

}  // namespace kconform::fuzz
