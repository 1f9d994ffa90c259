// What one op did (Outcome), what a model allows it to do (Allowed), and
// which rules the op exercised (RuleHit). Shared by models, targets and the
// oracle. Nondeterminism is explicit: a model returns every allowed outcome,
// each licensed by a rule; the oracle checks membership.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/common/rules.h"

namespace kconform {

struct Outcome {
  enum class Kind : uint8_t {
    kOk,      // the call returned value (>= 0)
    kErrno,   // the call failed with errno value
    kSignal,  // the access raised signal value (e.g. SIGBUS)
  };
  Kind kind = Kind::kOk;
  int64_t value = 0;
  uint64_t aux = 0;  // op-specific observation (load: content digest; fstat: st_size)
  // FF-A: the registers x0..x7 returned to the caller, and a digest of the
  // state the call may change (host stage-2 page states, SPMC state).
  std::array<uint64_t, 8> regs{};
  uint64_t state = 0;

  static Outcome ok(int64_t v = 0, uint64_t aux = 0) { return {Kind::kOk, v, aux, {}, 0}; }
  static Outcome err(int e) { return {Kind::kErrno, e, 0, {}, 0}; }
  static Outcome sig(int s) { return {Kind::kSignal, s, 0, {}, 0}; }
  bool operator==(const Outcome&) const = default;
};

// Two register files equal, without a call to memcmp (std::array's == is one): a
// fuzzer's memcmp hook (libFuzzer's value profile) costs more than the compare.
inline bool same_regs(const std::array<uint64_t, 8>& a, const std::array<uint64_t, 8>& b) {
  uint64_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= a[i] ^ b[i];
  return d == 0;
}

// One allowed outcome: kind, a closed range for value, optionally an exact
// aux, and the rule that licenses it.
struct Allowed {
  Outcome::Kind kind = Outcome::Kind::kOk;
  int64_t lo = 0, hi = 0;
  bool check_aux = false;
  uint64_t aux = 0;
  RuleId rule = 0;
  // FF-A: registers whose bit is set in regs_mask must equal regs[i];
  // check_state: the state digest must equal state.
  uint8_t regs_mask = 0;
  std::array<uint64_t, 8> regs{};
  bool check_state = false;
  uint64_t state = 0;

  bool admits(const Outcome& o) const {
    if (o.kind != kind || o.value < lo || o.value > hi || (check_aux && o.aux != aux)) return false;
    for (int i = 0; i < 8; ++i)
      if ((regs_mask >> i & 1) && o.regs[i] != regs[i]) return false;
    return !check_state || o.state == state;
  }
  static Allowed ok(RuleId r, int64_t v = 0) { return make(Outcome::Kind::kOk, v, v, r); }
  static Allowed ok_range(RuleId r, int64_t lo, int64_t hi) {
    return make(Outcome::Kind::kOk, lo, hi, r);
  }
  static Allowed ok_aux(RuleId r, int64_t v, uint64_t aux) {
    Allowed a = make(Outcome::Kind::kOk, v, v, r);
    a.check_aux = true;
    a.aux = aux;
    return a;
  }
  static Allowed err(RuleId r, int e) { return make(Outcome::Kind::kErrno, e, e, r); }
  static Allowed sig(RuleId r, int s) { return make(Outcome::Kind::kSignal, s, s, r); }

 private:
  static Allowed make(Outcome::Kind k, int64_t lo, int64_t hi, RuleId r) {
    Allowed a;
    a.kind = k;
    a.lo = lo;
    a.hi = hi;
    a.rule = r;
    return a;
  }
};

// A rule the model evaluated for this op. forbidden == true: the op is on the
// rule's forbidden side (the rule demands an error); false: on its allowed side.
struct RuleHit {
  RuleId rule = 0;
  bool forbidden = false;
};

struct Expectation {
  std::vector<Allowed> allowed;
  std::vector<RuleHit> hits;
  std::string note;  // optional model diagnostic shown with a violation
  // The op ran under a fault injected into the target's environment (FF-A:
  // an el3_misbehave fault it consumed) or is judged by a rule that exists
  // only for such faults: a violation is about robustness against a
  // misbehaving environment, not conformance (the verdict's "class").
  bool robustness = false;

  void clear() {
    allowed.clear();
    hits.clear();
    note.clear();
    robustness = false;
  }
};

std::string errno_name(int e);
std::string signal_name(int s);
std::string to_string(const Outcome& o);
std::string to_string(const Allowed& a);
// The same text appended to s (no allocation once s is large enough).
void append_to(std::string& s, const Outcome& o);
void append_to(std::string& s, const Allowed& a);

}  // namespace kconform
