// The SPMC model (the EL3 side): answers an SMC from the Normal world given
// x0..x17. RX/TX mailboxes, a fixed-capacity transaction table keyed by handle
// with per-4K-page reclaim state, fragment reassembly, the memory ABIs incl.
// FFA_MEM_RECLAIM2 (reclaim2_abi.h) and a one-shot misbehaviour knob.
// Deterministic; no exceptions, RTTI or allocation (SPEC.md SPMC:*).
//
// Every SMC is decided on a const SPMC (answer: the registers, the rules, and
// the change as an SpmcAnswer) and then applied (apply); smc() does both. The
// proxy model asks answer() what EL3 would say without changing anything.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include <cstdint>
#include <span>
#include <vector>

#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/ffa_spec.h"
#include "models/common/dirty_pages.h"
#include "models/ffa/desc.h"
#include "models/ffa/hits.h"
#include "models/ffa/regs.h"

namespace kconform::ffa {

struct Reclaim2Args;
class Reclaim2Checks;

inline constexpr uint32_t kMaxTransactions = 16;   // ours: SPMC table size
inline constexpr uint32_t kMaxTxPages = 16384;     // ours: 4K pages one transaction may hold (64 MiB)
inline constexpr uint32_t kMaxDescBytes = 65536;   // ours: largest descriptor the SPMC reassembles (16 4K fragments)
inline constexpr uint32_t kMaxSps = 4;
inline constexpr uint64_t kHandleBase = 1ull << 63;  // ours: bit 63 set = allocated by the SPMC

// FFA_RXTX_MAP w3: [5:0] the buffers' size in 4K pages, [31:6] reserved.
inline constexpr uint32_t kRxtxPagesMask = 0x3f;
inline constexpr uint32_t rxtx_pages(uint32_t w3) { return w3 & kRxtxPagesMask; }
inline constexpr bool rxtx_reserved_set(uint32_t w3) { return (w3 & ~kRxtxPagesMask) != 0; }
// FFA_PARTITION_INFO_GET w5: bit 0 count only, [31:1] MBZ.
inline constexpr uint32_t kPartitionInfoCountOnly = 1u << 0;

// The UUID the SPMC model gives partition id, in FFA_PARTITION_INFO_GET w1..w4
// order (ours: "kcon" "form" 0 id).
inline constexpr uint32_t kSpUuidWord0 = 0x6b636f6e, kSpUuidWord1 = 0x666f726d;
inline void sp_uuid(uint16_t id, uint32_t u[4]) {
  u[0] = kSpUuidWord0;
  u[1] = kSpUuidWord1;
  u[2] = 0;
  u[3] = id;
}

struct SpmcConfig {
  uint32_t version = kVersion12;  // what FFA_VERSION answers
  uint64_t ns_base = 0;           // Normal-world memory the SPMC accepts
  uint64_t ns_size = 0;
  uint16_t sp_ids[kMaxSps] = {0x8001, 0x8002, 0, 0};
  uint32_t n_sps = 2;
  bool reclaim2 = true;           // implements FFA_MEM_RECLAIM2
  // PROFILE:ONE-SEND: a new send while a fragmented one is in flight is BUSY
  // (a choice of this machine's SPMC, not an FF-A requirement).
  bool one_send_in_flight = true;
  // FFA_MEM_DONATE (DEN0077: optional): without it DONATE and FFA_FEATURES of
  // it are NOT_SUPPORTED (TF-A's EL3 SPMC has none).
  bool donate = true;
  // What SPMC:TABLE compares of the table (spmc_view.h): the full view, or
  // SPMC:TABLE-PAGES, the pages view, for an SPMC that keeps only the pages of
  // a transaction and whether it is in use (OP-TEE's S-EL1 SPMC).
  bool table_pages_view = false;
  // SPMC:HYP-RETRIEVE-OPTIONAL: the hypervisor retrieve request (FFA_MEM_RETRIEVE_REQ
  // from the Normal world, SPMC:HYP-RETRIEVE-REQ, and FFA_MEM_FRAG_RX, which only
  // reads its response). Without it these calls and FFA_FEATURES of them are
  // NOT_SUPPORTED (OP-TEE's S-EL1 SPMC has none).
  bool hyp_retrieve = true;
  // SPMC:ROUTED: the highest FF-A function number (bits [15:0] of the ID) the
  // EL3 firmware's dispatcher hands to the SPMC. FF-A owns 0x60-0xFF (DEN0077
  // §13.1); a firmware that routes fewer answers the rest as an SMC nobody
  // implements: SMC_UNK (SMCCC). TF-A 2.12.1 routes 0x60-0x8E (is_ffa_fid,
  // include/services/ffa_svc.h FFA_FNUM_MAX_VALUE), so FFA_MEM_RECLAIM2 (0x91)
  // is SMC_UNK there.
  uint32_t max_fnum = 0xff;
};

struct Transaction {
  bool live = false;
  bool complete = false;
  // The constituents are in ascending address order and disjoint (record()
  // found them so): page_index() finds a page's constituent by binary search.
  // (Here, in what was padding: the state-bytes comparisons see no new padding.)
  bool ascending = false;
  uint64_t handle = 0;
  MemKind kind = MemKind::kNone;
  uint16_t sender = 0;
  uint16_t attributes = 0;
  uint32_t flags = 0;
  uint64_t tag = 0;
  uint32_t n_receivers = 0;
  uint16_t recv_id[kMaxReceivers] = {};
  uint8_t recv_perms[kMaxReceivers] = {};
  bool retrieved[kMaxReceivers] = {};
  uint32_t n_ranges = 0;
  Constituent ranges[kMaxRanges];
  uint32_t total_pages = 0;
  uint32_t reclaimed_count = 0;
  // FNV-1a-64 of the constituents, n_ranges x (u64 address, u32 pages), set
  // with them by Spmc::record() (they never change after): what the state
  // digest holds of them (digest.h), so that a transaction of thousands of
  // constituents is not hashed again at every digest.
  uint64_t ranges_digest = 0;
  uint64_t reclaimed[kMaxTxPages / 64] = {};
  // Reassembly of an incomplete (fragmented) send.
  uint32_t total_len = 0;
  uint32_t received = 0;

