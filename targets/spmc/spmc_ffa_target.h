// The spmc target: Abi::kFfa scenarios straight into a real SPMC (TF-A's EL3
// SPMC, built by this folder) from the Normal world, judged by the SPMC-side
// model (models/ffa/spmc_model.h). Each host call becomes the Normal world's
// SMC into spmc_smc_handler(); tx_* ops write into the Normal world's TX
// buffer; sp_retrieve/sp_relinquish are the borrower: the one secure
// partition the SPMC is booted with sends FFA_MEM_RETRIEVE_REQ (and
// FFA_RX_RELEASE) or FFA_MEM_RELINQUISH from its own mailbox.
//
// Memory: the scenario's physical addresses are host RAM the target owns.
// The SPMC maps Normal-world buffers PA == VA, so the addresses of
// FFA_RXTX_MAP (x1, x2) are translated to where that RAM is in this process;
// an address outside RAM is translated into a reserved, inaccessible window
// (an SPMC that reads or writes it faults: a crash of the op). Descriptors
// keep the scenario's addresses: the SPMC never dereferences a constituent.
//
// After every op: the handle a new transaction got (SPMC:HANDLE-SPEC,
// FFA.SPMC.HANDLE: bit 63 clear, named by no other transaction of TF-A's
// table) and whether the SPMC left a lock held; the outcome's state
// is the digest of TF-A's transaction table read through its own structures
// (models/ffa/spmc_view.h, SPEC.md SPMC:TABLE).
//
// TF-A's state is global: one SpmcFfaTarget at a time (TF-A is booted once per
// process); every scenario starts from the snapshot taken after the SP mapped
// its mailbox.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/ffa/proxy.h"
#include "models/ffa/scenario_ops.h"
#include "targets/invariants.h"
#include "targets/spmc/tfa_spmc.h"
#include "targets/target.h"

namespace kconform::spmc {

class SpmcFfaTarget final : public Target, public InvariantSource {
 public:
  // page_size: the host PAGE_SIZE the scenarios are written for (4K, 16K, 64K).
  explicit SpmcFfaTarget(uint64_t page_size);
  ~SpmcFfaTarget() override;
  SpmcFfaTarget(const SpmcFfaTarget&) = delete;
  SpmcFfaTarget& operator=(const SpmcFfaTarget&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // RAM and what the model's SPMC is configured as (models/ffa/spmc_model.h).
  const ::kconform::ffa::ProxyProfile& layout() const { return layout_; }

  const TargetIdentity& identity() const override { return identity_; }
  void begin(const Scenario& s) override;
  Outcome exec(const Scenario& s, size_t i) override;
  void end() override {}
  std::span<const InvariantBreak> invariant_breaks() const override { return breaks_; }

 private:
  uint64_t host_va(uint64_t pa, uint64_t len) const;
  uint8_t* ram(uint64_t pa, uint64_t len) const;
  uint64_t tx_op(const Scenario& s, const Op& op);
  Outcome exec_op(const Scenario& s, size_t i);

  std::string error_;
  ::kconform::ffa::ProxyProfile layout_;
  TargetIdentity identity_;
  uint8_t* ram_ = nullptr;    // layout_.ram_bytes() at layout_.phys_base
  TfaSpmc* tfa_ = nullptr;    // the process's SPMC (tfa_spmc.h)
  std::vector<uint8_t> snapshot_;
  std::vector<std::pair<uint64_t, uint64_t>> dirty_;  // RAM ranges written since begin()
  // Per scenario.
  std::vector<uint64_t> handles_;  // HARNESS:SLOTS
  uint64_t last_desc_len_ = 0;
  ::kconform::ffa::TxWrite tx_;  // tx_op's scratch (kept for its capacity)
  uint64_t tx_window_ = 0;
  bool tx_known_ = false;
  uint64_t rx_pa_ = 0, rx_bytes_ = 0;  // the Normal world's RX as mapped (the SPMC writes it)
  std::vector<InvariantBreak> breaks_;
};

std::unique_ptr<SpmcFfaTarget> open_spmc_ffa_target(uint64_t page_size, std::string* error);

}  // namespace kconform::spmc
