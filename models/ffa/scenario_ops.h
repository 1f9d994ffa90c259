// The FF-A scenario conventions in one place (SPEC.md HARNESS:SLOTS,
// HARNESS:TX): how a scenario op becomes the host's x0..x7, what bytes a tx_*
// op writes where in the host TX window, and which handle a producer's result
// yields. Used by the model (model.cc) and by the EL2 target
// (targets/el2/ffa_target.cc) so both sides build the same call from the same op.
//
// Header-only (inline): both the model library and the target library include
// it without a build-file change.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/scenario.h"
#include "models/ffa/desc.h"
#include "models/ffa/proxy.h"
#include "models/ffa/regs.h"

namespace kconform::ffa {

// FFA_MEM_FRAG_TX w4[31:16]: the sender's endpoint ID (MEM:FRAGMENT).
inline constexpr uint32_t kFragTxSenderShift = 16;
// ours: larger than any mailbox a tree configures (HARNESS:TX writes nothing then).
inline constexpr uint64_t kLargestMailbox = 1u << 20;

// The host RAM every in-process FF-A target lays out (el2, spmc, optee): the
// 64 host pages every directed scenario addresses from 0x80000000 (the
// ProxyProfile default; the hypervisor's pages follow them), and below them
// more host pages for corpora/ffa/large.kcs: transactions of more
// constituents than one mailbox holds (at 4K and 16K) and, at 4K, a retrieve
// response longer than the proxy's descriptor buffer (SPEC.md
// PROFILE:DESC-BUF). Everything below (0x10000000, which the directed files use
// as "outside RAM") stays outside. Sets phys_base and host_pages of p.
inline void harness_ram(uint64_t page_size, ProxyProfile* p) {
  constexpr uint64_t kHostPages = 64, kTopBase = 0x80000000;
  // 4K: 9.25 MiB, 2432 pages in all, more than 36 KiB of constituents; 16K: 17 MiB,
  // more than the 1019 constituents a 16K mailbox holds; 64K: 20 MiB, hundreds.
  const uint64_t low = page_size == 4096 ? 2368 : page_size == 16384 ? 1088 : 320;
  p->host_pages = kHostPages + low;
  p->phys_base = kTopBase - low * page_size;
}

// HARNESS:SLOTS: the handle a slot holds, FFA_MEMORY_HANDLE_INVALID for a slot
// that was never produced.
inline uint64_t slot_handle(const std::vector<uint64_t>& handles, uint64_t slot) {
  return slot < handles.size() ? handles[slot] : kInvalidHandle;
}

// HARNESS:SLOTS: the handle a share/lend/donate result carries: w2|w3<<32 of
// FFA_SUCCESS, w1|w2<<32 of FFA_MEM_FRAG_RX, else FFA_MEMORY_HANDLE_INVALID.
inline uint64_t produced_handle(const uint64_t out[8]) {
  if (fid_of(out) == kFnSuccess32 || out[0] == kFnSuccess64) return handle_of(out[2], out[3]);
  if (fid_of(out) == kFnMemFragRx) return handle_of(out[1], out[2]);
  return kInvalidHandle;
}

// FFA.SPMC.HANDLE (SPEC.md SPMC:HANDLE-SPEC), as a target checks the handle a
// real SPMC gave a new transaction (the model takes the SPMC's choice, so the
// target checks what the specification asks of it): empty if the reply to
// call fid is not the first reply of a send or its handle is fine; else what is
// wrong, for the note. named(h): how many live transactions of the SPMC's own
// table have handle h, the new one included.
template <typename Named>
std::string new_handle_problem(uint32_t fid, const uint64_t reply[], Named named) {
  const uint32_t f = fid & ~kSmc64Bit;
  if (f != kFnMemShare32 && f != kFnMemLend32 && f != kFnMemDonate32) return {};
  const uint64_t h = produced_handle(reply);
  if (h == kInvalidHandle)
    return fid_of(reply) == kFnMemFragRx || is_success(reply) ? "FFA_MEMORY_HANDLE_INVALID for a new transaction"
                                                              : "";
  const size_t n = named(h);
  std::string bad;
  if (h >> 63) bad = "bit 63 set (allocated by a hypervisor)";
  if (n > 1) bad = "it names " + std::to_string(n) + " live transactions of the SPMC's table";
  if (bad.empty()) return {};
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(h));
  return "handle " + std::string(b) + ": " + bad;
}

inline bool is_producer(uint8_t code) { return code == kOpMemShare || code == kOpMemLend || code == kOpMemDonate; }

