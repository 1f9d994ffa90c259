// The rule table, built from each model's rules.def.
#include "models/common/rules.h"

#include <string_view>

namespace kconform {
namespace {

constexpr RuleInfo kRules[] = {
    {"NONE", "", "no rule", ""},
#define KCONFORM_RULE(sym, id, summary, citation) {id, "gmem", summary, citation},
#include "models/gmem/rules.def"
#undef KCONFORM_RULE
#define KCONFORM_RULE(sym, id, summary, citation) {id, "ffa", summary, citation},
#include "models/ffa/rules.def"
#undef KCONFORM_RULE
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == kRuleCount);

}  // namespace

std::span<const RuleInfo> all_rules() { return kRules; }

const RuleInfo& rule_info(RuleId id) { return id < kRuleCount ? kRules[id] : kRules[0]; }

std::optional<RuleId> rule_by_id(std::string_view id) {
  for (RuleId i = 1; i < kRuleCount; ++i)
    if (id == kRules[i].id) return i;
  return std::nullopt;
}

}  // namespace kconform
