// The proxy model: the world it reasons about, the plan a check writes, and
// the routing of a host call to its area's checks (SPEC.md PKVM:FORWARD,
// PKVM:UNSUPPORTED, SMCCC:32, VERSION:NEGOTIATE); then how an effect is made
// so (apply_effect) and the state it leaves (digest_after).
#include "models/ffa/proxy.h"

#include "models/ffa/plan.h"
#include "models/ffa/proxy_ops.h"
#include "models/ffa/reclaim2_abi.h"
#include "models/ffa/spmc_view.h"

#include <algorithm>
#include <cstring>

namespace kconform::ffa {

// --- World -------------------------------------------------------------------

void World::reset(const ProxyProfile& p, std::span<uint8_t> mem) {
  profile = &p;
  proxy = ProxyState{};
  phys = mem;
  SpmcConfig c = p.spmc;
  c.ns_base = p.phys_base;
  c.ns_size = p.ram_bytes();
  spmc.reset(c, mem, p.phys_base);
  // At initialisation the hypervisor negotiates its version with the SPMC. It
  // maps its own mailboxes there only when the host registers its pair
  // (FFA_RXTX_MAP relayed, SPEC.md PKVM:MBOX), not here.
  uint64_t in[kNumRegs] = {kFnVersion, p.version}, out[kNumRegs];
  spmc.smc(in, out);
  proxy.host_version = spmc.ns_version();
}

uint64_t World::hyp_tx_pa() const { return profile->phys_base + profile->host_pages * profile->page_size; }
uint64_t World::hyp_rx_pa() const { return hyp_tx_pa() + profile->mbox_bytes(); }

const uint8_t* World::at(uint64_t pa, uint64_t len) const {
  const uint64_t base = profile->phys_base;
  if (pa < base || pa - base > phys.size() || len > phys.size() - (pa - base)) return nullptr;
  return phys.data() + (pa - base);
}
// For writing: marked in dirty.
uint8_t* World::at(uint64_t pa, uint64_t len) {
  uint8_t* p = const_cast<uint8_t*>(static_cast<const World*>(this)->at(pa, len));
  if (p && dirty) dirty->mark(p, len);
  return p;
}

std::span<const uint8_t> World::host_tx(uint64_t len) const {
  const uint8_t* tx = at(proxy.mbox.tx_pa, len);
  return tx ? std::span<const uint8_t>(tx, len) : std::span<const uint8_t>();
}

int64_t World::host_page(uint64_t pa) const {
  const ProxyProfile& p = *profile;
  if (pa < p.phys_base) return -1;
  const uint64_t i = (pa - p.phys_base) / p.page_size;
  return i < p.host_pages ? static_cast<int64_t>(i) : -1;
}

bool World::range_is(uint64_t pa, uint64_t len, PageView want) const {
  if (len == 0) return true;
  if (pa + len < pa) return false;
  for (uint64_t a = pa - pa % profile->page_size; a < pa + len; a += profile->page_size) {
    const int64_t i = host_page(a);
    if (i < 0 || proxy.view[i] != static_cast<uint8_t>(want)) return false;
  }
  return true;
}

uint64_t state_digest_of(const ProxyProfile& p, std::span<const uint8_t> views, const Spmc& spmc, TableOverlay o) {
  if (p.real_el3) return state_digest_table_view(views, spmc_view_digest(spmc, o));
  return state_digest(views, spmc, o);
}

uint64_t World::digest(TableOverlay o) const {
  return state_digest_of(*profile, std::span<const uint8_t>(proxy.view, profile->host_pages), spmc, o);
}

namespace {

// The hypervisor retrieve request for handle (SPMC:HYP-RETRIEVE): a
// descriptor header of layout l naming no endpoint. Returns its length.
uint32_t write_retrieve_request(std::span<uint8_t> out, uint64_t handle, Layout l) {
  const uint32_t len = header_size(l);
  std::memset(out.data(), 0, std::min<size_t>(len, out.size()));
  put_u64(out, 8, handle);
  if (l != Layout::kV10) {
    put_u32(out, 24, emad_size(l));
    put_u32(out, 32, header_size(l));
  }
  return len;
}
constexpr uint32_t kMaxRetrieveRequest = 48;  // the v1.1+ header

void clear_effect(Effect& e) {
  e.n_relays = 0;
  e.views_set = e.mbox_set = e.version_set = e.frag_set = false;
  e.n_added = 0;
}

}  // namespace

// --- Plan --------------------------------------------------------------------

void Plan::begin(const World& w) {
  w_ = &w;
  hits.clear();
  failed = false;
  n_alts_ = 0;
  for (uint32_t& n : listed_) n = 0;
  clear_effect(effects_[0]);
  n_effects_ = 1;
  cur_ = 0;
  probe_.session = w.spmc.session();
  probe_.overlay = {};
  probe_.rx_written = false;
  probe_.response_built = false;
}

void Plan::add(const Alt& a) {
  // Each variant lists at most kMaxAlts outcomes, as a call planned alone would.
  if (listed_[cur_] >= kMaxAlts) return;
  ++listed_[cur_];
  alts_[n_alts_++] = a;
}

void Plan::error(RuleId r, int32_t code, bool unchanged) {
  Alt a;
  a.mask = kX0 | kX2;
  a.regs[0] = kFnError;
  a.regs[2] = static_cast<uint32_t>(code);
  a.rule = r;
  a.effect = unchanged ? kUnchanged : static_cast<int8_t>(cur_);
  add(a);
  a.regs[2] = static_cast<uint64_t>(static_cast<int64_t>(code));
  add(a);
}

void Plan::fail(RuleId r, std::initializer_list<int32_t> codes) {
  hits.add(r, true);
  hits.pass(kFfaProxyNoChangeOnError);
  hits.pass(kFfaProxyErrorEncoding);
  for (int32_t c : codes) error(r, c, true);
  failed = true;
}

void Plan::any_error(RuleId r, bool unchanged) {
  for (int32_t c = kNotSupported; c >= kNoData; --c) error(r, c, unchanged);
}

void Plan::success(RuleId r, uint8_t mask, uint64_t w2, uint64_t w3, bool unchanged) {
  Alt a;
  a.mask = static_cast<uint8_t>(mask | kX0);
  a.regs[0] = kFnSuccess32;
  a.regs[2] = w2;
  a.regs[3] = w3;
  a.rule = r;
  a.effect = unchanged ? kUnchanged : static_cast<int8_t>(cur_);
  add(a);
  a.regs[0] = kFnSuccess64;
  add(a);
  hits.pass(r);
}

void Plan::exact(RuleId r, const uint64_t regs[kCallRegs], uint8_t mask, bool unchanged) {
  Alt a;
  for (uint32_t i = 0; i < kCallRegs; ++i) a.regs[i] = regs[i];
  a.mask = mask;
  a.rule = r;
  a.effect = unchanged ? kUnchanged : static_cast<int8_t>(cur_);
  add(a);
  hits.pass(r);
}

void Plan::any(RuleId r) {
  Alt a;
  a.rule = r;
  add(a);
}

uint32_t Plan::fork() {
  if (n_effects_ == kMaxVariants) return cur_;  // no call has more variants
  const uint32_t v = n_effects_++;
  effects_[v] = effects_[cur_];
  listed_[v] = listed_[cur_];
  select(v);
  return v;
}

void Plan::select(uint32_t v) {
  cur_ = v;
  // The note explains the first variant only.
  hits.set_quiet(v != 0);
}

PageView Plan::view(int64_t k) const {
  const Effect& e = effects_[cur_];
  return static_cast<PageView>(e.views_set ? e.views[k] : w_->proxy.view[k]);
}

void Plan::set_page(int64_t k, PageView v) {
  Effect& e = effect();
  if (!e.views_set) {
    std::memcpy(e.views, w_->proxy.view, w_->profile->host_pages);  // not a byte loop: 2,432 pages at 4K
    e.views_set = true;
  }
  e.views[k] = static_cast<uint8_t>(v);
}

void Plan::set_pages(uint64_t pa, uint64_t len, PageView v) {
  const uint64_t ps = w_->profile->page_size;
  for (uint64_t a = pa - pa % ps; a < pa + len; a += ps) {
    const int64_t k = w_->host_page(a);
    if (k >= 0) set_page(k, v);
  }
}

HostMailbox& Plan::mailbox() {
  Effect& e = effect();
  if (!e.mbox_set) e.mbox = w_->proxy.mbox;
  e.mbox_set = true;
  return e.mbox;
}

void Plan::fix_version(uint32_t host_version) {
  effect().version_set = true;
  effect().host_version = host_version;
}

FragSend& Plan::frag() {
  Effect& e = effect();
  if (!e.frag_set) e.frag = w_->proxy.frag;
  e.frag_set = true;
  return e.frag;
}

void Plan::add_frag_ranges(const Constituent* rs, uint32_t n) {
  Effect& e = effect();
  for (uint32_t i = 0; i < n; ++i) e.frag_added[i] = rs[i];
  e.n_added = n;
}

void Plan::set_ranges(const Constituent* rs, uint32_t n, PageView v) {
  for (uint32_t i = 0; i < n; ++i) set_pages(rs[i].address, uint64_t{rs[i].pages} * kFfaPage, v);
}

// The calls of one host call reach EL3 in order; each is answered by the SPMC
// model as it would answer it after the earlier ones (their session, their
// RX), without changing the SPMC. Only the last of them may change the
// transaction table (answer() reads the table as it is).
void Plan::relay(const Relay& r, uint64_t out[kNumRegs], Hits* hits_to) {
  Effect& e = effect();
  if (e.n_relays < kMaxRelays) e.relays[e.n_relays++] = r;
  const World& w = *w_;
  uint8_t request[kMaxRetrieveRequest];
  std::span<const uint8_t> tx;
  switch (r.tx) {
    case Relay::Tx::kHostTx: tx = w.host_tx(r.tx_len); break;
    case Relay::Tx::kRetrieveRequest: tx = {request, write_retrieve_request(request, r.handle, r.layout)}; break;
    case Relay::Tx::kNone:
      if (const uint8_t* b = w.spmc.phys(probe_.session.tx_pa, probe_.session.mbox_bytes))
        tx = {b, probe_.session.mbox_bytes};
      break;
  }
  Hits unused;
  SpmcAnswer& ans = probe_.answer;
  w.spmc.answer(r.in, tx, probe_.session, ans, hits_to ? *hits_to : unused);
  probe_.session = ans.after;
  if (ans.slot >= 0) {
    copy_transaction(probe_.changed, ans.tx);
    probe_.overlay = {ans.slot, &probe_.changed};
  }
  if (ans.respond >= 0) {
    const Transaction& t = probe_.overlay.slot == ans.respond ? probe_.changed : w.spmc.slot(ans.respond);
    w.spmc.build_response(t, ans.respond_layout, ans.bogus, ans.bogus_address, probe_.response, ans.lie,
                          ans.lie_value);
    probe_.response_built = true;
  }
  if (ans.rx_chunk && w.spmc.phys(ans.after.rx_pa, ans.rx_len)) {
    if (!probe_.rx_written) {
      // The buffer as memory holds it (mbox_bytes; past them RX reads 0).
      const uint64_t mbox = w.profile->mbox_bytes();
      probe_.rx_valid = static_cast<uint32_t>(mbox < kMaxDescBytes ? mbox : kMaxDescBytes);
      read_hyp_rx(probe_.rx, probe_.rx_valid);
    }
    probe_.rx_written = true;
    const uint8_t* src = probe_.response_built ? probe_.response : w.spmc.response().data();
    const uint32_t n = ans.rx_len < kMaxDescBytes ? ans.rx_len : kMaxDescBytes;
    std::memcpy(probe_.rx, src + ans.rx_from, n);
    if (n > probe_.rx_valid) probe_.rx_valid = n;
  }
  for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = ans.out[i];
}

const Transaction* Plan::el3_find(uint64_t handle) const { return w_->spmc.find(handle, probe_.overlay); }
bool Plan::el3_page_held(uint64_t pa) const { return w_->spmc.page_held(pa, probe_.overlay); }

void Plan::read_hyp_rx(uint8_t* dst, uint32_t len) const {
  // The bytes there are, then zeros up to len.
  auto put = [&](const uint8_t* src, uint64_t have) {
    const uint32_t n = src ? static_cast<uint32_t>(have < len ? have : len) : 0;
    if (n) std::memcpy(dst, src, n);
    std::memset(dst + n, 0, len - n);
  };
  if (probe_.rx_written) {
    put(probe_.rx, probe_.rx_valid);
    return;
  }
  const uint64_t mbox = w_->profile->mbox_bytes();
  put(w_->at(w_->hyp_rx_pa(), len < mbox ? len : mbox), mbox);
}

// --- Shared by the checks ----------------------------------------------------------

RuleId last_broken(const Hits& h, RuleId fallback) {
  for (uint32_t i = h.size(); i-- > 0;)
    if (h[i].forbidden) return h[i].rule;
  return fallback;
}

int32_t el3_error(const uint64_t out[kNumRegs]) { return is_error(out) ? error_code(out) : kAborted; }

// --- Routing -------------------------------------------------------------------

void expect_call(const World& w, const uint64_t call[kCallRegs], Plan& p) {
  p.begin(w);
  // SMCCC:HINT: the call is the one the ID names with the SVE hint clear.
  uint64_t in[kCallRegs];
  for (uint32_t i = 0; i < kCallRegs; ++i) in[i] = call[i];
  if (call[0] & kSmcccSveHint) {
    in[0] = without_hint(call[0]);
    p.hits.pass(kFfaSmcccHint);
  }
  const uint32_t fid = w32(in[0]);
  if (!is_ffa_fid(fid)) {
    // Not an FF-A call: no FF-A state may change; what EL3 answers is not ours to judge.
    p.any(kFfaProxyNonFfa);
    p.hits.pass(kFfaProxyNonFfa);
    return;
  }
  // SMCCC:W0: bits in x0[63:32] of an FF-A call; the callee may also refuse it as
  // an unknown function, nothing changed.
  if (in[0] >> 32) {
    static constexpr uint64_t kUnknown[kCallRegs] = {~0ull};
    p.hits.pass(kFfaSmcccX0Upper);
    p.exact(kFfaSmcccX0Upper, kUnknown, kX0, true);
  }
  bool upper = false;
  const CallArgs a = CallArgs::of(in, &upper);
  if (upper) p.hits.pass(kFfaSmc32Upper);
  // VERSION:NEGOTIATE: the host negotiates with FFA_VERSION before any other
  // FF-A ABI; a proxy may refuse calls made before (no state change).
  if (!w.proxy.version_fixed && fid != kFnVersion) {
    p.hits.pass(kFfaVersionNegotiate);
    p.error(kFfaVersionNegotiate, kInvalidParameters);
    p.error(kFfaVersionNegotiate, kNotSupported);
  }
  // SMCCC:32: FFA_RXTX_MAP has an SMC32 and an SMC64 form; a callee may
  // implement only one (FFA_FEATURES tells which).
  if (fid == kFnRxtxMap32) p.error(kFfaMboxMapOk, kNotSupported);
  switch (fid) {
    case kFnVersion: return expect_version(w, a, p);
    case kFnFeatures: return expect_features(w, a, p);
    case kFnIdGet: return expect_id_get(w, a, p);
    case kFnRxtxMap32:
    case kFnRxtxMap64: return expect_rxtx_map(w, a, p);
    case kFnRxtxUnmap: return expect_rxtx_unmap(w, a, p);
    case kFnRxRelease: return expect_rx_release(w, a, p);
    case kFnPartitionInfoGet: return expect_partition_info(w, a, p);
    case kFnMemShare32:
    case kFnMemShare64: return expect_mem_send(w, a, MemKind::kShare, p);
    case kFnMemLend32:
    case kFnMemLend64: return expect_mem_send(w, a, MemKind::kLend, p);
    case kFnMemFragTx: return expect_mem_frag_tx(w, a, p);
    case kFnMemReclaim: return expect_mem_reclaim(w, a, p);
    default: break;
  }
  if (proxy_refuses(*w.profile, fid)) {
    const RuleId r = fid == kReclaim2.fid ? kFfaR2NotImplemented : kFfaProxyUnsupported;
    p.hits.broke(r, "%#llx is not relayed", static_cast<unsigned long long>(fid));
    p.fail(r, {kNotSupported});
    return;
  }
  if (fid == kReclaim2.fid) return expect_mem_reclaim2(w, a, p);
  // Anything else: relayed or refused, never a stage-2 change.
  p.any(kFfaProxyForwardOther);
  p.hits.pass(kFfaProxyForwardOther);
}

// --- Effects ---------------------------------------------------------------------

uint64_t digest_after(const World& w, const Plan& plan, uint32_t v) {
  const Effect& e = plan.effect(v);
  const uint8_t* views = e.views_set ? e.views : w.proxy.view;
  return state_digest_of(*w.profile, std::span<const uint8_t>(views, w.profile->host_pages), w.spmc,
                         plan.el3_overlay());
}

void apply_effect(World& w, const Plan& plan, uint32_t v) {
  const Effect& e = plan.effect(v);
  for (uint32_t i = 0; i < e.n_relays; ++i) {
    const Relay& r = e.relays[i];
    if (r.tx == Relay::Tx::kHostTx) {
      const uint8_t* src = w.at(w.proxy.mbox.tx_pa, r.tx_len);
      uint8_t* dst = w.at(w.hyp_tx_pa(), r.tx_len);
      if (src && dst)
        std::memmove(dst, src, r.tx_len);
    } else if (r.tx == Relay::Tx::kRetrieveRequest) {
      if (uint8_t* dst = w.at(w.hyp_tx_pa(), header_size(r.layout)))
        write_retrieve_request({dst, header_size(r.layout)}, r.handle, r.layout);
    }
    uint64_t out[kNumRegs];
    w.spmc.smc(r.in, out);
  }
  ProxyState& ps = w.proxy;
  if (e.views_set)
    std::memcpy(ps.view, e.views, w.profile->host_pages);
  if (e.mbox_set) ps.mbox = e.mbox;
  if (e.version_set) {
    ps.version_fixed = true;
    ps.host_version = e.host_version;
  }
  if (e.frag_set) {
    ps.frag = e.frag;
    const uint32_t from = e.frag.n - e.n_added;
    for (uint32_t k = 0; k < e.n_added; ++k) ps.frag_ranges[from + k] = e.frag_added[k];
  }
}

}  // namespace kconform::ffa
