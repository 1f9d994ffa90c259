// The proxy model (the EL2 side; the oracle for pKVM's FF-A handler): for each
// host call, what a correct pKVM must do — reject (which error), relay to the
// SPMC, or validate and update host stage-2 (per host PAGE_SIZE page) and roll
// back on EL3 failure. Where the sources leave the outcome open it returns
// every allowed outcome, each tagged with its rule (SPEC.md PKVM:*, R2:*).
//
// One way: expect_call() checks a call against a const World and writes a
// Plan (plan.h): the allowed outcomes, the rules, and for each variant of the
// call the effect it has; apply_effect() makes the effect of the outcome the
// target produced so. No exceptions, RTTI or allocation.
#pragma once

#include <cstdint>
#include <span>

#include "models/ffa/digest.h"
#include "models/ffa/hits.h"
#include "models/ffa/regs.h"
#include "models/ffa/spmc.h"

namespace kconform::ffa {

inline constexpr uint32_t kMaxHostPages = 4096;

struct ProxyProfile {
  uint64_t page_size = 4096;       // host PAGE_SIZE: 4K, 16K or 64K
  bool reclaim2 = false;           // the handler implements FFA_MEM_RECLAIM2
  uint64_t phys_base = 0x80000000;  // RAM: host pages, then the hypervisor's
  uint64_t host_pages = 64;
  uint64_t hyp_pages = 4;          // the hypervisor's (its mailboxes, descriptor buffer)
  uint64_t mbox_pages = 1;         // host pages per mailbox (KVM_FFA_MBOX_NR_PAGES)
  uint32_t version = kVersion12;   // FF-A version the proxy implements
  // PROFILE:DESC-BUF: the proxy's own buffer for EL3's retrieve response (the
  // hypervisor pages besides its two mailboxes; the EL2 target reports it).
  uint64_t desc_buf_bytes = 2 * 4096;
  SpmcConfig spmc;                 // ns_base/ns_size are set by World::reset
  // EL3 is an implementation under test, not the model: the state digest
  // holds its table in the SPMC:TABLE view (SPEC.md DIGEST:TABLE-VIEW) and
  // the handles it allocates are its choice (SPMC:HANDLE-SPEC).
  bool real_el3 = false;
  // The target cannot show its state (a real machine: the host sees neither
  // its stage-2 nor the SPMC's table; qemu-arm64): outcomes are judged by
  // their registers and results alone, and after a violation the model goes
  // on only from a refusal (FF-A: a failed call changes nothing).
  bool state_hidden = false;

  uint64_t mbox_bytes() const { return mbox_pages * page_size; }
  uint64_t ram_bytes() const { return (host_pages + hyp_pages) * page_size; }
};

// The host's mailbox pair as the proxy knows it (PKVM:MBOX, MBOX:*).
struct HostMailbox {
  bool mapped = false;
  uint64_t tx_pa = 0, rx_pa = 0;
  bool rx_held = false;  // the host owns its RX buffer (must FFA_RX_RELEASE)
};

// The fragmented send in flight (MEM:FRAGMENT); its constituents so far are
// ProxyState::frag_ranges[0, n).
struct FragSend {
  bool active = false;
  bool eager = true;  // pages shared as each fragment arrives (else at the end)
  uint64_t handle = 0;
  MemKind kind = MemKind::kNone;
  uint32_t total = 0, received = 0;
  uint32_t n = 0;
};

// What pKVM keeps between calls.
struct ProxyState {
  uint8_t view[kMaxHostPages] = {};  // PageView per host page
  HostMailbox mbox;
  bool version_fixed = false;
  uint32_t host_version = 0;
  FragSend frag;
  Constituent frag_ranges[kMaxRanges];
};

// Everything a host call may change. phys is owned by the caller.
struct World {
  const ProxyProfile* profile = nullptr;
  ProxyState proxy;
  Spmc spmc;
  std::span<uint8_t> phys;
  DirtyPages* dirty = nullptr;  // where writes through at() are marked (not state)

  void reset(const ProxyProfile& p, std::span<uint8_t> mem);
  // The state digest in the profile's mode (state_digest_of), the SPMC's
  // table seen with o's slot replaced.
  uint64_t digest(TableOverlay o = {}) const;
  // The hypervisor's own mailbox pair (the first pages after the host's).
  uint64_t hyp_tx_pa() const;
  uint64_t hyp_rx_pa() const;
  uint8_t* at(uint64_t pa, uint64_t len);
  const uint8_t* at(uint64_t pa, uint64_t len) const;
  // The first len bytes of the host's TX buffer (empty outside memory).
  std::span<const uint8_t> host_tx(uint64_t len) const;
  // Index of the host page holding pa, or -1 outside host memory.
  int64_t host_page(uint64_t pa) const;
  // All of [pa, pa+len) is host memory in view want.
  bool range_is(uint64_t pa, uint64_t len, PageView want) const;
};

// The state digest of host stage-2 (views, one per host page) and the SPMC
// model's table (with o) as p's target computes it: SPEC.md DIGEST
// (state_digest, digest.h), or DIGEST:TABLE-VIEW when p.real_el3
// (state_digest_table_view, spmc_view.h). No allocation.
uint64_t state_digest_of(const ProxyProfile& p, std::span<const uint8_t> views, const Spmc& spmc,
                         TableOverlay o = {});

class Plan;

// Checks host call in (x0..x7) against w, changing nothing: fills plan.
void expect_call(const World& w, const uint64_t in[kCallRegs], Plan& plan);
// The state digest after effect v of plan (expect_call's, on the same w).
uint64_t digest_after(const World& w, const Plan& plan, uint32_t v);
// Makes effect v of plan so: the proxy's calls to EL3, then its own state.
void apply_effect(World& w, const Plan& plan, uint32_t v);

}  // namespace kconform::ffa