  bool page_reclaimed(uint32_t i) const { return reclaimed[i / 64] >> (i % 64) & 1; }
  void mark_reclaimed(uint32_t i) { reclaimed[i / 64] |= 1ull << (i % 64); }
  bool any_retrieved() const;
  // The constituent holding the 4K page at pa (the first naming it), or null.
  const Constituent* constituent_of(uint64_t pa) const;
  // Index of the 4K page at pa among the transaction's pages (constituent
  // order), or -1.
  int64_t page_index(uint64_t pa) const;
};

// Copies a transaction's fields and its first n constituents (at most
// kMaxRanges).
inline void copy_transaction(Transaction& dst, const Transaction& src, uint32_t n) {
  static_assert(std::is_trivially_copyable_v<Transaction> && std::is_standard_layout_v<Transaction>);
  constexpr size_t head = offsetof(Transaction, ranges), tail = offsetof(Transaction, total_pages);
  if (n > kMaxRanges) n = kMaxRanges;
  std::memcpy(static_cast<void*>(&dst), &src, head);
  std::memcpy(dst.ranges, src.ranges, n * sizeof(Constituent));
  std::memcpy(reinterpret_cast<char*>(&dst) + tail, reinterpret_cast<const char*>(&src) + tail,
              sizeof(Transaction) - tail);
}

// Copies what a transaction holds: its fields and its first n_ranges
// constituents (the entries past n_ranges are never read). A whole copy is
// 42 KiB, made several times per relayed call otherwise. Being the only
// writer of a slot's constituents, it bounds what Spmc::restore copies back
// (ranges_hwm_): the entries past that are still the snapshot's, byte for byte.
inline void copy_transaction(Transaction& dst, const Transaction& src) { copy_transaction(dst, src, src.n_ranges); }

// The Normal world's side of the SPMC: its mailbox pair, the exchanges in
// flight through it, the next handle and the armed fault.
struct SpmcSession {
  uint32_t ns_version = kVersion10;  // negotiated with FFA_VERSION
  bool mapped = false;
  uint64_t tx_pa = 0, rx_pa = 0, mbox_bytes = 0;
  bool rx_full = false;  // the Normal world owns RX (data waiting for RX_RELEASE)
  uint64_t next_handle = kHandleBase | 1;
  // In-flight fragmented send.
  bool sending = false;
  uint64_t send_handle = 0;
  // In-flight fragmented retrieve response.
  bool resp_active = false;
  uint64_t resp_handle = 0;
  uint32_t resp_len = 0, resp_sent = 0;
  Fault fault = Fault::kNone;
  uint64_t fault_value = 0;
  // HARNESS:EL3 on the reclaim path: chunks of the response in flight sent so
  // far (0: only the RETRIEVE_RESP), the chunk from which FRAG_TX stalls (0:
  // never), and the largest chunk (MAX_FRAG; 0: a mailbox).
  uint32_t resp_chunk = 0, resp_stall_from = 0;
  uint32_t max_frag = 0;
};

// A transaction table seen with one slot replaced (what a decided but not yet
// applied answer leaves): slot < 0 is the table as it is.
struct TableOverlay {
  int32_t slot = -1;
  const Transaction* tx = nullptr;
};

// What one SMC does: the registers it answers, the session after it, the one
// transaction it changes, and what it writes into memory.
struct SpmcAnswer {
  uint64_t out[kNumRegs] = {};
  SpmcSession after;
  // The transaction the call changes (slot < 0: none) and its value after
  // (live == false: freed).
  int32_t slot = -1;
  Transaction tx;
  bool zero_released = false;  // zero the 4K pages the call takes back from it
  // TX [0, send_len) is copied into the reassembly buffer at send_from.
  uint32_t send_from = 0, send_len = 0;
  // The retrieve response of transaction `respond` is built (with constituent
  // 0 moved to bogus_address if bogus) ...
  int32_t respond = -1;
  Layout respond_layout = Layout::kV12;
  bool bogus = false;
  uint64_t bogus_address = 0;
  // ... with one field of it a lie (HARNESS:EL3: kResp*, kNone: none) ...
  Fault lie = Fault::kNone;
  uint64_t lie_value = 0;
  // ... and response[rx_from, rx_from + rx_len) written into RX.
  bool rx_chunk = false;
  uint32_t rx_from = 0, rx_len = 0;
  // FFA_PARTITION_INFO_GET: n_partitions descriptors of partition_size bytes into RX.
  bool rx_partitions = false;
  uint32_t n_partitions = 0, partition_size = 0;
  uint16_t partitions[kMaxSps] = {};
  // A send's descriptor: what else an SPMC may answer where the
  // specification leaves it a choice (DescLeeway; SPEC.md DESC:EP-MEM-SIZE,
  // DESC:ATTRS, DESC:FLAGS). The answer itself is this model's choice.
  DescLeeway leeway;

