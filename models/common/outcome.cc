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
// "0x<hex>", as "0x%llx" prints it, without printf: verdicts print several
// per op.
void put_hex(std::string& s, uint64_t v) {
  char buf[18] = {'0', 'x'};
  const std::to_chars_result r = std::to_chars(buf + 2, buf + sizeof buf, v, 16);
  s.append(buf, r.ptr);
}

void put_dec(std::string& s, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

// FF-A evidence: " x<i>=<hex>" for each register in mask, then " state=<hex>".
// FFA_ERROR's status code (w2) is also shown as a signed number.
void regs_evidence(std::string& s, const std::array<uint64_t, 8>& regs, uint8_t mask, bool with_state,
                   uint64_t state) {
  for (int i = 0; i < 8; ++i) {
    if (!(mask >> i & 1)) continue;
    s += " x";
    s += static_cast<char>('0' + i);
    s += '=';
    put_hex(s, regs[i]);
    if (i == 2 && (mask & 1) && (regs[0] & 0xffffffffu) == 0x84000060u) {  // FFA_ERROR
      s += '(';
      put_dec(s, static_cast<int32_t>(regs[2] & 0xffffffffu));
      s += ')';
    }
  }
  if (with_state) {
    s += " state=";
    put_hex(s, state);
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
  if (o.kind != Outcome::Kind::kOk) {
    put_failure(s, o.kind, o.value);
  } else {
    s += "ok ";
    put_dec(s, o.value);
    if (o.aux) {
      s += " aux=";
      put_hex(s, o.aux);
    }
  }
  // FF-A outcomes carry registers and a state digest: show the non-zero ones.
  uint8_t mask = 0;
  for (int i = 0; i < 8; ++i)
    if (o.regs[i]) mask |= static_cast<uint8_t>(1u << i);
  regs_evidence(s, o.regs, mask, o.state != 0, o.state);
}

void append_to(std::string& s, const Allowed& a) {
  if (a.kind != Outcome::Kind::kOk) {
    put_failure(s, a.kind, a.lo);
  } else {
    s += "ok ";
    put_dec(s, a.lo);
    if (a.lo != a.hi) {
      s += "..";
      put_dec(s, a.hi);
    }
  }
  if (a.kind == Outcome::Kind::kOk && a.check_aux) {
    s += " aux=";
    put_hex(s, a.aux);
  }
  // FF-A: the registers the model constrains and the state it demands.
  regs_evidence(s, a.regs, a.regs_mask, a.check_state, a.state);
  s += " [";
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
