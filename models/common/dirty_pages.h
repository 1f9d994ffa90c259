// DirtyPages: which pages of a buffer were written since the last reset, for
// a restore that costs the pages a scenario touched (the FF-A model's RAM,
// models/ffa/model.cc). Writers call mark(); zero_marked() zeroes exactly the
// marked pages (the buffer's snapshot is all zero) with the pages kept
// mapped (no MADV_DONTNEED, so no page fault when they are written again).
// Sized once by bind(): mark() does not allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kconform {

class DirtyPages {
 public:
  static constexpr size_t kGranule = 4096;

  void bind(uint8_t* base, size_t size) {
    base_ = base;
    size_ = size;
    flag_.assign((size + kGranule - 1) / kGranule, 0);
    list_.clear();
    list_.reserve(flag_.size());
  }
  // Bytes [p, p + n) of the bound buffer may have changed (outside it: ignored).
  void mark(const uint8_t* p, size_t n) {
    if (n == 0 || !base_ || p < base_ || static_cast<size_t>(p - base_) >= size_) return;
    const size_t lo = static_cast<size_t>(p - base_);
    const size_t hi = n > size_ - lo ? size_ : lo + n;
    for (size_t i = lo / kGranule; i <= (hi - 1) / kGranule; ++i)
      if (!flag_[i]) {
        flag_[i] = 1;
        list_.push_back(static_cast<uint32_t>(i));
      }
  }
  // Zeroes every marked page and forgets the marks.
  void zero_marked() {
    for (uint32_t i : list_) {
      const size_t off = size_t{i} * kGranule;
      std::memset(base_ + off, 0, size_ - off < kGranule ? size_ - off : kGranule);
      flag_[i] = 0;
    }
    list_.clear();
  }
  size_t marked() const { return list_.size(); }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::vector<uint8_t> flag_;
  std::vector<uint32_t> list_;
};

}  // namespace kconform
