// The verdict stream: JSON lines, one record per op, after one record naming
// the target. This is the one verdict format; the driver, the baseline and
// the reports read it (docs: oracles/README.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "harness/scenario/scenario.h"
#include "oracles/json_text.h"
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

// Op records are held in a fixed buffer and written when the runner ends a
// scenario (flush()), when the buffer fills and when the writer goes; the
// plan, target and summary records are written at once. If the process dies
// first (a signal, a sanitizer report or the hang watchdog in the code under
// test: harness/runner/crash_marker.h), write_pending_verdicts() writes what
// the newest writer holds with write(2), so every op judged before the crash
// is in the stream.
class VerdictWriter {
 public:
  explicit VerdictWriter(std::FILE* out);
  ~VerdictWriter();
  VerdictWriter(const VerdictWriter&) = delete;
  VerdictWriter& operator=(const VerdictWriter&) = delete;
  void plan(size_t scenarios, size_t ops);
  void target(const TargetIdentity& id);
  // contents: the content oracle's judgement after the op, if it ran;
  // adopted: the model went on from a violating outcome (step.h); call_json:
  // the op as format_op prints it, quoted (json_put_string), when the caller
  // has it already.
  void op(const ScenarioRef& ref, size_t op_index, const Expectation& expected,
          const Outcome& observed, const Verdict& verdict, const ContentCheck* contents = nullptr,
          bool adopted = false, const std::string* call_json = nullptr);
  // An op of a scenario the target cannot run: the capabilities it lacks, by
  // name ("missing"), and/or why ("note": what else keeps the target from it).
  void unsupported(const ScenarioRef& ref, size_t op_index, uint32_t missing_caps, const std::string& why = "");
  void summary(size_t scenarios, size_t ops, size_t violations, double seconds,
               const FaultReport* fault = nullptr);
  // Writes the records held (the runner: after each scenario).
  void flush();

 private:
  friend void write_pending_verdicts() noexcept;
  static constexpr size_t kHeld = size_t{1} << 16;  // bytes of records held before a write
  void emit(std::string_view line, bool now = false);
  std::FILE* out_;
  int fd_;  // out_'s file descriptor (-1: a memory stream), for write_pending_verdicts()
  VerdictWriter* prev_;  // the writer write_pending_verdicts() served before this one
  std::unique_ptr<char[]> held_;  // records not yet written: [0, held_len_)
  std::atomic<size_t> held_len_{0};
  std::string line_;  // the op record being written, its buffer kept
  ScenarioJson scenario_json_;  // the op record's scenario fields, quoted once per scenario
  std::string field_;  // one of its fields as text, before quoting (buffer kept)
};

// Writes the records the newest live VerdictWriter holds to its stream's file
// descriptor with write(2): async-signal-safe, for the crash, sanitizer and
// hang paths (crash_marker.cc), which end the process without a flush.
void write_pending_verdicts() noexcept;

// The op record as VerdictWriter::op writes it, built through nlohmann::json
// (the reference the direct writer is tested against).
std::string op_record_reference(const ScenarioRef& ref, size_t op_index, const Expectation& expected,
                                const Outcome& observed, const Verdict& verdict,
                                const ContentCheck* contents = nullptr, bool adopted = false);

}  // namespace kconform
