// One op, judged the one way: the step every caller shares (run_scenarios in
// runner.h, hence `run` and `replay`; FuzzRunner in harness/fuzz). The model
// says what the op may do, the outcome source says what it did (a target
// running it, or a recording of one: replay.cc's ReplayTarget), the oracle
// judges, the target's invariants are folded in, and the model either commits
// the outcome or has lost track of the target's state.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/scenario/scenario.h"
#include "models/model.h"
#include "oracles/oracle.h"
#include "targets/invariants.h"
#include "targets/target.h"

namespace kconform {

struct StepResult {
  // The model's expectation (empty on an unchecked op), with every broken
  // invariant and content rule folded in: its rule on the forbidden side,
  // "invariant: ..." / "contents: ..." in the note. This, observed, verdict
  // and contents are what the verdict stream writes.
  Expectation expected;
  Outcome observed;
  // pass or violation; unchecked when the model had lost track of the
  // target's state before this op (a broken invariant still makes it a
  // violation of the invariant's rule). `violated` lists the rules the
  // outcome violates (oracle.h), then those of broken content rules and
  // invariants.
  Verdict verdict;
  // Whom a violation blames (empty if none): verdict.violated. A fuzz finding
  // is named by these.
  std::vector<RuleId> blamed;
  // The content oracle after this op (contents.taken false when the model
  // did not ask or the target cannot re-read).
  ContentCheck contents;
  Contents seen;  // what the target re-read (buffer reused between steps)
  // After a violation the model adopted the target's outcome and judging
  // goes on (the note says what was adopted).
  bool adopted = false;
  // Whether the model still knows the target's state after this op: false
  // once it could not adopt a violating outcome; later ops are then run but
  // unchecked, and lost_at/lost_reason say where and why (kept across steps:
  // callers reuse one StepResult for a scenario).
  bool model_knows = true;
  size_t lost_at = 0;
  std::string lost_reason;
};

// Runs op i of s on source and judges it into *out (reused between calls to
// keep its buffers and the lost_* fields). model_knows: the previous step's
// (true for op 0). The caller calls model.begin(s) and source.begin(s) before
// op 0 and source.end() after the last op. invariants: the source's (or of
// the target it wraps), or null.
void step(Model& model, Target& source, const InvariantSource* invariants, const Scenario& s, size_t i,
          bool model_knows, StepResult* out);

}  // namespace kconform
