// Guard-clause bookkeeping for one op's expectation: each evaluated rule
// becomes a RuleHit, each error a rule demands or permits becomes an Allowed,
// and a broken rule adds a line to the note (actual vs expected values).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <initializer_list>
#include <string>

#include "models/common/outcome.h"

namespace kconform::gmem {

class Guards {
 public:
  explicit Guards(Expectation& out) : out_(out) {}

  // The op is on rule r's allowed side.
  void pass(RuleId r) { out_.hits.push_back({r, false}); }

  // The op is on r's forbidden side: it must fail, with one of errs.
  void fail(RuleId r, std::initializer_list<int> errs, const char* fmt, ...)
      __attribute__((format(printf, 4, 5))) {
    out_.hits.push_back({r, true});
    for (int e : errs) add_err(r, e);
    failed_ = true;
    va_list ap;
    va_start(ap, fmt);
    add_note(fmt, ap);
    va_end(ap);
  }

  // r permits (but does not demand) these errors for this op.
  void may_fail(RuleId r, std::initializer_list<int> errs) {
    out_.hits.push_back({r, false});
    for (int e : errs) add_err(r, e);
  }

  // The op raises signal s under rule r (the rule demands it).
  void fault(RuleId r, int s) {
    out_.hits.push_back({r, true});
    out_.allowed.push_back(Allowed::sig(r, s));
    failed_ = true;
  }

  // An outcome the op may have; its rule counts as evaluated (allowed side)
  // unless a guard already recorded it.
  void allow(const Allowed& a) {
    out_.allowed.push_back(a);
    for (const RuleHit& h : out_.hits)
      if (h.rule == a.rule) return;
    out_.hits.push_back({a.rule, false});
  }

  // Some rule demanded a failure.
  bool failed() const { return failed_; }

 private:
  void add_err(RuleId r, int e) {
    for (const Allowed& a : out_.allowed)
      if (a.kind == Outcome::Kind::kErrno && a.lo == e && a.rule == r) return;
    out_.allowed.push_back(Allowed::err(r, e));
  }
  void add_note(const char* fmt, va_list ap) {
    char buf[256];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    if (!out_.note.empty()) out_.note += "; ";
    out_.note += buf;
  }

  Expectation& out_;
  bool failed_ = false;
};

}  // namespace kconform::gmem
