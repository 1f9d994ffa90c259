// El2FfaTarget: FF-A scenarios on the real ffa.c (see ffa_target.h).
//
// Invariants, checked after every op (InvariantSource; the runner reports a
// broken one as a violation of the rule named here, note "invariant: ..."):
//  I1 FFA_ERROR means no state change (FFA.PROXY.NO_CHANGE_ON_ERROR, SPEC.md
//     PKVM:ATOMIC): after a call that returned FFA_ERROR the host stage-2 views
//     and the SPMC's transactions are as before. When EL3 itself failed during
//     the call (an SMC to EL3 returned FFA_ERROR, or an armed el3_misbehave
//     fault was consumed) only "no page became shared with FF-A" is required.
//  I2 Host stage-2 agrees with EL3, per host page: shared with FF-A if and
//     only if a complete live SPMC transaction holds one of its 4K pages
//     (skipped in the "shared => held" direction while a fragmented send is
//     in flight, when pages are legitimately shared before EL3 holds them).
//     Reported by the op that breaks it, under the rule that op's function
//     ID violates by doing so (stale_share_rule / early_unshare_rule). Not
//     reported by a host call (but RECLAIM2) that consumed an armed
//     el3_misbehave fault: a stateless proxy that believes EL3's lie
//     (another transaction's shared page in a retrieve response, a send EL3
//     completed but called unfinished) leaves stage-2 and EL3 disagreeing,
//     and the model judges that op's stage-2 exactly (SPEC.md PKVM:DISTRUST).
//  I3 The hypervisor's pages stay the hypervisor's, and no SPMC transaction
//     holds a page outside host memory (FFA.PROXY.HOST_MEMORY, PKVM:OWNERSHIP).
//  I4 (handlers that implement FFA_MEM_RECLAIM2 only) The proxy does not relay
//     a RECLAIM2 it must refuse (SPEC.md R2:PROFILE: "The proxy must check
//     what it will walk ... before relaying"): when the SPMC finds a relayed
//     RECLAIM2 breaks one of the argument rules the profile gives the relayer
//     (kRelayerRules), that rule is reported broken by the op. EL3 answers
//     the same INVALID_PARAMETERS the proxy should have, so only the relay
//     shows the fault (MUTANTS.md hook H1).
#include "targets/el2/ffa_target.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <set>

#include "harness/scenario/ffa_abi.h"
#include "models/common/zero.h"
#include "models/ffa/desc.h"
#include "models/ffa/digest.h"
#include "models/ffa/scenario_ops.h"
#include "models/ffa/model.h"
#include "models/ffa/reclaim2_abi.h"
#include "models/ffa/spmc_view.h"

