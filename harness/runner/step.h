// One op, judged the one way: the step every caller shares (run_scenarios in
// runner.h, hence `run` and `replay`; FuzzRunner in harness/fuzz). The model
// says what the op may do, the outcome source says what it did (a target
// running it, or a recording of one: replay.cc's ReplayTarget), the oracle
// judges, the target's invariants are folded in, and the model either commits
// the outcome or has lost track of the target's state.
#pragma once

#include <cstddef>
#include <vector>

#include "harness/scenario/scenario.h"
#include "models/model.h"
#include "oracles/oracle.h"
#include "targets/invariants.h"
#include "targets/target.h"

namespace kconform {

struct StepResult {
  // The model's expectation (empty on an unchecked op), with every broken
  // invariant folded in: its rule on the forbidden side, "invariant: ..." in
  // the note. This, observed and verdict are what the verdict stream writes.
  Expectation expected;
  Outcome observed;
  // pass or violation; unchecked when the model no longer knew the state
  // before this op (a broken invariant still makes it a violation of the
  // invariant's rule). `violated` lists the rules of every outcome the model
  // allowed (oracle.h), then those of the broken invariants.
  Verdict verdict;
  // Whom a violation blames (empty if none): the violated rules the op was on
  // the forbidden side of (the rules that demanded something else), or, if it
  // was on the forbidden side of none, every violated rule; then the rules of
  // the broken invariants. A fuzz finding is named by these.
  std::vector<RuleId> blamed;
  // Whether the model still knows the target's state after this op: false
  // once the model's judgement failed (later ops of the scenario are run but
  // unchecked); a broken invariant alone leaves it true.
  bool model_knows = true;
};

// Runs op i of s on source and judges it into *out (reused between calls to
// keep its buffers). model_knows: the previous step's (true for op 0). The
// caller calls model.begin(s) and source.begin(s) before op 0 and
// source.end() after the last op. invariants: the source's (or of the target
// it wraps), or null.
void step(Model& model, Target& source, const InvariantSource* invariants, const Scenario& s, size_t i,
          bool model_knows, StepResult* out);

}  // namespace kconform
