// zero_bytes: memset(p, 0, n) for large buffers that are restored per
// scenario but mostly never touched (the FF-A host RAM below 0x80000000,
// targets/el2/README.md): the whole OS pages inside are given back to the
// kernel (MADV_DONTNEED: private anonymous memory reads as zero again), so
// the cost is that of the pages touched since, not of n. Falls back to memset.
// give_back and all_zero are its pieces, for a caller that keeps some pages
// (targets/el2/el2_handler.cc's RAM restore).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kconform {

// give_back(p, n): [p, p + n), whole OS pages, reads as zero again: they are
// given back to the kernel, so the cost is that of the pages populated in it
// (a page never touched costs a page-table look). memset if refused.
inline void give_back(uint8_t* p, size_t n) {
  if (n && madvise(p, n, MADV_DONTNEED) != 0) std::memset(p, 0, n);
}

// Whether p[0, n) is all zero (n a multiple of 8): eight bytes at a time.
inline bool all_zero(const uint8_t* p, size_t n) {
  uint64_t any = 0;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, sizeof w);
    any |= w;
  }
  return any == 0;
}

inline void zero_bytes(uint8_t* p, size_t n) {
  const uintptr_t os = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), e = a + n;
  const uintptr_t lo = (a + os - 1) / os * os, hi = e / os * os;
  if (n < 16 * os || hi <= lo) {
    std::memset(p, 0, n);
    return;
  }
  std::memset(p, 0, lo - a);
  give_back(reinterpret_cast<uint8_t*>(lo), hi - lo);
  std::memset(reinterpret_cast<void*>(hi), 0, e - hi);
}

}  // namespace kconform
