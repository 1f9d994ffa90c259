// The guest_memfd model's state: VMs, guest_memfd files (with their bytes)
// and mappings, each numbered by slot in creation order (SPEC.md HARNESS:SLOTS).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "harness/scenario/gmem_abi.h"
#include "harness/scenario/pattern.h"
#include "models/gmem/profile.h"
// Harness conventions shared with the targets (kMaxOpBytes, kMmapShareMax, ...).
#include "harness/scenario/gmem_conventions.h"

namespace kconform::gmem {

inline constexpr uint64_t kLoffMax = 0x7fffffffffffffffull;  // largest loff_t

// A 64-bit op argument stored in a __u32 struct field keeps its low 32 bits
// (SPEC.md HARNESS:NARROW).
inline uint32_t low_u32(uint64_t v) { return static_cast<uint32_t>(v); }

inline bool aligned(uint64_t v, uint64_t page) { return v % page == 0; }
inline uint64_t round_down(uint64_t v, uint64_t page) { return v - v % page; }
// Rounds up; returns false if the result does not fit in 64 bits.
inline bool round_up(uint64_t v, uint64_t page, uint64_t& out) {
  uint64_t rem = v % page;
  if (rem == 0) {
    out = v;
    return true;
  }
  return !__builtin_add_overflow(v, page - rem, &out);
}
// [a, a+alen) and [b, b+blen) intersect (lengths > 0; ends may pass 2^64).
inline bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  using u128 = unsigned __int128;
  return u128{a} < u128{b} + blen && u128{b} < u128{a} + alen;
}

// A guest_memfd file. Pages absent from `pages` are holes and read as zero;
// present pages hold their bytes (page_size each). The model does not track
// allocation separately from content (SPEC.md LSEEK:DATA-HOLE allows any
// answer in range), so fallocate(KEEP_SIZE) leaves `pages` alone.
// A stream an op wrote, or tried to write, into a file: bytes [0, len) of
// pattern seed aimed at file offset base (content oracle: bytes a page may
// hold, SPEC.md CONTENT:FOREIGN).
struct WriteSource {
  uint64_t op = 0;  // op index in the scenario
  uint64_t seed = 0;
  uint64_t base = 0;
  uint64_t len = 0;
};

struct GmemFile {
  bool open = false;  // the fd is live
  uint64_t vm = 0;    // owning VM slot
  uint64_t size = 0;
  uint64_t flags = 0;
  uint64_t pos = 0;  // file position (write(), lseek())
  std::map<uint64_t, std::vector<uint8_t>> pages;
  std::vector<WriteSource> sources;  // every write and store aimed at the file

  // No op in this ABI converts pages, so sharedness is fixed at creation
  // (SPEC.md FLAGS:INIT-SHARED).
  bool shared(uint64_t /*page_index*/) const { return flags & kFlagInitShared; }

  // What may have changed mtime/ctime since the slot's last `times` or its
  // creation (SPEC.md TIMES:*): TimesMark bits (ops.h), 0 when nothing did.
  uint8_t times_marks = 0;
};

struct Mapping {
  bool live = false;  // mmap succeeded and no munmap yet
  uint64_t file = 0;  // gmem slot
  uint64_t offset = 0;
  uint64_t len = 0;  // as requested; accesses may use it rounded up to a page
  uint64_t prot = 0;
};

struct Memslot {
  uint64_t gpa = 0;
  uint64_t size = 0;
  uint32_t flags = 0;
  bool gmem = false;  // KVM_MEM_GUEST_MEMFD: file/offset are meaningful
  uint64_t file = 0;
  uint64_t offset = 0;
};

struct Vm {
  bool open = false;
  uint64_t type = 0;
  std::map<uint32_t, Memslot> slots;  // by the full 32-bit slot field
};

struct State {
  Profile profile;
  std::vector<Vm> vms;
  std::vector<GmemFile> files;
  std::vector<Mapping> maps;
  uint64_t op = 0;  // index of the op being committed

  uint64_t page() const { return profile.page_size; }

  const Vm* live_vm(uint64_t slot) const {
    return slot < vms.size() && vms[slot].open ? &vms[slot] : nullptr;
  }
  const GmemFile* live_file(uint64_t slot) const {
    return slot < files.size() && files[slot].open ? &files[slot] : nullptr;
  }
  const Mapping* live_map(uint64_t slot) const {
    return slot < maps.size() && maps[slot].live ? &maps[slot] : nullptr;
  }

  // For commit_*: the slot's entry, or nullptr if it was never produced. The
  // oracle only commits allowed outcomes, but a commit must never index past
  // the end whatever it is given.
  Vm* vm_at(uint64_t slot) { return slot < vms.size() ? &vms[slot] : nullptr; }
  GmemFile* file_at(uint64_t slot) { return slot < files.size() ? &files[slot] : nullptr; }
  Mapping* map_at(uint64_t slot) { return slot < maps.size() ? &maps[slot] : nullptr; }
};

// Copies n bytes of pattern `seed`, starting at stream index src_start, into
// the file at offset. Pages it touches become present.
inline void store_bytes(GmemFile& f, uint64_t page, uint64_t offset, uint64_t seed,
                        uint64_t src_start, uint64_t n) {
  while (n > 0) {
    uint64_t index = offset / page, in_page = offset % page;
    uint64_t chunk = std::min(n, page - in_page);
    auto& bytes = f.pages[index];
    if (bytes.empty()) bytes.assign(page, 0);
    fill_pattern(seed, src_start, std::span<uint8_t>(bytes.data() + in_page, chunk));
    offset += chunk;
    src_start += chunk;
    n -= chunk;
  }
}

// FNV-1a of the file's bytes [offset, offset+n) (holes read as zero).
inline uint64_t digest_bytes(const GmemFile& f, uint64_t page, uint64_t offset, uint64_t n) {
  static const std::vector<uint8_t> zeros(1 << 16, 0);
  uint64_t h = kFnvInit;
  while (n > 0) {
    uint64_t index = offset / page, in_page = offset % page;
    uint64_t chunk = std::min(n, page - in_page);
    auto it = f.pages.find(index);
    if (it != f.pages.end()) {
      h = fnv1a(std::span<const uint8_t>(it->second.data() + in_page, chunk), h);
    } else {
      for (uint64_t done = 0; done < chunk;) {
        uint64_t step = std::min<uint64_t>(chunk - done, zeros.size());
        h = fnv1a(std::span<const uint8_t>(zeros.data(), step), h);
        done += step;
      }
    }
    offset += chunk;
    n -= chunk;
  }
  return h;
}

}  // namespace kconform::gmem
