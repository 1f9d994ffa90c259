// Rule sides as coverage features (rule_features.h).
#include "harness/fuzz/rule_features.h"

#include <cstdlib>
#include <cstring>

namespace kconform::fuzz {

bool rule_features_enabled() {
  const char* off = std::getenv(kEnvNoRuleFeatures);
  return !off || !*off || std::strcmp(off, "0") == 0;
}

namespace {
volatile unsigned g_rule_side_sink;
}  // namespace

// One case per rule of every rules.def, and in it one block per side, each a
// volatile store of its own value. optnone: the optimiser would otherwise merge
// the cases (a lookup table and one store), leaving one block for them all;
// the coverage pass runs on the function as written.
__attribute__((noinline, optnone)) void rule_side_feature(RuleId rule, bool forbidden) {
  switch (rule) {
#define KCONFORM_RULE(sym, id, summary, citation) \
  case sym:                                       \
    if (forbidden)                                \
      g_rule_side_sink = 2u * sym + 1u;           \
    else                                          \
      g_rule_side_sink = 2u * sym;                \
    break;
#include "models/gmem/rules.def"
#include "models/ffa/rules.def"
#undef KCONFORM_RULE
    default:
      break;
  }
}

}  // namespace kconform::fuzz
