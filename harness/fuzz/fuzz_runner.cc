// The fuzz runner (fuzz_runner.h).
#include "harness/fuzz/fuzz_runner.h"

#include "harness/fuzz/rule_features.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "harness/runner/group.h"
#include "harness/runner/step.h"
#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "oracles/verdict_json.h"

namespace kconform::fuzz {

FuzzConfig fuzz_config_for(Abi abi) {
  FuzzConfig c;
  c.abi = abi;
  c.limits = limits_for(abi);
  return c;
}

namespace {

OpenTarget open_or_exit(const TargetFamily& family) {
  OpenTarget t;
  std::string error;
  if (!family.open(&t, &error)) {
    std::fprintf(stderr, "kconform-fuzz: target %s cannot run: %s\n", family.name, error.c_str());
    std::exit(2);
  }
  return t;
}

}  // namespace

namespace {

// Every store of this process, flushed at exit (libFuzzer ends with exit()).
std::set<FindingStore*>& live_stores() {
  static std::set<FindingStore*>* s = new std::set<FindingStore*>;
  return *s;
}

void flush_live_stores() {
  for (FindingStore* s : live_stores()) s->flush();
}

std::string hex16(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Writes path atomically (a temporary beside it, then rename); false on error.
bool write_file(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("kconform-fuzz");
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string signature(const Scenario& s, const Finding& f, const TargetIdentity& id) {
  const AbiSpec& abi = abi_spec(s.abi);
  const uint32_t code = f.op < s.ops.size() ? s.ops[f.op].code : ~0u;
  const std::string op = code < abi.ops.size() ? abi.ops[code].name : "op" + std::to_string(code);
  return f.rules + " " + op + " " + id.target + " " + id.release;
}

FindingStore::FindingStore(std::string dir) : dir_(std::move(dir)) {
  ::mkdir(dir_.c_str(), 0777);
  ::mkdir((dir_ + "/.counts").c_str(), 0777);
  static const bool registered = [] { return std::atexit(flush_live_stores) == 0; }();
  (void)registered;
  live_stores().insert(this);
}

FindingStore::~FindingStore() {
  flush();
  live_stores().erase(this);
}

void FindingStore::executed() {
  ++execs_;
  dirty_ = true;
  if ((execs_ & 63) == 0 && now_ns() - last_flush_ns_ > 1000000000) {
    rearm_removed();
    flush();
  }
}

void FindingStore::rearm_removed() {
  if (!rearm_) return;
  for (auto& [key, c] : counts_)
    if (!c.known && !c.stem.empty() && ::access((dir_ + "/" + c.stem + ".kcsb").c_str(), F_OK) != 0) {
      c.stem.clear();
      c.rearmed = true;
    }
}

void FindingStore::flush() {
  if (!dirty_) return;
  std::string out = "execs\t" + std::to_string(execs_) + "\n";
  for (const auto& [key, c] : counts_)
    out += std::to_string(c.count) + "\t" + (c.known ? "known" : "new") + "\t" + (c.stem.empty() ? "-" : c.stem) +
           "\t" + key.first + "\n";
  for (const auto& [rule, forbidden] : sides())
    out += std::string("side\t") + rule_info(rule).id + "\t" + (forbidden ? "forbidden" : "allowed") + "\n";
  if (write_file(dir_ + "/.counts/" + std::to_string(::getpid()) + ".tsv", out)) dirty_ = false;
  last_flush_ns_ = now_ns();
}

void FindingStore::reached(RuleId rule, bool forbidden) {
  if (rule == kNoRule || rule >= kRuleCount) return;
  uint8_t& seen = side_seen_[2 * static_cast<size_t>(rule) + (forbidden ? 1 : 0)];
  if (seen) return;
  seen = 1;
  dirty_ = true;
}

std::set<std::pair<RuleId, bool>> FindingStore::sides() const {
  std::set<std::pair<RuleId, bool>> out;
  for (size_t i = 0; i < side_seen_.size(); ++i)
    if (side_seen_[i]) out.emplace(static_cast<RuleId>(i / 2), i % 2 == 1);
  return out;
}

std::string FindingStore::record(const Scenario& s, const Finding& f, const StepResult& r, const TargetIdentity& id,
                                 std::span<const uint8_t> input) {
  const std::string sig = signature(s, f, id);
  dirty_ = true;
  auto [it, first] = counts_.try_emplace(Key{sig, f.known});
  Count& c = it->second;
  ++c.count;
  if (!first && !c.rearmed) return "";
  c.rearmed = false;
  c.known = f.known;
  if (f.known) return "";
  std::string rules = f.rules;
  for (char& ch : rules)
    if (ch == ',') ch = '+';
  const AbiSpec& abi = abi_spec(s.abi);
  const uint32_t code = s.ops[f.op].code;
  const std::string stem =
      "violation-" + rules + "-" + (code < abi.ops.size() ? abi.ops[code].name : "op") + "-" + hex16(sig);
  c.stem = stem;
  const std::string base = dir_ + "/" + stem;
  // Claim the signature: the .kcsb appears whole (written beside, then linked)
  // and only once; a process that finds it there has a duplicate.
  const std::vector<uint8_t> encoded = input.empty() ? encode_binary(s) : std::vector<uint8_t>{};
  const std::span<const uint8_t> bytes = input.empty() ? std::span<const uint8_t>(encoded) : input;
  const std::string tmp = base + ".kcsb.tmp" + std::to_string(::getpid());
  if (!write_file(tmp, std::string(bytes.begin(), bytes.end()))) {
    std::fprintf(stderr, "kconform-fuzz: cannot write %s; finding %s counted, not stored\n", tmp.c_str(),
                 sig.c_str());
    return "";
  }
  const bool claimed = ::link(tmp.c_str(), (base + ".kcsb").c_str()) == 0;
  std::remove(tmp.c_str());
  if (!claimed) return "";  // stored by another process (or an earlier run)
  // One line each: the detail (notes) may hold line breaks.
  std::string detail = f.detail;
  for (char& ch : detail)
    if (ch == '\n' || ch == '\r') ch = ' ';
  const std::string line = "kconform-fuzz: finding " + sig + ": " + f.rules + " violated by op " +
                           std::to_string(f.op) + " (" + format_op(s, f.op) + ") on target " + id.target + " " +
                           id.release + ": " + detail;
  const std::string head = "# violation found by kconform fuzz: " + sig + "\n# op " + std::to_string(f.op) + " (" +
                           format_op(s, f.op) + "): " + detail + "\n# replay: " + self_exe() + " " + base +
                           ".kcsb\n";
  write_file(base + ".kcs", head + format_text(s));
  // The verdict records, in the one verdict format.
  std::string jsonl;
  {
    char* buf = nullptr;
    size_t len = 0;
    if (std::FILE* mem = ::open_memstream(&buf, &len)) {
      {
        VerdictWriter w(mem);  // written to mem when it goes
        w.target(id);
        const ScenarioRef ref{&s, base + ".kcs", 0};
        w.op(ref, f.op, r.expected, r.observed, r.verdict, r.contents.taken ? &r.contents : nullptr, r.adopted);
      }
      std::fclose(mem);
      jsonl.assign(buf, len);
      std::free(buf);
    }
  }
  write_file(base + ".jsonl", jsonl);
  write_file(base + ".log", line + "\n");
  std::fprintf(stderr, "%s\nkconform-fuzz: stored as %s.{kcsb,kcs,jsonl,log}; fuzzing goes on\n", line.c_str(),
               base.c_str());
  return stem;
}

bool glob_match(const std::string& pattern, const std::string& text) {
  // libc's matcher; FNM_NOESCAPE: a backslash is itself, as in Python's fnmatch.
  return ::fnmatch(pattern.c_str(), text.c_str(), FNM_NOESCAPE) == 0;
}

FuzzRunner::FuzzRunner(const TargetFamily& family, const FuzzConfig& cfg, Mode mode)
    : FuzzRunner(open_or_exit(family), cfg, mode) {}

FuzzRunner::FuzzRunner(OpenTarget opened, const FuzzConfig& cfg, Mode mode)
    : cfg_(cfg), mode_(mode), t_(std::move(opened)) {
  if (const char* k = std::getenv(kEnvKnownRules)) {
    std::stringstream ss(k);
    std::string id;
    while (std::getline(ss, id, ','))
      if (!id.empty()) known_.insert(id);
  }
  if (const char* b = std::getenv(kEnvBaseline)) {
    std::stringstream ss(b);
    std::string line;
    while (std::getline(ss, line)) {
      const size_t tab = line.find('\t');
      if (tab == std::string::npos || tab == 0) continue;
      baseline_.emplace_back(line.substr(0, tab), line.substr(tab + 1));
    }
  }
  if (const char* l = std::getenv(kEnvKnownLog)) known_log_ = l;
  rule_features_ = rule_features_enabled();
  if (const char* d = std::getenv(kEnvFindings); d && *d && mode_ == Mode::kAbortOnFinding) record_to(d);
}

void FuzzRunner::record_to(const std::string& dir) {
  store_ = std::make_unique<FindingStore>(dir);
  if (const char* r = std::getenv(kEnvRearm)) store_->set_rearm(std::string_view(r) == "1");
  mode_ = Mode::kRecord;
}

bool FuzzRunner::baselined(const std::string& id, const std::string& scenario) const {
  for (const auto& [rule, pattern] : baseline_)
    if (rule == id && glob_match(pattern, scenario)) return true;
  return false;
}

bool FuzzRunner::bounded(const Scenario& s) const {
  if (s.abi != cfg_.abi || s.ops.size() > cfg_.limits.max_ops) return false;
  // A real target: few costly resources (VMs), and no op that moves more than
  // max_op_bytes unless the target refuses it anyway (gmem: E2BIG).
  const AbiSpec& abi = abi_spec(s.abi);
  const EngineHints& hints = abi.engine;
  size_t costly = 0;
  for (const Op& op : s.ops) {
    if (op.code >= abi.ops.size()) continue;
    if (hints.costly_resource >= 0 && abi.ops[op.code].produces == hints.costly_resource) ++costly;
    const uint64_t bytes = byte_count(abi, op);
    if (bytes > cfg_.max_op_bytes && (hints.refused_bytes_above == 0 || bytes <= hints.refused_bytes_above))
      return false;
  }
  return costly <= cfg_.max_costly;
}

void FuzzRunner::report(const Scenario& s, const Finding& f, const StepResult& r) {
  if (mode_ == Mode::kRecord) store_->record(s, f, r, t_.target->identity(), input_);
  if (!f.known) {
    if (mode_ == Mode::kRecord) return;
    if (mode_ == Mode::kCollect) return;
    std::fprintf(stderr, "SUMMARY: kconform: %s violated by op %zu (%s) on target %s: %s\n", f.rules.c_str(), f.op,
                 format_op(s, f.op).c_str(), t_.target->identity().target.c_str(), f.detail.c_str());
    std::fflush(stderr);
    std::abort();
  }
  // A baselined finding: recorded once per rule set; the input goes on.
  if (known_seen_.insert(f.rules).second) {
    std::fprintf(stderr, "kconform-fuzz: known finding %s (baselined) at op %zu (%s); fuzzing goes on\n",
                 f.rules.c_str(), f.op, format_op(s, f.op).c_str());
    if (!known_log_.empty())
      if (std::FILE* file = std::fopen(known_log_.c_str(), "a")) {
        std::fprintf(file, "KNOWN %s %s\n", f.rules.c_str(), format_op(s, f.op).c_str());
        std::fclose(file);
      }
  }
}

std::vector<Finding> FuzzRunner::run_scenario(const Scenario& s) {
  std::vector<Finding> findings;
  Model& model = *t_.model;
  Target& target = *t_.target;
  model.begin(s);
  target.begin(s);
  StepResult one;
  std::vector<StepResult> group;
  bool model_knows = true;
  for (size_t i = 0, n = 1; i < s.ops.size(); i += n) {
    const bool checked = model_knows;
    // A concurrent group and the ops after it are judged as `run` judges them
    // (harness/runner/group.h; one run: `repeat` is for `run`).
    if (s.ops[i].thread != 0) {
      n = run_group(model, target, s, "<fuzz>", 0, i, model_knows, jitter_seed(s, 0), &group) - i;
    } else {
      n = 1;
      step(model, target, t_.invariants, s, i, model_knows, &one);
    }
    for (size_t k = 0; k < n; ++k) {
      const StepResult& r = n == 1 && s.ops[i].thread == 0 ? one : group[k];
      model_knows = r.model_knows;
      // Rule sides: coverage features for the engine, and counted.
      for (const RuleHit& h : r.expected.hits) {
        if (rule_features_) rule_side_feature(h.rule, h.forbidden);
        if (store_) store_->reached(h.rule, h.forbidden);
      }
      if (r.blamed.empty()) continue;
      Finding f;
      f.op = i + k;
      f.blamed = r.blamed;
      // Known as `run` knows it: every violated rule (one finding each in `run`)
      // has a baseline entry for this scenario. Or, for the mutant bench, every
      // blamed rule is background.
      bool background = true;
      for (RuleId rule : r.blamed) {
        const std::string id = rule_info(rule).id;
        f.rules += (f.rules.empty() ? "" : ",") + id;
        if (!known_.count(id)) background = false;
      }
      bool baselined_all = !r.verdict.violated.empty();
      for (RuleId rule : r.verdict.violated)
        if (!baselined(rule_info(rule).id, s.name)) baselined_all = false;
      f.known = background || baselined_all;
      f.detail = "observed " + to_string(r.observed);
      if (checked) {
        f.detail += ", expected";
        for (const Allowed& a : r.expected.allowed) f.detail += " | " + to_string(a);
      } else {
        f.detail += " (unchecked: the model lost the state at an earlier op)";
      }
      if (!r.expected.note.empty()) f.detail += "; note: " + r.expected.note;
      report(s, f, r);
      findings.push_back(std::move(f));
    }
  }
  target.end();
  return findings;
}

int FuzzRunner::run(const uint8_t* data, size_t size) {
  Scenario s;
  std::string err;
  std::span<const uint8_t> bytes{data, size};  // what a finding stores (FindingStore::record)
  if (size < 4) {
    // Too short to hold the magic: an engine's first input from an empty corpus
    // (libFuzzer runs "\n", AFL++ needs a file). It runs the mutator's own starting
    // point (starter(): the first of the ABI table's EngineHints::starters; the
    // mutator falls back to one of them for an input that does not decode).
    // Otherwise it reaches no code and libFuzzer gives up at once ("no interesting
    // inputs were found"): a campaign could not start from nothing. Longer bytes
    // that do not decode are refused.
    s = starter(cfg_.abi);
    bytes = {};  // a finding stores the starter's encoding, not bytes that do not decode
  } else if (!decode_binary(bytes, &s, &err)) {
    return -1;
  }
  if (!bounded(s)) return -1;
  // What `run` reports unsupported (a seed requiring a capability or page size this
  // build lacks) is not run here either: it would be judged by the wrong profile.
  if (t_.target && (s.requires_caps & ~t_.target->identity().cap_bits)) return -1;
  input_ = bytes;
  run_scenario(s);
  input_ = {};
  if (store_) store_->executed();
  return 0;
}

}  // namespace kconform::fuzz
