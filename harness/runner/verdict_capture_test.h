// For the runner's target tests (el2_runner_test.cc, spmc_runner_test.cc):
// scenarios through target + model + the runner, with the verdict stream's op
// records parsed back, and the rules a record says were violated. Header-only
// (inline), test code only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "harness/runner/runner.h"

namespace kconform::test {

struct RunResult {
  RunStats stats;
  std::vector<nlohmann::json> ops;  // the "op" records of the verdict stream
};

inline RunResult run_captured(Target& target, Model& model, const InvariantSource* inv,
                              const std::vector<LoadedScenario>& ss) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  RunResult r;
  {
    VerdictWriter w(f);
    r.stats = run_scenarios(ss, model, target, w, inv);
  }
  std::fclose(f);
  std::string text(buf, len);
  std::free(buf);
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    nlohmann::json rec = nlohmann::json::parse(text.substr(pos, nl - pos));
    if (rec["type"] == "op") r.ops.push_back(rec);
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return r;
}

// A target that forwards to one it does not own (the faulty-target wrapper owns
// what it wraps; the tests keep theirs).
struct BorrowedTarget : Target {
  Target* t;
  explicit BorrowedTarget(Target* t) : t(t) {}
  const TargetIdentity& identity() const override { return t->identity(); }
  void begin(const Scenario& s) override { t->begin(s); }
  Outcome exec(const Scenario& s, size_t i) override { return t->exec(s, i); }
  void end() override { t->end(); }
};

inline std::set<std::string> violated(const nlohmann::json& rec) {
  std::set<std::string> out;
  if (rec.contains("violated"))
    for (const auto& v : rec["violated"]) out.insert(v.get<std::string>());
  return out;
}

}  // namespace kconform::test
