// SpmcFfaTarget: FF-A scenarios straight into TF-A's EL3 SPMC (spmc_ffa_target.h).
#include "targets/spmc/spmc_ffa_target.h"

#include <sys/mman.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness/scenario/ffa_abi.h"
#include "models/ffa/scenario_ops.h"
#include "models/ffa/spmc_model.h"
#include "models/ffa/spmc_view.h"
#include "targets/spmc/kc_spmc_hooks.h"

namespace kconform::spmc {

namespace F = kconform::ffa;

namespace {

constexpr uint64_t kFfaPage = 4096;
bool g_open = false;  // TF-A's state is global: one target at a time

}  // namespace

SpmcFfaTarget::SpmcFfaTarget(uint64_t page_size) {
  if (page_size != 4096 && page_size != 16384 && page_size != 65536) {
    error_ = "spmc: page size " + std::to_string(page_size) + " is not 4K, 16K or 64K";
    return;
  }
  if (g_open) {
    error_ = "spmc: TF-A's SPMC is global: one spmc target at a time";
    return;
  }
  layout_.page_size = page_size;
  F::harness_ram(page_size, &layout_);
  // The el2 target's hypervisor pages stay RAM (the spmc model's Normal-world
  // memory is the host pages only): directed scenarios address them as "not
  // the host's", which is memory all the same.
  layout_.hyp_pages = 4;
  layout_.mbox_pages = 1;
  TfaSpmc::model_config(&layout_.spmc);  // the model's SPMC as this one is configured

  const size_t bytes = layout_.ram_bytes();
  void* r = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED) {
    error_ = std::string("spmc: mmap: ") + std::strerror(errno);
    return;
  }
  ram_ = static_cast<uint8_t*>(r);

  tfa_ = TfaSpmc::get(&error_);
  if (!tfa_) return;
  snapshot_ = tfa_->boot_snapshot();
  tfa_->load(snapshot_);
  g_open = true;

  identity_.target = "spmc";
  identity_.release = std::string("tf-a-") + TfaSpmc::tree_version() + "-" + std::to_string(page_size / 1024) + "k";
  identity_.profile = F::spmc_profile_name(layout_);
  identity_.caps = {{"page_size", page_size},
                    {"reclaim2", 0},
                    {"ffa_version", layout_.spmc.version},
                    {"sp_count", 1},
                    {"sp_id", TfaSpmc::kSpId},
                    {"host_pages", layout_.host_pages},
                    {"phys_base", layout_.phys_base},
                    {"snapshot_bytes", snapshot_.size()}};
  identity_.cap_bits = page_size == 4096 ? F::kCapPage4k : page_size == 16384 ? F::kCapPage16k : F::kCapPage64k;
}

SpmcFfaTarget::~SpmcFfaTarget() {
  if (ok()) {
    // Nothing of TF-A's may point into this target's RAM once it is gone.
    tfa_->load(snapshot_);
    g_open = false;
  }
  if (ram_) munmap(ram_, layout_.ram_bytes());
}

std::unique_ptr<SpmcFfaTarget> open_spmc_ffa_target(uint64_t page_size, std::string* error) {
  auto t = std::make_unique<SpmcFfaTarget>(page_size);
  if (!t->ok()) {
    if (error) *error = t->error();
    return nullptr;
  }
  return t;
}

// Where the SPMC finds physical address pa in this process.
// Where the SPMC finds the buffer [pa, pa + len) in this process: in the RAM,
// or, if any of it is outside, in the no-memory window (an access is an
// external abort; on hardware only the part past RAM would be, a limit of
// this stand-in).
uint64_t SpmcFfaTarget::host_va(uint64_t pa, uint64_t len) const {
  if (uint8_t* p = ram(pa, len)) return reinterpret_cast<uint64_t>(p);
  return tfa_->nomem_va(pa);
}

uint8_t* SpmcFfaTarget::ram(uint64_t pa, uint64_t len) const {
  if (pa < layout_.phys_base || pa - layout_.phys_base > layout_.ram_bytes() ||
      len > layout_.ram_bytes() - (pa - layout_.phys_base))
    return nullptr;
  return ram_ + (pa - layout_.phys_base);
}

void SpmcFfaTarget::begin(const Scenario&) {
  tfa_->load(snapshot_);
  for (const auto& [pa, len] : dirty_)
    if (uint8_t* p = ram(pa, len)) std::memset(p, 0, len);
  dirty_.clear();
  handles_.clear();
  last_desc_len_ = 0;
  tx_window_ = 0;
  tx_known_ = false;
  rx_pa_ = rx_bytes_ = 0;
  breaks_.clear();
}

uint64_t SpmcFfaTarget::tx_op(const Scenario& s, const Op& op) {
  F::tx_bytes(s, op, &tx_);
  const F::TxWrite& w = tx_;
  if (w.is_desc) last_desc_len_ = w.desc_len;
  const uint64_t len = F::tx_clip(layout_, tx_known_, tx_window_, w.offset, w.bytes.size());
  if (len == 0) return 0;
  uint8_t* dst = ram(tx_window_ + w.offset, len);
  if (!dst) return 0;
  std::memcpy(dst, w.bytes.data(), len);
  dirty_.push_back({tx_window_ + w.offset, len});
  return len;
}

Outcome SpmcFfaTarget::exec(const Scenario& s, size_t i) {
  Outcome o = exec_op(s, i);
  o.state = tfa_->table_digest();
  return o;
}

