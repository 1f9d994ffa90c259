// Helpers of the FF-A model's unit tests (model_test.cc and the tests of
// one behaviour each beside it): scenario text, the outcome an Allowed
// stands for, and playing a scenario's ops with their first allowed outcome.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/scenario/codec.h"
#include "models/common/outcome.h"
#include "models/ffa/model.h"
#include "models/model.h"

namespace kconform::ffa {
namespace test {

// A ranges byte string: (address u64, pages u32) records.
inline std::string R(std::initializer_list<std::pair<uint64_t, uint32_t>> rs) {
  static const char d[] = "0123456789abcdef";
  std::string out = "hex:";
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i, v >>= 8) {
      out += d[(v >> 4) & 15];
      out += d[v & 15];
    }
  };
  for (auto& [a, p] : rs) put(a, 8), put(p, 4);
  return out;
}
inline std::string R1(uint64_t a, uint32_t p) { return R({{a, p}}); }

inline ProxyProfile profile(uint64_t page, bool r2) {
  ProxyProfile p;
  p.page_size = page;
  p.reclaim2 = r2;
  return p;
}

enum Pre { kFull, kNoMap, kNothing };

inline std::string scenario(const ProxyProfile& p, Pre pre, const std::string& body) {
  std::string s = "kconform-scenario 1\nabi ffa\nname t\n";
  if (pre != kNothing) s += "version\n";
  if (pre == kFull) {
    char buf[128];
    snprintf(buf, sizeof buf, "rxtx_map tx=0x80000000 rx=%#llx pages=%llu\n",
             static_cast<unsigned long long>(0x80000000 + p.page_size),
             static_cast<unsigned long long>(p.mbox_bytes() / 4096));
    s += buf;
  }
  return s + body;
}

inline Outcome pick(const Allowed& a) {
  Outcome o = Outcome::ok(a.lo);
  o.kind = a.kind;
  for (int i = 0; i < 8; ++i)
    if (a.regs_mask >> i & 1) o.regs[i] = a.regs[i];
  o.state = a.state;
  if (a.check_aux) o.aux = a.aux;
  return o;
}

// Runs a scenario's ops, each with its first allowed outcome, up to `upto`.
struct Play {
  Scenario s;
  std::unique_ptr<Model> m;
  uint64_t last_state = 0;
  std::string error;

  Play(const ProxyProfile& p, const std::string& text) {
    std::vector<Scenario> v;
    if (!parse_text(text, "<test>", &v, &error) || v.size() != 1) return;
    s = v[0];
    m = make_model(p);
    m->begin(s);
  }
  bool ok() const { return m != nullptr; }
  // Plays ops [0, n); returns false if one allows nothing.
  bool play(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      Expectation e;
      m->expect(s, i, e);
      if (e.allowed.empty()) {
        error = "op " + std::to_string(i) + " allows nothing: " + e.note;
        return false;
      }
      const Outcome o = pick(e.allowed[0]);
      last_state = o.state;
      m->commit(s, i, o);
    }
    return true;
  }
  Expectation expect_last() {
    Expectation e;
    m->expect(s, s.ops.size() - 1, e);
    return e;
  }
  uint64_t final_state() {
    play(s.ops.size());
    return last_state;
  }
};

}  // namespace test
}  // namespace kconform::ffa
