// Printing outcomes for verdicts and diagnostics.
#include "models/common/outcome.h"

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
std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// FF-A evidence: " x<i>=<hex>" for each register in mask, then " state=<hex>".
// FFA_ERROR's status code (w2) is also shown as a signed number.
std::string regs_evidence(const std::array<uint64_t, 8>& regs, uint8_t mask, bool with_state, uint64_t state) {
  std::string s;
  for (int i = 0; i < 8; ++i) {
    if (!(mask >> i & 1)) continue;
    s += " x" + std::to_string(i) + "=" + hex(regs[i]);
    if (i == 2 && (mask & 1) && (regs[0] & 0xffffffffu) == 0x84000060u)  // FFA_ERROR
      s += "(" + std::to_string(static_cast<int32_t>(regs[2] & 0xffffffffu)) + ")";
  }
  if (with_state) s += " state=" + hex(state);
  return s;
}
// "errno EINVAL" / "signal SIGBUS": an error outcome, observed or allowed.
std::string failure(Outcome::Kind kind, int64_t value) {
  return kind == Outcome::Kind::kErrno ? "errno " + errno_name(static_cast<int>(value))
                                       : "signal " + signal_name(static_cast<int>(value));
}

}  // namespace

std::string to_string(const Outcome& o) {
  std::string s = o.kind != Outcome::Kind::kOk ? failure(o.kind, o.value)
                  : o.aux                        ? "ok " + std::to_string(o.value) + " aux=" + hex(o.aux)
                                                 : "ok " + std::to_string(o.value);
  // FF-A outcomes carry registers and a state digest: show the non-zero ones.
  uint8_t mask = 0;
  for (int i = 0; i < 8; ++i)
    if (o.regs[i]) mask |= static_cast<uint8_t>(1u << i);
  return s + regs_evidence(o.regs, mask, o.state != 0, o.state);
}

std::string to_string(const Allowed& a) {
  std::string s = a.kind != Outcome::Kind::kOk
                      ? failure(a.kind, a.lo)
                      : "ok " + std::to_string(a.lo) + (a.lo == a.hi ? "" : ".." + std::to_string(a.hi));
  if (a.kind == Outcome::Kind::kOk && a.check_aux) s += " aux=" + hex(a.aux);
  // FF-A: the registers the model constrains and the state it demands.
  s += regs_evidence(a.regs, a.regs_mask, a.check_state, a.state);
  return s + " [" + rule_info(a.rule).id + "]";
}

}  // namespace kconform
