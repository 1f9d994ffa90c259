// The EL2 target for Abi::kFfa scenarios: each host call goes through the real
// kvm_host_ffa_handler() of the tree's ffa.c (el2_handler.h); its EL3 is the
// SPMC model (models/ffa/spmc.h) bound to the handler's SMC conduit; its host
// stage-2 is the page tracker. Ops follow the harness conventions of
// models/ffa/SPEC.md ("Harness conventions"), outcomes the model's
// "Outcomes and the state digest". After every op it checks three
// model-independent invariants (InvariantSource; see ffa_target.cc).
//
// ffa.c's state is global: one El2FfaTarget may exist at a time. Scenarios
// start from a snapshot taken right after hyp_ffa_init() (in-process, no fork).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "targets/invariants.h"
#include "targets/real_el3.h"
#include "models/ffa/proxy.h"
#include "models/ffa/scenario_ops.h"
#include "models/ffa/spmc.h"
#include "targets/el2/el2_handler.h"
#include "targets/target.h"

namespace kconform::el2 {

class El2FfaTarget final : public Target, public InvariantSource {
 public:
  // Initialises the handler (el2_init) with the SPMC model as EL3, or with el3
  // (a real SPMC, targets/real_el3.h: `--el3 tf-a`). On failure ok() is false
  // and error() says why.
  explicit El2FfaTarget(std::unique_ptr<RealEl3> el3 = nullptr);
  ~El2FfaTarget() override;
  El2FfaTarget(const El2FfaTarget&) = delete;
  El2FfaTarget& operator=(const El2FfaTarget&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // The model profile of this build: host PAGE_SIZE, RECLAIM2 handled or not,
  // mailbox and hypervisor pages, the FF-A version ffa.c asked EL3 for at init.
  const ::kconform::ffa::ProxyProfile& profile() const { return profile_; }

  const TargetIdentity& identity() const override { return identity_; }
  void begin(const Scenario& s) override;
  Outcome exec(const Scenario& s, size_t i) override;
  void end() override {}

  std::span<const InvariantBreak> invariant_breaks() const override { return breaks_; }
  // Tests: I2 checked after every op, also when the state digest says nothing
  // it reads changed (to show that skip changes no verdict).
  void set_check_i2_always(bool on) { check_i2_always_ = on; }
  // Tests: the state digest hashed after every op, also when nothing it
  // covers changed (to show reusing it changes no record).
  void set_digest_always(bool on) { digest_always_ = on; }

  // For tests: the SPMC model (EL3 unless a real one was given), the real
  // EL3 (or nullptr) and the digest of the current state.
  const ::kconform::ffa::Spmc& spmc() const { return *spmc_; }
  RealEl3* real_el3() const { return el3_.get(); }
  uint64_t state_digest() const;
  // Every byte begin() restores: el2_state_bytes() and EL3's (Spmc::bytes,
  // RealEl3::state_bytes).
  std::vector<uint8_t> state_bytes() const;

 private:
  struct Snapshot;
  void el3_smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs]);
  void real_el3_smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs]);
  uint64_t el3_digest() const;  // EL3's part of the state (I1)
  // state_digest() and el3_digest() as last hashed when nothing they cover
  // changed since (no SMC reached the modelled EL3, no borrower's op, no
  // stage-2 page changed): a harness op, a call ffa.c refuses itself.
  uint64_t digest_now();
  uint64_t spmc_now();
  void forget_digests() { digest_known_ = spmc_known_ = false; }
  void check_real_handle(uint64_t fid, const uint64_t out[kNumRegs]);
  uint64_t handle(uint64_t slot) const;
  void host_regs(const Op& op, uint64_t in[kNumRegs]) const;
  uint64_t tx_op(const Scenario& s, const Op& op);
  uint64_t write_tx(uint64_t offset, const uint8_t* data, uint64_t n) const;
  std::span<const uint8_t> views() const;  // host pages, digest encoding
  // state: the op's state digest (I2 is skipped when it is the last checked).
  void check_invariants(uint64_t fid, bool host_call, uint64_t pre_spmc, const uint64_t out[kNumRegs],
                        uint64_t state);

  std::string error_;
  ::kconform::ffa::ProxyProfile profile_;
  TargetIdentity identity_;
  std::unique_ptr<::kconform::ffa::Spmc> spmc_;
  std::unique_ptr<::kconform::ffa::Spmc> spmc_snap_;
  std::unique_ptr<RealEl3> el3_;  // a real EL3 instead of spmc_ (`--el3`)
  bool el3_fatal_ = false;        // the real EL3 stopped during this op
  // Per scenario (HARNESS:SLOTS, HARNESS:TX).
  std::vector<uint64_t> handles_;
  uint64_t last_desc_len_ = 0;
  ::kconform::ffa::TxWrite tx_;  // tx_op's scratch (kept for its capacity)
  uint64_t tx_window_ = 0;
  bool tx_known_ = false;
  // Per call: what EL3 did (PKVM:ATOMIC's "EL3 itself failed mid-way").
  bool el3_failed_ = false;
  bool fault_fired_ = false;  // the host call consumed an armed el3_misbehave fault
  uint32_t init_version_ = 0;  // FFA_VERSION w1 ffa.c sent EL3 at init
  std::vector<InvariantBreak> breaks_;
  // Pages mismatched between stage-2 and EL3 after the previous op: an
  // invariant is reported by the op that breaks it, not by every later op.
  std::vector<uint8_t> mismatch_;
  uint64_t checked_state_ = 0;  // the state digest after the last op I2 checked
  bool checked_state_known_ = false;  // (this scenario)
  bool check_i2_always_ = false;
  bool digest_always_ = false;
  bool digest_known_ = false, spmc_known_ = false;  // (modelled EL3 only)
  uint64_t digest_ = 0, spmc_digest_ = 0;
  std::vector<uint8_t> held_;  // check_invariants' scratch: host pages EL3 holds
  std::vector<uint8_t> seen_;  // and 4K pages already decided (all zero between calls)
  std::vector<PageTracker::Changed> changed_;  // I1's scratch: pages the op changed, sorted
  std::vector<uint64_t> foreign_handles_;  // transactions reported holding non-host memory
  bool hyp_reported_ = false;
};

// Opens the target: nullptr and *error when the handler cannot be initialised.
std::unique_ptr<El2FfaTarget> open_el2_ffa_target(std::string* error, std::unique_ptr<RealEl3> el3 = nullptr);

}  // namespace kconform::el2
