// The SPMC model: FF-A ABIs as an EL3 SPMC answers them for the Normal world
// (SPEC.md SPMC:*, R2:*). Every check is a guard clause naming its rule; each
// handler decides on a const SPMC (into an SpmcAnswer) and apply() makes it so.
#include "models/ffa/spmc.h"

#include <memory>
#include <type_traits>
#include <cstring>
#include <algorithm>

#include "models/ffa/reclaim2_abi.h"

namespace kconform::ffa {

namespace {

constexpr uint64_t kSmcccNotSupported = ~0ull;  // SMCCC_RET_NOT_SUPPORTED: not an FF-A call
// FFA_PARTITION_INFO_GET descriptors (DEN0077 Table 6.x): 8 bytes in v1.0,
// 24 from v1.1 (with the UUID); one execution context, direct messages both
// ways, AArch64.
constexpr uint32_t kPartitionInfoSize10 = 8, kPartitionInfoSize11 = 24;
constexpr uint16_t kPartitionExecContexts = 1;
constexpr uint32_t kPartitionPropDirectMsg = 0x3, kPartitionPropAarch64 = 1u << 8;
// The smallest descriptor a retrieve request can be (the v1.0 header).
// Retrieve response flags: the transaction type in bits [4:3] (Table 10.22).
constexpr uint32_t kTransactionTypeShift = 3;

void set_handle_regs(uint64_t out[], int first, uint64_t h) {
  out[first] = handle_lo(h);
  out[first + 1] = handle_hi(h);
}

// The runs of t's pages not yet reclaimed, within each constituent (at most
// kMaxRanges; kMaxRanges + 1 means more). Written to out when given.
uint32_t unreclaimed_runs(const Transaction& t, Constituent* out) {
  uint32_t n = 0;
  Constituent last;
  uint64_t base = 0;
  for (uint32_t i = 0; i < t.n_ranges; ++i) {
    for (uint32_t p = 0; p < t.ranges[i].pages; ++p) {
      if (t.page_reclaimed(static_cast<uint32_t>(base + p))) continue;
      const uint64_t pa = t.ranges[i].address + uint64_t{p} * kFfaPage;
      if (n > 0 && last.address + uint64_t{last.pages} * kFfaPage == pa && p > 0 &&
          !t.page_reclaimed(static_cast<uint32_t>(base + p - 1))) {
        ++last.pages;
      } else {
        if (n == kMaxRanges) return kMaxRanges + 1;
        last = {pa, 1, 0};
        ++n;
      }
      if (out) out[n - 1] = last;
    }
    base += t.ranges[i].pages;
  }
  return n;
}

// The descriptor spec of t's retrieve response over runs[0, n).
DescSpec response_spec(const Transaction& t, Layout l, const Constituent* runs, uint32_t n) {
  DescSpec s;
  s.layout = l;
  s.sender = t.sender;
  s.n_receivers = t.n_receivers;
  for (uint32_t i = 0; i < t.n_receivers; ++i) s.receivers[i] = {t.recv_id[i], t.recv_perms[i], 0, 0, 0};
  s.attributes = t.attributes;
  s.flags = static_cast<uint32_t>(t.kind) << kTransactionTypeShift;
  s.tag = t.tag;
  s.handle = t.handle;
  s.n_ranges = n;
  s.ranges = runs;
  return s;
}

}  // namespace

// HARNESS:EL3 faults 20-24: EL3's reply to a forwarded SHARE/LEND/FRAG_TX
// lies; what the call did at EL3 stays as decided. Returns whether the armed
// fault fired (it is then disarmed by the caller).
bool lie_about_send(Fault f, uint64_t value, uint64_t out[]) {
  const bool frag_rx = fid_of(out) == kFnMemFragRx;
  const bool success = fid_of(out) == kFnSuccess32 || out[0] == kFnSuccess64;
  switch (f) {
    case Fault::kFragRxOffset:
      if (!frag_rx) return false;
      out[3] = value & kW32;
      return true;
    case Fault::kFragRxHandle:
      if (!frag_rx) return false;
      set_handle_regs(out, 1, handle_of(out[1], out[2]) ^ value);
      return true;
    case Fault::kFragRxReserved:
      if (!frag_rx) return false;
      out[5] = value & kW32;
      return true;
    case Fault::kEarlySuccess: {
      if (!frag_rx) return false;
      const uint64_t h = handle_of(out[1], out[2]);
      for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = 0;
      out[0] = kFnSuccess32;
      set_handle_regs(out, 2, h);
      return true;
    }
    case Fault::kFragRxWhole: {
      if (!success) return false;
      const uint64_t h = handle_of(out[2], out[3]);
      for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = 0;
      out[0] = kFnMemFragRx;
      set_handle_regs(out, 1, h);
      out[3] = value & kW32;
      return true;
    }
    default:
      return false;
  }
}

void set_error(uint64_t out[], int32_t code) {
  for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = 0;
  out[0] = kFnError;
  out[2] = static_cast<uint32_t>(code);
}

void set_success(uint64_t out[], uint64_t w2, uint64_t w3) {
  for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = 0;
  out[0] = kFnSuccess32;
  out[2] = w2;
  out[3] = w3;
}

bool is_mem_fid(uint64_t fid) {
  const uint32_t n = fn_num(fid);
  return is_ffa_fid(fid) &&
         ((n >= fn_num(kFnMemDonate32) && n <= fn_num(kFnMemFragTx)) || n == fn_num(kFnMemReclaim2));
}

bool Transaction::any_retrieved() const {
  for (uint32_t i = 0; i < n_receivers; ++i)
    if (retrieved[i]) return true;
  return false;
}

const Constituent* Transaction::constituent_of(uint64_t pa) const {
  const Constituent* end = ranges + n_ranges;
  if (ascending) {
    // The only constituent that can hold pa is the first whose end lies above it.
    const Constituent* c = std::partition_point(ranges, end, [pa](const Constituent& r) {
      return r.address + uint64_t{r.pages} * kFfaPage <= pa;
    });
    return c != end && pa >= c->address ? c : nullptr;
  }
  for (const Constituent* c = ranges; c != end; ++c)
    if (pa >= c->address && (pa - c->address) / kFfaPage < c->pages) return c;
  return nullptr;
}

int64_t Transaction::page_index(uint64_t pa) const {
  const Constituent* c = constituent_of(pa);
  if (!c) return -1;
  uint64_t base = 0;
  for (const Constituent* b = ranges; b != c; ++b) base += b->pages;
  return static_cast<int64_t>(base + (pa - c->address) / kFfaPage);
}

void SpmcAnswer::reset(const SpmcSession& s) {
  for (uint64_t& r : out) r = 0;
  after = s;
  slot = -1;
  zero_released = false;
  send_from = send_len = 0;
  respond = -1;
  bogus = false;
  lie = Fault::kNone;
  lie_value = 0;
  rx_chunk = rx_partitions = false;
  leeway.clear();
}

// One SMC being answered: its arguments, the TX bytes it may read, the answer
// being decided and the rules it hits.
struct Spmc::Reply {
  const CallArgs& a;
  std::span<const uint8_t> tx;
  SpmcAnswer& ans;
  Hits& h;