// x0..x7 of the host call op stands for (host ops only; harness ops give zeros).
// handles: the slots so far; last_desc_len: the length of the last descriptor
// tx_mem_desc built (total_len/frag_len "auto").
inline void host_regs(const Op& op, const std::vector<uint64_t>& handles, uint64_t last_desc_len, uint64_t in[8]) {
  for (int k = 0; k < 8; ++k) in[k] = 0;
  const auto& a = op.args;
  auto conv = [](uint64_t c, uint32_t fid64) { return c == kConvSmc32 ? (fid64 & ~kSmc64Bit) : fid64; };
  switch (op.code) {
    case kOpVersion: in[0] = kFnVersion, in[1] = a[0]; break;
    case kOpFeatures: in[0] = kFnFeatures, in[1] = a[0], in[2] = a[1]; break;
    case kOpIdGet: in[0] = kFnIdGet; break;
    case kOpPartitionInfo:
      in[0] = kFnPartitionInfoGet;
      for (int k = 0; k < 5; ++k) in[k + 1] = a[k];
      break;
    case kOpRxtxMap: in[0] = conv(a[3], kFnRxtxMap64), in[1] = a[0], in[2] = a[1], in[3] = a[2]; break;
    case kOpRxtxUnmap: in[0] = kFnRxtxUnmap, in[1] = a[0]; break;
    case kOpRxRelease: in[0] = kFnRxRelease, in[1] = a[0]; break;
    case kOpMemShare:
    case kOpMemLend:
    case kOpMemDonate: {
      const uint32_t fid = op.code == kOpMemShare ? kFnMemShare64 : op.code == kOpMemLend ? kFnMemLend64 : kFnMemDonate64;
      in[0] = conv(a[4], fid);
      in[1] = a[0] == kArgAuto ? last_desc_len : a[0];
      in[2] = a[1] == kArgAuto ? last_desc_len : a[1];
      in[3] = a[2], in[4] = a[3];
      break;
    }
    case kOpMemFragTx: {
      const uint64_t h = slot_handle(handles, a[0]);
      in[0] = kFnMemFragTx, in[1] = handle_lo(h), in[2] = handle_hi(h), in[3] = a[1], in[4] = a[2] << kFragTxSenderShift;
      break;
    }
    case kOpMemReclaim: {
      const uint64_t h = slot_handle(handles, a[0]) ^ a[2];
      in[0] = kFnMemReclaim, in[1] = handle_lo(h), in[2] = handle_hi(h), in[3] = a[1];
      break;
    }
    case kOpMemReclaim2: {
      const uint64_t h = slot_handle(handles, a[0]) ^ a[6];
      in[0] = kFnMemReclaim2, in[1] = handle_lo(h), in[2] = handle_hi(h);
      in[3] = a[1], in[4] = a[2], in[5] = a[3], in[6] = a[4], in[7] = a[5];
      break;
    }
    case kOpRaw:
      for (int k = 0; k < 8; ++k) in[k] = a[k];
      break;
    default: break;
  }
}

// A ranges byte string: 12-byte records (address u64 LE, pages u32 LE); each
// constituent gets the given reserved word. The first form fills *rs (its
// capacity reused: no allocation once it is large enough).
inline void ranges_of(const std::vector<uint8_t>& blob, uint32_t reserved, std::vector<Constituent>* rs) {
  rs->resize(blob.size() / kRangeRecordBytes);
  for (size_t i = 0; i < rs->size(); ++i) {
    Constituent& c = (*rs)[i];
    get_u64(blob, i * kRangeRecordBytes, &c.address);
    get_u32(blob, i * kRangeRecordBytes + 8, &c.pages);
    c.reserved = reserved;
  }
}
inline std::vector<Constituent> ranges_of(const std::vector<uint8_t>& blob, uint32_t reserved) {
  std::vector<Constituent> rs;
  ranges_of(blob, reserved, &rs);
  return rs;
}

// What a tx_write / tx_mem_desc / tx_constituents op writes: bytes at offset
// of the host TX window. For tx_mem_desc, desc_len is the descriptor's full
// length (0 and nothing to write if it is larger than any mailbox). `ranges`
// is the builder's scratch (the op's decoded constituents).
struct TxWrite {
  uint64_t offset = 0;
  std::vector<uint8_t> bytes;
  bool is_desc = false;
  uint64_t desc_len = 0;
  std::vector<Constituent> ranges;
};

