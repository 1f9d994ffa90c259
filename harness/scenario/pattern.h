// Data patterns and content digests. A scenario names data by a pattern seed
// instead of carrying bytes; model and target expand it the same way.
// Seed 0 is all zero bytes; any other seed is a pseudo-random stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace kconform {

// Byte i of the stream for seed (i counts from the start of the source buffer).
inline uint8_t pattern_byte(uint64_t seed, uint64_t i) {
  if (seed == 0) return 0;
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i >> 3) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<uint8_t>(z >> ((i & 7) * 8));
}

inline void fill_pattern(uint64_t seed, uint64_t start, std::span<uint8_t> out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = pattern_byte(seed, start + i);
}

// FNV-1a 64, incremental: digest = fnv1a(bytes, digest) over consecutive spans.
inline constexpr uint64_t kFnvInit = 0xcbf29ce484222325ull;
inline uint64_t fnv1a(std::span<const uint8_t> bytes, uint64_t h = kFnvInit) {
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace kconform