namespace kconform::el2 {

namespace F = kconform::ffa;

namespace {

uint64_t spmc_digest(const F::Spmc& s) {
  F::Fnv1a h;
  s.digest(h);
  return h.h;
}

bool is_share_fid(uint64_t fid) {
  return fid == F::kFnMemShare32 || fid == F::kFnMemShare64 || fid == F::kFnMemLend32 || fid == F::kFnMemLend64;
}

// I2, "shared at stage-2 but EL3 holds none of it": the rule the call broke.
RuleId stale_share_rule(uint64_t fid, bool host_call) {
  if (!host_call) return kFfaProxyForwardOther;
  if (fid == F::kReclaim2.fid) return kFfaR2Unshare;
  if (fid == F::kFnMemReclaim) return kFfaProxyReclaimOk;
  if (is_share_fid(fid) || fid == F::kFnMemFragTx) return kFfaProxyRollback;
  return F::is_ffa_fid(fid) ? kFfaProxyForwardOther : kFfaProxyNonFfa;
}

// I2, "EL3 holds a page the host owns again (or never gave up)".
RuleId early_unshare_rule(uint64_t fid, bool host_call) {
  if (!host_call) return kFfaProxyForwardOther;
  if (fid == F::kFnMemShare32 || fid == F::kFnMemShare64) return kFfaProxyShareOk;
  if (fid == F::kFnMemLend32 || fid == F::kFnMemLend64) return kFfaProxyLendAsShare;
  if (fid == F::kFnMemFragTx) return kFfaProxyFragState;
  if (fid == F::kReclaim2.fid) return kFfaR2HostGranule;
  if (fid == F::kFnMemReclaim) return kFfaProxyEl3Fault;
  return F::is_ffa_fid(fid) ? kFfaProxyForwardOther : kFfaProxyNonFfa;
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}

// I4: argument checks R2:PROFILE assigns to the relayer, which EL3 repeats.
void check_reclaim2_relay(const uint64_t in[kNumRegs], const F::Hits& hits, std::vector<InvariantBreak>* breaks) {
  static constexpr RuleId kRelayerRules[] = {kFfaR2OffsetAlign, kFfaR2Count,     kFfaR2Bounds, kFfaR2DescValid,
                                             kFfaR2Total,       kFfaR2PageIndex, kFfaR2Flags};
  const uint32_t flags = static_cast<uint32_t>(in[F::kReclaim2.reg_flags]);
  for (uint32_t i = 0; i < hits.size(); ++i) {
    const RuleId r = hits[i].rule;
    if (!hits[i].forbidden || std::find(std::begin(kRelayerRules), std::end(kRelayerRules), r) == std::end(kRelayerRules))
      continue;
    // Zero-before-reclaim on a share is EL3's to refuse; only MBZ bits are the relayer's.
    if (r == kFfaR2Flags && !(flags & ~F::kReclaim2.flags_allowed)) continue;
    breaks->push_back({r, "the proxy relayed a RECLAIM2 it must refuse (SPEC.md R2:PROFILE); EL3 found: " +
                              std::string(hits.text()) + " (x3..x7 = " + hex(in[3]) + " " + hex(in[4]) + " " +
                              hex(in[5]) + " " + hex(in[6]) + " " + hex(in[7]) + ")"});
  }
}

}  // namespace

El2FfaTarget::El2FfaTarget(std::unique_ptr<RealEl3> el3)
    : spmc_(std::make_unique<F::Spmc>()), spmc_snap_(std::make_unique<F::Spmc>()), el3_(std::move(el3)) {
  const BuildInfo& bi = el2_build_info();
  El2Config cfg;
  F::harness_ram(bi.page_size, &profile_);  // HARNESS RAM (scenario_ops.h)
  cfg.host_pages = profile_.host_pages;
  cfg.phys_base = profile_.phys_base;
  if (el3_)
    cfg.el3 = [this](const uint64_t in[kNumRegs], uint64_t out[kNumRegs]) { real_el3_smc(in, out); };
  else
    cfg.el3 = [this](const uint64_t in[kNumRegs], uint64_t out[kNumRegs]) { el3_smc(in, out); };

  // The model profile comes from the build: the tree's PAGE_SIZE,
  // KVM_FFA_MBOX_NR_PAGES, hyp_ffa_proxy_pages() and whether its ffa.c names
  // FFA_MEM_RECLAIM2; the proxy's FF-A version is what ffa.c asks EL3 for at
  // init (recorded by el3_smc).
  profile_.page_size = bi.page_size;
  profile_.reclaim2 = bi.handles_reclaim2;
  profile_.phys_base = cfg.phys_base;
  profile_.host_pages = cfg.host_pages;
  profile_.hyp_pages = bi.ffa_proxy_pages;
  profile_.mbox_pages = bi.ffa_mbox_pages;
  // PROFILE:DESC-BUF: the hypervisor pages hyp_ffa_proxy_pages() gives the
  // proxy besides its TX and RX mailboxes are its descriptor buffer.
  profile_.desc_buf_bytes =
      bi.ffa_proxy_pages > 2 * bi.ffa_mbox_pages ? (bi.ffa_proxy_pages - 2 * bi.ffa_mbox_pages) * bi.page_size : 0;

  // A real EL3: the model's SPMC is configured as it is (RealEl3Profile);
  // the state digest holds its table in the SPMC:TABLE view and the handles
  // it allocates are its choice (ProxyProfile::real_el3).
  if (el3_) {
    const RealEl3Profile rp = el3_->profile();
    profile_.real_el3 = true;
    profile_.spmc.version = rp.version;
    profile_.spmc.n_sps = rp.n_sps;
    for (uint32_t k = 0; k < F::kMaxSps; ++k) profile_.spmc.sp_ids[k] = k < 4 ? rp.sp_ids[k] : 0;
    profile_.spmc.reclaim2 = rp.reclaim2;
    profile_.spmc.donate = rp.donate;
    profile_.spmc.one_send_in_flight = rp.one_send_in_flight;
    profile_.spmc.max_fnum = rp.max_fnum;
  }
  // EL3 as World::reset configures it: Normal-world memory is all of RAM.
  F::SpmcConfig sc = profile_.spmc;
  sc.ns_base = profile_.phys_base;
  sc.ns_size = profile_.ram_bytes();
  spmc_->reset(sc, {}, profile_.phys_base);  // memory is bound once el2_init allocated it

  std::string err;
  if (!el2_init(cfg, &err)) {
    error_ = "el2: " + err;
    return;
  }
  spmc_->rebind(el2_phys_mem());
  changed_.reserve(el2_tracker().pages().size());
  if (el2_phys_mem().size() != profile_.ram_bytes()) {
    error_ = "el2: physical memory is " + std::to_string(el2_phys_mem().size()) + " bytes, the model's " +
             std::to_string(profile_.ram_bytes());
    return;
  }
  if (init_version_ == 0) {
    error_ = "el2: hyp_ffa_init() did not ask EL3 for an FF-A version (the proxy is off)";
    return;
  }
  profile_.version = init_version_;
  spmc_->mark_clean();
  *spmc_snap_ = *spmc_;
  if (el3_) el3_->save_start();  // after hyp_ffa_init()'s calls

  identity_.target = "el2";
  identity_.release = bi.tree_version + "-" + std::to_string(bi.page_size / 1024) + "k";
  if (el3_) identity_.release += "+" + el3_->release();
  identity_.profile = F::profile_name(profile_);
  identity_.caps = {{"page_size", bi.page_size},
                    {"reclaim2", bi.handles_reclaim2 ? 1u : 0u},
                    {"ffa_version", profile_.version},
                    {"mbox_pages", bi.ffa_mbox_pages},
                    {"proxy_pages", bi.ffa_proxy_pages},
                    {"host_pages", cfg.host_pages},
                    {"phys_base", cfg.phys_base},
                    {"desc_buf_bytes", profile_.desc_buf_bytes},
                    {"sanitized", bi.sanitized ? 1u : 0u},
                    {"real_el3", el3_ ? 1u : 0u}};
  identity_.cap_bits = bi.handles_reclaim2 ? F::kCapReclaim2 : 0;
  if (bi.page_size == 4096) identity_.cap_bits |= F::kCapPage4k;
  if (bi.page_size == 16384) identity_.cap_bits |= F::kCapPage16k;
  if (bi.page_size == 65536) identity_.cap_bits |= F::kCapPage64k;
}

El2FfaTarget::~El2FfaTarget() { el2_set_el3(nullptr); }

std::unique_ptr<El2FfaTarget> open_el2_ffa_target(std::string* error, std::unique_ptr<RealEl3> el3) {
  auto t = std::make_unique<El2FfaTarget>(std::move(el3));
  if (!t->ok()) {
    if (error) *error = t->error();
    return nullptr;
  }
  return t;
}

void El2FfaTarget::el3_smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs]) {
  forget_digests();  // the SPMC may change
  if (init_version_ == 0 && (in[0] & 0xffffffffu) == F::kFnVersion) init_version_ = static_cast<uint32_t>(in[1]);
  if ((in[0] & 0xffffffffu) == F::kReclaim2.fid && profile_.reclaim2) {
    F::Hits hits;
    spmc_->smc(in, out, &hits);
    check_reclaim2_relay(in, hits, &breaks_);
  } else if ((in[0] & 0xffffffffu) == F::kFnMemRetrieveReq32 || (in[0] & 0xffffffffu) == F::kFnMemRetrieveReq64) {
    // SPMC:HYP-RETRIEVE-REQ: a request the hypervisor builds wrong is its
    // finding (the host cannot send one: the proxy does not relay it).
    F::Hits hits;
    spmc_->smc(in, out, &hits);
    for (uint32_t i = 0; i < hits.size(); ++i)
      if (hits[i].forbidden && hits[i].rule == kFfaSpmcHypRetrieveReq)
        breaks_.push_back({kFfaSpmcHypRetrieveReq, "the proxy sent a malformed hypervisor retrieve request (SPEC.md "
                                                   "SPMC:HYP-RETRIEVE-REQ): " + std::string(hits.text()) +
                                                   " (w1..w4 = " + hex(in[1]) + " " + hex(in[2]) + " " + hex(in[3]) +
                                                   " " + hex(in[4]) + ")"});
  } else {
    spmc_->smc(in, out);
  }
  if (F::is_error(out)) el3_failed_ = true;
}

