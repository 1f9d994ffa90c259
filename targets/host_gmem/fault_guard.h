// Memory accesses that may fault (SIGBUS, SIGSEGV) and report the signal
// instead of dying. Handlers are installed for the duration of one access
// and the previous ones restored; a process survives any number of faults.
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>

namespace kconform::host_gmem {

// Installs the handlers the guarded accesses use and restores the previous
// ones when it goes. Each access installs them for its own duration; while
// accesses run in several threads at once (HostGmemTarget::exec_group), one
// of these held around them keeps a thread's restore from removing the
// handler another thread's access needs.
class FaultHandlers {
 public:
  FaultHandlers();
  ~FaultHandlers();
  FaultHandlers(const FaultHandlers&) = delete;
  FaultHandlers& operator=(const FaultHandlers&) = delete;

 private:
  struct sigaction old_bus_, old_segv_;
};

// Reads [p, p+len) page by page (page-aligned chunks in ascending address
// order) and folds the bytes into an FNV-1a digest. Returns 0 and sets
// *digest, or returns the signal the first faulting page raised.
int guarded_load(const uint8_t* p, size_t len, size_t page_size, uint64_t* digest);

// Copies [src, src+len) to dst page by page. Returns 0, or the signal the
// first faulting page raised (dst then holds the pages before it).
int guarded_copy(uint8_t* dst, const uint8_t* src, size_t len, size_t page_size);

// Writes pattern_byte(seed, i) to p[i] for i in [0, len), page by page in
// ascending order. Returns 0, or the signal the first faulting page raised;
// the pages before it stay written, nothing at or after it is written.
int guarded_store(uint8_t* p, size_t len, size_t page_size, uint64_t seed);

}  // namespace kconform::host_gmem