  SpmcSession& s() { return ans.after; }
  void error(int32_t code) { set_error(ans.out, code); }
  void success(uint64_t w2 = 0, uint64_t w3 = 0) { set_success(ans.out, w2, w3); }
  void success_handle(uint64_t handle) { success(handle_lo(handle), handle_hi(handle)); }
};

// --- Set-up and memory ---------------------------------------------------------

void Spmc::reset(const SpmcConfig& config, std::span<uint8_t> phys, uint64_t phys_base) {
  cfg_ = config;
  phys_ = phys;
  phys_base_ = phys_base;
  session_ = SpmcSession{};
  permissive_ = false;
  for (Transaction& t : tx_) t.live = false;
  dirty_slots_ = (1u << kMaxTransactions) - 1;
  for (uint32_t& n : ranges_hwm_) n = kMaxRanges;
}

std::vector<uint8_t> Spmc::bytes() const {
  std::vector<uint8_t> b;
  auto put = [&b](const void* p, size_t n) {
    const uint8_t* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  };
  put(&cfg_, sizeof cfg_);
  put(&permissive_, sizeof permissive_);
  put(&phys_base_, sizeof phys_base_);
  put(&session_, sizeof session_);
  put(tx_, sizeof tx_);
  put(buf_, sizeof buf_);
  put(resp_, sizeof resp_);
  return b;
}

void Spmc::restore(const Spmc& snap) {
  static_assert(std::is_trivially_copyable_v<Transaction> && std::is_trivially_copyable_v<SpmcSession> &&
                kMaxTransactions <= 32);
  cfg_ = snap.cfg_;
  permissive_ = snap.permissive_;
  phys_ = snap.phys_;
  phys_base_ = snap.phys_base_;
  std::memcpy(&session_, &snap.session_, sizeof session_);
  // A slot's constituents past its high-water mark were not written since
  // (copy_transaction() is the only writer): what they hold is the snap's.
  for (uint32_t i = 0; i < kMaxTransactions; ++i)
    if (dirty_slots_ >> i & 1) copy_transaction(tx_[i], snap.tx_[i], ranges_hwm_[i]);
  std::memcpy(ranges_hwm_, snap.ranges_hwm_, sizeof ranges_hwm_);
  std::memcpy(buf_, snap.buf_, buf_hwm_);
  std::memcpy(resp_, snap.resp_, resp_hwm_);
  dirty_slots_ = snap.dirty_slots_;
  buf_hwm_ = snap.buf_hwm_;
  resp_hwm_ = snap.resp_hwm_;
}

uint8_t* Spmc::locate(uint64_t pa, uint64_t len) const {
  if (pa < phys_base_ || pa - phys_base_ > phys_.size() || len > phys_.size() - (pa - phys_base_))
    return nullptr;
  return phys_.data() + (pa - phys_base_);
}
// Every write of the SPMC's to memory goes through here: marked for a restore.
uint8_t* Spmc::phys_mut(uint64_t pa, uint64_t len) {
  uint8_t* p = locate(pa, len);
  if (p && dirty_) dirty_->mark(p, len);
  return p;
}
const uint8_t* Spmc::phys(uint64_t pa, uint64_t len) const { return locate(pa, len); }

std::span<const uint8_t> Spmc::tx_window() const {
  const uint8_t* tx = phys(session_.tx_pa, session_.mbox_bytes);
  return tx ? std::span<const uint8_t>(tx, session_.mbox_bytes) : std::span<const uint8_t>();
}

bool Spmc::known_sp(uint16_t id) const {
  for (uint32_t i = 0; i < cfg_.n_sps; ++i)
    if (cfg_.sp_ids[i] == id) return true;
  return false;
}

bool Spmc::is_ns_memory(uint64_t pa, uint64_t len) const {
  return pa >= cfg_.ns_base && pa - cfg_.ns_base <= cfg_.ns_size && len <= cfg_.ns_size - (pa - cfg_.ns_base);
}

// --- The transaction table --------------------------------------------------------

const Transaction* Spmc::find(uint64_t handle, TableOverlay o) const {
  for (uint32_t i = 0; i < kMaxTransactions; ++i) {
    const Transaction& t = static_cast<int32_t>(i) == o.slot ? *o.tx : tx_[i];
    if (t.live && t.handle == handle) return &t;
  }
  return nullptr;
}

int32_t Spmc::free_slot() const {
  for (uint32_t i = 0; i < kMaxTransactions; ++i)
    if (!tx_[i].live) return static_cast<int32_t>(i);
  return -1;
}

bool Spmc::page_held(uint64_t pa, TableOverlay o) const {
  for (uint32_t i = 0; i < kMaxTransactions; ++i) {
    const Transaction& t = static_cast<int32_t>(i) == o.slot ? *o.tx : tx_[i];
    if (!t.live || !t.complete) continue;
    const uint64_t page = pa & ~(kFfaPage - 1);
    if (t.reclaimed_count == 0) {  // nothing reclaimed yet: every page of it is held
      if (t.constituent_of(page)) return true;
      continue;
    }
    const int64_t k = t.page_index(page);
    if (k >= 0 && !t.page_reclaimed(static_cast<uint32_t>(k))) return true;
  }
  return false;
}

// A new transaction in slot, with the session's next handle.
void Spmc::new_transaction(Reply& r, int32_t slot, MemKind kind, uint32_t total_len) const {
  r.ans.slot = slot;
  static const Transaction kEmpty{};
  copy_transaction(r.ans.tx, kEmpty);
  r.ans.tx.live = true;
  r.ans.tx.handle = r.s().next_handle++;
  r.ans.tx.kind = kind;
  r.ans.tx.total_len = total_len;
}

DescError Spmc::parse_sent(std::span<const uint8_t> frag, uint32_t total, Layout l, MemRegion* r, Hits* h,
                            DescLeeway* leeway) const {
  const DescError e = parse_region(frag, total, l, r, /*transmission=*/true, /*lenient=*/false, leeway);
  if (!permissive_ || (e != DescError::kEpCount && e != DescError::kEpMemOffset)) return e;
  // PROFILE:PERMISSIVE-EL3: an endpoint count of 0, an endpoint array inside the header.
  const DescError lax = parse_region(frag, total, l, r, /*transmission=*/true, /*lenient=*/true, leeway);
  if (lax != e && h) h->pass(kFfaProfilePermissiveEl3);
  return lax;
}

// Records a complete descriptor (check_send found nothing wrong) into t.
void Spmc::record(Transaction& t, std::span<const uint8_t> desc, Layout l) const {
  MemRegion r;
  parse_sent(desc, t.total_len, l, &r, nullptr);
  t.sender = r.sender;
  t.attributes = r.attributes;
  t.flags = r.flags;
  t.tag = r.tag;
  t.n_receivers = r.ep_count;
  for (uint32_t i = 0; i < r.ep_count; ++i) {
    t.recv_id[i] = r.receivers[i].id;
    t.recv_perms[i] = r.receivers[i].perms;
    t.retrieved[i] = false;
  }
  check_ranges(desc, r, t.total_len, t.ranges);
  t.n_ranges = r.range_count;
  Fnv1a rd;
  for (uint32_t i = 0; i < t.n_ranges; ++i) {
    rd.u64(t.ranges[i].address);
    rd.u32(t.ranges[i].pages);
  }
  t.ranges_digest = rd.h;
  t.ascending = true;
  for (uint32_t i = 1; i < t.n_ranges && t.ascending; ++i)
    t.ascending = t.ranges[i].address >= t.ranges[i - 1].address + uint64_t{t.ranges[i - 1].pages} * kFfaPage;
  t.total_pages = r.total_pages;
  t.reclaimed_count = 0;
  for (uint64_t& b : t.reclaimed) b = 0;
  t.complete = true;
  t.received = t.total_len;
}

int32_t Spmc::check_send(MemKind kind, std::span<const uint8_t> desc, Hits* hits, DescLeeway* leeway) const {
  Hits scratch;
  Hits& h = hits ? *hits : scratch;
  const Layout l = layout_for(session_.ns_version);
  h.pass(kFfaDescLayout);
  MemRegion r;
  DescError e = parse_sent(desc, static_cast<uint32_t>(desc.size()), l, &r, &h, leeway);
  // PROFILE:PERMISSIVE-EL3: any sender is taken for the caller.
  const bool any_sender = permissive_ && e == DescError::kOk && r.sender != kHostId;
  if (any_sender) h.pass(kFfaProfilePermissiveEl3);
  // SPMC:NS-TRUST: a Normal-world sender (bit 15 clear) is the hypervisor's to vouch for.
  const bool ns_sender = !any_sender && ns_trust_ && e == DescError::kOk && r.sender != kHostId && !(r.sender & 0x8000);
  if (ns_sender) h.pass(kFfaSpmcNsTrust);
  if (e == DescError::kOk) e = check_semantics(r, kind, any_sender || ns_sender ? r.sender : kHostId, [](uint16_t id, const void* ctx) {
        return static_cast<const Spmc*>(ctx)->known_sp(id);
      }, this, leeway);
  // A donation has exactly one receiver (ours: Table 10.20 note).
  if (e == DescError::kOk && kind == MemKind::kDonate && r.ep_count != 1) e = DescError::kReceiver;
  ConstituentScratch range_scratch;
  Constituent* const ranges = range_scratch.data();
  if (e == DescError::kOk) e = check_ranges(desc, r, static_cast<uint32_t>(desc.size()), ranges);
  // PROFILE:PERMISSIVE-EL3: overlapping constituents are taken as given
  // (check_ranges has read them all by then).
  if (e == DescError::kOverlap && (permissive_ || ns_trust_)) {
    h.pass(permissive_ ? kFfaProfilePermissiveEl3 : kFfaSpmcNsTrust);
    e = DescError::kOk;
  }
  if (e != DescError::kOk) {
    h.broke(desc_error_rule(e), "descriptor: %s", desc_error_name(e));
    return kInvalidParameters;
  }
  for (RuleId rule = kFfaDescHeader; rule <= kFfaDescLayout; ++rule) h.pass(rule);
  // Not more pages than a transaction can hold.
  if (r.total_pages > kMaxTxPages) {
    h.broke(kFfaSpmcDescTooBig, "%u pages > %u", r.total_pages, kMaxTxPages);
    return kNoMemory;
  }
  // Constituents inside Normal-world memory (SPMC:NS-TRUST: the hypervisor's to know).
  for (uint32_t i = 0; i < r.range_count && !ns_trust_; ++i)
    if (!is_ns_memory(ranges[i].address, uint64_t{ranges[i].pages} * kFfaPage)) {
      h.broke(kFfaSpmcNsMemory, "constituent %u at %#llx not NS memory", i,
              static_cast<unsigned long long>(ranges[i].address));
      return kInvalidParameters;
    }
  h.pass(kFfaSpmcNsMemory);
  // No page already held by a live transaction (PROFILE:PERMISSIVE-EL3: any).
  for (uint32_t i = 0; i < r.range_count && !permissive_ && !ns_trust_; ++i)
    for (uint64_t p = 0; p < ranges[i].pages; ++p)
      if (page_held(ranges[i].address + p * kFfaPage)) {
        h.broke(kFfaSpmcInUse, "page %#llx already shared",
                static_cast<unsigned long long>(ranges[i].address + p * kFfaPage));
        return kDenied;
      }
  h.pass(kFfaSpmcInUse);
  return 0;
}

uint32_t Spmc::build_response(const Transaction& t, Layout l, bool bogus, uint64_t bogus_address,
                              std::span<uint8_t> out, Fault lie, uint64_t lie_value) const {
  ConstituentScratch run_scratch;
  Constituent* const runs = run_scratch.data();
  const uint32_t n = unreclaimed_runs(t, runs);
  const DescSpec s = response_spec(t, l, runs, n);
  const uint32_t len = static_cast<uint32_t>(build_region(s, out));
  MemRegion r;
  parse_region(out.first(len), len, l, &r, /*transmission=*/false);
  if (bogus) put_u64(out, r.ranges_off, bogus_address);
  // HARNESS:EL3: one field of the response lies (the rest is the truth). The
  // composite offset is endpoint 0's (+4), the range count the composite's (+4),
  // the endpoint-array offset the v1.1+ header's (+32).
  const uint32_t v32 = static_cast<uint32_t>(lie_value);
  switch (lie) {
    case Fault::kRespCompositeOff: put_u32(out, r.ep_mem_offset + 4, v32); break;
    case Fault::kRespRangeCount: put_u32(out, r.composite_off + 4, v32); break;
    case Fault::kRespEmadOff:
      if (l != Layout::kV10) put_u32(out, 32, v32);
      break;
    case Fault::kRespConstituent:
      put_u64(out, r.ranges_off + uint64_t{kConstituentSize} * (lie_value >> 48), lie_value & ((1ull << 48) - 1));
      break;
    default: break;
  }
  return len;
}

// --- answer and apply ---------------------------------------------------------------

namespace {
// One answer and one Hits per thread, made once: an SpmcAnswer holds a whole
// Transaction (tens of KiB), too much to build per SMC (answer() resets
// what it reads; ans.tx is written whenever ans.slot is set).
struct Scratch {
  SpmcAnswer ans;
  Hits hits;
};
Scratch& scratch() {
  thread_local std::unique_ptr<Scratch> s = std::make_unique<Scratch>();
  return *s;
}
}  // namespace

void Spmc::smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs], Hits* hits) {
  Scratch& sc = scratch();
  sc.hits.clear();
  SpmcAnswer& ans = sc.ans;
  const std::span<const uint8_t> tx = tx_window();
  answer(in, tx, session_, ans, hits ? *hits : sc.hits);
  apply(ans, tx);
  for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = ans.out[i];
}