namespace detail {
// tx_mem_desc's descriptor over n ranges at rs (null: the geometry only).
inline DescSpec tx_desc_spec(const Op& op, const Constituent* rs, uint32_t n) {
  const auto& a = op.args;
  DescSpec d;
  d.layout = static_cast<Layout>(a[0] > 2 ? 2 : a[0]);
  d.sender = static_cast<uint16_t>(a[1]);
  d.receivers[0] = {static_cast<uint16_t>(a[2]), static_cast<uint8_t>(a[3]), 0, 0, 0};
  d.n_receivers = 1;
  if (a[4] != kNoReceiver) {
    d.receivers[1] = {static_cast<uint16_t>(a[4]), static_cast<uint8_t>(a[5]), 0, 0, 0};
    d.n_receivers = 2;
  }
  d.attributes = static_cast<uint16_t>(a[6]);
  d.flags = static_cast<uint32_t>(a[7]);
  d.tag = a[8];
  d.n_ranges = n;
  d.ranges = rs;
  d.total_pages = a[10], d.composite_off = a[11], d.ep_count = a[12], d.range_count = a[13];
  d.ep_mem_size = a[14];
  return d;
}
}  // namespace detail

// The op's bytes into *w, reusing its buffers' capacity (no allocation once
// they are large enough: the fuzzing loop calls this on every tx op).
inline void tx_bytes(const Scenario& s, const Op& op, TxWrite* w) {
  const auto& a = op.args;
  w->is_desc = false;
  w->desc_len = 0;
  switch (op.code) {
    case kOpTxWrite: {
      const std::vector<uint8_t>& blob = s.blobs.at(a[1]);
      w->offset = a[0];
      w->bytes.assign(blob.begin(), blob.end());
      return;
    }
    case kOpTxConstituents: {
      ranges_of(s.blobs.at(a[1]), static_cast<uint32_t>(a[2]), &w->ranges);
      w->offset = a[0];
      w->bytes.resize(w->ranges.size() * kConstituentSize);
      build_constituents(w->ranges.data(), static_cast<uint32_t>(w->ranges.size()), w->bytes);
      return;
    }
    default: {  // kOpTxMemDesc
      ranges_of(s.blobs.at(a[9]), 0, &w->ranges);
      const DescSpec d =
          detail::tx_desc_spec(op, w->ranges.data(), static_cast<uint32_t>(w->ranges.size()));
      w->offset = a[15];
      const uint64_t size = region_size(d);
      if (size > kLargestMailbox) {  // HARNESS:TX: larger than any mailbox, nothing written
        w->bytes.clear();
        return;
      }
      w->is_desc = true;
      w->desc_len = size;
      w->bytes.resize(size);
      build_region(d, w->bytes);
      return;
    }
  }
}
inline TxWrite tx_bytes(const Scenario& s, const Op& op) {
  TxWrite w;
  tx_bytes(s, op, &w);
  return w;
}

// Where a tx op writes and how many bytes (tx_bytes' offset and bytes.size()),
// without building them.
struct TxExtent {
  uint64_t offset = 0, size = 0;
};
inline TxExtent tx_extent(const Scenario& s, const Op& op) {
  const auto& a = op.args;
  switch (op.code) {
    case kOpTxWrite: return {a[0], s.blobs.at(a[1]).size()};
    case kOpTxConstituents: return {a[0], s.blobs.at(a[1]).size() / kRangeRecordBytes * kConstituentSize};
    default: {  // kOpTxMemDesc: the geometry reads the range count only
      const uint64_t n = s.blobs.at(a[9]).size() / kRangeRecordBytes;
      const uint64_t size = region_size(detail::tx_desc_spec(op, nullptr, static_cast<uint32_t>(n)));
      return {a[15], size > kLargestMailbox ? 0 : size};
    }
  }
}

// HARNESS:TX: how many of n bytes at offset of the TX window (at window, known
// = an rxtx_map came before) are written: clipped to the mailbox; none unless
// the whole window is host memory.
inline uint64_t tx_clip(const ProxyProfile& p, bool known, uint64_t window, uint64_t offset, uint64_t n) {
  const uint64_t mbox = p.mbox_bytes(), host_end = p.phys_base + p.host_pages * p.page_size;
  if (!known || window < p.phys_base || window > host_end || mbox > host_end - window || offset >= mbox) return 0;
  return n < mbox - offset ? n : mbox - offset;
}

// HARNESS:HOST-MEM: host_fill/host_count address [addr, addr + 4K*pages): its
// length in bytes if it is 4K-aligned and wholly host memory, else 0.
inline uint64_t host_mem_len(const ProxyProfile& p, uint64_t addr, uint64_t pages) {
  const uint64_t host = p.host_pages * p.page_size;
  if (addr % kFfaPage || pages == 0 || pages > host / kFfaPage || addr < p.phys_base) return 0;
  const uint64_t len = pages * kFfaPage;
  return addr - p.phys_base <= host - len ? len : 0;
}
// HARNESS:HOST-MEM: host_count's result, the bytes of mem (len bytes at the
// range) equal to value.
inline uint64_t count_bytes(const uint8_t* mem, uint64_t len, uint8_t value) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < len; ++i) n += mem[i] == value;
  return n;
}

}  // namespace kconform::ffa