// A real EL3's SMC: x0-x7 go to it (FF-A's memory and framework calls use no
// more), x8-x17 come back as the caller left them. FFA_RXTX_MAP's buffers are
// translated to where the RAM is in this process (the SPMC maps them PA ==
// VA), or into the no-memory window if not wholly in RAM; a register the SPMC
// did not write reports the hypervisor's address, not the translation.
void El2FfaTarget::real_el3_smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs]) {
  if (init_version_ == 0 && (in[0] & 0xffffffffu) == F::kFnVersion) init_version_ = static_cast<uint32_t>(in[1]);
  uint64_t call[8], reply[8] = {};
  std::memcpy(call, in, sizeof call);
  if ((in[0] & 0xffffffffu & ~F::kSmc64Bit) == F::kFnRxtxMap32) {
    const uint64_t len = (in[3] & 0x3f) * F::kFfaPage;  // FFA_RXTX_MAP w3[5:0]: pages of each buffer
    for (int k = 1; k <= 2; ++k) {
      uint8_t* p = el2_phys(in[k], len);
      call[k] = p ? reinterpret_cast<uint64_t>(p) : el3_->nomem_va(in[k]);
    }
  }
  if (!el3_->smc(call, reply, &breaks_)) {
    el3_fatal_ = true;  // EL3 stopped: the op is a crash (exec)
    for (int k = 0; k < 8; ++k) reply[k] = in[k];
    reply[0] = F::kFnError;
    reply[2] = static_cast<uint32_t>(F::kAborted);
  }
  for (int k = 1; k <= 2; ++k)
    if (call[k] != in[k] && reply[k] == call[k]) reply[k] = in[k];
  for (size_t k = 0; k < kNumRegs; ++k) out[k] = k < 8 ? reply[k] : in[k];
  if (F::is_error(out)) el3_failed_ = true;
}