void Spmc::answer(const uint64_t call[kNumRegs], std::span<const uint8_t> tx, const SpmcSession& s, SpmcAnswer& ans,
                  Hits& hits) const {
  ans.reset(s);
  // SMCCC:HINT: the function called is the ID with the SVE hint clear.
  uint64_t in[kNumRegs];
  for (uint32_t i = 0; i < kNumRegs; ++i) in[i] = call[i];
  in[0] = without_hint(call[0]);
  // SPMC:ROUTED. An error armed by HARNESS:EL3 replaces EL3's answer to the
  // next memory call whether or not the firmware routes it (as the real-EL3
  // boundaries do, targets/spmc/tfa_el3.cc): it stands for any EL3.
  const bool armed_error = s.fault == Fault::kError && is_ffa_fid(in[0]) && is_mem_fid(CallArgs::of(in).fid());
  if (!is_ffa_fid(in[0]) || (fn_num(in[0]) > cfg_.max_fnum && !armed_error)) {
    ans.out[0] = kSmcccNotSupported;
    return;
  }
  // SMC32: only the W registers count (SMCCC §2.6).
  const CallArgs a = CallArgs::of(in);
  Reply r{a, tx, ans, hits};
  const uint32_t fid = a.fid();
  if (r.s().fault == Fault::kError && is_mem_fid(fid)) {
    r.s().fault = Fault::kNone;
    return r.error(static_cast<int32_t>(r.s().fault_value));
  }
  switch (fid) {
    case kFnVersion: return version(r);
    case kFnFeatures: return features(r);
    case kFnIdGet: return r.success(kHostId);
    case kFnSpmIdGet: return r.success(kSpmcId);
    case kFnPartitionInfoGet: return partition_info_get(r);
    case kFnRxtxMap32:
    case kFnRxtxMap64: return rxtx_map(r);
    case kFnRxtxUnmap: return rxtx_unmap(r);
    case kFnRxRelease: return rx_release(r);
    case kFnMemShare32:
    case kFnMemShare64: mem_send(MemKind::kShare, r); return lie(r);
    case kFnMemLend32:
    case kFnMemLend64: mem_send(MemKind::kLend, r); return lie(r);
    case kFnMemDonate32:
    case kFnMemDonate64:
      if (!cfg_.donate) return r.error(kNotSupported);
      mem_send(MemKind::kDonate, r);
      return lie(r);
    case kFnMemFragTx: frag_tx(r); return lie(r);
    case kFnMemFragRx:
      if (!cfg_.hyp_retrieve) return r.error(kNotSupported);  // SPMC:HYP-RETRIEVE-OPTIONAL
      return frag_rx(r);
    case kFnMemRetrieveReq32:
    case kFnMemRetrieveReq64:
      if (!cfg_.hyp_retrieve) return r.error(kNotSupported);  // SPMC:HYP-RETRIEVE-OPTIONAL
      return retrieve_req(r);
    case kFnMemReclaim: return reclaim(r);
    default:
      if (fid == kReclaim2.fid && cfg_.reclaim2) return reclaim2(r);
      return r.error(kNotSupported);
  }
}

