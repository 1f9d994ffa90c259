// The fuzz harness core (harness.h).
#include "harness/fuzz/harness.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "harness/scenario/gmem_abi.h"
#include "harness/scenario/gmem_conventions.h"
#include "oracles/oracle.h"

namespace kconform::fuzz {

Harness::Harness(const TargetFamily& family, const HarnessConfig& cfg) : cfg_(cfg) {
  std::string error;
  if (!family.open(&t_, &error)) {
    std::fprintf(stderr, "kconform-fuzz: target %s cannot run: %s\n", family.name, error.c_str());
    std::exit(2);
  }
  if (const char* k = std::getenv(kEnvKnownRules)) {
    std::stringstream ss(k);
    std::string id;
    while (std::getline(ss, id, ','))
      if (!id.empty()) known_.insert(id);
  }
  if (const char* l = std::getenv(kEnvKnownLog)) known_log_ = l;
}

bool Harness::bounded(const Scenario& s) const {
  if (s.abi != cfg_.abi || s.ops.size() > cfg_.limits.max_ops) return false;
  if (s.abi != Abi::kGmem) return true;
  // guest_memfd on the running kernel: few VMs, and no op that moves more than
  // max_op_bytes unless the harness refuses it anyway (E2BIG above kMaxOpBytes).
  size_t vms = 0;
  for (const Op& op : s.ops) {
    uint64_t bytes = 0;
    switch (op.code) {
      case gmem::kCreateVm: ++vms; break;
      case gmem::kWrite: case gmem::kRead: bytes = op.args[1]; break;
      case gmem::kPwrite: case gmem::kPwritev: case gmem::kPread: case gmem::kLoad: case gmem::kStore:
        bytes = op.args[2];
        break;
      case gmem::kFallocate:
        if (!(op.args[1] & gmem::kFallocPunchHole)) bytes = op.args[3];
        break;
      default: break;
    }
    if (bytes > cfg_.max_op_bytes && bytes <= gmem::kMaxOpBytes) return false;
  }
  return vms <= cfg_.max_vms;
}

void Harness::finding(const Scenario& s, size_t op, const std::string& rules, const std::string& detail) {
  std::fprintf(stderr, "SUMMARY: kconform: %s violated by op %zu (%s) on target %s: %s\n", rules.c_str(), op,
               format_op(s, op).c_str(), t_.target->identity().target.c_str(), detail.c_str());
  std::fflush(stderr);
  std::abort();
}

int Harness::run(const uint8_t* data, size_t size) {
  Scenario s;
  std::string err;
  if (!decode_binary({data, size}, &s, &err) || !bounded(s)) return -1;
  Model& model = *t_.model;
  Target& target = *t_.target;
  model.begin(s);
  target.begin(s);
  Expectation expected;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    expected.clear();
    model.expect(s, i, expected);
    Outcome observed = target.exec(s, i);
    Verdict v = judge(expected, observed);
    std::vector<RuleId> rules = v.kind == VerdictKind::kViolation ? v.violated : std::vector<RuleId>{};
    std::string detail;
    if (t_.invariants)
      for (const InvariantBreak& b : t_.invariants->invariant_breaks()) {
        rules.push_back(b.rule);
        detail += "invariant: " + b.what + "; ";
      }
    if (rules.empty()) {
      model.commit(s, i, observed);
      continue;
    }
    // The culprits: violated rules the op was on the forbidden side of (a rule
    // that only allowed an error is listed too, but did not demand it).
    std::vector<RuleId> culprits;
    for (RuleId r : rules)
      for (const RuleHit& h : expected.hits)
        if (h.rule == r && h.forbidden && std::find(culprits.begin(), culprits.end(), r) == culprits.end())
          culprits.push_back(r);
    if (culprits.empty()) culprits = rules;
    std::string ids;
    bool all_known = true;
    for (RuleId r : culprits) {
      const std::string id = rule_info(r).id;
      ids += (ids.empty() ? "" : ",") + id;
      if (!known_.count(id)) all_known = false;
    }
    if (!all_known) {
      detail += "observed " + to_string(observed) + ", expected";
      for (const Allowed& a : expected.allowed) detail += " | " + to_string(a);
      if (!expected.note.empty()) detail += "; note: " + expected.note;
      finding(s, i, ids, detail);
    }
    // A baselined finding: recorded once per rule, and this input stops here
    // (the model no longer knows the target's state).
    if (known_seen_.insert(ids).second) {
      std::fprintf(stderr, "kconform-fuzz: known finding %s (baselined) at op %zu (%s); fuzzing goes on\n",
                   ids.c_str(), i, format_op(s, i).c_str());
      if (!known_log_.empty())
        if (std::FILE* f = std::fopen(known_log_.c_str(), "a")) {
          std::fprintf(f, "KNOWN %s %s\n", ids.c_str(), format_op(s, i).c_str());
          std::fclose(f);
        }
    }
    break;
  }
  target.end();
  return 0;
}

}  // namespace kconform::fuzz