// FFA.SPMC.HANDLE with a real EL3 (SPEC.md SPMC:HANDLE-SPEC; the model takes
// the handle the SPMC chose, so the target checks what the specification
// asks of it): the handle the host got for a new transaction has bit 63
// clear (allocated by the SPMC, not a hypervisor) and names exactly one
// transaction of EL3's table.
void El2FfaTarget::check_real_handle(uint64_t fid, const uint64_t out[kNumRegs]) {
  const std::string bad = F::new_handle_problem(static_cast<uint32_t>(fid), out, [this](uint64_t h) {
    size_t named = 0;
    for (const RealEl3Tx& t : el3_->transactions()) named += t.handle == h;
    return named;
  });
  if (!bad.empty()) breaks_.push_back({kFfaSpmcHandle, "the host got " + bad});
}

uint64_t El2FfaTarget::el3_digest() const { return el3_ ? el3_->table_digest() : spmc_digest(*spmc_); }

uint64_t El2FfaTarget::state_digest() const {
  if (el3_) return F::state_digest_table_view(views(), el3_->table_digest());
  return F::state_digest(views(), *spmc_);
}

uint64_t El2FfaTarget::digest_now() {
  if (!el2_tracker().ChangedThisOp().empty()) digest_known_ = false;
  if (el3_ || digest_always_ || !digest_known_) {
    digest_ = state_digest();
    digest_known_ = true;
  }
  return digest_;
}

uint64_t El2FfaTarget::spmc_now() {
  if (el3_ || digest_always_ || !spmc_known_) {
    spmc_digest_ = el3_digest();
    spmc_known_ = true;
  }
  return spmc_digest_;
}

// The tracker keeps each page's view (PageTracker::views) in the digest's
// encoding: host page i is the tracker's page i (both start at phys_base).
static_assert(static_cast<uint8_t>(PageView::kHostOwned) == static_cast<uint8_t>(F::PageView::kOwned) &&
              static_cast<uint8_t>(PageView::kSharedWithFfa) == static_cast<uint8_t>(F::PageView::kSharedFfa) &&
              static_cast<uint8_t>(PageView::kSharedWithHyp) == static_cast<uint8_t>(F::PageView::kSharedHyp) &&
              static_cast<uint8_t>(PageView::kHypOwned) == static_cast<uint8_t>(F::PageView::kOther));
std::span<const uint8_t> El2FfaTarget::views() const {
  return std::span<const uint8_t>(el2_tracker().views().data(), profile_.host_pages);
}

void El2FfaTarget::begin(const Scenario&) {
  el2_restore();
  if (el3_)
    el3_->restore_start();
  else if (!(el2_restore_skip() & kRestoreSpmc))
    spmc_->restore(*spmc_snap_);  // only the slots and buffer bytes the last scenario changed
  handles_.clear();
  last_desc_len_ = 0;
  forget_digests();
  tx_window_ = 0;
  tx_known_ = false;
  breaks_.clear();
  mismatch_.assign(profile_.host_pages, 0);
  checked_state_known_ = false;
  foreign_handles_.clear();
  hyp_reported_ = false;
}

