// Writing verdict records as JSON lines.
#include "oracles/verdict_json.h"

#include <nlohmann/json.hpp>

#include "harness/scenario/abi.h"

namespace kconform {

using nlohmann::json;

void VerdictWriter::emit(const std::string& line) {
  std::fputs(line.c_str(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
}

void VerdictWriter::plan(size_t scenarios, size_t ops) {
  emit(json{{"type", "plan"}, {"format", kVerdictFormatVersion}, {"scenarios", scenarios}, {"ops", ops}}
           .dump());
}

void VerdictWriter::target(const TargetIdentity& id) {
  json caps = json::object();
  for (const auto& [name, value] : id.caps) caps[name] = value;
  emit(json{{"type", "target"},
            {"format", kVerdictFormatVersion},
            {"target", id.target},
            {"release", id.release},
            {"profile", id.profile},
            {"caps", caps}}
           .dump());
}

namespace {

json base_record(const ScenarioRef& ref, size_t op_index) {
  return json{{"type", "op"},
              {"scenario", ref.scenario->name},
              {"file", ref.file},
              {"index", ref.index},
              {"op", op_index},
              {"call", format_op(*ref.scenario, op_index)}};
}

}  // namespace

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

// "contents": what the content oracle looked at after the op and every page
// that differed (oracles/README.md).
json contents_record(const ContentCheck& c) {
  json r{{"files", c.files}, {"pages", c.pages}, {"digest", hex(c.digest)}};
  if (!c.unobserved.empty()) r["unobserved"] = c.unobserved;
  if (!c.diffs.empty()) {
    json diffs = json::array();
    for (const PageDiff& d : c.diffs)
      diffs.push_back(json{{"gmem", d.slot},
                           {"page", d.index},
                           {"first_diff", hex(d.first_diff)},
                           {"expected_digest", hex(d.expected_digest)},
                           {"observed_digest", hex(d.observed_digest)},
                           {"rule", rule_info(d.rule).id},
                           {"why", d.why}});
    r["differ"] = diffs;
  }
  return r;
}

}  // namespace

void VerdictWriter::op(const ScenarioRef& ref, size_t op_index, const Expectation& expected,
                       const Outcome& observed, const Verdict& verdict, const ContentCheck* contents,
                       bool adopted) {
  json r = base_record(ref, op_index);
  r["verdict"] = to_string(verdict.kind);
  json rules = json::array();
  for (const RuleHit& h : expected.hits)
    rules.push_back(json::array({rule_info(h.rule).id, h.forbidden ? "forbidden" : "allowed"}));
  r["rules"] = rules;
  json allowed = json::array();
  for (const Allowed& a : expected.allowed) allowed.push_back(to_string(a));
  r["expected"] = allowed;
  r["observed"] = to_string(observed);
  if (verdict.kind == VerdictKind::kViolation) {
    json violated = json::array();
    for (RuleId id : verdict.violated) violated.push_back(rule_info(id).id);
    r["violated"] = violated;
    // Robustness against an environment the scenario made misbehave (an
    // injected EL3 fault) or conformance (oracles/README.md).
    r["class"] = expected.robustness ? "robustness" : "conformance";
    if (!expected.note.empty()) r["note"] = expected.note;
    if (adopted) r["adopted"] = true;
  } else if (verdict.kind == VerdictKind::kUnchecked && !expected.note.empty()) {
    r["note"] = expected.note;
  } else if (verdict.kind == VerdictKind::kPass && !expected.note.empty() && expected.allowed.size() > 1) {
    // On a rule's forbidden side with several outcomes allowed (e.g. FF-A
    // DESC:SENDER's INVALID_PARAMETERS or DENIED): which one the target gave.
    r["note"] = expected.note;
    for (const Allowed& a : expected.allowed)
      if (a.admits(observed)) {
        r["gave"] = to_string(a);
        break;
      }
  }
  // A re-read that found nothing (no file yet) is left out.
  if (contents && contents->taken && (contents->files != 0 || !contents->unobserved.empty()))
    r["contents"] = contents_record(*contents);
  emit(r.dump());
}

void VerdictWriter::unsupported(const ScenarioRef& ref, size_t op_index, uint32_t missing_caps) {
  json r = base_record(ref, op_index);
  r["verdict"] = to_string(VerdictKind::kUnsupported);
  const AbiSpec& abi = abi_spec(ref.scenario->abi);
  json missing = json::array();
  for (const NamedValue& cap : abi.capabilities)
    if (missing_caps & (1u << cap.value)) missing.push_back(cap.name);
  r["missing"] = missing;
  emit(r.dump());
}

void VerdictWriter::summary(size_t scenarios, size_t ops, size_t violations, double seconds,
                            const FaultReport* fault) {
  json r{{"type", "summary"}, {"scenarios", scenarios}, {"ops", ops}, {"violations", violations}, {"seconds", seconds}};
  if (fault) r["fault"] = json{{"spec", fault->spec}, {"fired", fault->fired}, {"scenarios", fault->scenarios}};
  emit(r.dump());
}

}  // namespace kconform
