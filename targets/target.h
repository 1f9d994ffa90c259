// A target runs scenarios on real code (the running kernel, a kernel in QEMU,
// the pKVM EL2 handler compiled for the host) and reports what each op did.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/scenario/scenario.h"
#include "models/common/contents.h"
#include "models/common/outcome.h"

namespace kconform {

// Who the target is, recorded in every verdict stream.
struct TargetIdentity {
  std::string target;   // "host", "qemu", "el2", ...
  std::string release;  // kernel release (uname -r) or tree version
  std::string profile;  // the model profile chosen from the probed capabilities
  std::vector<std::pair<std::string, uint64_t>> caps;  // what was probed, by name
  uint32_t cap_bits = 0;  // which Scenario::requires_caps bits this target has
};

class Target {
 public:
  virtual ~Target() = default;
  virtual const TargetIdentity& identity() const = 0;
  // Called before the first op of a scenario; the target starts from nothing.
  virtual void begin(const Scenario& s) = 0;
  // Runs op i of s and reports what it did.
  virtual Outcome exec(const Scenario& s, size_t i) = 0;
  // Re-reads the data the scenario can read, after op i ran (content oracle,
  // models/common/contents.h). False: this target cannot.
  virtual bool observe(const Scenario& s, size_t i, Contents* out) {
    (void)s, (void)i, (void)out;
    return false;
  }
  // Runs the concurrent group of ops [first, last) of s (Op::thread: the ops
  // of one thread in order, the threads concurrently) and reports each op's
  // outcome in out[0 .. last-first). seed varies the timing from run to run
  // (a target that runs threads waits a seed-chosen while before each op).
  // The default runs the ops one by one, in scenario order.
  virtual void exec_group(const Scenario& s, size_t first, size_t last, uint64_t seed, Outcome* out) {
    (void)seed;
    for (size_t i = first; i < last; ++i) out[i - first] = exec(s, i);
  }
  // Releases everything the scenario created (fds, VMs, mappings).
  virtual void end() = 0;
  // Why this target cannot run s at all, beyond the capabilities its identity
  // lacks (those run_scenarios checks itself); "" when it can. Its ops are then
  // written `unsupported` with this reason (the record's "note").
  virtual std::string unsupported(const Scenario& s) const {
    (void)s;
    return "";
  }
};

}  // namespace kconform