std::vector<uint8_t> El2FfaTarget::state_bytes() const {
  std::vector<uint8_t> b = el2_state_bytes();
  const std::vector<uint8_t> s = el3_ ? el3_->state_bytes() : spmc_->bytes();
  b.insert(b.end(), s.begin(), s.end());
  return b;
}

uint64_t El2FfaTarget::handle(uint64_t slot) const { return F::slot_handle(handles_, slot); }

// x0..x7 of a host call, built by the same code as the FF-A model's
// (models/ffa/scenario_ops.h); x8..x17 are zero.
void El2FfaTarget::host_regs(const Op& op, uint64_t in[kNumRegs]) const {
  for (size_t k = 0; k < kNumRegs; ++k) in[k] = 0;
  F::host_regs(op, handles_, last_desc_len_, in);
}

// HARNESS:TX: into the host TX window, clipped to the mailbox; nothing unless
// an rxtx_map came before and the whole window is host memory.
uint64_t El2FfaTarget::write_tx(uint64_t offset, const uint8_t* data, uint64_t n) const {
  const uint64_t len = F::tx_clip(profile_, tx_known_, tx_window_, offset, n);
  if (len == 0) return 0;
  uint8_t* dst = el2_phys(tx_window_ + offset, len);
  if (!dst) return 0;
  std::memcpy(dst, data, len);
  return len;
}

// tx_write, tx_mem_desc, tx_constituents: the bytes come from the model's own
// builders (scenario_ops.h tx_bytes), so both sides write the same.
uint64_t El2FfaTarget::tx_op(const Scenario& s, const Op& op) {
  F::tx_bytes(s, op, &tx_);
  const F::TxWrite& w = tx_;
  if (w.is_desc) last_desc_len_ = w.desc_len;
  return write_tx(w.offset, w.bytes.data(), w.bytes.size());
}

namespace {

// The stderr line of a hyp panic or a fatal error is printed the first time
// per process for each WARN_ON site (each kind of fatal error), as
// WARN_ON_ONCE would: a corpus or a fuzzer meets the same one thousands of
// times, and every one is in the verdict stream (the op's outcome and break).
constexpr const char* kRepeatsNotPrinted = " (printed once per process; every one is in the verdict stream)";
bool first_report(const std::string& key) {
  static std::set<std::string> printed;
  return printed.insert(key).second;
}

}  // namespace

