// OpteeFfaTarget: FF-A scenarios into OP-TEE's S-EL1 SPMC (optee_ffa_target.h).
#include "targets/optee/optee_ffa_target.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness/scenario/ffa_abi.h"
#include "models/ffa/scenario_ops.h"
#include "models/ffa/spmc_model.h"
#include "models/ffa/spmc_view.h"

namespace kconform::optee {

namespace F = kconform::ffa;

namespace {

constexpr uint64_t kFfaPage = 4096;
constexpr uint32_t kSmcUnknown = 0xffffffffu;
// TF-A's SPMD (services/std_svc/spmd/spmd_main.c, TF-A 2.12.1): framework message
// "FFA_VERSION request/response" (spmd_build_spmc_message, SPMD_FWK_MSG_FFA_VERSION_REQ),
// its own endpoint ID (SPMD_DIRECT_MSG_ENDPOINT_ID) and the NS endpoint's (FFA_NS_ENDPOINT_ID).
constexpr uint32_t kFwkMsg = 1u << 31, kFwkVersionReq = 0x8, kFwkVersionResp = 0x9;
constexpr uint16_t kSpmdId = 0xffff, kNsEndpointId = 0;
// OP-TEE's direct-request ABI (core/arch/arm/include/optee_ffa.h): OPTEE_FFA_UNREGISTER_SHM.
constexpr uint32_t kOpteeUnregisterShm = 3;

bool g_booted = false, g_open = false;
std::string g_boot_error;
kc_optee_snapshot* g_boot = nullptr;

void error_regs(uint64_t out[8], int32_t code) {
  std::memset(out, 0, 8 * sizeof out[0]);
  out[0] = F::kFnError;
  out[2] = static_cast<uint32_t>(code);
}

// OP-TEE's entry: x0-x7 of the SMC as the SPMD passes them (x8-x17 zero).
bool optee_call(const uint64_t in[8], uint64_t out[8]) {
  kc_optee_regs r{};
  for (int k = 0; k < 8; ++k) r.a[k] = in[k];
  const bool ok = kc_optee_smc(&r) == 0;
  for (int k = 0; k < 8; ++k) out[k] = r.a[k];
  return ok;
}

}  // namespace

const char* OpteeFfaTarget::tree_version() { return KC_OPTEE_VERSION; }

// OP-TEE 4.10.0 as an S-EL1 SPMC without CFG_SECURE_PARTITION: one endpoint,
// its own (0x8001, thread_spmc.c spmc_init: my_endpoint_id = FFA_ID_GET + 1);
// FFA_VERSION answers v1.2 (thread_spmc.c: my_version / FFA_VERSION_1_2); no
// FFA_MEM_DONATE, FFA_MEM_RECLAIM2 or hypervisor retrieve request
// (thread_spmc.c thread_spmc_msg_recv's switch has none of them); several sends in flight (its frag_state_head list); its table in
// the pages view (SPMC:TABLE-PAGES).
void OpteeFfaTarget::model_config(F::SpmcConfig* c) {
  c->version = kVersion;
  c->n_sps = 1;
  c->sp_ids[0] = kOpteeId;
  for (uint32_t k = 1; k < F::kMaxSps; ++k) c->sp_ids[k] = 0;
  c->reclaim2 = false;
  c->donate = false;
  c->one_send_in_flight = false;
  c->table_pages_view = true;
  c->hyp_retrieve = false;  // SPMC:HYP-RETRIEVE-OPTIONAL
}

OpteeFfaTarget::OpteeFfaTarget(uint64_t page_size) {
  if (page_size != 4096 && page_size != 16384 && page_size != 65536) {
    error_ = "spmc op-tee: page size " + std::to_string(page_size) + " is not 4K, 16K or 64K";
    return;
  }
  if (g_open) {
    error_ = "spmc op-tee: OP-TEE's state is global: one target at a time";
    return;
  }
  layout_.page_size = page_size;
  F::harness_ram(page_size, &layout_);
  layout_.hyp_pages = 4;
  layout_.mbox_pages = 1;
  model_config(&layout_.spmc);
  if (!g_booted) {
    g_booted = true;
    // KCONFORM_OPTEE_LOG=1: OP-TEE's own log lines (kc_optee_host.c).
    if (kc_optee_init(layout_.phys_base, layout_.ram_bytes(), layout_.phys_base,
                      layout_.host_pages * layout_.page_size) != 0)
      g_boot_error = "spmc op-tee: OP-TEE's boot (heap, mapped_shm_init, spmc_init) failed";
    else
      g_boot = kc_optee_snapshot_save();
  } else if (g_boot && !ram(layout_.phys_base, layout_.ram_bytes())) {
    g_boot_error = "spmc op-tee: OP-TEE was booted with another RAM layout in this process";
  }
  if (!g_boot || !g_boot_error.empty()) {
    error_ = g_boot_error.empty() ? "spmc op-tee: boot failed" : g_boot_error;
    return;
  }
  snapshot_ = g_boot;
  kc_optee_snapshot_load(snapshot_);
  g_open = true;

  identity_.target = "spmc";
  identity_.release = std::string("op-tee-") + tree_version() + "-" + std::to_string(page_size / 1024) + "k";
  identity_.profile = F::spmc_profile_name(layout_);
  identity_.caps = {{"page_size", page_size},
                    {"reclaim2", 0},
                    {"ffa_version", layout_.spmc.version},
                    {"sp_count", 1},
                    {"sp_id", kOpteeId},
                    {"host_pages", layout_.host_pages},
                    {"phys_base", layout_.phys_base},
                    {"snapshot_bytes", kc_optee_snapshot_bytes()}};
  identity_.cap_bits = page_size == 4096 ? F::kCapPage4k : page_size == 16384 ? F::kCapPage16k : F::kCapPage64k;
}

OpteeFfaTarget::~OpteeFfaTarget() {
  if (ok()) {
    kc_optee_snapshot_load(snapshot_);
    g_open = false;
  }
}

std::unique_ptr<OpteeFfaTarget> open_optee_ffa_target(uint64_t page_size, std::string* error) {
  auto t = std::make_unique<OpteeFfaTarget>(page_size);
  if (!t->ok()) {
    if (error) *error = t->error();
    return nullptr;
  }
  return t;
}

uint8_t* OpteeFfaTarget::ram(uint64_t pa, uint64_t len) const {
  if (pa < layout_.phys_base || pa - layout_.phys_base > layout_.ram_bytes() ||
      len > layout_.ram_bytes() - (pa - layout_.phys_base))
    return nullptr;
  return static_cast<uint8_t*>(kc_optee_ns(layout_.phys_base)) + (pa - layout_.phys_base);
}

void OpteeFfaTarget::begin(const Scenario&) {
  kc_optee_snapshot_load(snapshot_);
  for (const auto& [pa, len] : dirty_)
    if (uint8_t* p = ram(pa, len)) std::memset(p, 0, len);
  dirty_.clear();
  handles_.clear();
  borrowed_.clear();  // OP-TEE's mobjs of the last scenario are gone with its state
  last_desc_len_ = 0;
  tx_window_ = 0;
  tx_known_ = false;
  rx_pa_ = rx_bytes_ = 0;
  breaks_.clear();
}

// OP-TEE's table now: the objects in table_, their pages in pages_.
size_t OpteeFfaTarget::read_table() {
  size_t np = 0;
  size_t n = kc_optee_table(table_.data(), table_.size(), pages_.data(), pages_.size(), &np);
  if (n > table_.size() || np > pages_.size()) {
    table_.resize(std::max(n, table_.size()));
    pages_.resize(std::max(np, pages_.size()));
    n = kc_optee_table(table_.data(), table_.size(), pages_.data(), pages_.size(), &np);
  }
  return n;
}

uint64_t OpteeFfaTarget::table_digest() {
  const size_t n = read_table();
  std::vector<F::SpmcPagesEntry> v;
  for (size_t i = 0; i < n; ++i) {
    const kc_optee_obj& o = table_[i];
    F::SpmcPagesEntry e;
    e.retrieved = o.active;  // on shm_head: OP-TEE (the receiver) uses it
    e.pages.assign(pages_.begin() + o.pages_at, pages_.begin() + o.pages_at + o.npages);
    v.push_back(std::move(e));
  }
  return F::spmc_pages_digest(std::move(v));
}

size_t OpteeFfaTarget::count_handle(uint64_t h) {
  const size_t n = read_table();
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += table_[i].cookie == h;
  return c;
}

// TF-A's SPMD in front of an S-EL1 SPMC (spmd_main.c spmd_smc_handler, TF-A
// 2.12.1, Normal-world origin): what it answers itself, what it forwards. Only
// FF-A function IDs reach it (BL31's runtime services; anything else is SMC_UNK).
bool OpteeFfaTarget::smc(const uint64_t in[8], uint64_t out[8]) {
  using namespace F;
  const uint32_t fid = static_cast<uint32_t>(in[0]);
  std::memset(out, 0, 8 * sizeof out[0]);
  switch (fid) {
    case kFnVersion: {  // spmd_main.c:905: bit 31 set: NOT_SUPPORTED; else the framework message
      if (in[1] & (1u << 31)) {
        out[0] = static_cast<uint32_t>(kNotSupported);
        return true;
      }
      const uint64_t req[8] = {kFnDirectReq32, (uint64_t{kSpmdId} << 16) | kSpmcId, kFwkMsg | kFwkVersionReq,
                               static_cast<uint32_t>(in[1])};
      uint64_t resp[8];
      if (!optee_call(req, resp)) return false;
      // spmd_main.c:986: anything but the version response is NOT_SUPPORTED
      const bool good = static_cast<uint32_t>(resp[0]) == kFnDirectResp32 &&
                        static_cast<uint32_t>(resp[2]) == (kFwkMsg | kFwkVersionResp);
      out[0] = good ? static_cast<uint32_t>(resp[3]) : static_cast<uint32_t>(kNotSupported);
      return true;
    }
    case kFnIdGet:  // spmd_main.c:1045: the NS endpoint's ID
      out[0] = kFnSuccess32;
      out[2] = kNsEndpointId;
      return true;
    case kFnSpmIdGet:  // spmd_main.c:1087: the SPMC's ID to the Normal world
      out[0] = kFnSuccess32;
      out[2] = kSpmcId;
      return true;
    case kFnDirectReq32:
    case kFnDirectReq64:
    case kFnDirectReq2:
      // spmd_main.c:1111: a Normal-world request naming a secure source (or the SPMD's
      // logical partitions, none here) is INVALID_PARAMETERS
      if ((in[1] >> 16) & 0x8000) {
        error_regs(out, kInvalidParameters);
        return true;
      }
      return optee_call(in, out);
    case kFnError:
    case kFnFeatures:
    case kFnDirectResp32:
    case kFnDirectResp64:
    case kFnDirectResp2:
    case kFnRxRelease:
    case kFnRxtxMap32:
    case kFnRxtxMap64:
    case kFnRxtxUnmap:
    case kFnPartitionInfoGet:
    case kFnRun:
    case kFnMsgSend:
    case kFnMsgSend2:
    case kFnRxAcquire:
    case kFnMemDonate32:
    case kFnMemDonate64:
    case kFnMemLend32:
    case kFnMemLend64:
    case kFnMemShare32:
    case kFnMemShare64:
    case kFnMemRetrieveReq32:
    case kFnMemRetrieveReq64:
    case kFnMemRetrieveResp:
    case kFnMemRelinquish:
    case kFnMemReclaim:
    case kFnMemFragTx:
    case kFnMemFragRx:
    case kFnSuccess32:
    case kFnSuccess64:
    case kFnPartitionInfoGetRegs:
      return optee_call(in, out);  // spmd_main.c:880-1214, 1269: forwarded (spmd_smc_forward)
    case kFnNormalWorldResume:  // spmd_main.c:1261
      error_regs(out, kDenied);
      return true;
    default:
      if (fid >= 0x8400007D && fid <= 0x84000083) return optee_call(in, out);  // the notification ABIs
      error_regs(out, kNotSupported);  // spmd_main.c:1297 (MSG_WAIT, INTERRUPT, YIELD: 1230-1242)
      return true;
  }
}

uint64_t OpteeFfaTarget::tx_op(const Scenario& s, const Op& op) {
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

// HARNESS:SP with OP-TEE as the borrower (optee_ffa_target.h). Returns 0, an FF-A
// error code, or kFatal. OP-TEE's path has no FF-A error of its own: a cookie it
// will not give out (mobj_ffa_get_by_cookie() NULL) is reported INVALID_PARAMETERS,
// a relinquish of what it does not hold INVALID_PARAMETERS, and a failed
// OPTEE_FFA_UNREGISTER_SHM DENIED.
int OpteeFfaTarget::sp_op(bool retrieve, uint64_t handle, uint16_t sp) {
  constexpr int kFatal = -1000;
  if (sp != kOpteeId) return F::kInvalidParameters;  // OP-TEE is the only receiver there is
  if (retrieve) {
    void* m = nullptr;
    const int rc = kc_optee_borrow(handle, &m);
    if (rc == -2) return kFatal;
    if (rc) return F::kInvalidParameters;
    borrowed_.push_back({handle, m});
    return 0;
  }
  auto it = borrowed_.begin();
  while (it != borrowed_.end() && it->first != handle) ++it;
  if (it == borrowed_.end()) return F::kInvalidParameters;
  if (kc_optee_unborrow(it->second)) return kFatal;
  borrowed_.erase(it);
  // Still held by another retrieve of the same cookie: OP-TEE keeps it registered.
  for (const auto& b : borrowed_)
    if (b.first == handle) return 0;
  const uint64_t req[8] = {F::kFnDirectReq64, (uint64_t{kNsEndpointId} << 16) | kOpteeId, 0, kOpteeUnregisterShm,
                           handle & 0xffffffffu, handle >> 32};
  uint64_t out[8];
  if (!optee_call(req, out)) return kFatal;
  return static_cast<uint32_t>(out[0]) == F::kFnDirectResp64 && static_cast<uint32_t>(out[3]) == 0 ? 0 : F::kDenied;
}

Outcome OpteeFfaTarget::exec(const Scenario& s, size_t i) {
  Outcome o = exec_op(s, i);
  o.state = table_digest();
  return o;
}

Outcome OpteeFfaTarget::exec_op(const Scenario& s, size_t i) {
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
    case kOpEl3Misbehave:  // the SPMC under test is OP-TEE itself: nothing to lie at (spmc_model.h)
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
      const int rc = sp_op(op.code == kOpSpRetrieve, h, static_cast<uint16_t>(op.args[1]));
      if (rc == -1000) return Outcome::sig(SIGABRT);
      o = Outcome::ok(rc);
      if (rc) error_regs(out, rc);
      else out[0] = kFnSuccess32;
      for (int k = 0; k < 8; ++k) o.regs[k] = out[k] & 0xffffffffu;
      return o;
    }
    default:
      break;
  }
  uint64_t in[8] = {};
  F::host_regs(op, handles_, last_desc_len_, in);
  // SMCCC:HINT: BL31 masks the SVE hint before dispatch, so the SPMD (whose
  // place this target takes) hands OP-TEE the ID without it.
  in[0] = without_hint(in[0]);
  const uint32_t fid = static_cast<uint32_t>(in[0]);
  if (!is_ffa_fid(in[0])) {
    for (int k = 0; k < 8; ++k) o.regs[k] = in[k];  // BL31 leaves the caller's registers
    o.regs[0] = kSmcUnknown;                         // but w0: SMC_UNK
    if (is_producer(op.code)) handles_.push_back(kInvalidHandle);
    return o;
  }
  if (!smc(in, out)) {
    if (is_producer(op.code)) handles_.push_back(kInvalidHandle);
    return Outcome::sig(SIGABRT);  // OP-TEE panicked: at S-EL1 the core stops there
  }
  // SMCCC: the reply to an SMC32 call, and a reply of the SMC32 convention, is in w0-w7.
  const bool smc32 = !(fid & kSmc64Bit) || (is_ffa_fid(out[0]) && !(out[0] & kSmc64Bit));
  for (int k = 0; k < 8; ++k) o.regs[k] = smc32 ? out[k] & 0xffffffffu : out[k];
  if (rx_bytes_) dirty_.push_back({rx_pa_, rx_bytes_});
  if ((fid & ~kSmc64Bit) == kFnRxtxMap32) {
    tx_window_ = op.args[0];  // HARNESS:TX: whatever the outcome
    tx_known_ = true;
    if (fid_of(out) == kFnSuccess32) rx_pa_ = in[2], rx_bytes_ = (in[3] & 0x3f) * kFfaPage;
  }
  if (fid == kFnRxtxUnmap && fid_of(out) == kFnSuccess32) rx_bytes_ = 0;

  // FFA.SPMC.HANDLE (SPMC:HANDLE-SPEC): a new transaction's handle.
  const std::string bad = new_handle_problem(fid, out, [this](uint64_t h) { return count_handle(h); });
  if (!bad.empty()) breaks_.push_back({kFfaSpmcHandle, "OP-TEE gave " + bad});
  if (is_producer(op.code)) handles_.push_back(produced_handle(out));  // HARNESS:SLOTS
  return o;
}

}  // namespace kconform::optee
