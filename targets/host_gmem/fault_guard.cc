// sigsetjmp/siglongjmp around page-by-page copies; see fault_guard.h.
#include "targets/host_gmem/fault_guard.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "harness/scenario/pattern.h"

namespace kconform::host_gmem {
namespace {

// Where a fault in the current thread's guarded access jumps to; null when
// no guarded access runs (then the fault is not ours). Volatile: the stores
// that arm and disarm it must stay ordered with the volatile copies between
// them (a plain store would be sunk past the loop and dropped as dead).
thread_local sigjmp_buf* volatile t_landing = nullptr;

void on_fault(int sig, siginfo_t*, void*) {
  sigjmp_buf* landing = t_landing;
  if (landing != nullptr) {
    t_landing = nullptr;
    siglongjmp(*landing, sig);
  }
  // Not a guarded access: restore the default action and return, so the
  // faulting instruction runs again and the process dies as it would have.
  signal(sig, SIG_DFL);
}

}  // namespace

// Installs on_fault for SIGBUS and SIGSEGV; restores the previous handlers.
FaultHandlers::FaultHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &old_bus_);
  sigaction(SIGSEGV, &sa, &old_segv_);
}

FaultHandlers::~FaultHandlers() {
  t_landing = nullptr;
  sigaction(SIGBUS, &old_bus_, nullptr);
  sigaction(SIGSEGV, &old_segv_, nullptr);
}

namespace {

using ScopedFaultHandlers = FaultHandlers;

// Length of the chunk starting at address a: up to the next page boundary.
size_t chunk_len(uintptr_t a, size_t left, size_t page_size) {
  size_t to_boundary = page_size - (a & (page_size - 1));
  return left < to_boundary ? left : to_boundary;
}

// Volatile byte copies: the compiler can neither merge nor move them across
// the sigsetjmp, and a fault happens inside this frame's callees only.
void copy_in(uint8_t* dst, const volatile uint8_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}
void copy_out(volatile uint8_t* dst, const uint8_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}

}  // namespace

namespace {

// Runs step(done, n) over [0, len) in chunks that end on page boundaries of the
// addresses from base, with the fault handlers in place. Returns 0, or the
// signal of the first faulting chunk (the steps before it have run).
template <class Step>
int guarded_chunks(uintptr_t base, size_t len, size_t page_size, Step step) {
  ScopedFaultHandlers handlers;
  sigjmp_buf landing;
  size_t done = 0;
  // Locals changed after sigsetjmp are not read after a jump back to it.
  if (int sig = sigsetjmp(landing, 1); sig != 0) return sig;
  t_landing = &landing;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  while (done < len) {
    size_t n = chunk_len(base + done, len - done, page_size);
    step(done, n);
    done += n;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_landing = nullptr;
  return 0;
}

}  // namespace

int guarded_load(const uint8_t* p, size_t len, size_t page_size, uint64_t* digest) {
  std::vector<uint8_t> chunk(page_size);
  uint64_t h = kFnvInit;
  int sig = guarded_chunks(reinterpret_cast<uintptr_t>(p), len, page_size, [&](size_t done, size_t n) {
    copy_in(chunk.data(), p + done, n);
    h = fnv1a(std::span<const uint8_t>(chunk.data(), n), h);
  });
  if (sig == 0) *digest = h;
  return sig;
}

int guarded_copy(uint8_t* dst, const uint8_t* src, size_t len, size_t page_size) {
  return guarded_chunks(reinterpret_cast<uintptr_t>(src), len, page_size,
                        [&](size_t done, size_t n) { copy_in(dst + done, src + done, n); });
}

int guarded_store(uint8_t* p, size_t len, size_t page_size, uint64_t seed) {
  std::vector<uint8_t> chunk(page_size);
  return guarded_chunks(reinterpret_cast<uintptr_t>(p), len, page_size, [&](size_t done, size_t n) {
    fill_pattern(seed, done, std::span<uint8_t>(chunk.data(), n));
    copy_out(p + done, chunk.data(), n);
  });
}

}  // namespace kconform::host_gmem
