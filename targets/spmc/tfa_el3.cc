// TfaEl3: TF-A's EL3 SPMC behind the el2 target (tfa_el3.h).
#include "targets/spmc/tfa_el3.h"

#include <cstring>

#include "harness/scenario/ffa_abi.h"
#include "models/ffa/regs.h"
#include "models/ffa/spmc.h"

namespace kconform::spmc {

namespace F = kconform::ffa;

namespace {
bool g_open = false;  // TF-A's SPMC is global: one user at a time
}  // namespace

std::unique_ptr<TfaEl3> TfaEl3::open(std::string* error) {
  if (g_open) {
    *error = "spmc: TF-A's SPMC is global: one el2 target with --el3 tf-a at a time";
    return nullptr;
  }
  TfaSpmc* t = TfaSpmc::get(error);
  if (!t) return nullptr;
  t->load(t->boot_snapshot());
  g_open = true;
  auto e = std::unique_ptr<TfaEl3>(new TfaEl3(t));
  e->start_ = t->boot_snapshot();
  return e;
}

TfaEl3::~TfaEl3() {
  // Nothing of TF-A's may point into the el2 target's RAM once it is gone.
  tfa_->load(tfa_->boot_snapshot());
  g_open = false;
}

std::string TfaEl3::release() const { return std::string("tf-a-") + TfaSpmc::tree_version(); }

RealEl3Profile TfaEl3::profile() const {
  F::SpmcConfig c;
  TfaSpmc::model_config(&c);
  RealEl3Profile p;
  p.version = c.version;
  p.n_sps = c.n_sps;
  for (uint32_t k = 0; k < 4 && k < F::kMaxSps; ++k) p.sp_ids[k] = c.sp_ids[k];
  p.reclaim2 = c.reclaim2;
  p.donate = c.donate;
  p.one_send_in_flight = c.one_send_in_flight;
  p.max_fnum = c.max_fnum;
  return p;
}

void TfaEl3::restore_start() {
  tfa_->load(start_);
  fault_ = 0;
  fault_value_ = 0;
}

bool TfaEl3::smc(const uint64_t in[8], uint64_t out[8], std::vector<InvariantBreak>* breaks) {
  const auto f = static_cast<F::Fault>(fault_);
  const uint32_t fid = static_cast<uint32_t>(in[0]);
  if (f == F::Fault::kError && F::is_mem_fid(in[0])) {  // the call never reaches the SPMC
    fault_ = 0;
    for (int k = 0; k < 8; ++k) out[k] = 0;
    out[0] = F::kFnError;
    out[2] = static_cast<uint32_t>(fault_value_);
    return true;
  }
  if (!tfa_->smc(KC_SPMC_FROM_NS, in, out, breaks)) return false;
  if (f == F::Fault::kNone) return true;
  const uint32_t fn = fid & ~F::kSmc64Bit;
  const bool send = fn == F::kFnMemShare32 || fn == F::kFnMemLend32 || fn == F::kFnMemDonate32 || fn == F::kFnMemFragTx;
  if (send) {  // lie_about_send rewrites a whole SMC reply (x0-x17); TF-A's is x0-x7
    uint64_t reply[F::kNumRegs] = {};
    std::memcpy(reply, out, 8 * sizeof(uint64_t));
    if (F::lie_about_send(f, fault_value_, reply)) fault_ = 0;
    std::memcpy(out, reply, 8 * sizeof(uint64_t));
  }
  if ((f == F::Fault::kPartCount || f == F::Fault::kPartSize) && fn == F::kFnPartitionInfoGet &&
      !(in[5] & F::kPartitionInfoCountOnly) && F::is_success(out)) {
    out[f == F::Fault::kPartCount ? 2 : 3] = fault_value_ & F::kW32;
    fault_ = 0;
  }
  return true;
}

std::span<const RealEl3Tx> TfaEl3::transactions() {
  const std::span<const kc_spmc_tx> tab = tfa_->table();
  txs_.resize(tab.size());
  for (size_t k = 0; k < tab.size(); ++k) {
    RealEl3Tx& t = txs_[k];
    t.handle = tab[k].handle;
    t.complete = tab[k].complete;
    t.ranges.clear();
    if (!t.complete) continue;
    const auto* c = static_cast<const uint8_t*>(tab[k].ranges);
    for (uint32_t r = 0; r < tab[k].n_ranges; ++r) {  // u64 address, u32 pages, u32 reserved
      uint64_t a;
      uint32_t n;
      std::memcpy(&a, c + 16 * r, 8);
      std::memcpy(&n, c + 16 * r + 8, 4);
      t.ranges.push_back({a, n});
    }
  }
  return txs_;
}

std::vector<uint8_t> TfaEl3::state_bytes() const {
  std::vector<uint8_t> b = tfa_->save();
  b.push_back(fault_);
  return b;
}

}  // namespace kconform::spmc