void Spmc::lie(Reply& r) const {
  if (lie_about_send(r.s().fault, r.s().fault_value, r.ans.out)) r.s().fault = Fault::kNone;
}

void Spmc::apply(const SpmcAnswer& ans, std::span<const uint8_t> tx) {
  if (const uint32_t n = static_cast<uint32_t>(std::min<size_t>(ans.send_len, tx.size()))) {
    std::memcpy(buf_ + ans.send_from, tx.data(), n);
    buf_hwm_ = std::max(buf_hwm_, std::min<uint32_t>(kMaxDescBytes, ans.send_from + n));
  }
  if (ans.respond >= 0) {
    const uint32_t len = build_response(tx_[ans.respond], ans.respond_layout, ans.bogus, ans.bogus_address,
                                        {resp_, kMaxDescBytes}, ans.lie, ans.lie_value);
    // A lie may write a field past the response's length.
    resp_hwm_ = std::max(resp_hwm_, ans.lie != Fault::kNone ? kMaxDescBytes : std::min(len, kMaxDescBytes));
  }
  if (ans.rx_chunk)
    if (uint8_t* rx = phys_mut(ans.after.rx_pa, ans.rx_len))
      std::memcpy(rx, resp_ + ans.rx_from, ans.rx_len);
  if (ans.rx_partitions) {
    const uint32_t size = ans.partition_size;
    std::span<uint8_t> b(phys_mut(ans.after.rx_pa, ans.after.mbox_bytes), ans.after.mbox_bytes);
    for (uint32_t i = 0; i < ans.n_partitions; ++i) {
      put_u16(b, i * size, ans.partitions[i]);
      put_u16(b, i * size + 2, kPartitionExecContexts);
      put_u32(b, i * size + 4, kPartitionPropDirectMsg | kPartitionPropAarch64);
      if (size == kPartitionInfoSize11) {
        uint32_t u[4];
        sp_uuid(ans.partitions[i], u);
        for (int k = 0; k < 4; ++k) put_u32(b, i * size + 8 + 4 * k, u[k]);
      }
    }
  }
  if (ans.slot >= 0) {
    const Transaction& before = tx_[ans.slot];
    if (ans.zero_released) {
      // Every page the transaction held before and holds no more.
      uint64_t k = 0;
      for (uint32_t i = 0; i < before.n_ranges; ++i)
        for (uint32_t p = 0; p < before.ranges[i].pages; ++p, ++k) {
          const uint32_t page = static_cast<uint32_t>(k);
          if (before.page_reclaimed(page) || (ans.tx.live && !ans.tx.page_reclaimed(page))) continue;
          if (uint8_t* m = phys_mut(before.ranges[i].address + uint64_t{p} * kFfaPage, kFfaPage))
            std::memset(m, 0, kFfaPage);
        }
    }
    copy_transaction(tx_[ans.slot], ans.tx);
    dirty_slots_ |= 1u << ans.slot;
    ranges_hwm_[ans.slot] = std::max(ranges_hwm_[ans.slot], std::min(ans.tx.n_ranges, kMaxRanges));
  }
  session_ = ans.after;
}

// --- Framework and mailbox ---------------------------------------------------------

void Spmc::version(Reply& r) const {
  const uint32_t req = r.a.w1();
  // Bit 31 MBZ: NOT_SUPPORTED in w0.
  if (req >> 31) {
    r.ans.out[0] = static_cast<uint32_t>(kNotSupported);
    return;
  }
  if (version_major(req) == version_major(cfg_.version)) {
    const uint32_t minor = version_minor(req) < version_minor(cfg_.version) ? version_minor(req)
                                                                            : version_minor(cfg_.version);
    r.s().ns_version = ffa::version(1, minor);
  }
  r.ans.out[0] = cfg_.version;
}

void Spmc::features(Reply& r) const {
  const uint32_t id = r.a.w1();
  switch (id) {
    case kFnError: case kFnSuccess32: case kFnVersion: case kFnFeatures: case kFnRxRelease:
    case kFnRxtxMap32: case kFnRxtxMap64: case kFnRxtxUnmap: case kFnPartitionInfoGet:
    case kFnIdGet: case kFnSpmIdGet: case kFnMemShare32: case kFnMemShare64: case kFnMemLend32:
    case kFnMemLend64: case kFnMemReclaim: case kFnMemFragTx:
      return r.success(0);  // RXTX_MAP: w2[1:0] = 0, 4K minimum buffer
    case kFnMemRetrieveReq32: case kFnMemRetrieveReq64: case kFnMemFragRx:
      if (cfg_.hyp_retrieve) return r.success(0);
      return r.error(kNotSupported);  // SPMC:HYP-RETRIEVE-OPTIONAL
    case kFnMemDonate32: case kFnMemDonate64:
      if (cfg_.donate) return r.success(0);
      return r.error(kNotSupported);
    default:
      if (id == kReclaim2.fid && cfg_.reclaim2) return r.success(0);
      return r.error(kNotSupported);
  }
}

