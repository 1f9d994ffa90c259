// TF-A's EL3 SPMC (tfa_spmc.h) as the real EL3 behind the el2 target
// (targets/real_el3.h, `--target el2 --el3 tf-a`): the hypervisor's SMCs go
// into spmc_smc_handler() from the Normal world, and the harness's EL3
// faults are injected at the SMC boundary (HARNESS:EL3), where a wrapper can
// make a real SPMC's reply lie:
//   kError (1): the next memory-management call is answered FFA_ERROR(value)
//     and does not reach the SPMC;
//   20-24: the reply to a SHARE/LEND/FRAG_TX is rewritten as the model's
//     SPMC rewrites its own (ffa::lie_about_send);
//   kPartCount/kPartSize (25/26): the reply to FFA_PARTITION_INFO_GET that
//     writes RX reports a wrong count or descriptor size.
// The faults on retrieve responses and RECLAIM2 counts (2-14) stay armed and
// never fire: this SPMC answers no hypervisor retrieve request and has no
// RECLAIM2 (targets/spmc/README.md).
#pragma once

#include <memory>
#include <string>

#include "targets/real_el3.h"
#include "targets/spmc/tfa_spmc.h"

namespace kconform::spmc {

class TfaEl3 final : public RealEl3 {
 public:
  // nullptr and *error if TF-A's SPMC cannot boot. One at a time (the SPMC is global).
  static std::unique_ptr<TfaEl3> open(std::string* error);
  ~TfaEl3() override;

  std::string release() const override;
  RealEl3Profile profile() const override;
  uint64_t nomem_va(uint64_t pa) const override { return tfa_->nomem_va(pa); }
  void save_start() override { start_ = tfa_->save(); }
  void restore_start() override;
  bool smc(const uint64_t in[8], uint64_t out[8], std::vector<InvariantBreak>* breaks) override;
  int sp_op(bool retrieve, uint64_t handle, uint16_t sp, uint64_t out[8],
            std::vector<InvariantBreak>* breaks) override {
    return tfa_->sp_op(retrieve, handle, sp, out, breaks);
  }
  void arm(uint8_t fault, uint64_t value) override {
    fault_ = fault;
    fault_value_ = value;
  }
  uint8_t armed() const override { return fault_; }
  std::span<const RealEl3Tx> transactions() override;
  uint64_t table_digest() override { return tfa_->table_digest(); }
  std::vector<uint8_t> state_bytes() const override;

 private:
  explicit TfaEl3(TfaSpmc* t) : tfa_(t) {}
  TfaSpmc* tfa_;
  std::vector<uint8_t> start_;
  uint8_t fault_ = 0;
  uint64_t fault_value_ = 0;
  std::vector<RealEl3Tx> txs_;
};

}  // namespace kconform::spmc
