// The spmc target with OP-TEE's S-EL1 SPMC (`run --target spmc --spmc op-tee`):
// Abi::kFfa scenarios from the Normal world into OP-TEE's thread_spmc_msg_recv()
// (built by this folder from an OP-TEE tree), through a stand-in of TF-A's SPMD
// at EL3 (optee_ffa_target.cc: what the SPMD answers itself, what it forwards),
// judged by the SPMC-side model (models/ffa/spmc_model.h) configured as OP-TEE
// is (OpteeFfaTarget::model_config).
//
// Memory: the scenario's physical addresses are the NS RAM of kc_optee_host.c
// (a memfd OP-TEE maps pages of by PA into its SHM VA space, as its page tables
// would): no translation. The NS DDR OP-TEE accepts (core_pbuf_is) is the host
// pages, the model's Normal-world memory.
//
// The borrower (sp_retrieve/sp_relinquish, HARNESS:SP) is OP-TEE itself, the one
// receiver it has (0x8001), on its own path: retrieve = mobj_ffa_get_by_cookie()
// + mobj_inc_map() (what a call naming the cookie does), relinquish =
// mobj_dec_map() + mobj_put() then the Normal world's OPTEE_FFA_UNREGISTER_SHM
// (OP-TEE gives a cookie back only then).
//
// After every op: the handle check (FFA.SPMC.HANDLE) and the state, OP-TEE's
// table (mobj_ffa.c's lists, kc_optee_table) in the pages view (SPEC.md
// SPMC:TABLE-PAGES). OP-TEE's state is global: one target per process.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/ffa/proxy.h"
#include "models/ffa/scenario_ops.h"
#include "targets/invariants.h"
#include "targets/optee/kc_optee_hooks.h"
#include "targets/target.h"

namespace kconform::optee {

class OpteeFfaTarget final : public Target, public InvariantSource {
 public:
  static constexpr uint16_t kOpteeId = 0x8001;   // OP-TEE's endpoint (FFA_ID_GET's 0x8000 + 1)
  static constexpr uint16_t kSpmcId = 0x8000;    // its SPMC ID (the SPMD stand-in's FFA_ID_GET to it)
  static constexpr uint32_t kVersion = 0x10002;  // what it answers to FFA_VERSION (thread_spmc.c: v1.2)
  static const char* tree_version();
  // The model's SPMC as OP-TEE is (models/ffa/spmc.h SpmcConfig).
  static void model_config(::kconform::ffa::SpmcConfig* c);

  explicit OpteeFfaTarget(uint64_t page_size);
  ~OpteeFfaTarget() override;
  OpteeFfaTarget(const OpteeFfaTarget&) = delete;
  OpteeFfaTarget& operator=(const OpteeFfaTarget&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const ::kconform::ffa::ProxyProfile& layout() const { return layout_; }

  const TargetIdentity& identity() const override { return identity_; }
  void begin(const Scenario& s) override;
  Outcome exec(const Scenario& s, size_t i) override;
  void end() override {}
  std::span<const InvariantBreak> invariant_breaks() const override { return breaks_; }

  // OP-TEE's table in the pages view (SPEC.md SPMC:TABLE-PAGES), and how many
  // of its objects have cookie h.
  uint64_t table_digest();
  size_t count_handle(uint64_t h);
  // The Normal world's SMC through the SPMD stand-in; false: OP-TEE panicked.
  bool smc(const uint64_t in[8], uint64_t out[8]);

 private:
  uint8_t* ram(uint64_t pa, uint64_t len) const;
  uint64_t tx_op(const Scenario& s, const Op& op);
  Outcome exec_op(const Scenario& s, size_t i);
  int sp_op(bool retrieve, uint64_t handle, uint16_t sp);

  std::string error_;
  ::kconform::ffa::ProxyProfile layout_;
  TargetIdentity identity_;
  kc_optee_snapshot* snapshot_ = nullptr;
  std::vector<kc_optee_obj> table_ = std::vector<kc_optee_obj>(64);
  std::vector<uint64_t> pages_ = std::vector<uint64_t>(4096);
  size_t read_table();
  std::vector<std::pair<uint64_t, uint64_t>> dirty_;
  // Per scenario.
  std::vector<uint64_t> handles_;  // HARNESS:SLOTS
  std::vector<std::pair<uint64_t, void*>> borrowed_;  // cookie, OP-TEE's mobj
  uint64_t last_desc_len_ = 0;
  ::kconform::ffa::TxWrite tx_;  // tx_op's scratch (kept for its capacity)
  uint64_t tx_window_ = 0;
  bool tx_known_ = false;
  uint64_t rx_pa_ = 0, rx_bytes_ = 0;
  std::vector<InvariantBreak> breaks_;
};

std::unique_ptr<OpteeFfaTarget> open_optee_ffa_target(uint64_t page_size, std::string* error);

}  // namespace kconform::optee
