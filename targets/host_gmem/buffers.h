// Memory the host target owns for the duration of one op: anonymous
// mappings, and write source buffers whose readable part ends at an exact byte.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kconform::host_gmem {

// An anonymous private (MAP_NORESERVE) mapping, unmapped on destruction.
class AnonArea {
 public:
  AnonArea() = default;
  ~AnonArea();
  AnonArea(const AnonArea&) = delete;
  AnonArea& operator=(const AnonArea&) = delete;

  bool map(size_t len, int prot);
  uint8_t* base() const { return base_; }

 private:
  uint8_t* base_ = nullptr;
  size_t len_ = 0;
};

// v rounded up to a multiple of page (a power of two); 0 when that overflows.
uint64_t round_up(uint64_t v, uint64_t page);

// The source buffer of a write: len bytes, byte i = pattern_byte(seed, i), of
// which only the first min(valid, len) are readable. The readable pages come
// first and the buffer starts inside them so that byte `valid` is the first
// byte of the PROT_NONE pages that cover the rest. Returns `empty` when len
// is 0, null when the mapping failed (the harness is out of memory).
const uint8_t* build_source(AnonArea& area, uint64_t len, uint64_t seed, uint64_t valid,
                            size_t page, const uint8_t* empty);

}  // namespace kconform::host_gmem
