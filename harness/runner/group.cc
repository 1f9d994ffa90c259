// A concurrent group: exec_group, the ops after it, the interleaving search (group.h).
#include "harness/runner/group.h"

#include <algorithm>
#include <cstdlib>

#include "harness/runner/crash_marker.h"
#include "harness/scenario/abi.h"

namespace kconform {

bool scale_repeats(std::vector<Scenario*> scenarios, std::string* error) {
  const char* v = std::getenv("KCONFORM_REPEAT_SCALE");
  if (!v || !*v) return true;
  char* end = nullptr;
  unsigned long k = std::strtoul(v, &end, 10);
  if (*end != '\0' || k < 1 || k > 1000) {
    *error = std::string("KCONFORM_REPEAT_SCALE: '") + v + "' is not a number 1..1000";
    return false;
  }
  for (Scenario* s : scenarios)
    if (s->repeat > 1) s->repeat = static_cast<uint32_t>(std::min<uint64_t>(uint64_t{s->repeat} * k, kMaxRepeat));
  return true;
}

size_t run_group(Model& model, Target& target, const Scenario& s, const std::string& file, size_t index,
                 size_t first, bool model_knows, uint64_t seed, std::vector<StepResult>* results,
                 LinearizeStats* stats) {
  const size_t gend = group_end(s, first);
  size_t end = gend;
  while (end < s.ops.size() && s.ops[end].thread == 0) ++end;
  std::vector<Outcome> observed(end - first);
  set_in_flight(s.name, file, index, first,
                format_op(s, first) + " (concurrent group of ops " + std::to_string(first) + ".." +
                    std::to_string(gend - 1) + ")");
  target.exec_group(s, first, gend, seed, observed.data());
  for (size_t i = gend; i < end; ++i) {
    set_in_flight(s.name, file, index, i, format_op(s, i));
    observed[i - first] = target.exec(s, i);
  }
  auto* cm = dynamic_cast<ConcurrentModel*>(&model);
  if (model_knows && cm) {
    linearize(*cm, s, first, end, observed, results, stats);
    return end;
  }
  results->resize(end - first);
  for (size_t k = 0; k < end - first; ++k) {
    StepResult& r = (*results)[k];
    r.expected.clear();
    if (model_knows) r.expected.note = "this model cannot judge concurrent groups";
    r.observed = observed[k];
    r.verdict = Verdict{VerdictKind::kUnchecked, {}};
    r.blamed.clear();
    r.model_knows = false;
  }
  return end;
}

}  // namespace kconform
