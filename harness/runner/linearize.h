// The linearizability check of a concurrent group: is there an interleaving
// of the group's threads, each in program order and each op split into its
// atomic steps (models/concurrent.h), in which every op's observed outcome is
// one the model allows where the op takes effect, and whose end state
// explains the main-sequence ops after the group? A depth-first search over
// interleavings, memoised on (model state digest, each thread's progress):
// a state reached again has the same future and is not explored twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "harness/runner/step.h"
#include "harness/scenario/scenario.h"
#include "models/concurrent.h"

namespace kconform {

struct LinearizeStats {
  uint64_t nodes = 0;          // search states visited (memoised ones not counted twice)
  uint64_t interleavings = 0;  // complete interleavings of the group reached (then the tail judged)
  bool budget_exhausted = false;
};

inline constexpr uint64_t kLinearizeBudget = 2000000;  // search states before giving up

// Judges ops [first, end) of s: the concurrent group [first, group_end(s,
// first)) and the main-sequence ops after it, up to end (no op of a group
// among them), given observed[k], the outcome of op first+k. Writes one
// StepResult per op into results (resized to end-first).
//
// true: some interleaving explains everything; every op passes with the
// expectation it had in that interleaving, and model holds its end state.
// false: none does (or the search gave up after budget states, said in the
// note). The ops that could not be placed in the closest interleaving found
// (the one that placed most ops) are violations of model.linearizable_rule():
// the outcomes the model allowed there are listed as licensed by that rule
// (their own rules are named in the note, with the ops that could not be
// placed and that interleaving); the ops it placed pass; the rest are
// unchecked; model_knows is false from the first violation on.
bool linearize(ConcurrentModel& model, const Scenario& s, size_t first, size_t end,
               std::span<const Outcome> observed, std::vector<StepResult>* results,
               LinearizeStats* stats = nullptr, uint64_t budget = kLinearizeBudget);

}  // namespace kconform
