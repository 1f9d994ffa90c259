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
//
// The same view digests the EL2 target's state when EL3 is a real SPMC
// (ProxyProfile::real_el3, SPEC.md DIGEST:TABLE-VIEW): state_digest_table_view.
//
// One definition of the bytes (spmc_view_feed, spmc_view.cc), fed by both
// paths: the vector one (the spmc target; spmc_view_of) and the SPMC model's
// own table without allocating (the proxy model's core).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "models/ffa/digest.h"
#include "models/ffa/spmc.h"

namespace kconform::ffa {

// A transaction in the view, less its lists.
struct SpmcViewHead {
  uint64_t handle = 0;
  bool complete = false;
  uint32_t received = 0, total_len = 0;  // incomplete
  uint8_t kind = 0;
  uint16_t sender = 0;
  uint64_t tag = 0;
  bool retrieved = false;
  uint32_t total_pages = 0;
};

using SpmcViewReceiver = std::pair<uint16_t, uint8_t>;  // id, perms

struct SpmcViewEntry : SpmcViewHead {
  std::vector<SpmcViewReceiver> receivers;
  std::vector<Constituent> ranges;
};

// The bytes of one live transaction (the record above, after n_live): the
// one definition of the layout. The handle is not fed (only the order counts).
void spmc_view_feed(Fnv1a& h, const SpmcViewHead& e, std::span<const SpmcViewReceiver> receivers,
                    std::span<const Constituent> ranges);

// Transaction t of the SPMC model in the view: its head, its receivers into
// recv (returns how many) and its constituents (an incomplete one: none).
SpmcViewHead spmc_view_head(const Transaction& t);
uint32_t spmc_view_receivers(const Transaction& t, SpmcViewReceiver recv[kMaxReceivers]);
std::span<const Constituent> spmc_view_ranges(const Transaction& t);

// The SPMC:TABLE digest of the SPMC model's table (slot o.slot replaced by
// *o.tx when given), without allocating: spmc_view_digest(spmc_view_of(s, o)).
uint64_t spmc_view_digest(const Spmc& s, TableOverlay o = {});

// SPEC.md DIGEST:TABLE-VIEW: the state with a real EL3, FNV-1a-64 over u32
// n_host_pages, n_host_pages x u8 view (as digest.h), then u64 table_digest
// (the SPMC:TABLE digest of EL3's table: spmc_view_digest).
uint64_t state_digest_table_view(std::span<const uint8_t> host_views, uint64_t table_digest);

// SPEC.md SPMC:TABLE-PAGES, the pages view (SpmcConfig::table_pages_view): of
// each complete live transaction only whether a borrower holds it and its
// pages, the 4K page addresses of its constituents in order; the transactions
// as a multiset (handles and their order left out).
//
//   state = FNV-1a-64 over: u32 n (complete live transactions), then the
//   records sorted by their bytes, each: u8 retrieved, u32 n_pages,
//   n_pages x u64 address.
struct SpmcPagesEntry {
  bool retrieved = false;
  std::vector<uint64_t> pages;
};
uint64_t spmc_pages_digest(std::vector<SpmcPagesEntry> v);

inline uint64_t spmc_view_digest(std::vector<SpmcViewEntry> v) {
  std::sort(v.begin(), v.end(), [](const SpmcViewEntry& a, const SpmcViewEntry& b) { return a.handle < b.handle; });
  Fnv1a h;
  h.u32(static_cast<uint32_t>(v.size()));
  for (const SpmcViewEntry& e : v) spmc_view_feed(h, e, e.receivers, e.ranges);
  return h.h;
}

// The SPMC model's table (with slot o.slot replaced by *o.tx when given).
inline std::vector<SpmcViewEntry> spmc_view_of(const Spmc& s, TableOverlay o = {}) {
  std::vector<SpmcViewEntry> v;
  for (uint32_t i = 0; i < kMaxTransactions; ++i) {
    const Transaction& t = static_cast<int32_t>(i) == o.slot ? *o.tx : s.slot(i);
    if (!t.live) continue;
    SpmcViewEntry e;
    static_cast<SpmcViewHead&>(e) = spmc_view_head(t);
    SpmcViewReceiver recv[kMaxReceivers];
    e.receivers.assign(recv, recv + spmc_view_receivers(t, recv));
    const std::span<const Constituent> ranges = spmc_view_ranges(t);
    e.ranges.assign(ranges.begin(), ranges.end());
    v.push_back(std::move(e));
  }
  return v;
}

}  // namespace kconform::ffa
