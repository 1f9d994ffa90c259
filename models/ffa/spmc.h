// The SPMC model (the EL3 side): answers an SMC from the Normal world given
// x0..x17. RX/TX mailboxes, a fixed-capacity transaction table keyed by handle
// with per-4K-page reclaim state, fragment reassembly, the memory ABIs incl.
// FFA_MEM_RECLAIM2 (reclaim2_profile.h) and a one-shot misbehaviour knob.
// Deterministic; no exceptions, RTTI or allocation (SPEC.md SPMC:*).
#pragma once

#include <cstdint>
#include <span>

#include "models/ffa/desc.h"
#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/ffa_spec.h"
#include "models/ffa/hits.h"

namespace kconform::ffa {

inline constexpr uint32_t kNumRegs = 18;
inline constexpr uint32_t kMaxTransactions = 16;   // ours: SPMC table size
inline constexpr uint32_t kMaxTxPages = 4096;      // ours: 4K pages one transaction may hold
inline constexpr uint32_t kMaxDescBytes = 8192;    // ours: largest descriptor the SPMC reassembles
inline constexpr uint32_t kMaxSps = 4;
inline constexpr uint64_t kHandleBase = 1ull << 63;  // ours: bit 63 set = allocated by the SPMC

struct SpmcConfig {
  uint32_t version = kVersion12;  // what FFA_VERSION answers
  uint64_t ns_base = 0;           // Normal-world memory the SPMC accepts
  uint64_t ns_size = 0;
  uint16_t sp_ids[kMaxSps] = {0x8001, 0x8002, 0, 0};
  uint32_t n_sps = 2;
  bool reclaim2 = true;           // implements FFA_MEM_RECLAIM2
};

struct Transaction {
  bool live = false;
  bool complete = false;
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
  uint64_t reclaimed[kMaxTxPages / 64] = {};
  // Reassembly of an incomplete (fragmented) send.
  uint32_t total_len = 0;
  uint32_t received = 0;

  bool page_reclaimed(uint32_t i) const { return reclaimed[i / 64] >> (i % 64) & 1; }
  bool any_retrieved() const;
  // Index of the 4K page at pa among the transaction's pages (constituent
  // order), or -1.
  int64_t page_index(uint64_t pa) const;
};

class Spmc {
 public:
  // phys: the physical memory the SPMC reads descriptors from and writes RX
  // into, starting at phys_base.
  void reset(const SpmcConfig& config, std::span<uint8_t> phys, uint64_t phys_base);
  // Points the model at another copy of the same physical memory.
  void rebind(std::span<uint8_t> phys) { phys_ = phys; }
  // An SMC from the Normal world (the hypervisor / host, endpoint 0).
  void smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs], Hits* hits = nullptr);
  // As the secure partition sp: retrieve / relinquish the memory of handle.
  void sp_retrieve(uint64_t handle, uint16_t sp, uint64_t out[kNumRegs], Hits* hits = nullptr);
  void sp_relinquish(uint64_t handle, uint16_t sp, uint64_t out[kNumRegs], Hits* hits = nullptr);
  void arm(Fault f, uint64_t value) {
    fault_ = f;
    fault_value_ = value;
  }
  Fault armed() const { return fault_; }

  // The FF-A error a complete send descriptor would get (0 if none), without
  // changing anything. desc is the whole descriptor.
  int32_t check_send(MemKind kind, std::span<const uint8_t> desc, Hits* hits) const;

  const Transaction* find(uint64_t handle) const;
  const Transaction& slot(uint32_t i) const { return tx_[i]; }
  // Whether a live transaction holds the 4K page at pa (not yet reclaimed).
  bool page_held(uint64_t pa) const;
  uint32_t ns_version() const { return ns_version_; }
  const SpmcConfig& config() const { return cfg_; }
  bool mailbox_mapped() const { return mapped_; }
  uint64_t tx_pa() const { return tx_pa_; }
  uint64_t rx_pa() const { return rx_pa_; }
  uint64_t mailbox_bytes() const { return mbox_bytes_; }
  bool rx_full() const { return rx_full_; }
  uint64_t next_handle() const { return next_handle_; }
  // Feeds the transaction table into h (digest.h defines the record).
  void digest(Fnv1a& h) const;

 private:
  uint8_t* phys(uint64_t pa, uint64_t len);
  const uint8_t* phys(uint64_t pa, uint64_t len) const;
  bool known_sp(uint16_t id) const;
  bool is_ns_memory(uint64_t pa, uint64_t len) const;
  Transaction* find_mut(uint64_t handle);
  Transaction* alloc_tx();

  void version(const uint64_t* in, uint64_t* out);
  void features(const uint64_t* in, uint64_t* out);
  void partition_info_get(const uint64_t* in, uint64_t* out);
  void rxtx_map(const uint64_t* in, uint64_t* out);
  void rxtx_unmap(const uint64_t* in, uint64_t* out);
  void rx_release(const uint64_t* in, uint64_t* out);
  void mem_send(MemKind kind, const uint64_t* in, uint64_t* out, Hits* hits);
  void frag_tx(const uint64_t* in, uint64_t* out, Hits* hits);
  void frag_rx(const uint64_t* in, uint64_t* out);
  void retrieve_req(const uint64_t* in, uint64_t* out, Hits* hits);
  void reclaim(const uint64_t* in, uint64_t* out, Hits* hits);
  void reclaim2(const uint64_t* in, uint64_t* out, Hits* hits);
  // Validates and records a complete descriptor held in buf_ into t.
  int32_t finish_send(Transaction* t, Hits* hits);
  void write_retrieve_chunk(uint64_t* out, bool first);

  SpmcConfig cfg_;
  std::span<uint8_t> phys_;
  uint64_t phys_base_ = 0;
  uint32_t ns_version_ = kVersion10;
  bool mapped_ = false;
  uint64_t tx_pa_ = 0, rx_pa_ = 0, mbox_bytes_ = 0;
  bool rx_full_ = false;  // the Normal world owns RX (data waiting for RX_RELEASE)
  Transaction tx_[kMaxTransactions];
  uint64_t next_handle_ = kHandleBase | 1;
  // In-flight fragmented send.
  bool sending_ = false;
  uint64_t send_handle_ = 0;
  uint8_t buf_[kMaxDescBytes] = {};
  // In-flight fragmented retrieve response.
  bool resp_active_ = false;
  uint64_t resp_handle_ = 0;
  uint32_t resp_len_ = 0, resp_sent_ = 0;
  uint8_t resp_[kMaxDescBytes] = {};
  Constituent scratch_[kMaxRanges];
  Fault fault_ = Fault::kNone;
  uint64_t fault_value_ = 0;
};

// Helpers shared with the proxy.
void set_error(uint64_t out[], int32_t code);
void set_success(uint64_t out[], uint64_t w2 = 0, uint64_t w3 = 0);
inline bool is_error(const uint64_t out[]) { return (out[0] & 0xffffffffu) == kFnError; }
inline int32_t error_code(const uint64_t out[]) { return static_cast<int32_t>(out[2] & 0xffffffffu); }
inline bool is_success(const uint64_t out[]) {
  return (out[0] & 0xffffffffu) == kFnSuccess32 || out[0] == kFnSuccess64;
}
bool is_mem_fid(uint64_t fid);

}  // namespace kconform::ffa