Outcome El2FfaTarget::exec(const Scenario& s, size_t i) {
  using namespace F;
  breaks_.clear();
  fault_fired_ = false;
  el3_fatal_ = false;
  const Op& op = s.ops[i];
  el2_tracker().BeginOp();  // the pages this op changes, with their views before (I1)
  // The SPMC's digest before the op, for I1 (an FF-A error changes nothing):
  // only the ops that can return one (a host call, a borrower's op) take it.
  uint64_t pre_spmc = 0;
  uint64_t out[kNumRegs] = {};
  Outcome o = Outcome::ok(0);
  bool host_call = false, error_return = false;
  uint64_t fid = 0;
  if (s.abi != Abi::kFfa || op.code >= kOpCount) {
    o = Outcome::err(ENOSYS);  // not an FF-A op: nothing runs
  } else {
    switch (op.code) {
      case kOpTxWrite:
      case kOpTxMemDesc:
      case kOpTxConstituents:
        o = Outcome::ok(static_cast<int64_t>(tx_op(s, op)));
        break;
      case kOpEl3Misbehave:  // a real EL3: at the SMC boundary (RealEl3::arm)
        forget_digests();  // (the SPMC's own knobs: not hashed, but not ours to assume)
        if (el3_)
          el3_->arm(static_cast<uint8_t>(op.args[0]), op.args[1]);
        else
          spmc_->arm(static_cast<Fault>(op.args[0]), op.args[1]);
        break;
      case kOpEl3Profile:  // PROFILE:PERMISSIVE-EL3; a real EL3 is what it is
        forget_digests();
        if (!el3_) spmc_->set_permissive(op.args[0] != 0);
        break;
      case kOpHostFill:
      case kOpHostCount: {  // HARNESS:HOST-MEM, on the RAM ffa.c and the SPMC use
        const uint64_t len = host_mem_len(profile_, op.args[0], op.args[1]);
        uint8_t* m = len ? el2_phys(op.args[0], len) : nullptr;
        const uint8_t v = static_cast<uint8_t>(op.args[2]);
        if (m && op.code == kOpHostFill) std::memset(m, v, len);
        o = Outcome::ok(static_cast<int64_t>(!m ? 0 : op.code == kOpHostFill ? len : count_bytes(m, len, v)));
        break;
      }
      case kOpSpRetrieve:
      case kOpSpRelinquish: {
        pre_spmc = spmc_now();
        forget_digests();  // the borrower's op goes to the SPMC directly
        const uint16_t sp = static_cast<uint16_t>(op.args[1]);
        if (el3_) {
          const int rc = el3_->sp_op(op.code == kOpSpRetrieve, handle(op.args[0]), sp, out, &breaks_);
          if (rc == RealEl3::kFatal) {
            o = Outcome::sig(SIGABRT);
            break;
          }
          o = Outcome::ok(rc);
          for (int k = 0; k < 8; ++k) o.regs[k] = out[k] & 0xffffffffu;  // SMC32 replies: w0-w7
          error_return = is_error(out);
          break;
        }
        if (op.code == kOpSpRetrieve)
          spmc_->sp_retrieve(handle(op.args[0]), sp, out);
        else
          spmc_->sp_relinquish(handle(op.args[0]), sp, out);
        o = Outcome::ok(is_success(out) ? 0 : error_code(out));
        for (int k = 0; k < 8; ++k) o.regs[k] = out[k];
        error_return = is_error(out);
        break;
      }
      default: {
        pre_spmc = spmc_now();
        host_call = true;
        uint64_t in[kNumRegs];
        host_regs(op, in);
        fid = in[0] & 0xffffffffu;
        el3_failed_ = false;
        const uint8_t armed = el3_ ? el3_->armed() : static_cast<uint8_t>(spmc_->armed());
        const size_t warned = el2_warnings().size();
        el2_host_smc(in, out);
        fault_fired_ = (el3_ ? el3_->armed() : static_cast<uint8_t>(spmc_->armed())) != armed;
        if (fault_fired_) el3_failed_ = true;
        if (el3_fatal_) {
          // EL3 stopped (panic, failed assert, external abort): the machine stops.
          if (first_report("EL3 fatal"))
            std::fprintf(stderr, "kconform el2: fatal error at EL3 in scenario '%s' op %zu%s\n", s.name.c_str(), i,
                         kRepeatsNotPrinted);
          o = Outcome::sig(SIGABRT);
        } else if (el2_last_status() == CallStatus::kFatal) {
          // hyp_panic/BUG/deadlock at EL2: the host would never return.
          if (first_report("EL2 fatal"))
            std::fprintf(stderr, "kconform el2: fatal error at EL2 in scenario '%s' op %zu%s\n", s.name.c_str(), i,
                         kRepeatsNotPrinted);
          o = Outcome::sig(SIGABRT);
        } else if (el2_warnings().size() > warned) {
          // A WARN_ON at EL2 is a hyp panic: "All hyp bugs, including warnings,
          // are treated as fatal" (arch/arm64/kvm/handle_exit.c,
          // nvhe_hyp_panic_handler). The stand-in's WARN_ON returns; the
          // machine would have stopped at it.
          const Warning& w = el2_warnings()[warned];
          if (first_report(w.file + ":" + std::to_string(w.line)))
            std::fprintf(stderr, "kconform el2: WARN_ON(%s) at %s:%d at EL2 in scenario '%s' op %zu: a hyp panic%s\n",
                         w.expr.c_str(), w.file.c_str(), w.line, s.name.c_str(), i, kRepeatsNotPrinted);
          breaks_.push_back({kFfaProxyNoHypPanic, "WARN_ON(" + w.expr + ") at " + w.file + ":" + std::to_string(w.line) +
                                                   " fired at EL2: a hyp panic in protected mode (handle_exit.c: all "
                                                   "hyp bugs, including warnings, are treated as fatal)"});
          o = Outcome::sig(SIGABRT);
        }
        for (int k = 0; k < 8; ++k) o.regs[k] = out[k];
        error_return = (out[0] & 0xffffffffu) == kFnError;
        if (op.code == kOpRxtxMap) {  // HARNESS:TX: whatever the outcome
          tx_window_ = op.args[0];
          tx_known_ = true;
        }
        if (el3_ && is_producer(op.code)) check_real_handle(fid, out);
        if (is_producer(op.code)) handles_.push_back(produced_handle(out));  // HARNESS:SLOTS
      }
    }
  }
  o.state = digest_now();
  check_invariants(fid, host_call, pre_spmc, error_return ? out : nullptr, o.state);
  return o;
}