Outcome SpmcFfaTarget::exec_op(const Scenario& s, size_t i) {
  using namespace F;
  breaks_.clear();
  const Op& op = s.ops[i];
  if (s.abi != Abi::kFfa || op.code >= kOpCount) return Outcome::err(ENOSYS);
  Outcome o = Outcome::ok(0);
  uint64_t out[8] = {};
  switch (op.code) {
    case kOpTxWrite:
    case kOpTxMemDesc:
    case kOpTxConstituents:
      return Outcome::ok(static_cast<int64_t>(tx_op(s, op)));
    case kOpEl3Misbehave:  // the SPMC under test is EL3: nothing to lie at (spmc_model.h)
    case kOpEl3Profile:
      return o;
    case kOpHostFill:
    case kOpHostCount: {
      const uint64_t len = host_mem_len(layout_, op.args[0], op.args[1]);
      uint8_t* m = len ? ram(op.args[0], len) : nullptr;
      const uint8_t v = static_cast<uint8_t>(op.args[2]);
      if (m && op.code == kOpHostFill) {
        std::memset(m, v, len);
        dirty_.push_back({op.args[0], len});
      }
      return Outcome::ok(static_cast<int64_t>(!m ? 0 : op.code == kOpHostFill ? len : count_bytes(m, len, v)));
    }
    case kOpSpRetrieve:
    case kOpSpRelinquish: {
      const uint64_t h = slot_handle(handles_, op.args[0]);
      const int rc = tfa_->sp_op(op.code == kOpSpRetrieve, h, static_cast<uint16_t>(op.args[1]), out, &breaks_);
      if (rc == TfaSpmc::kFatal) return Outcome::sig(SIGABRT);
      o = Outcome::ok(rc);
      for (int k = 0; k < 8; ++k) o.regs[k] = out[k] & 0xffffffffu;  // SMC32 replies: w0-w7
      return o;
    }
    default:
      break;
  }
  uint64_t in[8] = {};
  F::host_regs(op, handles_, last_desc_len_, in);
  // SMCCC:HINT: the function is the ID without the SVE hint (BL31 masks it
  // before dispatch; the call goes to TF-A as the scenario made it).
  const uint32_t fid = static_cast<uint32_t>(without_hint(in[0]));
  uint64_t call[8];
  std::memcpy(call, in, sizeof call);
  if ((fid & ~kSmc64Bit) == kFnRxtxMap32) {
    const uint64_t len = (in[3] & 0x3f) * kFfaPage;  // FFA_RXTX_MAP w3[5:0]: pages of each buffer
    call[1] = host_va(in[1], len);
    call[2] = host_va(in[2], len);
  }
  // BL31 dispatches an SMC by its owning entity: only FF-A function IDs
  // reach the SPMD and then the SPMC; anything else is SMC_UNK from BL31's
  // runtime service table (bl31/bl31_main.c, common/runtime_svc.c), which is
  // not built here.
  if (!is_ffa_fid(without_hint(in[0]))) {
    for (int k = 0; k < 8; ++k) o.regs[k] = in[k];  // BL31 leaves the caller's registers
    o.regs[0] = 0xffffffffu;                         // but w0: SMC_UNK
    if (is_producer(op.code)) handles_.push_back(kInvalidHandle);
    return o;
  }
  if (!tfa_->smc(KC_SPMC_FROM_NS, call, out, &breaks_)) {
    if (is_producer(op.code)) handles_.push_back(kInvalidHandle);
    return Outcome::sig(SIGABRT);
  }
  // SMCCC: the reply to an SMC32 call, and a reply of the SMC32 convention
  // (x0 an FF-A function ID with bit 30 clear: FFA_ERROR, FFA_SUCCESS_32,
  // FFA_MEM_FRAG_RX, ...), is in w0-w7; the upper halves are not part of it
  // (TF-A sign-extends FFA_ERROR's w2, spmc_ffa_error_return, and SMC_UNK).
  // A register the SPMC did not write holds what the caller passed: the
  // scenario's address, not where this process put it (translated above).
  for (int k = 1; k <= 2; ++k)
    if (call[k] != in[k] && out[k] == call[k]) out[k] = in[k];
  const bool smc32 = !(fid & kSmc64Bit) || (is_ffa_fid(out[0]) && !(out[0] & kSmc64Bit));
  for (int k = 0; k < 8; ++k) o.regs[k] = smc32 ? out[k] & 0xffffffffu : out[k];
  // The SPMC writes the Normal world's RX: zeroed at the next begin().
  if (rx_bytes_) dirty_.push_back({rx_pa_, rx_bytes_});
  if ((fid & ~kSmc64Bit) == kFnRxtxMap32) {
    tx_window_ = op.args[0];  // HARNESS:TX: whatever the outcome
    tx_known_ = true;
    if (fid_of(out) == kFnSuccess32) rx_pa_ = in[2], rx_bytes_ = (in[3] & 0x3f) * kFfaPage;
  }
  if (fid == kFnRxtxUnmap && fid_of(out) == kFnSuccess32) rx_bytes_ = 0;

  // FFA.SPMC.HANDLE (SPMC:HANDLE-SPEC): a new transaction's handle.
  const std::string bad = new_handle_problem(fid, out, [this](uint64_t h) { return tfa_->count_handle(h); });
  if (!bad.empty()) breaks_.push_back({kFfaSpmcHandle, "the SPMC gave " + bad});
  if (is_producer(op.code)) handles_.push_back(produced_handle(out));  // HARNESS:SLOTS
  return o;
}

}  // namespace kconform::spmc