void Spmc::partition_info_get(Reply& r) const {
  const uint32_t want[4] = {r.a.w1(), r.a.w2(), r.a.w3(), r.a.w4()};
  const uint32_t flags = r.a.w5();
  const bool nil = (want[0] | want[1] | want[2] | want[3]) == 0;
  if (flags & ~kPartitionInfoCountOnly) return r.error(kInvalidParameters);
  uint16_t ids[kMaxSps];
  uint32_t n = 0;
  for (uint32_t i = 0; i < cfg_.n_sps; ++i) {
    uint32_t u[4];
    sp_uuid(cfg_.sp_ids[i], u);
    if (nil || (u[0] == want[0] && u[1] == want[1] && u[2] == want[2] && u[3] == want[3]))
      ids[n++] = cfg_.sp_ids[i];
  }
  if (n == 0) return r.error(kInvalidParameters);
  const bool v11 = r.s().ns_version >= kVersion11;
  const uint32_t size = v11 ? kPartitionInfoSize11 : kPartitionInfoSize10;
  if (!(flags & kPartitionInfoCountOnly)) {
    if (!r.s().mapped) return r.error(kDenied);
    if (r.s().rx_full) return r.error(kBusy);
    if (!phys(r.s().rx_pa, r.s().mbox_bytes) || n * size > r.s().mbox_bytes) return r.error(kNoMemory);
    r.ans.rx_partitions = true;
    r.ans.n_partitions = n;
    r.ans.partition_size = size;
    for (uint32_t i = 0; i < n; ++i) r.ans.partitions[i] = ids[i];
    r.s().rx_full = true;
  }
  r.success(n, v11 ? size : 0);
  // HARNESS:EL3 PART_COUNT / PART_SIZE: the reply lies about what RX holds.
  if (!(flags & kPartitionInfoCountOnly) && (r.s().fault == Fault::kPartCount || r.s().fault == Fault::kPartSize)) {
    r.ans.out[r.s().fault == Fault::kPartCount ? 2 : 3] = r.s().fault_value & kW32;
    r.s().fault = Fault::kNone;
  }
}

void Spmc::rxtx_map(Reply& r) const {
  const uint64_t tx = r.a.x1(), rx = r.a.x2();
  const uint32_t pages = rxtx_pages(r.a.w3());
  if (rxtx_reserved_set(r.a.w3())) return r.error(kInvalidParameters);
  if (r.s().mapped) return r.error(kDenied);
  const uint64_t len = uint64_t{pages} * kFfaPage;
  // SPMC:NS-TRUST: that the buffers are the caller's memory is the hypervisor's to know.
  auto ns = [&](uint64_t pa) { return ns_trust_ ? phys(pa, len) != nullptr : is_ns_memory(pa, len); };
  if (pages == 0 || tx % kFfaPage || rx % kFfaPage || !ns(tx) || !ns(rx) || (tx < rx + len && rx < tx + len))
    return r.error(kInvalidParameters);
  r.s().mapped = true;
  r.s().tx_pa = tx;
  r.s().rx_pa = rx;
  r.s().mbox_bytes = len;
  r.s().rx_full = false;
  r.success();
}

void Spmc::rxtx_unmap(Reply& r) const {
  if (r.a.w1() != 0 || !r.s().mapped) return r.error(kInvalidParameters);
  r.s().mapped = false;
  r.s().rx_full = false;
  r.success();
}

void Spmc::rx_release(Reply& r) const {
  if (!r.s().mapped || !r.s().rx_full) return r.error(kDenied);
  r.s().rx_full = false;
  r.success();
}

// --- Sending memory ---------------------------------------------------------------------

// The first of several fragments (SPMC:FRAG): its header must be whole; the
// transaction is allocated, incomplete, and the send is in flight.
void Spmc::start_send(MemKind kind, uint32_t total, std::span<const uint8_t> frag, Reply& r) const {
  Hits& h = r.h;
  SpmcSession& s = r.s();
  MemRegion m;
  const DescError e = parse_sent(frag, total, layout_for(s.ns_version), &m, &h, &r.ans.leeway);
  if (e != DescError::kOk) {
    h.broke(desc_error_rule(e), "first fragment: %s", desc_error_name(e));
    return r.error(kInvalidParameters);
  }
  // What a valid header leaves an SPMC free to refuse (DescLeeway) it may
  // refuse already here: the header and endpoint array are whole (DESC:HEADER).
  DescLeeway header;
  if (check_semantics(m, kind, m.sender, [](uint16_t, const void*) { return true; }, nullptr, &header) ==
      DescError::kOk)
    r.ans.leeway.merge(header);
  const int32_t slot = free_slot();
  if (slot < 0) {
    h.broke(kFfaSpmcHandleAlloc, "transaction table full");
    return r.error(kNoMemory);
  }
  new_transaction(r, slot, kind, total);
  r.ans.tx.received = static_cast<uint32_t>(frag.size());
  s.sending = true;
  s.send_handle = r.ans.tx.handle;
  r.ans.out[0] = kFnMemFragRx;
  set_handle_regs(r.ans.out, 1, r.ans.tx.handle);
  r.ans.out[3] = frag.size();
  h.pass(kFfaProxyFragment);
}

void Spmc::mem_send(MemKind kind, Reply& r) const {
  Hits& h = r.h;
  SpmcSession& s = r.s();
  const uint32_t total = r.a.w1(), frag = r.a.w2();
  // The descriptor is in TX: address and page count MBZ (ours: no other buffer).
  if (r.a.w3() != 0 || r.a.w4() != 0) {
    h.broke(kFfaProxyMemArgs, "own-buffer form not supported");
    return r.error(kInvalidParameters);
  }
  if (!s.mapped) {
    h.broke(kFfaMboxTxRequired, "no TX buffer");
    return r.error(kDenied);
  }
  if (total == 0 || frag == 0 || frag > total || frag > s.mbox_bytes) {
    h.broke(kFfaProxyMemArgs, "total %u fragment %u mailbox %llu", total, frag,
            static_cast<unsigned long long>(s.mbox_bytes));
    return r.error(kInvalidParameters);
  }
  if (total > kMaxDescBytes) {
    h.broke(kFfaSpmcDescTooBig, "descriptor of %u bytes", total);
    return r.error(kNoMemory);
  }
  // PROFILE:ONE-SEND: an SPMC configured for one send in flight answers BUSY;
  // otherwise a whole send goes on (this model reassembles one send at a time,
  // so a second fragmented one is BUSY either way).
  if (s.sending && (cfg_.one_send_in_flight || frag < total)) {
    h.broke(kFfaProfileOneSend, "a fragmented send is in flight");
    return r.error(kBusy);
  }
  if (r.tx.size() < frag) return r.error(kInvalidParameters);
  // The reassembly buffer holds the fragmented send in flight: a whole send
  // beside it (PROFILE:ONE-SEND off) is read from TX and not copied there.
  r.ans.send_from = 0;
  r.ans.send_len = s.sending ? 0 : frag;
  const std::span<const uint8_t> desc = r.tx.first(frag);
  if (frag < total) return start_send(kind, total, desc, r);
  const int32_t err = check_send(kind, desc, &h, &r.ans.leeway);
  if (err) return r.error(err);
  const int32_t slot = free_slot();
  if (slot < 0) {
    h.broke(kFfaSpmcHandleAlloc, "transaction table full");
    return r.error(kNoMemory);
  }
  h.pass(kFfaSpmcHandleAlloc);
  new_transaction(r, slot, kind, total);
  record(r.ans.tx, desc, layout_for(s.ns_version));
  r.success_handle(r.ans.tx.handle);
}

