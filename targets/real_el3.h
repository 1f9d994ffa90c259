// A real EL3 behind the el2 target (`--target el2 --el3 tf-a`): an SPMC
// implementation that pKVM's ffa.c calls through its SMC conduit instead of
// the FF-A model's SPMC. The el2 target (targets/el2) uses this interface; an
// implementation (targets/spmc/tfa_el3.h: TF-A's EL3 SPMC) is handed to it by
// the runner's target family, so neither target folder includes the other.
//
// Calls come from the Normal world (the hypervisor); x0-x7 go in and come
// back (registers the SPMC does not write keep the caller's values). The
// harness's EL3 faults (HARNESS:EL3, Fault in harness/scenario/ffa_abi.h)
// are injected by the implementation at the SMC boundary, where it can.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "targets/invariants.h"

namespace kconform {

// What the model's SPMC must be configured as to be this one (SpmcConfig).
struct RealEl3Profile {
  uint32_t version = 0;  // what FFA_VERSION answers
  uint16_t sp_ids[4] = {};
  uint32_t n_sps = 0;
  bool reclaim2 = false;            // implements FFA_MEM_RECLAIM2
  bool donate = false;              // implements FFA_MEM_DONATE
  bool one_send_in_flight = false;  // a second send while one is in flight is BUSY
  uint32_t max_fnum = 0xff;         // SPMC:ROUTED: higher FF-A function numbers are SMC_UNK
};

// One live transaction, for the el2 target's invariants: its constituents
// (FF-A 4K pages) held while it is complete.
struct RealEl3Tx {
  uint64_t handle = 0;
  bool complete = false;
  std::vector<std::pair<uint64_t, uint32_t>> ranges;  // address, 4K pages
};

class RealEl3 {
 public:
  virtual ~RealEl3() = default;
  // e.g. "tf-a-2.12.1": the release field of the target's identity.
  virtual std::string release() const = 0;
  virtual RealEl3Profile profile() const = 0;
  // Where a buffer at physical address pa goes when not all of it is in the
  // caller's RAM (an access there ends the call as fatal).
  virtual uint64_t nomem_va(uint64_t pa) const = 0;
  // Takes the state every scenario starts from (after the hypervisor's
  // initialisation), and goes back to it.
  virtual void save_start() = 0;
  virtual void restore_start() = 0;
  // An SMC from the Normal world, x0-x7, through any armed fault. False: EL3
  // stopped (panic, failed assert, external abort); breaks: what it left
  // broken (e.g. a lock held).
  virtual bool smc(const uint64_t in[8], uint64_t out[8], std::vector<InvariantBreak>* breaks) = 0;
  // HARNESS:SP: the borrower's retrieve (+ RX release) or relinquish. 0, an
  // FF-A error code, or kFatal; out: the SPMC's last reply (x0-x7).
  static constexpr int kFatal = -1000;
  virtual int sp_op(bool retrieve, uint64_t handle, uint16_t sp, uint64_t out[8],
                    std::vector<InvariantBreak>* breaks) = 0;
  // HARNESS:EL3: arms fault (ffa::Fault's value) for the next call it applies
  // to; armed(): the one still armed (0: none).
  virtual void arm(uint8_t fault, uint64_t value) = 0;
  virtual uint8_t armed() const = 0;
  // The live transactions now, and the table's digest in the SPMC:TABLE view
  // (models/ffa/spmc_view.h).
  virtual std::span<const RealEl3Tx> transactions() = 0;
  virtual uint64_t table_digest() = 0;
  // Every byte restore_start() restores (for the exact-restore tests).
  virtual std::vector<uint8_t> state_bytes() const = 0;
};

}  // namespace kconform
