// The SPMC:TABLE view's digest (spmc_view.h has the exact definition): the
// bytes of one transaction, and the SPMC model's table fed without
// allocating (the proxy model's core uses it with a real EL3,
// SPEC.md DIGEST:TABLE-VIEW).
#include "models/ffa/spmc_view.h"

namespace kconform::ffa {

void spmc_view_feed(Fnv1a& h, const SpmcViewHead& e, std::span<const SpmcViewReceiver> receivers,
                    std::span<const Constituent> ranges) {
  h.u8(e.complete);
  if (!e.complete) {
    h.u32(e.received);
    h.u32(e.total_len);
    return;
  }
  h.u8(e.kind);
  h.u16(e.sender);
  h.u64(e.tag);
  h.u8(e.retrieved);
  h.u32(static_cast<uint32_t>(receivers.size()));
  for (const auto& [id, perms] : receivers) {
    h.u16(id);
    h.u8(perms);
  }
  h.u32(static_cast<uint32_t>(ranges.size()));
  for (const Constituent& c : ranges) {
    h.u64(c.address);
    h.u32(c.pages);
  }
  h.u32(e.total_pages);
}

SpmcViewHead spmc_view_head(const Transaction& t) {
  SpmcViewHead e;
  e.handle = t.handle;
  e.complete = t.complete;
  if (!t.complete) {
    e.received = t.received;
    e.total_len = t.total_len;
    return e;
  }
  e.kind = static_cast<uint8_t>(t.kind);
  e.sender = t.sender;
  e.tag = t.tag;
  e.retrieved = t.any_retrieved();
  e.total_pages = t.total_pages;
  return e;
}

uint32_t spmc_view_receivers(const Transaction& t, SpmcViewReceiver recv[kMaxReceivers]) {
  if (!t.complete) return 0;
  const uint32_t n = t.n_receivers < kMaxReceivers ? t.n_receivers : kMaxReceivers;
  for (uint32_t r = 0; r < n; ++r) recv[r] = {t.recv_id[r], t.recv_perms[r]};
  return n;
}

std::span<const Constituent> spmc_view_ranges(const Transaction& t) {
  if (!t.complete) return {};
  return {t.ranges, t.n_ranges < kMaxRanges ? t.n_ranges : kMaxRanges};
}

uint64_t spmc_pages_digest(std::vector<SpmcPagesEntry> v) {
  std::vector<std::vector<uint8_t>> recs;
  for (const SpmcPagesEntry& e : v) {
    std::vector<uint8_t> r;
    auto put = [&r](uint64_t x, int n) {
      for (int k = 0; k < n; ++k) r.push_back(static_cast<uint8_t>(x >> (8 * k)));
    };
    put(e.retrieved, 1);
    put(e.pages.size(), 4);
    for (uint64_t a : e.pages) put(a, 8);
    recs.push_back(std::move(r));
  }
  std::sort(recs.begin(), recs.end());
  Fnv1a h;
  h.u32(static_cast<uint32_t>(recs.size()));
  for (const auto& r : recs) h.bytes(r.data(), r.size());
  return h.h;
}

uint64_t spmc_view_digest(const Spmc& s, TableOverlay o) {
  auto entry = [&](uint32_t i) -> const Transaction& {
    return static_cast<int32_t>(i) == o.slot ? *o.tx : s.slot(i);
  };
  if (s.config().table_pages_view) {
    std::vector<SpmcPagesEntry> v;
    for (uint32_t i = 0; i < kMaxTransactions; ++i) {
      const Transaction& t = entry(i);
      if (!t.live || !t.complete) continue;
      SpmcPagesEntry e;
      e.retrieved = t.any_retrieved();
      for (const Constituent& c : spmc_view_ranges(t))
        for (uint32_t k = 0; k < c.pages; ++k) e.pages.push_back(c.address + uint64_t{k} * 4096);
      v.push_back(std::move(e));
    }
    return spmc_pages_digest(std::move(v));
  }
  // The live slots in ascending handle order (insertion sort: 16 at most).
  uint32_t order[kMaxTransactions];
  uint32_t n = 0;
  for (uint32_t i = 0; i < kMaxTransactions; ++i) {
    if (!entry(i).live) continue;
    uint32_t k = n++;
    for (; k > 0 && entry(order[k - 1]).handle > entry(i).handle; --k) order[k] = order[k - 1];
    order[k] = i;
  }
  Fnv1a h;
  h.u32(n);
  for (uint32_t k = 0; k < n; ++k) {
    const Transaction& t = entry(order[k]);
    SpmcViewReceiver recv[kMaxReceivers];
    const uint32_t n_recv = spmc_view_receivers(t, recv);
    spmc_view_feed(h, spmc_view_head(t), {recv, n_recv}, spmc_view_ranges(t));
  }
  return h.h;
}

uint64_t state_digest_table_view(std::span<const uint8_t> host_views, uint64_t table_digest) {
  Fnv1a h;
  h.u32(static_cast<uint32_t>(host_views.size()));
  h.bytes(host_views.data(), host_views.size());
  h.u64(table_digest);
  return h.h;
}

}  // namespace kconform::ffa