void Spmc::frag_tx(Reply& r) const {
  Hits& h = r.h;
  SpmcSession& s = r.s();
  const uint64_t handle = r.a.handle();
  const uint32_t frag = r.a.w3();
  const Transaction* t = s.sending ? find(s.send_handle) : nullptr;
  if (!t || handle != s.send_handle) {
    h.broke(kFfaProxyFragment, "no send in flight with handle %#llx", static_cast<unsigned long long>(handle));
    return r.error(kInvalidParameters);
  }
  r.ans.slot = slot_of(t);
  copy_transaction(r.ans.tx, *t);
  auto abort = [&](int32_t code) {
    r.ans.tx.live = false;
    s.sending = false;
    r.error(code);
  };
  // w4[31:16] is the sender's ID from a hypervisor; the host's is 0 (ours: MBZ).
  if (r.a.w4() != 0 || frag == 0 || frag > t->total_len - t->received || frag > s.mbox_bytes) {
    h.broke(kFfaProxyFragment, "fragment of %u bytes, %u remaining", frag, t->total_len - t->received);
    return abort(kInvalidParameters);
  }
  if (r.tx.size() < frag) return abort(kInvalidParameters);
  r.ans.send_from = t->received;
  r.ans.send_len = frag;
  r.ans.tx.received += frag;
  if (r.ans.tx.received < t->total_len) {
    r.ans.out[0] = kFnMemFragRx;
    set_handle_regs(r.ans.out, 1, t->handle);
    r.ans.out[3] = r.ans.tx.received;
    h.pass(kFfaProxyFragment);
    return;
  }
  s.sending = false;
  // The whole descriptor: the fragments received before, then this one.
  uint8_t whole[kMaxDescBytes];
  std::memcpy(whole, buf_, t->received);
  std::memcpy(whole + t->received, r.tx.data(), frag);
  const std::span<const uint8_t> desc(whole, t->total_len);
  if (const int32_t err = check_send(t->kind, desc, &h, &r.ans.leeway)) {
    r.ans.tx.live = false;
    return r.error(err);
  }
  record(r.ans.tx, desc, layout_for(s.ns_version));
  h.pass(kFfaProxyFragment);
  r.success_handle(t->handle);
}

// --- The hypervisor's retrieve request ------------------------------------------------

void Spmc::retrieve_chunk(Reply& r, bool first) const {
  SpmcSession& s = r.s();
  uint64_t max = s.mbox_bytes;
  if (s.max_frag != 0 && s.max_frag < max) max = s.max_frag;
  uint32_t len = static_cast<uint32_t>(max < s.resp_len - s.resp_sent ? max : s.resp_len - s.resp_sent);
  const uint32_t chunk = first ? 0 : s.resp_chunk + 1;
  s.resp_chunk = chunk;
  // HARNESS:EL3 FRAG_STALL: the chunk says 0 bytes and the SPMC stays where it is.
  if (!first && s.resp_stall_from != 0 && chunk >= s.resp_stall_from) len = 0;
  r.ans.rx_chunk = true;
  r.ans.rx_from = s.resp_sent;
  r.ans.rx_len = len;
  s.rx_full = true;
  s.resp_sent += len;
  if (s.resp_sent == s.resp_len) s.resp_active = false;
  if (first) {
    r.ans.out[0] = kFnMemRetrieveResp;
    r.ans.out[1] = s.resp_len;
    r.ans.out[2] = len;
  } else {
    r.ans.out[0] = kFnMemFragTx;
    set_handle_regs(r.ans.out, 1, s.resp_handle);
    r.ans.out[3] = len;
  }
  if (s.fault == Fault::kFragLen) {
    s.fault = Fault::kNone;
    r.ans.out[first ? 2 : 3] = s.fault_value & kW32;
  }
  // HARNESS:EL3: the chunk-indexed lies fire on their chunk only.
  if ((s.fault == Fault::kChunkFragLen || s.fault == Fault::kChunkFid) && (s.fault_value >> 32) == chunk) {
    if (s.fault == Fault::kChunkFragLen)
      r.ans.out[first ? 2 : 3] = s.fault_value & kW32;
    else
      r.ans.out[0] = s.fault_value & kW32;
    s.fault = Fault::kNone;
  }
}

void Spmc::frag_rx(Reply& r) const {
  const SpmcSession& s = r.s();
  if (!s.resp_active || r.a.handle() != s.resp_handle || r.a.w3() != s.resp_sent)
    return r.error(kInvalidParameters);
  if (s.rx_full) return r.error(kDenied);
  retrieve_chunk(r, false);
}

// SPMC:HYP-RETRIEVE-REQ: what is wrong with a hypervisor retrieve request req
// (whole, in TX) in layout l, or nullptr. Every field but the handle, the
// endpoint count and (v1.1+) the endpoint descriptor size and array offset,
// which mean nothing with no endpoint, is zero; so are bytes after the header.
namespace {
const char* hyp_retrieve_fault(std::span<const uint8_t> req, Layout l, uint64_t tx_tag) {
  const uint32_t hdr = header_size(l);
  if (req.size() < hdr) return "shorter than the header of the negotiated version";
  uint16_t sender = 0;
  uint32_t flags = 0;
  uint64_t tag = 0;
  get_u16(req, 0, &sender);
  get_u32(req, 4, &flags);
  get_u64(req, 16, &tag);
  if (sender != kHostId) return "sender is not the Normal world's owner (0)";
  if (flags != 0) return "flags not zero";
  if (tag != 0 && tag != tx_tag) return "tag neither zero nor the transaction's";
  for (uint64_t i = 2; i < 4; ++i)  // v1.0: attributes u8 @2, reserved u8 @3; v1.1+: attributes u16 @2
    if (req[i] != 0) return "memory attributes not zero";
  if (l == Layout::kV10) {
    for (uint64_t i = 24; i < 28; ++i)
      if (req[i] != 0) return "reserved field @24 not zero";
  } else {
    for (uint64_t i = 36; i < 48; ++i)
      if (req[i] != 0) return "reserved bytes @36..47 not zero";
  }
  for (uint64_t i = hdr; i < req.size(); ++i)
    if (req[i] != 0) return "bytes after the header not zero (no endpoint descriptor)";
  return nullptr;
}
}  // namespace

