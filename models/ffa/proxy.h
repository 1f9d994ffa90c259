// The proxy model (the EL2 side; the oracle for pKVM's FF-A handler): for each
// host call, what a correct pKVM must do — reject (which error), relay to the
// SPMC, or validate and update host stage-2 (per host PAGE_SIZE page) and roll
// back on EL3 failure. Where the sources leave the outcome open it returns
// every allowed outcome, each tagged with its rule (SPEC.md PKVM:*, R2:*).
// No exceptions, RTTI or allocation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "models/ffa/digest.h"
#include "models/ffa/hits.h"
#include "models/ffa/spmc.h"

namespace kconform::ffa {

inline constexpr uint32_t kMaxHostPages = 4096;
inline constexpr uint32_t kMaxAlts = 64;

struct ProxyProfile {
  uint64_t page_size = 4096;       // host PAGE_SIZE: 4K, 16K or 64K
  bool reclaim2 = false;           // the handler implements FFA_MEM_RECLAIM2
  uint64_t phys_base = 0x80000000;  // RAM: host pages, then the hypervisor's
  uint64_t host_pages = 64;
  uint64_t hyp_pages = 4;          // the hypervisor's (its mailboxes, descriptor buffer)
  uint64_t mbox_pages = 1;         // host pages per mailbox (KVM_FFA_MBOX_NR_PAGES)
  uint32_t version = kVersion12;   // FF-A version the proxy implements
  SpmcConfig spmc;                 // ns_base/ns_size are set by World::reset

  uint64_t mbox_bytes() const { return mbox_pages * page_size; }
  uint64_t ram_bytes() const { return (host_pages + hyp_pages) * page_size; }
};

struct ProxyState {
  uint8_t view[kMaxHostPages] = {};  // PageView per host page
  bool mapped = false;
  uint64_t tx_pa = 0, rx_pa = 0;
  bool rx_held = false;  // the host owns its RX buffer (must FFA_RX_RELEASE)
  bool version_fixed = false;
  uint32_t host_version = 0;
  // In-flight fragmented send.
  bool frag_active = false;
  bool frag_eager = true;  // pages shared as each fragment arrives (else at the end)
  uint64_t frag_handle = 0;
  MemKind frag_kind = MemKind::kNone;
  uint32_t frag_total = 0, frag_received = 0;
  uint32_t frag_n = 0;
  Constituent frag_ranges[kMaxRanges];
  uint8_t scratch[kMaxDescBytes] = {};
};

// Everything a host call may change. phys is owned by the caller.
struct World {
  const ProxyProfile* profile = nullptr;
  ProxyState proxy;
  Spmc spmc;
  std::span<uint8_t> phys;

  void reset(const ProxyProfile& p, std::span<uint8_t> mem);
  void rebind(std::span<uint8_t> mem) {
    phys = mem;
    spmc.rebind(mem);
  }
  uint64_t digest() const;
  uint64_t hyp_tx_pa() const;
  uint64_t hyp_rx_pa() const;
  uint8_t* at(uint64_t pa, uint64_t len);
};

// One allowed result of a host call: registers whose bit is in mask must
// equal regs; unchanged: the state is the one before the call, otherwise the
// one World holds after proxy_call.
struct Alt {
  uint64_t regs[8] = {};
  uint8_t mask = 0;
  RuleId rule = 0;
  bool unchanged = true;
};

struct Step {
  Alt alts[kMaxAlts];
  uint32_t n_alts = 0;
  uint32_t n_variants = 1;  // how many variants (alternative effects) the call has
  Hits hits;
  bool failed = false;      // some guard demanded an error

  void add(const Alt& a) {
    if (n_alts < kMaxAlts) alts[n_alts++] = a;
  }
  // FFA_ERROR(code), both extensions of w2.
  void error(RuleId r, int32_t code, bool unchanged = true);
  // A guard on rule r failed: each code is allowed (state unchanged).
  void fail(RuleId r, std::initializer_list<int32_t> codes);
  // Every FF-A error code, for outcomes where only "some error" is required.
  void any_error(RuleId r, bool unchanged);
  // FFA_SUCCESS (32 or 64) with w2/w3 as given where mask says.
  void success(RuleId r, uint8_t mask, uint64_t w2 = 0, uint64_t w3 = 0, bool unchanged = false);
  void exact(RuleId r, const uint64_t regs[8], uint8_t mask, bool unchanged);
};

// Runs host call in (x0..x7) on w as variant `variant` (0 <= variant <
// step->n_variants, which variant 0 sets) and lists the allowed outcomes.
void proxy_call(World& w, const uint64_t in[8], uint32_t variant, Step* step);

}  // namespace kconform::ffa
