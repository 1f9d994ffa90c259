// A reference model of one ABI: given a scenario prefix, which outcomes the
// next op may have (and which rules decide that), then the state change for
// the outcome the target actually produced.
#pragma once

#include <cstddef>

#include "harness/scenario/scenario.h"
#include "models/common/outcome.h"

namespace kconform {

class Model {
 public:
  virtual ~Model() = default;
  // Resets to the initial state (no VMs, no files) for a new scenario.
  virtual void begin(const Scenario& s) = 0;
  // Fills out with every allowed outcome of op i and the rules it exercised.
  // Does not change the model state.
  virtual void expect(const Scenario& s, size_t i, Expectation& out) = 0;
  // Applies the effect of op i given the outcome the target produced, which
  // the oracle has checked is one of the allowed outcomes of expect().
  virtual void commit(const Scenario& s, size_t i, const Outcome& observed) = 0;
};

}  // namespace kconform