void Spmc::retrieve_req(Reply& r) const {
  SpmcSession& s = r.s();
  Hits& h = r.h;
  const uint32_t total = r.a.w1(), frag = r.a.w2();
  if (!s.mapped) return r.error(kDenied);
  const Layout l = layout_for(s.ns_version);
  // SPMC:HYP-RETRIEVE-REQ: whole, in TX (no buffer of its own), at least the header.
  if (r.a.w3() != 0 || r.a.w4() != 0 || total == 0 || frag != total || frag > s.mbox_bytes ||
      total < header_size(l) || r.tx.size() < total) {
    h.broke(kFfaSpmcHypRetrieveReq, "hypervisor retrieve request: length %u, fragment %u, buffer %#x/%u", total,
            frag, r.a.w3(), r.a.w4());
    return r.error(kInvalidParameters);
  }
  const std::span<const uint8_t> req = r.tx.first(total);
  uint64_t handle = 0;
  uint32_t ep_count = 0;
  get_u64(req, 8, &handle);
  get_u32(req, 28, &ep_count);
  // The Normal world is never a borrower of its own memory (ours: DENIED).
  if (ep_count != 0) return r.error(kDenied);
  const Transaction* t = find(handle);
  if (!t || !t->complete) {
    h.broke(kFfaSpmcRetrieveHyp, "no transaction %#llx", static_cast<unsigned long long>(handle));
    return r.error(kInvalidParameters);
  }
  if (const char* why = hyp_retrieve_fault(req, l, t->tag)) {
    h.broke(kFfaSpmcHypRetrieveReq, "hypervisor retrieve request of %#llx: %s", static_cast<unsigned long long>(handle),
            why);
    return r.error(kInvalidParameters);
  }
  h.pass(kFfaSpmcHypRetrieveReq);
  // SPMC:HYP-RETRIEVE-REQ: memory a borrower holds cannot be reclaimed
  // (SPMC:RECLAIM), so its description is not handed out for that (DENIED).
  if (t->any_retrieved()) {
    h.broke(kFfaSpmcHypRetrieveRetrieved, "handle %#llx retrieved by a borrower", static_cast<unsigned long long>(handle));
    return r.error(kDenied);
  }
  h.pass(kFfaSpmcHypRetrieveRetrieved);
  if (s.rx_full) return r.error(kBusy);
  // Describe the pages not yet reclaimed, as runs within each constituent.
  const uint32_t n = unreclaimed_runs(*t, nullptr);
  if (n > kMaxRanges) return r.error(kNoMemory);
  const uint64_t len = region_size(response_spec(*t, l, nullptr, n));
  s.resp_len = len > kMaxDescBytes ? 0 : static_cast<uint32_t>(len);
  if (s.resp_len == 0) return r.error(kNoMemory);
  r.ans.respond = slot_of(t);
  r.ans.respond_layout = l;
  if (s.fault == Fault::kBogusDesc) {
    s.fault = Fault::kNone;
    r.ans.bogus = true;
    r.ans.bogus_address = s.fault_value;
  }
  s.resp_stall_from = 0;
  switch (s.fault) {
    case Fault::kRespCompositeOff:
    case Fault::kRespRangeCount:
    case Fault::kRespEmadOff:
    case Fault::kRespConstituent:
      r.ans.lie = s.fault;
      r.ans.lie_value = s.fault_value;
      s.fault = Fault::kNone;
      break;
    case Fault::kFragStall:
      s.resp_stall_from = s.fault_value == 0 ? 1 : static_cast<uint32_t>(s.fault_value);
      s.fault = Fault::kNone;
      break;
    default: break;
  }
  s.resp_handle = t->handle;
  s.resp_sent = 0;
  s.resp_active = true;
  r.h.pass(kFfaSpmcRetrieveHyp);
  retrieve_chunk(r, true);
  if (s.fault == Fault::kRespTotalLen) {
    s.fault = Fault::kNone;
    r.ans.out[1] = s.fault_value & kW32;
  }
}

// --- Reclaiming ---------------------------------------------------------------------------

void Spmc::reclaim(Reply& r) const {
  Hits& h = r.h;
  const uint64_t handle = r.a.handle();
  const uint32_t flags = r.a.w3();
  // Flags: bit 0 zero memory, bit 1 time slicing; [31:2] MBZ.
  if (flags & ~(kReclaimZero | kReclaimTimeSlice)) {
    h.broke(kFfaSpmcReclaimFlags, "flags %#x", flags);
    return r.error(kInvalidParameters);
  }
  const Transaction* t = find(handle);
  // The handle names a complete transaction whose owner is the caller.
  // SPMC:NS-TRUST: the hypervisor reclaims for any of its endpoints.
  const bool owner = t && (t->sender == kHostId || (ns_trust_ && !(t->sender & 0x8000)));
  if (!t || !t->complete || !owner) {
    h.broke(kFfaSpmcReclaimHandle, "no transaction %#llx", static_cast<unsigned long long>(handle));
    return r.error(kInvalidParameters);
  }
  h.pass(kFfaSpmcReclaimHandle);
  if (t->any_retrieved()) {
    h.broke(kFfaSpmcReclaimRetrieved, "handle %#llx retrieved", static_cast<unsigned long long>(handle));
    return r.error(kDenied);
  }
  h.pass(kFfaSpmcReclaimRetrieved);
  // Zeroing shared memory is not the lender's to ask (ours: mirrors DESC:FLAGS).
  if ((flags & kReclaimZero) && t->kind == MemKind::kShare) {
    h.broke(kFfaSpmcReclaimFlags, "zero flag on a share");
    return r.error(kInvalidParameters);
  }
  h.pass(kFfaSpmcReclaimFlags);
  r.ans.slot = slot_of(t);
  copy_transaction(r.ans.tx, *t);
  r.ans.tx.live = false;
  r.ans.zero_released = flags & kReclaimZero;
  if (r.s().resp_active && r.s().resp_handle == t->handle) r.s().resp_active = false;
  r.success();
}

// R2:PROFILE as EL3 checks a RECLAIM2 of transaction t: the descriptor list
// (as the Relayer checks it), each descriptor inside t and disjoint from the
// others, the flags against t's kind, no borrower, every page asked for still
// held. Returns 0 or the error.
int32_t Spmc::reclaim2_refusal(const Reclaim2Args& args, std::span<const uint8_t> tx, const Transaction& t,
                               const Reclaim2Checks& check, Hits& h) const {
  const Reclaim2Abi& P = kReclaim2;
  const Reclaim2List list = read_reclaim2_list(tx, args);
  if (!check.descriptors_valid(list) || !check.total_matches(list) || !check.page_index_in_first(list))
    return P.err_args;
  for (uint32_t i = 0; i < args.count; ++i) {
    const Constituent ci = reclaim2_descriptor(tx, args, i);
    const uint64_t ei = ci.address + uint64_t{ci.pages} * kFfaPage;
    for (uint32_t j = 0; j < i; ++j) {
      const Constituent cj = reclaim2_descriptor(tx, args, j);
      if (ci.address < cj.address + uint64_t{cj.pages} * kFfaPage && cj.address < ei) {
        h.broke(kFfaR2Overlap, "descriptors %u and %u overlap", j, i);
        return P.err_args;
      }
    }
    bool inside = false;
    for (uint32_t k = 0; k < t.n_ranges && !inside; ++k) {
      const uint64_t a = t.ranges[k].address, e = a + uint64_t{t.ranges[k].pages} * kFfaPage;
      inside = ci.address >= a && ei <= e;
    }
    if (!inside) {
      h.broke(kFfaR2NotInTx, "descriptor %u (%#llx, %u pages) not in the transaction", i,
              static_cast<unsigned long long>(ci.address), ci.pages);
      return P.err_not_in_tx;
    }
  }
  h.pass(kFfaR2Overlap);
  h.pass(kFfaR2NotInTx);
  if ((args.flags & kReclaimZero) && t.kind == MemKind::kShare) {
    h.broke(kFfaR2Flags, "zero flag on a share");
    return P.err_args;
  }
  h.pass(kFfaR2Flags);
  if (t.any_retrieved()) {
    h.broke(kFfaR2Retrieved, "handle %#llx retrieved", static_cast<unsigned long long>(args.handle));
    return P.err_retrieved;
  }
  h.pass(kFfaR2Retrieved);
  for (uint32_t i = 0; i < args.count; ++i) {
    const Constituent c = reclaim2_descriptor(tx, args, i);
    for (uint64_t p = i == 0 ? args.page_index : 0; p < c.pages; ++p) {
      const int64_t k = t.page_index(c.address + p * kFfaPage);
      if (k < 0 || t.page_reclaimed(static_cast<uint32_t>(k))) {
        h.broke(kFfaR2Reclaimed, "page %#llx already reclaimed",
                static_cast<unsigned long long>(c.address + p * kFfaPage));
        return P.err_reclaimed;
      }
    }
  }
  h.pass(kFfaR2Reclaimed);
  return 0;
}

