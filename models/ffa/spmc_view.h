// What the spmc target's oracle compares of an SPMC's transaction table
// (SPEC.md SPMC:TABLE): the part every SPMC must hold the same, whatever its
// own structures. Filled from the SPMC model (spmc_view_of) by the model and
// from the implementation's own table by the target (targets/spmc), then
// digested the same way.
//
//   state = FNV-1a-64 over: u32 n_live, then per transaction in ascending
//   handle order (the value is the SPMC's choice, SPMC:HANDLE-SPEC: only the
//   order counts; the handle itself is judged in the registers): u8 complete;
//     incomplete: u32 bytes_received, u32 total_length;
//     complete: u8 kind (1 share, 2 lend, 3 donate), u16 sender, u64 tag,
//               u8 retrieved (a borrower holds it: 0/1), u32 n_receivers,
//               n x (u16 id, u8 perms), u32 n_ranges, n x (u64 address,
//               u32 pages), u32 total_pages.
// Left out: the memory attributes and flags as the SPMC keeps them (TF-A
// stores the transaction type in the flags), per-receiver retrieval counts,
// and RECLAIM2's per-page state (no SPMC under test implements it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "models/ffa/digest.h"
#include "models/ffa/spmc.h"

namespace kconform::ffa {

struct SpmcViewEntry {
  uint64_t handle = 0;
  bool complete = false;
  uint32_t received = 0, total_len = 0;  // incomplete
  uint8_t kind = 0;
  uint16_t sender = 0;
  uint64_t tag = 0;
  bool retrieved = false;
  std::vector<std::pair<uint16_t, uint8_t>> receivers;  // id, perms
  std::vector<Constituent> ranges;
  uint32_t total_pages = 0;
};

inline uint64_t spmc_view_digest(std::vector<SpmcViewEntry> v) {
  std::sort(v.begin(), v.end(), [](const SpmcViewEntry& a, const SpmcViewEntry& b) { return a.handle < b.handle; });
  Fnv1a h;
  h.u32(static_cast<uint32_t>(v.size()));
  for (const SpmcViewEntry& e : v) {
    h.u8(e.complete);
    if (!e.complete) {
      h.u32(e.received);
      h.u32(e.total_len);
      continue;
    }
    h.u8(e.kind);
    h.u16(e.sender);
    h.u64(e.tag);
    h.u8(e.retrieved);
    h.u32(static_cast<uint32_t>(e.receivers.size()));
    for (const auto& [id, perms] : e.receivers) {
      h.u16(id);
      h.u8(perms);
    }
    h.u32(static_cast<uint32_t>(e.ranges.size()));
    for (const Constituent& c : e.ranges) {
      h.u64(c.address);
      h.u32(c.pages);
    }
    h.u32(e.total_pages);
  }
  return h.h;
}

// DIGEST:TABLE-VIEW: the state digest with a real EL3: FNV-1a-64 over u32
// n_host_pages, the views, then u64 table_digest (spmc_view_digest).
inline uint64_t state_digest_table_view(std::span<const uint8_t> host_views, uint64_t table_digest) {
  Fnv1a h;
  h.u32(static_cast<uint32_t>(host_views.size()));
  h.bytes(host_views.data(), host_views.size());
  h.u64(table_digest);
  return h.h;
}

// The SPMC model's table (with slot o.slot replaced by *o.tx when given).
inline std::vector<SpmcViewEntry> spmc_view_of(const Spmc& s, TableOverlay o = {}) {
  std::vector<SpmcViewEntry> v;
  for (uint32_t i = 0; i < kMaxTransactions; ++i) {
    const Transaction& t = static_cast<int32_t>(i) == o.slot ? *o.tx : s.slot(i);
    if (!t.live) continue;
    SpmcViewEntry e;
    e.handle = t.handle;
    e.complete = t.complete;
    if (!t.complete) {
      e.received = t.received;
      e.total_len = t.total_len;
    } else {
      e.kind = static_cast<uint8_t>(t.kind);
      e.sender = t.sender;
      e.tag = t.tag;
      e.retrieved = t.any_retrieved();
      for (uint32_t r = 0; r < t.n_receivers; ++r) e.receivers.push_back({t.recv_id[r], t.recv_perms[r]});
      e.ranges.assign(t.ranges, t.ranges + t.n_ranges);
      e.total_pages = t.total_pages;
    }
    v.push_back(std::move(e));
  }
  return v;
}

}  // namespace kconform::ffa