void El2FfaTarget::check_invariants(uint64_t fid, bool host_call, uint64_t pre_spmc,
                                    const uint64_t err_out[kNumRegs], uint64_t state) {
  using namespace F;
  const std::span<const uint8_t> post = views();
  const uint64_t ps = profile_.page_size, base = profile_.phys_base;
  const uint8_t kShared = static_cast<uint8_t>(F::PageView::kSharedFfa);

  // I1: an FF-A error changes nothing.
  if (err_out) {
    // Only the pages the op changed can differ (the tracker's undo log of
    // views, PageTracker::ChangedThisOp), in ascending page order.
    std::string changed;
    changed_.assign(el2_tracker().ChangedThisOp().begin(), el2_tracker().ChangedThisOp().end());
    std::sort(changed_.begin(), changed_.end(), [](const auto& a, const auto& b) { return a.page < b.page; });
    for (const PageTracker::Changed& c : changed_) {
      const uint64_t k = c.page;
      if (k >= post.size()) continue;
      const uint8_t pre = c.view_before;
      const bool bad = el3_failed_ ? (post[k] == kShared && pre != kShared) : post[k] != pre;
      if (bad) changed += " " + hex(base + k * ps) + ":" + std::to_string(pre) + "->" + std::to_string(post[k]);
    }
    if (!el3_failed_ && spmc_now() != pre_spmc) changed += " (and the SPMC's transactions)";
    if (!changed.empty())
      breaks_.push_back({kFfaProxyNoChangeOnError,
                         "FFA_ERROR(" + std::to_string(error_code(err_out)) + ") returned" +
                             (el3_failed_ ? " after EL3 failed mid-way, yet pages became shared:"
                                          : " but the state changed: host pages (view before->after)") +
                             changed});
  }

  // I2: stage-2 and EL3 agree on every host page. It reads only the host
  // page views and the SPMC's table, both in the state digest: after an op
  // that leaves the digest as the last check saw it (a harness op, most
  // refusals) it finds what it recorded then (mismatch_) and reports nothing
  // new, so it is skipped. Only with the modelled SPMC (a real EL3's digest
  // is of its own table view).
  const bool unchanged = !el3_ && !check_i2_always_ && checked_state_known_ && state == checked_state_;
  checked_state_ = state;
  checked_state_known_ = true;
  if (!unchanged) {
    bool in_flight = false;
    std::string stale, early;
    // Which host pages a live complete transaction holds (a 4K page of it not
    // yet reclaimed): Spmc::page_held for every page, in one pass over the table.
    held_.assign(post.size(), 0);
    if (seen_.size() != post.size() * (ps / kFfaPage)) seen_.assign(post.size() * (ps / kFfaPage), 0);
    // As Transaction::page_index: the first constituent naming a 4K page decides
    // (constituents may overlap under a permissive EL3). pass 0 marks, pass 1
    // clears seen_ again.
    auto visit = [&](int pass, uint64_t q, bool reclaimed) {
      if (q < base || (q - base) / ps >= post.size()) return;
      const uint64_t q4 = (q - base) / kFfaPage;
      if (pass == 1) {
        seen_[q4] = 0;
        return;
      }
      if (seen_[q4]) return;
      seen_[q4] = 1;
      if (!reclaimed) held_[(q - base) / ps] = 1;
    };
    if (el3_) {  // a real EL3 (no RECLAIM2: a complete transaction holds all its pages)
      const std::span<const RealEl3Tx> txs = el3_->transactions();
      for (const RealEl3Tx& tx : txs) in_flight |= !tx.complete;
      for (const RealEl3Tx& tx : txs)
        for (int pass = 0; pass < 2 && tx.complete; ++pass)
          for (const auto& [a, n] : tx.ranges)
            for (uint32_t p = 0; p < n; ++p) visit(pass, a + uint64_t{p} * kFfaPage, false);
    } else {
      for (uint32_t t = 0; t < kMaxTransactions; ++t)
        in_flight |= spmc_->slot(t).live && !spmc_->slot(t).complete;
      for (uint32_t t = 0; t < kMaxTransactions; ++t) {
        const Transaction& tx = spmc_->slot(t);
        if (!tx.live || !tx.complete) continue;
        for (int pass = 0; pass < 2; ++pass) {
          uint32_t idx = 0;
          for (uint32_t r = 0; r < tx.n_ranges; ++r)
            for (uint32_t p = 0; p < tx.ranges[r].pages; ++p, ++idx)
              visit(pass, tx.ranges[r].address + uint64_t{p} * kFfaPage, tx.page_reclaimed(idx));
        }
      }
    }
    // Only a page shared at stage-2, held by EL3 or mismatched before can be
    // mismatched now: blocks of 64 pages with none of these are skipped (a
    // page of another view, a mailbox shared with the hypervisor, is not one).
    auto none_shared = [&](uint64_t k) {
      // Eight views a word: a byte equal to kShared is a zero byte of
      // w ^ 0x0101..01, found exactly by (x - 0x0101..01) & ~x & 0x8080..80.
      constexpr uint64_t kOnes = 0x0101010101010101ull * kShared, kLow = 0x0101010101010101ull,
                         kHigh = 0x8080808080808080ull;
      uint64_t any = 0;
      for (uint64_t j = k; j < k + 64; j += 8) {
        uint64_t w;
        std::memcpy(&w, post.data() + j, sizeof w);
        const uint64_t x = w ^ kOnes;
        any |= (x - kLow) & ~x & kHigh;
      }
      return any == 0;
    };
    for (uint64_t k = 0; k < post.size(); ++k) {
      if (k % 64 == 0 && k + 64 <= post.size() && none_shared(k) && all_zero(held_.data() + k, 64) &&
          all_zero(mismatch_.data() + k, 64)) {
        k += 63;
        continue;
      }
      const uint64_t pa = base + k * ps;
      const bool held = held_[k];
      const bool shared = post[k] == kShared;
      uint8_t m = 0;
      if (shared && !held && !in_flight) m = 1;
      if (held && !shared) m = 2;
      if (m && m != mismatch_[k]) (m == 1 ? stale : early) += " " + hex(pa);
      mismatch_[k] = m;
    }
    // PKVM:DISTRUST: a RECLAIM2 count EL3 got wrong (an armed fault consumed) may
    // be refused with stage-2 untouched, which leaves what EL3 did reclaim shared
    // ("safe, but leaked", reclaim2/README.md): not a stale share of the proxy's.
    // A host call other than RECLAIM2 (whose count faults keep their own rule
    // above) that consumed an armed fault: the disagreement is the lie's
    // (PKVM:DISTRUST); the model judged this op's stage-2 exactly.
    if (host_call && fault_fired_ && fid != F::kReclaim2.fid) {
      stale.clear();
      early.clear();
    }
    if (!stale.empty() && !(host_call && fid == F::kReclaim2.fid && el3_failed_ && err_out))
      breaks_.push_back({stale_share_rule(fid, host_call),
                         "host pages shared with FF-A in stage-2 that EL3 no longer holds:" + stale});
    if (!early.empty())
      breaks_.push_back({early_unshare_rule(fid, host_call),
                         "host pages EL3 holds that are not shared with FF-A in stage-2:" + early});
  }

  // I3: the hypervisor's memory stays the hypervisor's; EL3 holds only host memory.
  const PageTracker& tr = el2_tracker();
  std::string hyp;
  for (uint64_t k = profile_.host_pages; k < profile_.host_pages + profile_.hyp_pages; ++k)
    if (tr.View(base + k * ps) != el2::PageView::kHypOwned) hyp += " " + hex(base + k * ps);
  if (!hyp.empty() && !hyp_reported_) {  // once per scenario is enough
    hyp_reported_ = true;
    breaks_.push_back({kFfaProxyHostMemory, "hypervisor pages no longer the hypervisor's:" + hyp});
  }
  if (unchanged) return;  // the SPMC's table too: no transaction new to report
  const uint64_t host_end = base + profile_.host_pages * ps;
  auto outside = [&](uint64_t handle, uint64_t a, uint64_t pages) {
    const uint64_t e = a + pages * kFfaPage;
    if (a >= base && e <= host_end) return false;
    foreign_handles_.push_back(handle);
    breaks_.push_back({kFfaProxyHostMemory, "EL3 holds [" + hex(a) + ", " + hex(e) + ") outside host memory [" +
                                                hex(base) + ", " + hex(host_end) + ") in handle " + hex(handle)});
    return true;
  };
  auto reported = [&](uint64_t h) {
    return std::find(foreign_handles_.begin(), foreign_handles_.end(), h) != foreign_handles_.end();
  };
  if (el3_) {
    for (const RealEl3Tx& tx : el3_->transactions()) {
      if (!tx.complete || reported(tx.handle)) continue;
      for (const auto& [a, n] : tx.ranges)
        if (outside(tx.handle, a, n)) break;
    }
    return;
  }
  for (uint32_t t = 0; t < kMaxTransactions; ++t) {
    const Transaction& tx = spmc_->slot(t);
    if (!tx.live || !tx.complete || reported(tx.handle)) continue;
    for (uint32_t r = 0; r < tx.n_ranges; ++r)
      if (outside(tx.handle, tx.ranges[r].address, tx.ranges[r].pages)) break;
  }
}

}  // namespace kconform::el2
