// Writing verdict records as JSON lines.
#include "oracles/verdict_json.h"

#include <nlohmann/json.hpp>

#include "harness/scenario/abi.h"
#include "oracles/json_text.h"

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

// The op record is written directly, keys in the order nlohmann::json's
// std::map gives them, byte for byte what json::dump() would print
// (VerdictJson.OpRecordIsWhatNlohmannPrints): one record per op made half of
// the EL2 differential's time through a json object tree.
void VerdictWriter::op(const ScenarioRef& ref, size_t op_index, const Expectation& expected,
                       const Outcome& observed, const Verdict& verdict, const ContentCheck* contents,
                       bool adopted, const std::string* call) {
  const bool violation = verdict.kind == VerdictKind::kViolation;
  const bool note = !expected.note.empty() &&
                    (violation || verdict.kind == VerdictKind::kUnchecked ||
                     (verdict.kind == VerdictKind::kPass && expected.allowed.size() > 1));
  // On a rule's forbidden side with several outcomes allowed (e.g. FF-A
  // DESC:SENDER's INVALID_PARAMETERS or DENIED): which one the target gave.
  const Allowed* gave = nullptr;
  if (verdict.kind == VerdictKind::kPass && note)
    for (const Allowed& a : expected.allowed)
      if (a.admits(observed)) {
        gave = &a;
        break;
      }
  // A re-read that found nothing (no file yet) is left out.
  const bool with_contents =
      contents && contents->taken && (contents->files != 0 || !contents->unobserved.empty());
  std::string& o = line_;
  o.clear();
  // An outcome or an allowed outcome as a JSON string, its text built in field_.
  auto put_text = [&](const auto& x) {
    field_.clear();
    append_to(field_, x);
    json_put_string(o, field_);
  };
  o += '{';
  if (violation && adopted) {
    json_put_key(o, "adopted");
    o += "true";
  }
  json_put_key(o, "call");
  if (!call) {
    format_op(*ref.scenario, op_index, &field_);
    call = &field_;
  }
  json_put_string(o, *call);
  // Robustness against an environment the scenario made misbehave (an
  // injected EL3 fault) or conformance (oracles/README.md).
  if (violation) {
    json_put_key(o, "class");
    json_put_string(o, expected.robustness ? "robustness" : "conformance");
  }
  if (with_contents) {
    json_put_key(o, "contents");
    o += contents_record(*contents).dump();
  }
  json_put_key(o, "expected");
  o += '[';
  for (size_t i = 0; i < expected.allowed.size(); ++i) {
    if (i) o += ',';
    put_text(expected.allowed[i]);
  }
  o += ']';
  json_put_key(o, "file");
  json_put_string(o, ref.file);
  if (gave) {
    json_put_key(o, "gave");
    put_text(*gave);
  }
  json_put_key(o, "index");
  json_put_uint(o, ref.index);
  if (note) {
    json_put_key(o, "note");
    json_put_string(o, expected.note);
  }
  json_put_key(o, "observed");
  put_text(observed);
  json_put_key(o, "op");
  json_put_uint(o, op_index);
  json_put_key(o, "rules");
  o += '[';
  for (size_t i = 0; i < expected.hits.size(); ++i) {
    if (i) o += ',';
    o += '[';
    json_put_string(o, rule_info(expected.hits[i].rule).id);
    o += expected.hits[i].forbidden ? ",\"forbidden\"]" : ",\"allowed\"]";
  }
  o += ']';
  json_put_key(o, "scenario");
  json_put_string(o, ref.scenario->name);
  json_put_key(o, "type");
  o += "\"op\"";
  json_put_key(o, "verdict");
  json_put_string(o, to_string(verdict.kind));
  if (violation) {
    json_put_key(o, "violated");
    o += '[';
    for (size_t i = 0; i < verdict.violated.size(); ++i) {
      if (i) o += ',';
      json_put_string(o, rule_info(verdict.violated[i]).id);
    }
    o += ']';
  }
  o += '}';
  emit(o);
}

// The same record through nlohmann::json, kept as the reference the direct
// writer is tested against (and nothing else).
std::string op_record_reference(const ScenarioRef& ref, size_t op_index, const Expectation& expected,
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
  return r.dump();
}

void VerdictWriter::unsupported(const ScenarioRef& ref, size_t op_index, uint32_t missing_caps,
                                const std::string& why) {
  json r = base_record(ref, op_index);
  r["verdict"] = to_string(VerdictKind::kUnsupported);
  const AbiSpec& abi = abi_spec(ref.scenario->abi);
  json missing = json::array();
  for (const NamedValue& cap : abi.capabilities)
    if (missing_caps & (1u << cap.value)) missing.push_back(cap.name);
  r["missing"] = missing;
  if (!why.empty()) r["note"] = why;
  emit(r.dump());
}

void VerdictWriter::summary(size_t scenarios, size_t ops, size_t violations, double seconds,
                            const FaultReport* fault) {
  json r{{"type", "summary"}, {"scenarios", scenarios}, {"ops", ops}, {"violations", violations}, {"seconds", seconds}};
  if (fault) r["fault"] = json{{"spec", fault->spec}, {"fired", fault->fired}, {"scenarios", fault->scenarios}};
  emit(r.dump());
}

}  // namespace kconform
