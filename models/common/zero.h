// zero_bytes: memset(p, 0, n) for large buffers that are restored per
// scenario but mostly never touched (the FF-A host RAM below 0x80000000,
// targets/el2/README.md): the whole OS pages inside are given back to the
// kernel (MADV_DONTNEED: private anonymous memory reads as zero again), so
// the cost is that of the pages touched since, not of n. Falls back to memset.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kconform {

inline void zero_bytes(uint8_t* p, size_t n) {
  const uintptr_t os = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), e = a + n;
  const uintptr_t lo = (a + os - 1) / os * os, hi = e / os * os;
  if (n < 16 * os || hi <= lo || madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) {
    std::memset(p, 0, n);
    return;
  }
  std::memset(p, 0, lo - a);
  std::memset(reinterpret_cast<void*>(hi), 0, e - hi);
}

}  // namespace kconform
