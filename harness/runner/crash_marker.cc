// The KCONFORM-CRASH marker (crash_marker.h).
#include "harness/runner/crash_marker.h"

#include "oracles/json_text.h"
#include "oracles/verdict_json.h"

#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

// Present only when a sanitizer runtime is linked (ASan, UBSan).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
// Present in a build with clang's source-based coverage (`kconform coverage`):
// a process that crashes, hangs or dies of a sanitizer report still writes the
// counters it has, so the code it ran up to there is counted.
extern "C" int __llvm_profile_write_file(void) __attribute__((weak));

namespace kconform {
namespace {

// The marker's JSON without the leading {"kind":...,"signal":N, part; built
// before each op so the handlers need no allocation.
char g_in_flight[4096];
volatile sig_atomic_t g_have_in_flight = 0;
// The scenario in flight (set_in_flight_scenario): position in the run, ops.
bool g_have_scenario = false;
size_t g_at = 0, g_ops = 0;
// set_in_flight's parts that hold "at" and "ops" are made again (main thread).
bool g_parts_stale = true;
// Bumped on every set_in_flight and clear_in_flight: the watchdog's "is it
// still the same op" (no clock read on the runner's path).
std::atomic<uint64_t> g_seq{0};
std::atomic<bool> g_in_flight_now{false};

void write_all(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void write_str(const char* s) { write_all(s, std::strlen(s)); }

// The fault address's description (set_fault_describer), taken in the
// signal handler, JSON-escaped: the marker's "fault".
std::atomic<FaultDescriber> g_describer{nullptr};
char g_fault[1024];
volatile sig_atomic_t g_have_fault = 0;

void note_fault(int sig, siginfo_t* si, void* uc) {
  const FaultDescriber d = g_describer.load();
  if (!d || !si || (sig != SIGSEGV && sig != SIGBUS)) return;
  int access = 0;
#if defined(__x86_64__) && defined(REG_ERR)
  // The page-fault error code: bit 1 set for a write.
  if (uc && si->si_code > 0) access = (static_cast<const ucontext_t*>(uc)->uc_mcontext.gregs[REG_ERR] & 2) ? 2 : 1;
#else
  (void)uc;
#endif
  char text[sizeof g_fault / 2];
  if (!d(reinterpret_cast<uintptr_t>(si->si_addr), access, text, sizeof text)) return;
  size_t k = 0;
  for (const char* p = text; *p && k + 3 < sizeof g_fault; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') g_fault[k++] = '\\';
    g_fault[k++] = c < 0x20 ? ' ' : static_cast<char>(c);
  }
  g_fault[k] = 0;
  g_have_fault = 1;
}

// The verdict records the runner holds (the ops of this scenario judged so
// far: VerdictWriter), then the marker.
void write_marker(const char* kind, int sig) {
  write_pending_verdicts();
  char head[96];
  // Small integers only: no snprintf in a signal handler.
  char num[16];
  int n = 0;
  unsigned v = static_cast<unsigned>(sig);
  do {
    num[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v && n < 15);
  size_t h = 0;
  auto put = [&](const char* s) {
    while (*s && h + 1 < sizeof head) head[h++] = *s++;
  };
  put("\n");
  put(kCrashMarker);
  put(" {\"kind\":\"");
  put(kind);
  put("\",\"signal\":");
  while (n > 0 && h + 1 < sizeof head) head[h++] = num[--n];
  head[h] = 0;
  write_str(head);
  if (g_have_fault) {
    write_str(",\"fault\":\"");
    write_str(g_fault);
    write_str("\"");
  }
  if (g_have_in_flight) {
    write_str(",");
    write_str(g_in_flight);
  } else {
    write_str(",\"scenario\":null");
  }
  write_str("}\n");
}

void write_coverage() {
  if (__llvm_profile_write_file) __llvm_profile_write_file();
}

void on_sanitizer_death() {
  write_marker("sanitizer", 0);
  write_coverage();
  _exit(kExitCrash);
}

// The watchdog thread: polls g_seq; one value held with an op in flight for
// `limit` is a hang.
void watchdog_loop(std::chrono::duration<double> limit) {
  using clock = std::chrono::steady_clock;
  const auto poll = std::chrono::duration_cast<clock::duration>(
      std::clamp(limit / 8, std::chrono::duration<double>(0.005), std::chrono::duration<double>(0.25)));
  uint64_t seen = g_seq.load();
  auto since = clock::now();
  for (;;) {
    std::this_thread::sleep_for(poll);
    const uint64_t now_seq = g_seq.load();
    const auto now = clock::now();
    if (now_seq != seen || !g_in_flight_now.load()) {
      seen = now_seq;
      since = now;
      continue;
    }
    if (now - since >= limit) {
      write_marker("hang", 0);
      write_coverage();
      _exit(kExitHang);
    }
  }
}

void on_signal(int sig, siginfo_t* si, void* uc) {
  note_fault(sig, si, uc);
  write_marker("signal", sig);
  write_coverage();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// A sanitizer's handler for SIGSEGV or SIGBUS: the fault is described, then
// the sanitizer reports it (and dies through the death callback).
struct sigaction g_chained[2];
void on_chained(int sig, siginfo_t* si, void* uc) {
  note_fault(sig, si, uc);
  const struct sigaction& old = g_chained[sig == SIGBUS];
  if (old.sa_flags & SA_SIGINFO)
    old.sa_sigaction(sig, si, uc);
  else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
    old.sa_handler(sig);
}

}  // namespace

void install_crash_marker() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_sanitizer_death);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
    struct sigaction sa {};
    sa.sa_sigaction = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND;
    // Leave a handler the sanitizer runtime installed (it reports, then dies
    // through the death callback); for a fault, run it after ours describes it.
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    const bool info = old.sa_flags & SA_SIGINFO;
    if (!info && old.sa_handler == SIG_DFL) {
      sigaction(sig, &sa, nullptr);
    } else if ((sig == SIGSEGV || sig == SIGBUS) && (info || old.sa_handler != SIG_IGN)) {
      g_chained[sig == SIGBUS] = old;
      struct sigaction chain = old;
      chain.sa_sigaction = on_chained;
      chain.sa_flags = old.sa_flags | SA_SIGINFO;
      sigaction(sig, &chain, nullptr);
    }
  }
}

void set_fault_describer(FaultDescriber fn) { g_describer.store(fn); }

namespace {

void set_in_flight_quoted(const std::string& scenario, const std::string& file, size_t index, size_t op,
                          const std::string& call, const std::string* call_json) {
  // The fields of {"at", "call", "file", "index", "op", "ops", "scenario"}
  // without their braces (the marker adds its own fields in front), written
  // straight into the marker's buffer: this runs before every op
  // (oracles/json_text.h). What is the same for every op of a scenario is
  // made once per scenario: the text before the call ("at"), between the call
  // and the op's index ("file", "index") and after it ("ops", "scenario").
  thread_local ScenarioJson sj;
  thread_local std::string before, between, after, cut;
  if (sj.update(scenario, file, index) || g_parts_stale) {
    g_parts_stale = false;
    before.clear();
    if (g_have_scenario) {
      before = "\"at\":";
      json_put_uint(before, g_at);
      before += ',';
    }
    before += "\"call\":";
    between = ",\"file\":" + sj.file_index + ",\"op\":";
    after.clear();
    if (g_have_scenario) {
      after += ",\"ops\":";
      json_put_uint(after, g_ops);
    }
    after += ",\"scenario\":";
    after += sj.name;
  }
  // A call with a long hex payload is cut (the marker holds 4 KiB, and a JSON
  // string cut by the copy below would not parse).
  constexpr size_t kCallShown = 1024;
  const std::string* quoted = call_json;
  if (call.size() > kCallShown || !call_json) {
    cut.clear();
    if (call.size() <= kCallShown)
      json_put_string(cut, call);
    else
      json_put_string(cut, call.substr(0, kCallShown) + "... (" + std::to_string(call.size() - kCallShown) +
                               " more bytes)");
    quoted = &cut;
  }
  char num[24];
  const size_t num_len = static_cast<size_t>(std::to_chars(num, num + sizeof num, op).ptr - num);
  g_have_in_flight = 0;
  // Up to its end, cut at the buffer's size.
  size_t n = 0;
  auto put = [&n](const char* p, size_t k) {
    k = std::min(k, sizeof g_in_flight - 1 - n);
    std::memcpy(g_in_flight + n, p, k);
    n += k;
  };
  put(before.data(), before.size());
  put(quoted->data(), quoted->size());
  put(between.data(), between.size());
  put(num, num_len);
  put(after.data(), after.size());
  g_in_flight[n] = 0;
  g_have_in_flight = 1;
  g_seq.fetch_add(1);
  g_in_flight_now.store(true);
}

}  // namespace

void set_in_flight(const std::string& scenario, const std::string& file, size_t index, size_t op,
                   const std::string& call) {
  set_in_flight_quoted(scenario, file, index, op, call, nullptr);
}

void set_in_flight(const std::string& scenario, const std::string& file, size_t index, size_t op,
                   const std::string& call, const std::string& call_json) {
  set_in_flight_quoted(scenario, file, index, op, call, &call_json);
}

void clear_in_flight() {
  g_have_in_flight = 0;
  g_in_flight_now.store(false);
  g_seq.fetch_add(1);
}

void set_in_flight_scenario(size_t at, size_t ops) {
  g_at = at;
  g_ops = ops;
  g_have_scenario = true;
  g_parts_stale = true;
}

void start_watchdog(double seconds) {
  static bool started = false;
  if (started || !(seconds > 0)) return;
  started = true;
  std::thread(watchdog_loop, std::chrono::duration<double>(seconds)).detach();
}

}  // namespace kconform