void Spmc::reclaim2(Reply& r) const {
  Hits& h = r.h;
  SpmcSession& s = r.s();
  const Reclaim2Abi& P = kReclaim2;
  const Reclaim2Args args = Reclaim2Args::of(r.a.x);
  const Reclaim2Checks check(args, h);
  if (!check.flags_mbz() || !check.offset_aligned() || !check.count_in_range()) return r.error(P.err_args);
  if (!s.mapped) {
    h.broke(kFfaMboxTxRequired, "no TX buffer");
    return r.error(kDenied);
  }
  if (!check.list_inside(s.mbox_bytes)) return r.error(P.err_args);
  const Transaction* t = find(args.handle);
  if (!t || !t->complete || t->sender != kHostId) {
    h.broke(kFfaR2Handle, "no transaction %#llx", static_cast<unsigned long long>(args.handle));
    return r.error(P.err_handle);
  }
  h.pass(kFfaR2Handle);
  if (const int32_t err = reclaim2_refusal(args, r.tx, *t, check, h)) return r.error(err);
  // R2:RESULT: the first pages asked for, in list order (fewer when
  // SHORT_COUNT is armed; LONG_COUNT reports more than were reclaimed).
  const uint64_t asked = args.pages_asked();
  uint64_t n = asked;
  if (s.fault == Fault::kShortCount) {
    s.fault = Fault::kNone;
    if (s.fault_value < asked) n = s.fault_value;
  }
  r.ans.slot = slot_of(t);
  copy_transaction(r.ans.tx, *t);
  r.ans.zero_released = args.flags & kReclaimZero;
  Transaction& after = r.ans.tx;
  const uint64_t done = for_each_reclaim2_page(r.tx, args, n, [&](uint64_t pa) {
    after.mark_reclaimed(static_cast<uint32_t>(after.page_index(pa)));
    ++after.reclaimed_count;
    return true;
  });
  uint64_t reported = done;
  if (s.fault == Fault::kLongCount) {
    s.fault = Fault::kNone;
    reported += s.fault_value;
  }
  // R2:EQUIVALENCE: the handle ends with its last page.
  if (after.reclaimed_count == after.total_pages) {
    if (s.resp_active && s.resp_handle == after.handle) s.resp_active = false;
    after.live = false;
    h.pass(kFfaR2Equivalence);
  }
  r.success(reported);
}

// --- The borrower (HARNESS:SP) -------------------------------------------------------------

void Spmc::answer_sp(bool retrieve, uint64_t handle, uint16_t sp, SpmcAnswer& ans) const {
  ans.reset(session_);
  const Transaction* t = find(handle);
  if (!t || !t->complete) return set_error(ans.out, kInvalidParameters);
  for (uint32_t i = 0; i < t->n_receivers; ++i) {
    if (t->recv_id[i] != sp) continue;
    if (retrieve) {
      // ours: a region partly reclaimed can no longer be retrieved.
      if (t->retrieved[i] || t->reclaimed_count) return set_error(ans.out, kDenied);
    } else if (!t->retrieved[i]) {
      continue;
    }
    ans.slot = slot_of(t);
    copy_transaction(ans.tx, *t);
    ans.tx.retrieved[i] = retrieve;
    return set_success(ans.out);
  }
  set_error(ans.out, kInvalidParameters);
}

bool Spmc::rename_handle(uint64_t from, uint64_t to) {
  for (uint32_t i = 0; i < kMaxTransactions; ++i) {
    if (!tx_[i].live || tx_[i].handle != from) continue;
    tx_[i].handle = to;
    dirty_slots_ |= 1u << i;
    if (session_.send_handle == from) session_.send_handle = to;
    if (session_.resp_handle == from) session_.resp_handle = to;
    return true;
  }
  return false;
}

void Spmc::sp_retrieve(uint64_t handle, uint16_t sp, uint64_t out[kNumRegs], Hits*) {
  SpmcAnswer& ans = scratch().ans;
  answer_sp(true, handle, sp, ans);
  apply(ans, {});
  for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = ans.out[i];
}

void Spmc::sp_relinquish(uint64_t handle, uint16_t sp, uint64_t out[kNumRegs], Hits*) {
  SpmcAnswer& ans = scratch().ans;
  answer_sp(false, handle, sp, ans);
  apply(ans, {});
  for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = ans.out[i];
}

// --- The digest ------------------------------------------------------------------------------

void Spmc::digest(Fnv1a& h, TableOverlay o) const {
  auto entry = [&](uint32_t i) -> const Transaction& {
    return static_cast<int32_t>(i) == o.slot ? *o.tx : tx_[i];
  };
  uint32_t n = 0;
  for (uint32_t i = 0; i < kMaxTransactions; ++i) n += entry(i).live;
  h.u32(n);
  uint64_t last = 0;
  for (uint32_t k = 0; k < n; ++k) {
    // Next live transaction in ascending handle order.
    const Transaction* best = nullptr;
    for (uint32_t i = 0; i < kMaxTransactions; ++i) {
      const Transaction& t = entry(i);
      if (t.live && (k == 0 || t.handle > last) && (!best || t.handle < best->handle)) best = &t;
    }
    const Transaction& t = *best;
    last = t.handle;
    h.u64(t.handle);
    h.u8(t.complete);
    h.u8(static_cast<uint8_t>(t.kind));
    if (!t.complete) {
      h.u32(t.received);
      h.u32(t.total_len);
      continue;
    }
    h.u16(t.sender);
    h.u16(t.attributes);
    h.u32(t.flags);
    h.u64(t.tag);
    h.u8(static_cast<uint8_t>(t.n_receivers));
    for (uint32_t i = 0; i < t.n_receivers; ++i) {
      h.u16(t.recv_id[i]);
      h.u8(t.recv_perms[i]);
      h.u8(t.retrieved[i]);
    }
    h.u32(t.n_ranges);
    h.u64(t.ranges_digest);
    h.u32(t.total_pages);
    h.u32(t.reclaimed_count);
    for (uint32_t i = 0; i < (t.total_pages + 7) / 8; ++i)
      h.u8(static_cast<uint8_t>(t.reclaimed[i / 8] >> (8 * (i % 8))));
  }
}

}  // namespace kconform::ffa
