// Rule bookkeeping for the FF-A core (desc, spmc, proxy): a fixed-capacity
// list of evaluated rules and a diagnostic note, with no allocation.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cstdio>

#include "models/common/rules.h"

namespace kconform::ffa {

struct Hit {
  RuleId rule = 0;
  bool forbidden = false;
};

class Hits {
 public:
  static constexpr uint32_t kMax = 96;
  Hits() { note_[0] = 0; }
  void pass(RuleId r) { add(r, false); }
  void broke(RuleId r, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    add(r, true);
    va_list ap;
    va_start(ap, fmt);
    append(fmt, ap);
    va_end(ap);
  }
  void add(RuleId r, bool forbidden) {
    for (uint32_t i = 0; i < n_; ++i)
      if (hits_.h[i].rule == r) {
        hits_.h[i].forbidden |= forbidden;
        return;
      }
    if (n_ < kMax) hits_.h[n_++] = {r, forbidden};
  }
  // While quiet, notes are dropped (the rules are still recorded): the note
  // explains the first variant of a call only.
  void set_quiet(bool quiet) { quiet_ = quiet; }
  void note(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    append(fmt, ap);
    va_end(ap);
  }
  uint32_t size() const { return n_; }
  const Hit& operator[](uint32_t i) const { return hits_.h[i]; }
  const char* text() const { return note_; }
  void clear() {
    n_ = 0;
    note_[0] = 0;
    len_ = 0;
    quiet_ = false;
  }

 private:
  void append(const char* fmt, va_list ap) {
    if (quiet_ || len_ >= sizeof(note_) - 4) return;
    if (len_) {
      note_[len_++] = ';';
      note_[len_++] = ' ';
    }
    int w = vsnprintf(note_ + len_, sizeof(note_) - len_, fmt, ap);
    if (w > 0) len_ += static_cast<uint32_t>(w);
    if (len_ >= sizeof(note_)) len_ = sizeof(note_) - 1;
  }
  // Only hits [0, n_) and note_ up to its NUL are ever read: the rest is
  // left uninitialised (a Hits is made per SMC the model relays; zeroing its
  // 900 bytes was a measurable share of the EL2 differential).
  union Store {
    Store() {}
    Hit h[kMax];
  } hits_;
  uint32_t n_ = 0;
  char note_[512];
  uint32_t len_ = 0;
  bool quiet_ = false;
};

// The FNV-64 prime to the power k (mod 2^64).
constexpr uint64_t fnv_prime_pow(unsigned k) {
  uint64_t r = 1;
  for (unsigned i = 0; i < k; ++i) r *= 0x100000001b3ull;
  return r;
}

// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3),
// fed little-endian fields. The state digest (digest.h) is built from it.
struct Fnv1a {
  uint64_t h = 0xcbf29ce484222325ull;
  void u8(uint8_t b) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  // Little-endian fields: the same as u8() over each byte, low first; the
  // zero bytes above the highest non-zero one (most of an address or a page
  // count) are one multiplication by the prime's power.
  void u16(uint16_t v) { le<2>(v); }
  void u32(uint32_t v) { le<4>(v); }
  void u64(uint64_t v) { le<8>(v); }
  // The same as u8() over each of p[0, n), faster when most bytes are zero
  // (the host page views): a zero byte only multiplies by the prime, so a run
  // of 64 (or 8) zero bytes is one multiplication by the prime's power.
  // Runs of 512 zero bytes (most of the host RAM's views) are one
  // multiplication too; a run with a non-zero byte goes by blocks of 64.
  void bytes(const uint8_t* p, size_t n) {
    size_t i = 0;
    for (; i + 512 <= n; i += 512) {
      if (zero_run<512>(p + i)) {
        h *= kP512;
        continue;
      }
      for (size_t k = 0; k < 512; k += 64) block(p + i + k);
    }
    for (; i + 64 <= n; i += 64) block(p + i);
    for (; i + 8 <= n; i += 8) word(p + i);
    for (; i < n; ++i) u8(p[i]);
  }

 private:
  static constexpr uint64_t kP8 = fnv_prime_pow(8), kP64 = fnv_prime_pow(64), kP512 = fnv_prime_pow(512);
  template <size_t N>
  static bool zero_run(const uint8_t* p) {
    uint64_t any = 0;
    for (size_t k = 0; k < N; k += 8) any |= load(p + k);
    return any == 0;
  }
  void block(const uint8_t* p) {
    if (zero_run<64>(p)) {
      h *= kP64;
      return;
    }
    for (size_t k = 0; k < 64; k += 8) word(p + k);
  }
  static constexpr uint64_t kPow[9] = {fnv_prime_pow(0), fnv_prime_pow(1), fnv_prime_pow(2),
                                       fnv_prime_pow(3), fnv_prime_pow(4), fnv_prime_pow(5),
                                       fnv_prime_pow(6), fnv_prime_pow(7), fnv_prime_pow(8)};
  template <int N>
  void le(uint64_t v) {
    int i = 0;
    for (; v != 0; ++i, v >>= 8) u8(static_cast<uint8_t>(v));
    if (i < N) h *= kPow[N - i];
  }
  // Eight bytes as one word, for telling zero from non-zero only (so the
  // byte order does not matter): one load, not eight.
  static uint64_t load(const uint8_t* p) {
    uint64_t w;
    std::memcpy(&w, p, sizeof w);
    return w;
  }
  void word(const uint8_t* p) {
    if (!load(p)) {
      h *= kP8;
      return;
    }
    for (int k = 0; k < 8; ++k) u8(p[k]);
  }
};

}  // namespace kconform::ffa
