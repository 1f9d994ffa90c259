// What a model offers beyond Model so that concurrent groups of a scenario
// (Op::thread, harness/scenario/scenario.h) can be judged: copies of its state
// for a search over interleavings (harness/runner/linearize.h), a digest for
// memoisation, and an op's effect split into the steps that are atomic.
//
// An op is judged at its first step: expect() there, and the observed outcome
// must be allowed. Its effect is then applied step by step, and other ops may
// run between two steps (a write of several pages is atomic only per page).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "models/common/rules.h"
#include "models/model.h"

namespace kconform {

class ConcurrentModel : public Model {
 public:
  // A copy in the current state (the copy is of the same dynamic type).
  virtual std::unique_ptr<ConcurrentModel> clone() const = 0;
  // Takes other's state; other is a clone of this model (same dynamic type).
  virtual void assign(const ConcurrentModel& other) = 0;
  // Equal states (ops in flight included) give equal digests.
  virtual uint64_t state_digest() const = 0;
  // Whether op i may take its first step now: false while an op in flight
  // excludes it (the ABI serialises the two as wholes). The search then tries
  // it later, after that op's remaining steps.
  virtual bool may_begin(const Scenario& s, size_t i) const {
    (void)s, (void)i;
    return true;
  }
  // Applies the first atomic step of op i, which had outcome observed (one
  // expect() allowed in the current state), and returns how many steps of it
  // remain. 0: the op is done (commit_begin is then the same as commit()).
  virtual size_t commit_begin(const Scenario& s, size_t i, const Outcome& observed) = 0;
  // Applies the next step of op i (started, with steps remaining); returns
  // how many remain.
  virtual size_t commit_more(const Scenario& s, size_t i) = 0;
  // The rule a concurrent group violates when no interleaving explains it.
  virtual RuleId linearizable_rule() const = 0;
};

}  // namespace kconform
