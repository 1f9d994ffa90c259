// Naming the op in flight when the process dies. A sanitizer report (ASan,
// UBSan) or a signal inside target code ends the runner; before it goes, one
// line on stderr names the scenario and op that were running:
//
//   KCONFORM-CRASH {"kind":"sanitizer"|"signal","signal":N,"scenario":"...","file":"...","index":I,"op":J,"call":"..."}
//
// After a sanitizer report the runner exits with kExitCrash (3); after a
// signal it dies of that signal (the default action is restored and the
// signal re-raised). The driver must treat exit 3 or death by a signal as a
// finding in that op (the sanitizer's report above the marker is the
// evidence), record the scenario as crashed, and may rerun the remaining
// scenarios (those after it in the same file order) in a fresh process.
#pragma once

#include <cstddef>
#include <string>

namespace kconform {

inline constexpr int kExitCrash = 3;
inline constexpr const char* kCrashMarker = "KCONFORM-CRASH";

// Installs the sanitizer death callback and handlers for SIGSEGV, SIGBUS,
// SIGILL, SIGFPE and SIGABRT. Idempotent.
void install_crash_marker();
// Records the op about to run (formatted now; the handlers only write(2) it).
void set_in_flight(const std::string& scenario, const std::string& file, size_t index, size_t op,
                   const std::string& call);
void clear_in_flight();

}  // namespace kconform
