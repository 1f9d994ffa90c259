// The verdict stream: JSON lines, one record per op, after one record naming
// the target. This is the one verdict format; the driver, the baseline and
// the reports read it (docs: oracles/README.md).
#pragma once

#include <cstdio>
#include <string>

#include "harness/scenario/scenario.h"
#include "models/common/contents.h"
#include "oracles/oracle.h"
#include "targets/target.h"

namespace kconform {

inline constexpr int kVerdictFormatVersion = 1;

struct ScenarioRef {
  const Scenario* scenario;
  std::string file;  // where it was read from
  size_t index;      // its position in that file
};

// What a faulty target (targets/faulty, `run --fault`) did: its spec, how many
// outcomes its lie changed and in how many scenarios. In the summary record as
// "fault": {"spec", "fired", "scenarios"}; absent on a run without a fault.
struct FaultReport {
  std::string spec;
  uint64_t fired = 0;
  uint64_t scenarios = 0;
};

class VerdictWriter {
 public:
  explicit VerdictWriter(std::FILE* out) : out_(out) {}
  void plan(size_t scenarios, size_t ops);
  void target(const TargetIdentity& id);
  // contents: the content oracle's judgement after the op, if it ran;
  // adopted: the model went on from a violating outcome (step.h); call: the
  // op as format_op prints it, when the caller has it already.
  void op(const ScenarioRef& ref, size_t op_index, const Expectation& expected,
          const Outcome& observed, const Verdict& verdict, const ContentCheck* contents = nullptr,
          bool adopted = false, const std::string* call = nullptr);
  // An op of a scenario the target cannot run: the capabilities it lacks, by
  // name ("missing"), and/or why ("note": what else keeps the target from it).
  void unsupported(const ScenarioRef& ref, size_t op_index, uint32_t missing_caps, const std::string& why = "");
  void summary(size_t scenarios, size_t ops, size_t violations, double seconds,
               const FaultReport* fault = nullptr);

 private:
  void emit(const std::string& line);
  std::FILE* out_;
  std::string line_;  // the op record being written, its buffer kept
  std::string field_;  // one of its fields as text, before quoting (buffer kept)
};

// The op record as VerdictWriter::op writes it, built through nlohmann::json
// (the reference the direct writer is tested against).
std::string op_record_reference(const ScenarioRef& ref, size_t op_index, const Expectation& expected,
                                const Outcome& observed, const Verdict& verdict,
                                const ContentCheck* contents = nullptr, bool adopted = false);

}  // namespace kconform
