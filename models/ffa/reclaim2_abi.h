// The FFA_MEM_RECLAIM2 ABI in one table: registers, TX layout, limits, results.
// DEN0140 rev K is not public; each field says where it comes from (the cover
// letter, or "ours" with the reason). Change this table, and nothing else, when
// the specification text is known. SPEC.md section "RECLAIM2 profile" mirrors it.
#pragma once

#include <cstdint>
#include <span>

#include "models/ffa/desc.h"
#include "harness/scenario/ffa_spec.h"

namespace kconform::ffa {

struct Reclaim2Abi {
  uint32_t fid = kFnMemReclaim2;  // cover: "FFA_MEM_RECLAIM2 (0xC4000091)" (an SMC64 fast call)
  // Argument registers (index into x0..x17).
  int reg_handle_lo = 1;   // ours: as FFA_MEM_RECLAIM w1 (handle[31:0])
  int reg_handle_hi = 2;   // ours: as FFA_MEM_RECLAIM w2 (handle[63:32])
  int reg_flags = 3;       // ours: as FFA_MEM_RECLAIM w3; cover v2: "the flags ... checks"
  int reg_offset = 4;      // cover: "a starting descriptor byte offset" (into the TX buffer)
  int reg_count = 5;       // ours: number of constituent descriptors ("an array of ...")
  int reg_page_index = 6;  // cover: "initial page index" (4K pages into the first descriptor); x6, 64-bit
  int reg_total = 7;       // cover v2: "Check total_pages against the sum of constituent pg_cnt"
  // Which argument registers are 32-bit ("w"): the rest are read as 64 bits.
  // ours: every argument but the page index is a w register; upper halves ignored (SMCCC §2.6).
  bool page_index_is_64bit = true;
  // TX layout: constituent memory region descriptors (DEN0077 Table 10.14, 16 bytes each).
  uint32_t desc_size = 16;
  uint32_t offset_align = 16;  // ours: cover v2 "offset alignment checks"; 16 = descriptor size
  uint32_t max_count = 0;      // 0: bounded only by the TX buffer (ours; cover batches 256/call)
  bool desc_reserved_mbz = true;  // ours: bytes 12..15 of a constituent are Reserved (MBZ)
  // Flags: bit 0 zero-before-reclaim as FFA_MEM_RECLAIM; every other bit MBZ.
  uint32_t flags_allowed = kReclaimZero;  // ours (cover v2 "Simplify the flags ... checks")
  // total_pages == sum of pg_cnt over all `count` descriptors (cover v2), the
  // sum taken without 32-bit wrap-around (ours).
  // The call asks for pages [page_index, total_pages) of the concatenated list.
  // Results.
  uint32_t success_fid = kFnSuccess32;  // ours: FFA_SUCCESS; FFA_SUCCESS_64 also accepted
  int reg_result_count = 2;  // cover: "The Relayer returns the number of 4K pages reclaimed"
  bool stateless = true;     // cover: "without maintaining intermediate transaction state"
  // Error codes (ours, by analogy with FFA_MEM_RECLAIM, DEN0077 §13.x):
  int32_t err_args = kInvalidParameters;    // flags, offset, count, index, total, descriptors
  int32_t err_handle = kInvalidParameters;  // unknown handle, or not the caller's
  int32_t err_not_in_tx = kInvalidParameters;  // a descriptor outside the transaction
  int32_t err_reclaimed = kInvalidParameters;  // a page already reclaimed
  int32_t err_retrieved = kDenied;             // a borrower still has the memory
};

inline constexpr Reclaim2Abi kReclaim2{};

// One line of provenance per field, for SPEC.md and reports.
struct Reclaim2Field {
  const char* field;
  const char* value;
  const char* provenance;
};
inline constexpr Reclaim2Field kReclaim2Table[] = {
    {"function id", "0xC4000091 (SMC64)", "cover: 'FFA_MEM_RECLAIM2 (0xC4000091)'"},
    {"w1/w2", "handle lo/hi", "ours: as FFA_MEM_RECLAIM"},
    {"w3", "flags: bit 0 zero before reclaim, rest MBZ", "ours: as FFA_MEM_RECLAIM; cover v2 'flags ... checks'"},
    {"w4", "byte offset of the first constituent descriptor in TX", "cover: 'a starting descriptor byte offset'"},
    {"w5", "number of constituent descriptors", "ours: cover 'an array of constituent memory region descriptors'"},
    {"x6", "initial page index (4K) into the first descriptor", "cover: 'initial page index'; 64-bit ours"},
    {"w7", "total pages == sum of the descriptors' pg_cnt", "cover v2: 'Check total_pages against the sum of constituent pg_cnt'"},
    {"offset alignment", "16 bytes", "ours: cover v2 'offset alignment checks', descriptor size"},
    {"bounds", "offset + 16*count <= TX size; count >= 1", "ours"},
    {"page index", "< pg_cnt of the first descriptor", "ours"},
    {"descriptors", "4K-aligned, pg_cnt > 0, reserved MBZ, inside one constituent of the transaction, disjoint", "ours"},
    {"success", "FFA_SUCCESS, w2 = 4K pages reclaimed by this call", "cover: 'returns the number of 4K pages reclaimed in that invocation'"},
    {"count", "1 <= w2 <= total - page_index; pages reclaimed in list order", "ours"},
    {"state", "none kept between calls", "cover: 'without maintaining intermediate transaction state'"},
    {"errors", "INVALID_PARAMETERS for arguments, handle, descriptors, reclaimed pages; DENIED while retrieved", "ours: as FFA_MEM_RECLAIM"},
    {"last page", "the handle is freed when its last page is reclaimed", "ours: equivalence with FFA_MEM_RECLAIM"},
};

// Visits, in list order, the 4K pages a RECLAIM2 call covers: the descriptors
// at txb[off], txb[off + desc_size], ..., from page `index` of the first one,
// at most `limit` pages (R2:PROFILE "pages reclaimed in list order"). fn(pa)
// returns false to stop early. Returns how many pages were visited.
template <typename Fn>
uint64_t for_each_reclaim2_page(std::span<const uint8_t> txb, uint64_t off, uint32_t count,
                                uint64_t index, uint64_t limit, Fn&& fn) {
  uint64_t done = 0;
  for (uint32_t i = 0; i < count && done < limit; ++i) {
    Constituent d;
    read_constituent(txb, off + static_cast<uint64_t>(i) * kReclaim2.desc_size, &d);
    for (uint64_t p = i == 0 ? index : 0; p < d.pages && done < limit; ++p) {
      ++done;
      if (!fn(d.address + p * kFfaPage)) return done;
    }
  }
  return done;
}

}  // namespace kconform::ffa
