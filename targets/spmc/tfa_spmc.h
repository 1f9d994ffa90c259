// TF-A's EL3 SPMC as one process holds it: booted once (spmc_setup() with the
// one secure partition's manifest, then the partition maps its mailbox),
// called through SMCs from the Normal world or the partition, read through
// its own table (kc_spmc_table), saved and restored by snapshots. Shared by
// the spmc target (Normal world straight into the SPMC, spmc_ffa_target.h)
// and the el2 target's `--el3 tf-a` (pKVM's real ffa.c in front of it).
//
// Memory: TF-A maps Normal-world buffers PA == VA. A caller translates the
// physical addresses of FFA_RXTX_MAP into its own RAM; a buffer not wholly in
// RAM goes into the no-memory window (nomem_va): an access of the SPMC's
// there is the external abort BL31 would take (kc_spmc_external_abort), and
// the call ends as fatal.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/ffa/spmc.h"
#include "targets/invariants.h"
#include "targets/spmc/kc_spmc_hooks.h"

namespace kconform::spmc {

class TfaSpmc {
 public:
  // The one secure partition: the model's first (SpmcConfig::sp_ids[0]),
  // FF-A v1.1 (the newest this SPMC accepts for memory sharing,
  // targets/spmc/README.md).
  static constexpr uint16_t kSpId = 0x8001;
  static constexpr uint32_t kSpVersion = 0x10001;
  static constexpr uint32_t kVersion = 0x10002;  // what its FFA_VERSION answers (the tree's v1.2)
  // The TF-A tree's version, e.g. "2.12.1" (with "+mutant-<name>" for a mutant).
  static const char* tree_version();

  // What the model's SPMC is configured as to be this one: one partition,
  // FFA_VERSION answers v1.2 (the tree's FFA_VERSION_MINOR), no
  // FFA_MEM_RECLAIM2, no FFA_MEM_DONATE, sends in flight not limited to one
  // (PROFILE:ONE-SEND is the el2 machine's choice). ns_base/ns_size are the caller's.
  static void model_config(::kconform::ffa::SpmcConfig* c);

  // The process's SPMC, booted at the first call; nullptr and *error if the
  // boot failed (every later call fails the same).
  static TfaSpmc* get(std::string* error);

  // Where a buffer of len bytes at physical address pa goes when it is not
  // wholly in the caller's RAM.
  uint64_t nomem_va(uint64_t pa) const;

  // One SMC into spmc_smc_handler() from origin (KC_SPMC_FROM_NS/_SP). False:
  // the SPMC stopped (panic, failed assert, external abort): at EL3 the machine
  // stops there. A lock left held is a break of FFA.SPMC.ANSWER in *breaks.
  bool smc(int origin, const uint64_t in[8], uint64_t out[8], std::vector<InvariantBreak>* breaks);

  // HARNESS:SP, the secure partition as borrower: FFA_MEM_RETRIEVE_REQ (v1.1
  // layout, naming the sender and tag the SPMC holds for handle and sp as the
  // one receiver; the response released at once, reported as FFA_SUCCESS) or
  // FFA_MEM_RELINQUISH. Returns 0, the FF-A error code, or kFatal.
  static constexpr int kFatal = -1000;
  int sp_op(bool retrieve, uint64_t handle, uint16_t sp, uint64_t out[8], std::vector<InvariantBreak>* breaks);

  // TF-A's live transactions now (valid until the next call into the SPMC),
  // and their digest in the view of models/ffa/spmc_view.h (SPEC.md SPMC:TABLE).
  std::span<const kc_spmc_tx> table();
  uint64_t table_digest();
  // How many live transactions of the table have handle h.
  size_t count_handle(uint64_t h);

  // Snapshots of the SPMC's state (kc_spmc_snapshot_*); load() also clears
  // the partition's mailbox. boot_snapshot(): right after the boot.
  std::vector<uint8_t> save() const;
  void load(const std::vector<uint8_t>& snap);
  const std::vector<uint8_t>& boot_snapshot() const { return boot_snapshot_; }

 private:
  TfaSpmc() = default;
  bool boot(std::string* error);

  uint8_t* sp_mbox_ = nullptr;  // the partition's TX and RX pages (never freed: snapshots name them)
  uint8_t* nomem_ = nullptr;    // the no-memory window, PROT_NONE
  std::vector<uint8_t> boot_snapshot_;
  std::vector<kc_spmc_tx> table_ = std::vector<kc_spmc_tx>(32);
};

}  // namespace kconform::spmc
