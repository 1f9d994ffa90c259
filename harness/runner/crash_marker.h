// Naming the op in flight when the process dies. A sanitizer report (ASan,
// UBSan) or a signal inside target code ends the runner; before it goes, one
// line on stderr names the scenario and op that were running:
//
//   KCONFORM-CRASH {"kind":"sanitizer"|"signal"|"hang","signal":N,"scenario":"...","file":"...","index":I,"op":J,"call":"...","at":P,"ops":K}
//
// "at" is the scenario's position in the run's load order (what `run --from`
// counts) and "ops" its number of ops. After a sanitizer report the runner
// exits with kExitCrash (3); after a signal it dies of that signal (the
// default action is restored and the signal re-raised); when the watchdog
// (start_watchdog) sees one op in flight longer than its limit it exits with
// kExitHang (4). The driver treats exit 3, 4 or death by a signal as a
// finding in that op (the sanitizer's report above the marker is the
// evidence), records the scenario as crashed, and reruns the remaining
// scenarios (`run --from P+1`) in a fresh process (engine/runner.py).
//
// A fault (SIGSEGV, SIGBUS) at an address the target names (set_fault_describer:
// the EL2 target's hypervisor view of memory, targets/el2/README.md) adds
// "fault":"<its text>" after "signal", under a sanitizer too (its handler
// for these signals is chained after the description is taken).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kconform {

inline constexpr int kExitCrash = 3;
inline constexpr int kExitHang = 4;
inline constexpr const char* kCrashMarker = "KCONFORM-CRASH";

// Installs the sanitizer death callback and handlers for SIGSEGV, SIGBUS,
// SIGILL, SIGFPE and SIGABRT. Idempotent.
void install_crash_marker();
// Records the op about to run (formatted now; the handlers only write(2) it).
void set_in_flight(const std::string& scenario, const std::string& file, size_t index, size_t op,
                   const std::string& call);
// The same with the call also given quoted as a JSON string (json_put_string),
// which is then not quoted again: the runner quotes each op once for this and
// its verdict record.
void set_in_flight(const std::string& scenario, const std::string& file, size_t index, size_t op,
                   const std::string& call, const std::string& call_json);
void clear_in_flight();
// The target's name for a fault address: access 1 read, 2 write, 0 unknown;
// writes a NUL-terminated text of at most n bytes into buf and returns true
// if the address is one it knows. Called in the signal handler: it must be
// async-signal-safe (no allocation, no locks). nullptr: none.
using FaultDescriber = bool (*)(uintptr_t addr, int access, char* buf, size_t n);
void set_fault_describer(FaultDescriber fn);
// Records the scenario about to run: its position in the run and its op count
// (the marker's "at" and "ops"; set_in_flight formats them in).
void set_in_flight_scenario(size_t at, size_t ops);

// Starts the watchdog thread (once; seconds <= 0: none): if one op stays in
// flight (set_in_flight, until the next set_in_flight or clear_in_flight)
// longer than `seconds`, it writes the marker with kind "hang" and ends the
// process with kExitHang. An infinite loop in the code under test becomes a
// finding naming the op instead of a hung suite.
void start_watchdog(double seconds);

}  // namespace kconform
