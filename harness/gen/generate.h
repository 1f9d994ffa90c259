// From a Function's conditions to concrete cases: the valid case, for every
// atomic condition a case breaking it alone, and its boundary cases (just
// inside, just outside, and the unsigned wrap-around a W-bit implementation
// would accept). With Function::fewest_others, a case that cannot keep every
// other condition breaks the fewest others it must, and its name lists them
// (<kind>+<cond>...); one that would have to break a condition the model
// checks before its target is not generated. Without it, a case keeps every
// other condition, or breaks only those whose W-bit computation still holds
// (named the same way); others are not generated. Deterministic: same Function,
// same cases, same order.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/gen/constraints.h"
#include "harness/scenario/scenario.h"

namespace kconform::gen {

struct Case {
  Scenario scenario;         // name set: z3/<abi>/<function>/<kind>
  std::vector<std::string> comment;  // lines without '#'
};

struct GenStats {
  size_t queries = 0, sat = 0, relaxed = 0, unsat = 0, duplicates = 0;
  std::vector<std::string> not_isolable;  // "function/cond": cannot be broken alone
  // "function/kind": every case of the query also breaks a condition of an
  // earlier stage than its target, so none reaches the target (not generated).
  std::vector<std::string> unreachable;
  // "function/kind": Function::fewest_others off, and no case of the query
  // keeps every other condition (exactly, or as its W-bit arithmetic computes
  // it), so none is generated.
  std::vector<std::string> not_generated;
};

std::vector<Case> generate(const Function& f, GenStats* stats);

// The text of one corpus file: a header (with the queries stats lists as
// unreachable), then each case with its comment.
std::string format_cases(const Function& f, const std::vector<Case>& cases, const GenStats* stats = nullptr);

// Builds one op of s by argument name; unnamed optional arguments take their
// defaults. Aborts on a name the ABI table does not have (a generator bug).
void add_op(Scenario& s, const std::string& op,
            const std::vector<std::pair<std::string, uint64_t>>& ints,
            const std::vector<std::pair<std::string, std::vector<uint8_t>>>& bytes = {});
// Sets the scenario's requires bit of a capability by name.
void require(Scenario& s, const std::string& cap);

}  // namespace kconform::gen
