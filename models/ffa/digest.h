// The FF-A state digest: what a target computes from its own host stage-2
// page tracker and SPMC so the oracle can compare states (SPEC.md DIGEST).
//
//   state = FNV-1a-64 over the little-endian byte sequence
//     u32 n_host_pages
//     n_host_pages x u8 view   (host PAGE_SIZE page i from phys_base:
//                               0 host-owned, 1 shared with FF-A (host
//                               SHARED_OWNED, no hyp mapping), 2 shared with
//                               the hypervisor (a mailbox), 3 anything else)
//     Spmc::digest(): u32 n_live_transactions, then per transaction in
//       ascending handle order:
//       u64 handle, u8 complete, u8 kind (1 share, 2 lend, 3 donate),
//       incomplete: u32 bytes_received, u32 total_length;
//       complete:   u16 sender, u16 attributes, u32 flags, u64 tag,
//                   u8 n_receivers, n x (u16 id, u8 perms, u8 retrieved),
//                   u32 n_ranges, u64 R (R: FNV-1a-64 over the
//                   constituents, n x (u64 address, u32 pages): hashed once
//                   per transaction, Transaction::ranges_digest),
//                   u32 total_pages, u32 reclaimed_count,
//                   ceil(total_pages/8) x u8 reclaimed bitmap (bit i%8 of
//                   byte i/8 = 4K page i, pages numbered in constituent order)
// FNV-1a-64: h = 0xcbf29ce484222325; per byte h ^= b; h *= 0x100000001b3.
#pragma once

#include <cstdint>
#include <span>

#include "models/ffa/spmc.h"

namespace kconform::ffa {

enum class PageView : uint8_t { kOwned = 0, kSharedFfa = 1, kSharedHyp = 2, kOther = 3 };

uint64_t state_digest(std::span<const uint8_t> host_views, const Spmc& spmc);
// The same with one transaction slot replaced (a decided, not yet applied SMC).
uint64_t state_digest(std::span<const uint8_t> host_views, const Spmc& spmc, TableOverlay o);

}  // namespace kconform::ffa
