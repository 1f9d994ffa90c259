// Printing outcomes for verdicts and diagnostics.
#include "models/common/outcome.h"

#include <charconv>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace kconform {

std::string errno_name(int e) {
  const char* name = strerrorname_np(e);
  return name ? name : "E" + std::to_string(e);
}

std::string signal_name(int s) {
  const char* abbrev = sigabbrev_np(s);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(s);
}

namespace {

// An outcome's text is written into a buffer on the stack and appended once
// (verdicts print several per op, each of a dozen pieces): "0x<hex>" as
// "0x%llx" prints it and decimals as "%lld", without printf.
struct Text {
  // "ok " + a decimal + " aux=" + a hex, eight " x<i>=<hex>(<decimal>)", " state=<hex>".
  char b[512];
  size_t n = 0;
  template <size_t N>
  void lit(const char (&s)[N]) {
    std::memcpy(b + n, s, N - 1);
    n += N - 1;
  }
  void ch(char c) { b[n++] = c; }
  void hex(uint64_t v) {
    lit("0x");
    n = static_cast<size_t>(std::to_chars(b + n, b + sizeof b, v, 16).ptr - b);
  }
  void dec(int64_t v) { n = static_cast<size_t>(std::to_chars(b + n, b + sizeof b, v).ptr - b); }
  void to(std::string& s) const { s.append(b, n); }
};

// FF-A evidence: " x<i>=<hex>" for each register in mask, then " state=<hex>".
// FFA_ERROR's status code (w2) is also shown as a signed number.
void regs_evidence(Text& t, const std::array<uint64_t, 8>& regs, uint8_t mask, bool with_state, uint64_t state) {
  for (int i = 0; i < 8; ++i) {
    if (!(mask >> i & 1)) continue;
    t.lit(" x");
    t.ch(static_cast<char>('0' + i));
    t.ch('=');
    t.hex(regs[i]);
    if (i == 2 && (mask & 1) && (regs[0] & 0xffffffffu) == 0x84000060u) {  // FFA_ERROR
      t.ch('(');
      t.dec(static_cast<int32_t>(regs[2] & 0xffffffffu));
      t.ch(')');
    }
  }
  if (with_state) {
    t.lit(" state=");
    t.hex(state);
  }
}
// "errno EINVAL" / "signal SIGBUS": an error outcome, observed or allowed.
void put_failure(std::string& s, Outcome::Kind kind, int64_t value) {
  if (kind == Outcome::Kind::kErrno) {
    s += "errno ";
    s += errno_name(static_cast<int>(value));
  } else {
    s += "signal ";
    s += signal_name(static_cast<int>(value));
  }
}

}  // namespace

void append_to(std::string& s, const Outcome& o) {
  Text t;
  if (o.kind != Outcome::Kind::kOk) {
    put_failure(s, o.kind, o.value);
  } else {
    t.lit("ok ");
    t.dec(o.value);
    if (o.aux) {
      t.lit(" aux=");
      t.hex(o.aux);
    }
  }
  // FF-A outcomes carry registers and a state digest: show the non-zero ones.
  uint8_t mask = 0;
  for (int i = 0; i < 8; ++i)
    if (o.regs[i]) mask |= static_cast<uint8_t>(1u << i);
  regs_evidence(t, o.regs, mask, o.state != 0, o.state);
  t.to(s);
}

void append_to(std::string& s, const Allowed& a) {
  Text t;
  if (a.kind != Outcome::Kind::kOk) {
    put_failure(s, a.kind, a.lo);
  } else {
    t.lit("ok ");
    t.dec(a.lo);
    if (a.lo != a.hi) {
      t.lit("..");
      t.dec(a.hi);
    }
  }
  if (a.kind == Outcome::Kind::kOk && a.check_aux) {
    t.lit(" aux=");
    t.hex(a.aux);
  }
  // FF-A: the registers the model constrains and the state it demands.
  regs_evidence(t, a.regs, a.regs_mask, a.check_state, a.state);
  t.lit(" [");
  t.to(s);
  s += rule_info(a.rule).id;
  s += ']';
}

std::string to_string(const Outcome& o) {
  std::string s;
  s.reserve(128);
  append_to(s, o);
  return s;
}

std::string to_string(const Allowed& a) {
  std::string s;
  s.reserve(128);
  append_to(s, a);
  return s;
}

}  // namespace kconform
