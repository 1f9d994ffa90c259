// The FFA_MEM_RECLAIM2 ABI in one table (registers, TX layout, limits,
// results, errors), and the one reader and validator of its arguments that
// both the Relayer (the proxy model) and the SPMC model use. DEN0140 rev K is
// not public; each field says where it comes from (the cover letter, or
// "ours" with the reason). Change this table, and nothing else, when the
// specification text is known. SPEC.md R2:PROFILE mirrors it.
//
// Header-only: the SPMC is also built alone as the EL2 target's EL3.
#pragma once

#include <cstdint>
#include <span>

#include "harness/scenario/ffa_spec.h"
#include "models/ffa/desc.h"
#include "models/ffa/hits.h"
#include "models/ffa/regs.h"

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

// --- Reading a call ---------------------------------------------------------------

// The arguments of one FFA_MEM_RECLAIM2 call, read from its registers as the
// table says.
struct Reclaim2Args {
  uint64_t handle = 0;
  uint32_t flags = 0;
  uint32_t offset = 0;  // byte offset of the first descriptor in TX
  uint32_t count = 0;   // descriptors
  uint64_t page_index = 0;  // 4K pages into the first descriptor
  uint32_t total = 0;   // total_pages

  static Reclaim2Args of(const uint64_t in[]) {
    const Reclaim2Abi& P = kReclaim2;
    Reclaim2Args a;
    a.handle = handle_of(in[P.reg_handle_lo], in[P.reg_handle_hi]);
    a.flags = w32(in[P.reg_flags]);
    a.offset = w32(in[P.reg_offset]);
    a.count = w32(in[P.reg_count]);
    a.page_index = P.page_index_is_64bit ? in[P.reg_page_index] : w32(in[P.reg_page_index]);
    a.total = w32(in[P.reg_total]);
    return a;
  }
  // The registers of the call (x0..x7) that carries these arguments.
  void to_regs(uint64_t out[kCallRegs]) const {
    const Reclaim2Abi& P = kReclaim2;
    for (uint32_t i = 0; i < kCallRegs; ++i) out[i] = 0;
    out[0] = P.fid;
    out[P.reg_handle_lo] = handle_lo(handle);
    out[P.reg_handle_hi] = handle_hi(handle);
    out[P.reg_flags] = flags;
    out[P.reg_offset] = offset;
    out[P.reg_count] = count;
    out[P.reg_page_index] = page_index;
    out[P.reg_total] = total;
  }
  // The end of the descriptor list in TX (64-bit: never wraps).
  uint64_t list_end() const { return uint64_t{offset} + uint64_t{count} * kReclaim2.desc_size; }
  // The pages the call asks for: [page_index, total) of the concatenated list.
  uint64_t pages_asked() const { return total - page_index; }
};

// Descriptor i of the list at a.offset of tx.
inline Constituent reclaim2_descriptor(std::span<const uint8_t> tx, const Reclaim2Args& a, uint32_t i) {
  Constituent c;
  read_constituent(tx, a.offset + uint64_t{i} * kReclaim2.desc_size, &c);
  return c;
}

// R2:PROFILE (descriptors): 4K-aligned, pg_cnt > 0, reserved MBZ, no wrap.
inline bool reclaim2_descriptor_ok(Constituent c) {
  if (!kReclaim2.desc_reserved_mbz) c.reserved = 0;
  return constituent_error(c) == DescError::kOk;
}

// What the descriptor list says, read once (the list must lie inside tx).
struct Reclaim2List {
  uint64_t sum = 0;          // of every descriptor's pg_cnt, in 64 bits
  uint32_t first_pages = 0;  // pg_cnt of the first descriptor
  bool valid = true;         // every descriptor is well-formed
  uint32_t bad = 0;          // else the first malformed one
  Constituent bad_desc;
};

inline Reclaim2List read_reclaim2_list(std::span<const uint8_t> tx, const Reclaim2Args& a) {
  Reclaim2List l;
  for (uint32_t i = 0; i < a.count; ++i) {
    const Constituent c = reclaim2_descriptor(tx, a, i);
    if (i == 0) l.first_pages = c.pages;
    if (l.valid && !reclaim2_descriptor_ok(c)) {
      l.valid = false;
      l.bad = i;
      l.bad_desc = c;
    }
    l.sum += c.pages;
  }
  return l;
}

