// Writing verdict records as JSON lines.
#include "oracles/verdict_json.h"

#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "harness/scenario/abi.h"
#include "oracles/json_text.h"

namespace kconform {

using nlohmann::json;

namespace {
// The writer whose held records write_pending_verdicts() writes: the newest
// live one (each restores the one before it when it goes).
std::atomic<VerdictWriter*> g_newest{nullptr};
}  // namespace

VerdictWriter::VerdictWriter(std::FILE* out)
    : out_(out), fd_(::fileno(out)), prev_(g_newest.exchange(this)), held_(new char[kHeld]) {}

VerdictWriter::~VerdictWriter() {
  flush();
  g_newest.store(prev_);
}

void VerdictWriter::flush() {
  const size_t n = held_len_.load(std::memory_order_relaxed);
  if (n == 0) return;
  std::fwrite(held_.get(), 1, n, out_);
  std::fflush(out_);
  held_len_.store(0, std::memory_order_release);
}

// A record and its newline, held (or written at once: `now`, or a record
// longer than the buffer). held_len_ grows only once the whole record is in
// place, so the crash paths never write half a record.
void VerdictWriter::emit(std::string_view line, bool now) {
  size_t n = held_len_.load(std::memory_order_relaxed);
  if (n + line.size() + 1 > kHeld) {
    flush();
    n = 0;
  }
  if (line.size() + 1 > kHeld) {
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fputc('\n', out_);
    std::fflush(out_);
    return;
  }
  std::memcpy(held_.get() + n, line.data(), line.size());
  held_[n + line.size()] = '\n';
  held_len_.store(n + line.size() + 1, std::memory_order_release);
  if (now) flush();
}

void write_pending_verdicts() noexcept {
  const VerdictWriter* w = g_newest.load(std::memory_order_acquire);
  if (!w || w->fd_ < 0) return;  // none, or a memory stream (open_memstream)
  const char* p = w->held_.get();
  size_t n = w->held_len_.load(std::memory_order_acquire);
  while (n > 0) {
    const ssize_t k = ::write(w->fd_, p, n);
    if (k <= 0) return;
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void VerdictWriter::plan(size_t scenarios, size_t ops) {
  emit(json{{"type", "plan"}, {"format", kVerdictFormatVersion}, {"scenarios", scenarios}, {"ops", ops}}
           .dump(), /*now=*/true);
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
           .dump(), /*now=*/true);
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

namespace {

// A string literal appended whole (its length known when compiled).
template <size_t N>
void lit(std::string& o, const char (&s)[N]) {
  o.append(s, N - 1);
}

// ["<rule ID>","allowed"] and ["<rule ID>","forbidden"] for every rule, as
// json_put_string writes the ID: made once.
const std::string& rule_hit_json(RuleId rule, bool forbidden) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t;
    t.reserve(2 * kRuleCount);
    for (size_t r = 0; r < kRuleCount; ++r)
      for (const char* side : {",\"allowed\"]", ",\"forbidden\"]"}) {
        std::string e = "[";
        json_put_string(e, rule_info(static_cast<RuleId>(r)).id);
        t.push_back(e + side);
      }
    return t;
  }();
  return table[2 * (rule < kRuleCount ? rule : 0) + forbidden];
}

}  // namespace

// The op record is written directly, keys in the order nlohmann::json's
// std::map gives them, byte for byte what json::dump() would print
// (VerdictJson.OpRecordIsWhatNlohmannPrints): one record per op made half of
// the EL2 differential's time through a json object tree. The fields that
// are the same for every op of a scenario ("file" and "index", "scenario")
// are quoted once per scenario.
void VerdictWriter::op(const ScenarioRef& ref, size_t op_index, const Expectation& expected,
                       const Outcome& observed, const Verdict& verdict, const ContentCheck* contents,
                       bool adopted, const std::string* call_json) {
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
  scenario_json_.update(ref.scenario->name, ref.file, ref.index);
  std::string& o = line_;
  o.clear();
  // An outcome or an allowed outcome as a JSON string: its text is written in
  // place and quoted as it is when plain (always, for the texts outcome.cc
  // prints), else taken out and quoted.
  auto put_text = [&](const auto& x) {
    const size_t at = o.size();
    o += '"';
    append_to(o, x);
    if (json_plain(std::string_view(o).substr(at + 1))) {
      o += '"';
      return;
    }
    field_.assign(o, at + 1);
    o.resize(at);
    json_put_string(o, field_);
  };
  if (violation && adopted)
    lit(o, "{\"adopted\":true,\"call\":");
  else
    lit(o, "{\"call\":");
  if (call_json) {
    o += *call_json;
  } else {
    format_op(*ref.scenario, op_index, &field_);
    json_put_string(o, field_);
  }
  // Robustness against an environment the scenario made misbehave (an
  // injected EL3 fault) or conformance (oracles/README.md).
  if (violation && expected.robustness) lit(o, ",\"class\":\"robustness\"");
  if (violation && !expected.robustness) lit(o, ",\"class\":\"conformance\"");
  if (with_contents) {
    lit(o, ",\"contents\":");
    o += contents_record(*contents).dump();
  }
  lit(o, ",\"expected\":[");
  for (size_t i = 0; i < expected.allowed.size(); ++i) {
    if (i) o += ',';
    put_text(expected.allowed[i]);
  }
  lit(o, "],\"file\":");
  if (!gave) {
    o += scenario_json_.file_index;
  } else {  // "gave" sorts between "file" and "index"
    json_put_string(o, ref.file);
    lit(o, ",\"gave\":");
    put_text(*gave);
    lit(o, ",\"index\":");
    json_put_uint(o, ref.index);
  }
  if (note) {
    lit(o, ",\"note\":");
    json_put_string(o, expected.note);
  }
  lit(o, ",\"observed\":");
  put_text(observed);
  lit(o, ",\"op\":");
  json_put_uint(o, op_index);
  lit(o, ",\"rules\":[");
  {
    // Made-once pairs, copied into room made for all of them at once (a
    // memory op hits thirty rules).
    size_t need = 0;
    for (const RuleHit& h : expected.hits) need += 1 + rule_hit_json(h.rule, h.forbidden).size();
    const size_t at = o.size();
    o.resize(at + need);
    char* p = o.data() + at;
    for (size_t i = 0; i < expected.hits.size(); ++i) {
      const std::string& e = rule_hit_json(expected.hits[i].rule, expected.hits[i].forbidden);
      if (i) *p++ = ',';
      std::memcpy(p, e.data(), e.size());
      p += e.size();
    }
    o.resize(static_cast<size_t>(p - o.data()));
  }
  lit(o, "],\"scenario\":");
  o += scenario_json_.name;
  lit(o, ",\"type\":\"op\",\"verdict\":");
  json_put_string(o, to_string(verdict.kind));
  if (violation) {
    lit(o, ",\"violated\":[");
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
  emit(r.dump(), /*now=*/true);
}

}  // namespace kconform
