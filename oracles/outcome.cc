// Printing outcomes for verdicts and diagnostics.
#include "oracles/outcome.h"

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
}  // namespace

std::string to_string(const Outcome& o) {
  switch (o.kind) {
    case Outcome::Kind::kOk: {
      std::string s = "ok " + std::to_string(o.value);
      if (o.aux) s += " aux=" + hex(o.aux);
      return s;
    }
    case Outcome::Kind::kErrno:
      return "errno " + errno_name(static_cast<int>(o.value));
    case Outcome::Kind::kSignal:
      return "signal " + signal_name(static_cast<int>(o.value));
  }
  return "?";
}

std::string to_string(const Allowed& a) {
  std::string s;
  switch (a.kind) {
    case Outcome::Kind::kOk:
      s = a.lo == a.hi ? "ok " + std::to_string(a.lo)
                       : "ok " + std::to_string(a.lo) + ".." + std::to_string(a.hi);
      if (a.check_aux) s += " aux=" + hex(a.aux);
      break;
    case Outcome::Kind::kErrno:
      s = "errno " + errno_name(static_cast<int>(a.lo));
      break;
    case Outcome::Kind::kSignal:
      s = "signal " + signal_name(static_cast<int>(a.lo));
      break;
  }
  return s + " [" + rule_info(a.rule).id + "]";
}

}  // namespace kconform