  void reset(const SpmcSession& s);
};

class Spmc {
 public:
  // phys: the physical memory the SPMC reads descriptors from and writes RX
  // into, starting at phys_base.
  void reset(const SpmcConfig& config, std::span<uint8_t> phys, uint64_t phys_base);
  // Makes this SPMC byte for byte the snap it was copied from (snap = *this,
  // then mark_clean() on this), copying only the slots and buffer bytes
  // changed since: the per-scenario restore of the EL2 target and the model.
  void mark_clean() {
    dirty_slots_ = 0, buf_hwm_ = 0, resp_hwm_ = 0;
    for (uint32_t& n : ranges_hwm_) n = 0;
  }
  void restore(const Spmc& snap);
  // Every byte of this SPMC's state (tests: restore() is exact).
  std::vector<uint8_t> bytes() const;
  // Points the model at another copy of the same physical memory.
  void rebind(std::span<uint8_t> phys) { phys_ = phys; }
  // Where the SPMC's writes to memory are marked (none: not marked). Not
  // state: restore() and the digest leave it alone.
  void set_dirty(DirtyPages* d) { dirty_ = d; }
  // An SMC from the Normal world (the hypervisor / host, endpoint 0).
  void smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs], Hits* hits = nullptr);
  // What that SMC would do, changing nothing: tx is what the caller's TX
  // buffer holds (the bytes the call may read), s the session to answer in
  // (session(), or what earlier answers not yet applied left).
  void answer(const uint64_t in[kNumRegs], std::span<const uint8_t> tx, const SpmcSession& s, SpmcAnswer& ans,
              Hits& hits) const;
  // Makes an answer so; tx as given to answer().
  void apply(const SpmcAnswer& ans, std::span<const uint8_t> tx);
  // As the secure partition sp: retrieve / relinquish the memory of handle.
  void sp_retrieve(uint64_t handle, uint16_t sp, uint64_t out[kNumRegs], Hits* hits = nullptr);
  void sp_relinquish(uint64_t handle, uint16_t sp, uint64_t out[kNumRegs], Hits* hits = nullptr);
  void answer_sp(bool retrieve, uint64_t handle, uint16_t sp, SpmcAnswer& ans) const;
  void arm(Fault f, uint64_t value) {
    if (f == Fault::kMaxFrag) {  // a setting, not a one-shot lie
      session_.max_frag = value > 0xffffffffu ? 0 : static_cast<uint32_t>(value);
      return;
    }
    session_.fault = f;
    session_.fault_value = value;
  }
  Fault armed() const { return session_.fault; }
  // PROFILE:PERMISSIVE-EL3: from here on the SPMC accepts, in a send's
  // descriptor, what a Relayer must refuse on its own: a sender that is not
  // the caller, overlapping constituents, pages a live transaction holds, an
  // endpoint count of 0 (read as one endpoint) and a v1.1+ endpoint array
  // offset inside the header (parse_region's lenient reading).
  void set_permissive(bool on) { permissive_ = on; }
  // SPMC:NS-TRUST: while on, answer() leaves to the hypervisor what only it
  // can check of a Normal-world send: that the sender is one of its endpoints
  // (any Normal-world ID, bit 15 clear, is taken; the hypervisor reclaims for
  // it) and owns the pages (Normal-world memory, no overlap, no page a live
  // transaction holds). Not state: the spmc target's
  // model turns it on for one answer() to list that reply too.
  void set_ns_trust(bool on) { ns_trust_ = on; }
  bool permissive() const { return permissive_; }

  // The FF-A error a complete send descriptor would get (0 if none), without
  // changing anything. desc is the whole descriptor. leeway (if given) gets
  // the other answers the specification allows (DescLeeway).
  int32_t check_send(MemKind kind, std::span<const uint8_t> desc, Hits* hits, DescLeeway* leeway = nullptr) const;
  // The retrieve response describing t's pages not yet reclaimed (in layout
  // l; constituent 0 at bogus_address if bogus; one field a lie if lie is a
  // kResp* fault) written into out; its length.
  uint32_t build_response(const Transaction& t, Layout l, bool bogus, uint64_t bogus_address,
                          std::span<uint8_t> out, Fault lie = Fault::kNone, uint64_t lie_value = 0) const;
  // The response of the retrieve exchange in flight (what FFA_MEM_FRAG_RX sends).
  std::span<const uint8_t> response() const { return {resp_, kMaxDescBytes}; }
  // The Normal world's TX buffer as last mapped (empty if not in memory).
  std::span<const uint8_t> tx_window() const;
  // Memory the SPMC sees, or nullptr outside it.
  const uint8_t* phys(uint64_t pa, uint64_t len) const;

  const Transaction* find(uint64_t handle, TableOverlay o = {}) const;
  // The transaction (and any exchange in flight) named from by handle to
  // instead: the handle another SPMC gave the same transaction (the spmc
  // target's model takes the handle the implementation under test chose).
  // False if no live transaction has handle from.
  bool rename_handle(uint64_t from, uint64_t to);
  const Transaction& slot(uint32_t i) const { return tx_[i]; }
  int32_t slot_of(const Transaction* t) const { return static_cast<int32_t>(t - tx_); }
  // Whether a live transaction holds the 4K page at pa (not yet reclaimed).
  bool page_held(uint64_t pa, TableOverlay o = {}) const;
  const SpmcSession& session() const { return session_; }
  uint32_t ns_version() const { return session_.ns_version; }
  const SpmcConfig& config() const { return cfg_; }
  bool rx_full() const { return session_.rx_full; }
  // Feeds the transaction table into h (digest.h defines the record).
  void digest(Fnv1a& h, TableOverlay o = {}) const;

 private:
  struct Reply;
  uint8_t* phys_mut(uint64_t pa, uint64_t len);
  bool known_sp(uint16_t id) const;
  bool is_ns_memory(uint64_t pa, uint64_t len) const;
  int32_t free_slot() const;
  void new_transaction(Reply& r, int32_t slot, MemKind kind, uint32_t total_len) const;
  void record(Transaction& t, std::span<const uint8_t> desc, Layout l) const;
  // parse_region of a sent descriptor, lenient when permissive_ (and then a
  // pass of PROFILE:PERMISSIVE-EL3 into h if the lenient reading changed the answer).
  DescError parse_sent(std::span<const uint8_t> frag, uint32_t total, Layout l, MemRegion* r, Hits* h,
                       DescLeeway* leeway = nullptr) const;

  void version(Reply& r) const;
  void features(Reply& r) const;
  void partition_info_get(Reply& r) const;
  void rxtx_map(Reply& r) const;
  void rxtx_unmap(Reply& r) const;
  void rx_release(Reply& r) const;
  void mem_send(MemKind kind, Reply& r) const;
  void start_send(MemKind kind, uint32_t total, std::span<const uint8_t> frag, Reply& r) const;
  void frag_tx(Reply& r) const;
  void lie(Reply& r) const;  // HARNESS:EL3 send-path reply faults
  void frag_rx(Reply& r) const;
  void retrieve_req(Reply& r) const;
  void retrieve_chunk(Reply& r, bool first) const;
  void reclaim(Reply& r) const;
  void reclaim2(Reply& r) const;
  int32_t reclaim2_refusal(const Reclaim2Args& args, std::span<const uint8_t> tx, const Transaction& t,
                           const Reclaim2Checks& check, Hits& h) const;

  SpmcConfig cfg_;
  bool permissive_ = false;
  bool ns_trust_ = false;  // not state (set_ns_trust)
  std::span<uint8_t> phys_;
  DirtyPages* dirty_ = nullptr;
  uint8_t* locate(uint64_t pa, uint64_t len) const;
  uint64_t phys_base_ = 0;
  SpmcSession session_;
  Transaction tx_[kMaxTransactions];
  uint8_t buf_[kMaxDescBytes] = {};   // reassembly of the fragmented send in flight
  uint8_t resp_[kMaxDescBytes] = {};  // the retrieve response in flight
  // What changed since mark_clean(): slots (bit i: tx_[i]; of its
  // constituents only tx_[i].ranges[0, ranges_hwm_[i]), copy_transaction()
  // writing no more), buf_[0, buf_hwm_), resp_[0, resp_hwm_).
  uint32_t dirty_slots_ = 0;
  uint32_t ranges_hwm_[kMaxTransactions] = {};
  uint32_t buf_hwm_ = 0;
  uint32_t resp_hwm_ = 0;
};

// Result frames (x0..x17), shared with the proxy model.
void set_error(uint64_t out[], int32_t code);
void set_success(uint64_t out[], uint64_t w2 = 0, uint64_t w3 = 0);
inline bool is_error(const uint64_t out[]) { return fid_of(out) == kFnError; }
inline int32_t error_code(const uint64_t out[]) { return static_cast<int32_t>(w32(out[2])); }
inline bool is_success(const uint64_t out[]) { return fid_of(out) == kFnSuccess32 || out[0] == kFnSuccess64; }
// The memory-management calls (function numbers 0x71-0x7B and RECLAIM2), the
// ones el3_misbehave's faults apply to.
bool is_mem_fid(uint64_t fid);
// HARNESS:EL3 faults 20-24 (EL3's reply to a SHARE/LEND/FRAG_TX lies; what the
// call did at EL3 stays): rewrites out if fault f applies to it; whether it did.
// Also the SMC-boundary wrapper of a real EL3 (targets/spmc/tfa_el3.h).
bool lie_about_send(Fault f, uint64_t value, uint64_t out[]);

}  // namespace kconform::ffa
