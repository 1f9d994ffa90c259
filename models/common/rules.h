// The rule registry: every check a model makes has a stable ID, a one-line
// statement and a citation. The rules themselves are listed in each model's
// rules.def (X-macro), so that one file per ABI is where a newcomer finds them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kconform {

using RuleId = uint16_t;

struct RuleInfo {
  const char* id;        // stable ID, e.g. "GMEM.WRITE.ALIGN"
  const char* abi;       // "gmem" or "ffa"
  const char* summary;   // the rule in one sentence
  const char* citation;  // where it comes from (clause label in the model's SPEC.md, api.rst, ...)
};

// Enumerators for every rule of every ABI. Rule 0 is reserved (no rule).
enum : RuleId {
  kNoRule = 0,
#define KCONFORM_RULE(sym, id, summary, citation) sym,
#include "models/gmem/rules.def"
#undef KCONFORM_RULE
  kGmemRulesEnd,
  kFfaRulesBegin = kGmemRulesEnd - 1,
#define KCONFORM_RULE(sym, id, summary, citation) sym,
#include "models/ffa/rules.def"
#undef KCONFORM_RULE
  kFfaRulesEnd,
  kRuleCount = kFfaRulesEnd
};

std::span<const RuleInfo> all_rules();  // index == RuleId (entry 0 is the null rule)
const RuleInfo& rule_info(RuleId id);
std::optional<RuleId> rule_by_id(std::string_view id);

}  // namespace kconform