// --- Checking a call ----------------------------------------------------------------

// The argument checks of R2:PROFILE that both the Relayer and the SPMC make.
// Each records its rule in hits (and on failure a note) and says whether the
// call passes it. Each side applies them in its own order: the SPMC answers
// the first failure, the proxy collects them all.
class Reclaim2Checks {
 public:
  Reclaim2Checks(const Reclaim2Args& a, Hits& hits) : a_(a), h_(hits) {}

  // (flags) no bit but zero-before-reclaim. Recorded only when broken: the
  // other half (zero-before-reclaim on a share) is EL3's to check.
  bool flags_mbz() const {
    if (!(a_.flags & ~kReclaim2.flags_allowed)) return true;
    h_.broke(kFfaR2Flags, "flags %#x", a_.flags);
    return false;
  }
  // (offset) aligned to a descriptor.
  bool offset_aligned() const {
    if (a_.offset % kReclaim2.offset_align == 0) return pass(kFfaR2OffsetAlign);
    h_.broke(kFfaR2OffsetAlign, "offset %#x not %u-aligned", a_.offset, kReclaim2.offset_align);
    return false;
  }
  // (count) at least one descriptor, at most the table's limit.
  bool count_in_range() const {
    if (a_.count != 0 && !(kReclaim2.max_count && a_.count > kReclaim2.max_count)) return pass(kFfaR2Count);
    h_.broke(kFfaR2Count, "count %u", a_.count);
    return false;
  }
  // (bounds) the list lies inside a TX buffer of tx_bytes.
  bool list_inside(uint64_t tx_bytes) const {
    if (a_.list_end() <= tx_bytes) return pass(kFfaR2Bounds);
    h_.broke(kFfaR2Bounds, "offset %#x + %u descriptors > TX %#llx", a_.offset, a_.count,
             static_cast<unsigned long long>(tx_bytes));
    return false;
  }
  // (descriptors) each well-formed.
  bool descriptors_valid(const Reclaim2List& l) const {
    if (l.valid) return pass(kFfaR2DescValid);
    h_.broke(kFfaR2DescValid, "descriptor %u (%#llx, %u pages, reserved %#x)", l.bad,
             static_cast<unsigned long long>(l.bad_desc.address), l.bad_desc.pages, l.bad_desc.reserved);
    return false;
  }
  // (total) total_pages is the sum of the descriptors' pg_cnt.
  bool total_matches(const Reclaim2List& l) const {
    if (l.sum == a_.total) return pass(kFfaR2Total);
    h_.broke(kFfaR2Total, "total %u != sum %llu", a_.total, static_cast<unsigned long long>(l.sum));
    return false;
  }
  // (page index) inside the first descriptor.
  bool page_index_in_first(const Reclaim2List& l) const {
    if (a_.page_index < l.first_pages) return pass(kFfaR2PageIndex);
    h_.broke(kFfaR2PageIndex, "page index %llu >= %u", static_cast<unsigned long long>(a_.page_index),
             l.first_pages);
    return false;
  }

 private:
  bool pass(RuleId r) const {
    h_.pass(r);
    return true;
  }
  const Reclaim2Args& a_;
  Hits& h_;
};

// Visits, in list order, the 4K pages a RECLAIM2 call covers: its descriptors
// in tx, from page `page_index` of the first one, at most `limit` pages
// (R2:RESULT "pages reclaimed in list order"). fn(pa) returns false to stop
// early. Returns how many pages were visited.
template <typename Fn>
uint64_t for_each_reclaim2_page(std::span<const uint8_t> tx, const Reclaim2Args& a, uint64_t limit, Fn&& fn) {
  uint64_t done = 0;
  for (uint32_t i = 0; i < a.count && done < limit; ++i) {
    const Constituent d = reclaim2_descriptor(tx, a, i);
    for (uint64_t p = i == 0 ? a.page_index : 0; p < d.pages && done < limit; ++p) {
      ++done;
      if (!fn(d.address + p * kFfaPage)) return done;
    }
  }
  return done;
}

}  // namespace kconform::ffa
