// AnonArea and write source buffers; see buffers.h.
#include "targets/host_gmem/buffers.h"

#include <sys/mman.h>

#include <span>

#include "harness/scenario/pattern.h"

namespace kconform::host_gmem {

AnonArea::~AnonArea() {
  if (base_ != nullptr) munmap(base_, len_);
}

bool AnonArea::map(size_t len, int prot) {
  void* p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  base_ = static_cast<uint8_t*>(p);
  len_ = len;
  return true;
}

uint64_t round_up(uint64_t v, uint64_t page) {
  if (v > UINT64_MAX - (page - 1)) return 0;
  return (v + page - 1) & ~(page - 1);
}

const uint8_t* build_source(AnonArea& area, uint64_t len, uint64_t seed, uint64_t valid,
                            size_t page, const uint8_t* empty) {
  if (valid > len) valid = len;
  const size_t head = round_up(valid, page);
  const size_t tail = round_up(len - valid, page);
  if (head + tail == 0) return empty;
  if (!area.map(head + tail, PROT_READ | PROT_WRITE)) return nullptr;
  uint8_t* start = area.base() + head - valid;
  fill_pattern(seed, 0, std::span<uint8_t>(start, valid));
  if (tail != 0 && mprotect(area.base() + head, tail, PROT_NONE) != 0) return nullptr;
  return start;
}

}  // namespace kconform::host_gmem
