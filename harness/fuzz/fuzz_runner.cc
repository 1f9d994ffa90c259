// The fuzz runner (fuzz_runner.h).
#include "harness/fuzz/fuzz_runner.h"

#include <fnmatch.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "harness/runner/group.h"
#include "harness/runner/step.h"
#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"

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

void FuzzRunner::report(const Scenario& s, const Finding& f) {
  if (!f.known) {
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
      report(s, f);
      findings.push_back(std::move(f));
    }
  }
  target.end();
  return findings;
}

int FuzzRunner::run(const uint8_t* data, size_t size) {
  Scenario s;
  std::string err;
  if (!decode_binary({data, size}, &s, &err) || !bounded(s)) return -1;
  // What `run` reports unsupported (a seed requiring a capability or page size this
  // build lacks) is not run here either: it would be judged by the wrong profile.
  if (t_.target && (s.requires_caps & ~t_.target->identity().cap_bits)) return -1;
  run_scenario(s);
  return 0;
}

}  // namespace kconform::fuzz
