// Model-independent invariants a target checks after every op, whatever the
// op and whatever the model expected (e.g. "no page is shared with FF-A in host
// stage-2 while the SPMC says it is reclaimed"). A target that has such checks
// implements InvariantSource; the runner asks it after each exec() and turns a
// broken invariant into a violation of the rule it names, in the one verdict
// format (oracles/README.md): the op's record gets verdict "violation", the
// rule in "violated" and "rules" (forbidden side), and the diagnostic in "note"
// prefixed "invariant: ". Invariants are checked on "unchecked" ops too (after
// an earlier violation), since they do not depend on the model's state.
#pragma once

#include <span>
#include <string>

#include "models/common/rules.h"

namespace kconform {

struct InvariantBreak {
  RuleId rule = kNoRule;  // the rule whose statement the invariant enforces
  std::string what;       // actual values, for the note
};

class InvariantSource {
 public:
  virtual ~InvariantSource() = default;
  // The invariants the last exec() broke (empty if none); valid until the
  // next begin() or exec().
  virtual std::span<const InvariantBreak> invariant_breaks() const = 0;
};

}  // namespace kconform
