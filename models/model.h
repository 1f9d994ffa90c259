// A reference model of one ABI: given a scenario prefix, which outcomes the
// next op may have (and which rules decide that), then the state change for
// the outcome the target actually produced.
#pragma once

#include <cstddef>

#include <string>
#include <vector>

#include "harness/scenario/scenario.h"
#include "models/common/contents.h"
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
  // After a violation: continues from what the target did, when the model can
  // represent it (the observed result and its effects). Returns true and says
  // in *note what was adopted, or returns false with the reason in *note: the
  // model has then lost track of the target, and later ops go unchecked.
  virtual bool adopt(const Scenario& s, size_t i, const Outcome& observed, std::string* note) {
    (void)s, (void)i, (void)observed;
    *note = "the model cannot represent this outcome's effects";
    return false;
  }
  // Content oracle: whether the target should re-read the data the scenario
  // can read after op i (ops that can change data, and the last op).
  virtual bool wants_contents(const Scenario& s, size_t i) const {
    (void)s, (void)i;
    return false;
  }
  // Compares what the target re-read after op i with the model's contents
  // into *out, then takes the target's contents as its own (the model goes on
  // from what the target holds; each difference is reported once).
  virtual void check_contents(const Scenario& s, size_t i, const Contents& seen, ContentCheck* out) {
    (void)s, (void)i, (void)seen, (void)out;
  }
};

}  // namespace kconform
