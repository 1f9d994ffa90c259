// What the proxy model concludes about one host call, the FF-A counterpart of
// the guest_memfd model's Guards: every allowed outcome (each tagged with its
// rule), the rules evaluated with a note, and the effect the call has when it
// takes effect. A call may have two variants (SPEC.md allows two behaviours
// with different states, e.g. MEM:FRAGMENT's eager or lazy sharing); each has
// its own effect, and each changed outcome names the variant it belongs to.
//
// The checks (proxy_*.cc) read a const World and write only a Plan. What EL3
// answers to the proxy's calls is asked of the SPMC model without changing it
// (Spmc::answer), so the plan also carries what those calls would leave at
// EL3: the session, the one transaction they change, the hypervisor's RX.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "models/ffa/proxy.h"

namespace kconform::ffa {

inline constexpr uint32_t kMaxAlts = 64;      // outcomes one variant lists (more are dropped)
inline constexpr uint32_t kMaxVariants = 3;  // e.g. a relayed lie of EL3's, or refused two ways
inline constexpr uint32_t kMaxRelays = 40;    // calls to EL3 in one host call (a reclaim of a 64 KiB descriptor in 4K chunks: 35)
inline constexpr int8_t kUnchanged = -1;

// One allowed result of a host call: registers whose bit is in mask must
// equal regs; the state is the one before the call (effect == kUnchanged) or
// the one variant `effect` leaves.
struct Alt {
  uint64_t regs[kCallRegs] = {};
  uint8_t mask = 0;
  RuleId rule = 0;
  int8_t effect = kUnchanged;
};

// A call the proxy makes to EL3, and what it first writes into its own TX.
struct Relay {
  enum class Tx : uint8_t {
    kNone,
    kHostTx,           // the first tx_len bytes of the host's TX (PKVM:MBOX)
    kRetrieveRequest,  // a hypervisor retrieve request for handle (SPMC:HYP-RETRIEVE)
  };
  Tx tx = Tx::kNone;
  uint64_t tx_len = 0;
  uint64_t handle = 0;
  Layout layout = Layout::kV12;
  uint64_t in[kNumRegs] = {};

  // The call x0, x1, ... (the rest zero), writing nothing into TX first.
  static Relay call(std::initializer_list<uint64_t> regs) {
    Relay r;
    uint32_t i = 0;
    for (uint64_t x : regs) r.in[i++] = x;
    return r;
  }
  // The same after copying the first len bytes of the host's TX.
  static Relay call_with_host_tx(uint64_t len, std::initializer_list<uint64_t> regs) {
    Relay r = call(regs);
    r.tx = Tx::kHostTx;
    r.tx_len = len;
    return r;
  }
};

// What one variant of a call changes: the calls to EL3, in order, then the
// proxy's own state (each part only if set).
struct Effect {
  Relay relays[kMaxRelays];
  uint32_t n_relays = 0;
  bool views_set = false;
  uint8_t views[kMaxHostPages] = {};  // host stage-2 after the call
  bool mbox_set = false;
  HostMailbox mbox;
  bool version_set = false;
  uint32_t host_version = 0;
  // The fragmented send after the call; frag_added are its new constituents,
  // stored from frag.n - n_added on.
  bool frag_set = false;
  FragSend frag;
  uint32_t n_added = 0;
  Constituent frag_added[kMaxRanges];
};

// What the proxy's calls during one host call leave at EL3, predicted.
struct El3Probe {
  SpmcSession session;
  TableOverlay overlay;  // the one transaction they change
  Transaction changed;
  SpmcAnswer answer;
  // The hypervisor's RX buffer as the calls leave it (rx_written: differs
  // from memory), and a retrieve response one of them started.
  bool rx_written = false;
  uint32_t rx_valid = 0;  // rx[0, rx_valid) holds the buffer; past it reads 0
  uint8_t rx[kMaxDescBytes] = {};
  bool response_built = false;
  uint8_t response[kMaxDescBytes] = {};
};

class Plan {
 public:
  // Starts the plan of a call on w.
  void begin(const World& w);

  // --- Outcomes (as the SPEC.md clause allows them) ---
  // FFA_ERROR(code), w2 zero- or sign-extended (CALL:ERROR).
  void error(RuleId r, int32_t code, bool unchanged = true);
  // Rule r is broken: each code is allowed, the state unchanged.
  void fail(RuleId r, std::initializer_list<int32_t> codes);
  // Every FF-A error code, where only "some error" is required.
  void any_error(RuleId r, bool unchanged);
  // FFA_SUCCESS (32 or 64) with w2/w3 as given where mask says.
  void success(RuleId r, uint8_t mask, uint64_t w2 = 0, uint64_t w3 = 0, bool unchanged = false);
  void exact(RuleId r, const uint64_t regs[kCallRegs], uint8_t mask, bool unchanged);
  // Any registers, the state unchanged (calls whose result is not judged).
  void any(RuleId r);
  Hits hits;
  bool failed = false;  // some guard demanded an error

  // --- Effects ---
  // The effect of the variant being planned.
  Effect& effect() { return effects_[cur_]; }
  // A second variant from here on: a copy of the current effect, planned next.
  uint32_t fork();
  void select(uint32_t v);
  // Host stage-2 as the current variant leaves it so far, and changes to it.
  PageView view(int64_t host_page) const;
  void set_pages(uint64_t pa, uint64_t len, PageView v);
  void set_ranges(const Constituent* rs, uint32_t n, PageView v);
  void set_page(int64_t host_page, PageView v);
  // The host's mailbox, the negotiated version and the fragmented send as the
  // current variant leaves them (changed through these).
  HostMailbox& mailbox();
  void fix_version(uint32_t host_version);
  FragSend& frag();
  // Adds constituents to the fragmented send (after frag().n is set).
  void add_frag_ranges(const Constituent* rs, uint32_t n);

  // --- EL3 ---
  // The proxy calls EL3 (recorded in the current effect): out is what EL3
  // answers, predicted on the const SPMC; hits gets its rules if given.
  void relay(const Relay& r, uint64_t out[kNumRegs], Hits* hits);
  // EL3 as the relays so far leave it.
  Fault el3_armed() const { return probe_.session.fault; }
  const Transaction* el3_find(uint64_t handle) const;
  bool el3_page_held(uint64_t pa) const;
  TableOverlay el3_overlay() const { return probe_.overlay; }
  // Reads the hypervisor's RX buffer as the relays so far leave it.
  void read_hyp_rx(uint8_t* dst, uint32_t len) const;

  // --- Reading the plan ---
  uint32_t n_alts() const { return n_alts_; }
  const Alt& alt(uint32_t i) const { return alts_[i]; }
  uint32_t n_effects() const { return n_effects_; }
  const Effect& effect(uint32_t v) const { return effects_[v]; }

  // Working buffers of the checks.
  uint8_t desc[kMaxDescBytes] = {};
  Constituent ranges[kMaxRanges];

 private:
  void add(const Alt& a);

  const World* w_ = nullptr;
  Alt alts_[kMaxAlts * kMaxVariants];
  uint32_t n_alts_ = 0;
  uint32_t listed_[kMaxVariants] = {};  // outcomes each variant listed
  Effect effects_[kMaxVariants];
  uint32_t n_effects_ = 1, cur_ = 0;
  El3Probe probe_;
};

}  // namespace kconform::ffa
