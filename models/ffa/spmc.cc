// The SPMC model: FF-A ABIs as an EL3 SPMC answers them for the Normal world
// (SPEC.md SPMC:*, R2:*). Every check is a guard clause naming its rule.
#include "models/ffa/spmc.h"

#include "models/ffa/reclaim2_profile.h"

namespace kconform::ffa {

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
  return is_ffa_fid(fid) && ((n >= 0x71 && n <= 0x7B) || n == 0x91);
}

bool Transaction::any_retrieved() const {
  for (uint32_t i = 0; i < n_receivers; ++i)
    if (retrieved[i]) return true;
  return false;
}

int64_t Transaction::page_index(uint64_t pa) const {
  uint64_t base = 0;
  for (uint32_t i = 0; i < n_ranges; ++i) {
    const uint64_t a = ranges[i].address, n = ranges[i].pages;
    if (pa >= a && (pa - a) / kFfaPage < n) return static_cast<int64_t>(base + (pa - a) / kFfaPage);
    base += n;
  }
  return -1;
}

namespace {
uint32_t w(uint64_t x) { return static_cast<uint32_t>(x); }
uint64_t handle_of(uint64_t lo, uint64_t hi) { return (lo & 0xffffffffu) | (hi & 0xffffffffu) << 32; }
void set_handle_regs(uint64_t out[], int first, uint64_t h) {
  out[first] = h & 0xffffffffu;
  out[first + 1] = h >> 32;
}
// The SP's UUID in FFA_PARTITION_INFO_GET w1..w4 order (ours: "kcon" "form" 0 id).
void sp_uuid(uint16_t id, uint32_t u[4]) {
  u[0] = 0x6b636f6e;
  u[1] = 0x666f726d;
  u[2] = 0;
  u[3] = id;
}
}  // namespace

void Spmc::reset(const SpmcConfig& config, std::span<uint8_t> phys, uint64_t phys_base) {
  cfg_ = config;
  phys_ = phys;
  phys_base_ = phys_base;
  ns_version_ = kVersion10;
  mapped_ = false;
  tx_pa_ = rx_pa_ = mbox_bytes_ = 0;
  rx_full_ = false;
  for (Transaction& t : tx_) t.live = false;
  next_handle_ = kHandleBase | 1;
  sending_ = false;
  send_handle_ = 0;
  resp_active_ = false;
  resp_handle_ = 0;
  resp_len_ = resp_sent_ = 0;
  fault_ = Fault::kNone;
  fault_value_ = 0;
}

uint8_t* Spmc::phys(uint64_t pa, uint64_t len) {
  if (pa < phys_base_ || pa - phys_base_ > phys_.size() || len > phys_.size() - (pa - phys_base_))
    return nullptr;
  return phys_.data() + (pa - phys_base_);
}
const uint8_t* Spmc::phys(uint64_t pa, uint64_t len) const {
  return const_cast<Spmc*>(this)->phys(pa, len);
}

bool Spmc::known_sp(uint16_t id) const {
  for (uint32_t i = 0; i < cfg_.n_sps; ++i)
    if (cfg_.sp_ids[i] == id) return true;
  return false;
}

bool Spmc::is_ns_memory(uint64_t pa, uint64_t len) const {
  return pa >= cfg_.ns_base && pa - cfg_.ns_base <= cfg_.ns_size && len <= cfg_.ns_size - (pa - cfg_.ns_base);
}

Transaction* Spmc::find_mut(uint64_t handle) {
  for (Transaction& t : tx_)
    if (t.live && t.handle == handle) return &t;
  return nullptr;
}
const Transaction* Spmc::find(uint64_t handle) const { return const_cast<Spmc*>(this)->find_mut(handle); }

Transaction* Spmc::alloc_tx() {
  for (Transaction& t : tx_)
    if (!t.live) {
      t = Transaction{};
      t.live = true;
      t.handle = next_handle_++;
      return &t;
    }
  return nullptr;
}

bool Spmc::page_held(uint64_t pa) const {
  for (const Transaction& t : tx_) {
    if (!t.live || !t.complete) continue;
    const int64_t i = t.page_index(pa & ~(kFfaPage - 1));
    if (i >= 0 && !t.page_reclaimed(static_cast<uint32_t>(i))) return true;
  }
  return false;
}

void Spmc::smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs], Hits* hits) {
  for (uint32_t i = 0; i < kNumRegs; ++i) out[i] = 0;
  const uint64_t fid = in[0] & 0xffffffffu;
  if (!is_ffa_fid(in[0])) {
    out[0] = ~0ull;  // SMCCC_RET_NOT_SUPPORTED
    return;
  }
  // SMC32: only the W registers count (SMCCC §2.6).
  uint64_t a[kNumRegs];
  for (uint32_t i = 0; i < kNumRegs; ++i) a[i] = is_smc64(fid) ? in[i] : (in[i] & 0xffffffffu);
  a[0] = fid;
  if (fault_ == Fault::kError && is_mem_fid(fid)) {
    fault_ = Fault::kNone;
    set_error(out, static_cast<int32_t>(fault_value_));
    return;
  }
  switch (fid) {
    case kFnVersion: return version(a, out);
    case kFnFeatures: return features(a, out);
    case kFnIdGet: return set_success(out, kHostId);
    case kFnSpmIdGet: return set_success(out, kSpmcId);
    case kFnPartitionInfoGet: return partition_info_get(a, out);
    case kFnRxtxMap32:
    case kFnRxtxMap64: return rxtx_map(a, out);
    case kFnRxtxUnmap: return rxtx_unmap(a, out);
    case kFnRxRelease: return rx_release(a, out);
    case kFnMemShare32:
    case kFnMemShare64: return mem_send(MemKind::kShare, a, out, hits);
    case kFnMemLend32:
    case kFnMemLend64: return mem_send(MemKind::kLend, a, out, hits);
    case kFnMemDonate32:
    case kFnMemDonate64: return mem_send(MemKind::kDonate, a, out, hits);
    case kFnMemFragTx: return frag_tx(a, out, hits);
    case kFnMemFragRx: return frag_rx(a, out);
    case kFnMemRetrieveReq32:
    case kFnMemRetrieveReq64: return retrieve_req(a, out, hits);
    case kFnMemReclaim: return reclaim(a, out, hits);
    default:
      if (fid == kReclaim2.fid && cfg_.reclaim2) return reclaim2(a, out, hits);
      return set_error(out, kNotSupported);
  }
}

void Spmc::version(const uint64_t* a, uint64_t* out) {
  const uint32_t req = w(a[1]);
  // Bit 31 MBZ: NOT_SUPPORTED in w0.
  if (req >> 31) {
    out[0] = static_cast<uint32_t>(kNotSupported);
    return;
  }
  if (version_major(req) == version_major(cfg_.version)) {
    const uint32_t minor = version_minor(req) < version_minor(cfg_.version) ? version_minor(req)
                                                                            : version_minor(cfg_.version);
    ns_version_ = ffa::version(1, minor);
  }
  out[0] = cfg_.version;
}

void Spmc::features(const uint64_t* a, uint64_t* out) {
  const uint32_t id = w(a[1]);
  switch (id) {
    case kFnError: case kFnSuccess32: case kFnVersion: case kFnFeatures: case kFnRxRelease:
    case kFnRxtxMap32: case kFnRxtxMap64: case kFnRxtxUnmap: case kFnPartitionInfoGet:
    case kFnIdGet: case kFnSpmIdGet: case kFnMemShare32: case kFnMemShare64: case kFnMemLend32:
    case kFnMemLend64: case kFnMemDonate32: case kFnMemDonate64: case kFnMemRetrieveReq32:
    case kFnMemRetrieveReq64: case kFnMemReclaim: case kFnMemFragRx: case kFnMemFragTx:
      return set_success(out, 0);  // RXTX_MAP: w2[1:0] = 0, 4K minimum buffer
    default:
      if (id == kReclaim2.fid && cfg_.reclaim2) return set_success(out, 0);
      return set_error(out, kNotSupported);
  }
}

void Spmc::partition_info_get(const uint64_t* a, uint64_t* out) {
  const uint32_t want[4] = {w(a[1]), w(a[2]), w(a[3]), w(a[4])};
  const uint32_t flags = w(a[5]);
  const bool nil = (want[0] | want[1] | want[2] | want[3]) == 0;
  // Flags: bit 0 count only; [31:1] MBZ.
  if (flags & ~1u) return set_error(out, kInvalidParameters);
  uint16_t ids[kMaxSps];
  uint32_t n = 0;
  for (uint32_t i = 0; i < cfg_.n_sps; ++i) {
    uint32_t u[4];
    sp_uuid(cfg_.sp_ids[i], u);
    if (nil || (u[0] == want[0] && u[1] == want[1] && u[2] == want[2] && u[3] == want[3]))
      ids[n++] = cfg_.sp_ids[i];
  }
  if (n == 0) return set_error(out, kInvalidParameters);
  const uint32_t size = ns_version_ >= kVersion11 ? 24 : 8;
  if (!(flags & 1)) {
    if (!mapped_) return set_error(out, kDenied);
    if (rx_full_) return set_error(out, kBusy);
    uint8_t* rx = phys(rx_pa_, mbox_bytes_);
    if (!rx || n * size > mbox_bytes_) return set_error(out, kNoMemory);
    std::span<uint8_t> b(rx, mbox_bytes_);
    for (uint32_t i = 0; i < n; ++i) {
      put_u16(b, i * size, ids[i]);
      put_u16(b, i * size + 2, 1);         // execution contexts
      put_u32(b, i * size + 4, 0x3 | 1u << 8);  // direct msg send/recv, AArch64
      if (size == 24) {
        uint32_t u[4];
        sp_uuid(ids[i], u);
        for (int k = 0; k < 4; ++k) put_u32(b, i * size + 8 + 4 * k, u[k]);
      }
    }
    rx_full_ = true;
  }
  set_success(out, n, ns_version_ >= kVersion11 ? size : 0);
}

void Spmc::rxtx_map(const uint64_t* a, uint64_t* out) {
  const uint64_t tx = a[1], rx = a[2];
  const uint32_t pages = w(a[3]) & 0x3f;
  if (w(a[3]) >> 6) return set_error(out, kInvalidParameters);
  if (mapped_) return set_error(out, kDenied);
  const uint64_t len = static_cast<uint64_t>(pages) * kFfaPage;
  if (pages == 0 || tx % kFfaPage || rx % kFfaPage || !is_ns_memory(tx, len) || !is_ns_memory(rx, len) ||
      (tx < rx + len && rx < tx + len))
    return set_error(out, kInvalidParameters);
  mapped_ = true;
  tx_pa_ = tx;
  rx_pa_ = rx;
  mbox_bytes_ = len;
  rx_full_ = false;
  set_success(out);
}

void Spmc::rxtx_unmap(const uint64_t* a, uint64_t* out) {
  if (w(a[1]) != 0 || !mapped_) return set_error(out, kInvalidParameters);
  mapped_ = false;
  rx_full_ = false;
  set_success(out);
}

void Spmc::rx_release(const uint64_t* a, uint64_t* out) {
  if (!mapped_ || !rx_full_) return set_error(out, kDenied);
  rx_full_ = false;
  set_success(out);
}

int32_t Spmc::check_send(MemKind kind, std::span<const uint8_t> desc, Hits* hits) const {
  Hits scratch;
  Hits& h = hits ? *hits : scratch;
  const Layout l = layout_for(ns_version_);
  h.pass(kFfaDescLayout);
  MemRegion r;
  DescError e = parse_region(desc, static_cast<uint32_t>(desc.size()), l, &r);
  if (e == DescError::kOk) e = check_semantics(r, kind, kHostId, [](uint16_t id, const void* ctx) {
        return static_cast<const Spmc*>(ctx)->known_sp(id);
      }, this);
  // A donation has exactly one receiver (ours: Table 10.20 note).
  if (e == DescError::kOk && kind == MemKind::kDonate && r.ep_count != 1) e = DescError::kReceiver;
  Constituent* ranges = const_cast<Spmc*>(this)->scratch_;
  if (e == DescError::kOk) e = check_ranges(desc, r, static_cast<uint32_t>(desc.size()), ranges);
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
  // Constituents inside Normal-world memory.
  for (uint32_t i = 0; i < r.range_count; ++i)
    if (!is_ns_memory(ranges[i].address, static_cast<uint64_t>(ranges[i].pages) * kFfaPage)) {
      h.broke(kFfaSpmcNsMemory, "constituent %u at %#llx not NS memory", i,
              static_cast<unsigned long long>(ranges[i].address));
      return kInvalidParameters;
    }
  h.pass(kFfaSpmcNsMemory);
  // No page already held by a live transaction.
  for (uint32_t i = 0; i < r.range_count; ++i)
    for (uint64_t p = 0; p < ranges[i].pages; ++p)
      if (page_held(ranges[i].address + p * kFfaPage)) {
        h.broke(kFfaSpmcInUse, "page %#llx already shared",
                static_cast<unsigned long long>(ranges[i].address + p * kFfaPage));
        return kDenied;
      }
  h.pass(kFfaSpmcInUse);
  return 0;
}

int32_t Spmc::finish_send(Transaction* t, Hits* hits) {
  std::span<const uint8_t> desc(buf_, t->total_len);
  const int32_t err = check_send(t->kind, desc, hits);
  if (err) return err;
  MemRegion r;
  parse_region(desc, t->total_len, layout_for(ns_version_), &r);
  t->sender = r.sender;
  t->attributes = r.attributes;
  t->flags = r.flags;
  t->tag = r.tag;
  t->n_receivers = r.ep_count;
  for (uint32_t i = 0; i < r.ep_count; ++i) {
    t->recv_id[i] = r.receivers[i].id;
    t->recv_perms[i] = r.receivers[i].perms;
    t->retrieved[i] = false;
  }
  check_ranges(desc, r, t->total_len, t->ranges);
  t->n_ranges = r.range_count;
  t->total_pages = r.total_pages;
  t->reclaimed_count = 0;
  for (uint64_t& b : t->reclaimed) b = 0;
  t->complete = true;
  t->received = t->total_len;
  return 0;
}

void Spmc::mem_send(MemKind kind, const uint64_t* a, uint64_t* out, Hits* hits) {
  Hits scratch;
  Hits& h = hits ? *hits : scratch;
  const uint32_t total = w(a[1]), frag = w(a[2]);
  // The descriptor is in TX: address and page count MBZ (ours: no other buffer).
  if (w(a[3]) != 0 || w(a[4]) != 0) {
    h.broke(kFfaProxyMemArgs, "own-buffer form not supported");
    return set_error(out, kInvalidParameters);
  }
  if (!mapped_) {
    h.broke(kFfaMboxTxRequired, "no TX buffer");
    return set_error(out, kDenied);
  }
  if (total == 0 || frag == 0 || frag > total || frag > mbox_bytes_) {
    h.broke(kFfaProxyMemArgs, "total %u fragment %u mailbox %llu", total, frag,
            static_cast<unsigned long long>(mbox_bytes_));
    return set_error(out, kInvalidParameters);
  }
  if (total > kMaxDescBytes) {
    h.broke(kFfaSpmcDescTooBig, "descriptor of %u bytes", total);
    return set_error(out, kNoMemory);
  }
  if (sending_) {
    h.broke(kFfaSpmcBusy, "a fragmented send is in flight");
    return set_error(out, kBusy);
  }
  const uint8_t* tx = phys(tx_pa_, frag);
  if (!tx) return set_error(out, kInvalidParameters);
  for (uint32_t i = 0; i < frag; ++i) buf_[i] = tx[i];
  if (frag < total) {
    // First of several fragments: its header must be whole.
    MemRegion r;
    const DescError e = parse_region(std::span<const uint8_t>(buf_, frag), total, layout_for(ns_version_), &r);
    if (e != DescError::kOk) {
      h.broke(desc_error_rule(e), "first fragment: %s", desc_error_name(e));
      return set_error(out, kInvalidParameters);
    }
    Transaction* t = alloc_tx();
    if (!t) {
      h.broke(kFfaSpmcHandleAlloc, "transaction table full");
      return set_error(out, kNoMemory);
    }
    t->kind = kind;
    t->total_len = total;
    t->received = frag;
    sending_ = true;
    send_handle_ = t->handle;
    out[0] = kFnMemFragRx;
    set_handle_regs(out, 1, t->handle);
    out[3] = frag;
    h.pass(kFfaProxyFragment);
    return;
  }
  const int32_t err = check_send(kind, std::span<const uint8_t>(buf_, total), &h);
  if (err) return set_error(out, err);
  Transaction* t = alloc_tx();
  if (!t) {
    h.broke(kFfaSpmcHandleAlloc, "transaction table full");
    return set_error(out, kNoMemory);
  }
  h.pass(kFfaSpmcHandleAlloc);
  t->kind = kind;
  t->total_len = total;
  finish_send(t, nullptr);
  set_success(out, t->handle & 0xffffffffu, t->handle >> 32);
}

void Spmc::frag_tx(const uint64_t* a, uint64_t* out, Hits* hits) {
  Hits scratch;
  Hits& h = hits ? *hits : scratch;
  const uint64_t handle = handle_of(a[1], a[2]);
  const uint32_t frag = w(a[3]);
  Transaction* t = sending_ ? find_mut(send_handle_) : nullptr;
  if (!t || handle != send_handle_) {
    h.broke(kFfaProxyFragment, "no send in flight with handle %#llx", static_cast<unsigned long long>(handle));
    return set_error(out, kInvalidParameters);
  }
  auto abort = [&](int32_t code) {
    t->live = false;
    sending_ = false;
    set_error(out, code);
  };
  // w4[31:16] is the sender's ID from a hypervisor; the host's is 0 (ours: MBZ).
  if (w(a[4]) != 0 || frag == 0 || frag > t->total_len - t->received || frag > mbox_bytes_) {
    h.broke(kFfaProxyFragment, "fragment of %u bytes, %u remaining", frag, t->total_len - t->received);
    return abort(kInvalidParameters);
  }
  const uint8_t* tx = phys(tx_pa_, frag);
  if (!tx) return abort(kInvalidParameters);
  for (uint32_t i = 0; i < frag; ++i) buf_[t->received + i] = tx[i];
  t->received += frag;
  if (t->received < t->total_len) {
    out[0] = kFnMemFragRx;
    set_handle_regs(out, 1, t->handle);
    out[3] = t->received;
    h.pass(kFfaProxyFragment);
    return;
  }
  sending_ = false;
  const int32_t err = finish_send(t, &h);
  if (err) {
    t->live = false;
    return set_error(out, err);
  }
  h.pass(kFfaProxyFragment);
  set_success(out, t->handle & 0xffffffffu, t->handle >> 32);
}

void Spmc::write_retrieve_chunk(uint64_t* out, bool first) {
  const uint32_t len = static_cast<uint32_t>(
      mbox_bytes_ < resp_len_ - resp_sent_ ? mbox_bytes_ : resp_len_ - resp_sent_);
  uint8_t* rx = phys(rx_pa_, len);
  if (rx)
    for (uint32_t i = 0; i < len; ++i) rx[i] = resp_[resp_sent_ + i];
  rx_full_ = true;
  const uint32_t start = resp_sent_;
  resp_sent_ += len;
  if (resp_sent_ == resp_len_) resp_active_ = false;
  if (first) {
    out[0] = kFnMemRetrieveResp;
    out[1] = resp_len_;
    out[2] = len;
  } else {
    out[0] = kFnMemFragTx;
    set_handle_regs(out, 1, resp_handle_);
    out[3] = len;
  }
  (void)start;
  if (fault_ == Fault::kFragLen) {
    fault_ = Fault::kNone;
    out[first ? 2 : 3] = fault_value_ & 0xffffffffu;
  }
}

void Spmc::frag_rx(const uint64_t* a, uint64_t* out) {
  const uint64_t handle = handle_of(a[1], a[2]);
  if (!resp_active_ || handle != resp_handle_ || w(a[3]) != resp_sent_)
    return set_error(out, kInvalidParameters);
  if (rx_full_) return set_error(out, kDenied);
  write_retrieve_chunk(out, false);
}

void Spmc::retrieve_req(const uint64_t* a, uint64_t* out, Hits* hits) {
  Hits scratch;
  Hits& h = hits ? *hits : scratch;
  const uint32_t total = w(a[1]), frag = w(a[2]);
  if (!mapped_) return set_error(out, kDenied);
  if (w(a[3]) != 0 || w(a[4]) != 0 || total == 0 || frag != total || frag > mbox_bytes_)
    return set_error(out, kInvalidParameters);
  const uint8_t* tx = phys(tx_pa_, total);
  if (!tx || total < 32) return set_error(out, kInvalidParameters);
  std::span<const uint8_t> req(tx, total);
  uint64_t handle = 0;
  uint32_t ep_count = 0;
  get_u64(req, 8, &handle);
  get_u32(req, 28, &ep_count);
  // The Normal world is never a borrower of its own memory (ours: DENIED).
  if (ep_count != 0) return set_error(out, kDenied);
  const Transaction* t = find(handle);
  if (!t || !t->complete) {
    h.broke(kFfaSpmcRetrieveHyp, "no transaction %#llx", static_cast<unsigned long long>(handle));
    return set_error(out, kInvalidParameters);
  }
  if (rx_full_) return set_error(out, kBusy);
  // Describe the pages not yet reclaimed, as runs within each constituent.
  uint32_t n = 0;
  uint64_t base = 0;
  for (uint32_t i = 0; i < t->n_ranges; ++i) {
    for (uint32_t p = 0; p < t->ranges[i].pages; ++p) {
      if (t->page_reclaimed(static_cast<uint32_t>(base + p))) continue;
      const uint64_t pa = t->ranges[i].address + static_cast<uint64_t>(p) * kFfaPage;
      if (n > 0 && scratch_[n - 1].address + static_cast<uint64_t>(scratch_[n - 1].pages) * kFfaPage == pa &&
          p > 0 && !t->page_reclaimed(static_cast<uint32_t>(base + p - 1))) {
        ++scratch_[n - 1].pages;
      } else {
        if (n == kMaxRanges) return set_error(out, kNoMemory);
        scratch_[n++] = {pa, 1, 0};
      }
    }
    base += t->ranges[i].pages;
  }
  DescSpec s;
  s.layout = layout_for(ns_version_);
  s.sender = t->sender;
  s.n_receivers = t->n_receivers;
  for (uint32_t i = 0; i < t->n_receivers; ++i) s.receivers[i] = {t->recv_id[i], t->recv_perms[i], 0, 0, 0};
  s.attributes = t->attributes;
  s.flags = static_cast<uint32_t>(t->kind) << 3;  // transaction type, Table 10.22 bits [4:3]
  s.tag = t->tag;
  s.handle = t->handle;
  s.n_ranges = n;
  s.ranges = scratch_;
  resp_len_ = static_cast<uint32_t>(build_region(s, std::span<uint8_t>(resp_, kMaxDescBytes)));
  if (resp_len_ == 0) return set_error(out, kNoMemory);
  if (fault_ == Fault::kBogusDesc) {
    fault_ = Fault::kNone;
    MemRegion r;
    parse_region(std::span<const uint8_t>(resp_, resp_len_), resp_len_, s.layout, &r, false);
    put_u64(std::span<uint8_t>(resp_, kMaxDescBytes), r.ranges_off, fault_value_);
  }
  resp_handle_ = t->handle;
  resp_sent_ = 0;
  resp_active_ = true;
  h.pass(kFfaSpmcRetrieveHyp);
  write_retrieve_chunk(out, true);
}

void Spmc::reclaim(const uint64_t* a, uint64_t* out, Hits* hits) {
  Hits scratch;
  Hits& h = hits ? *hits : scratch;
  const uint64_t handle = handle_of(a[1], a[2]);
  const uint32_t flags = w(a[3]);
  // Flags: bit 0 zero memory, bit 1 time slicing; [31:2] MBZ.
  if (flags & ~(kReclaimZero | kReclaimTimeSlice)) {
    h.broke(kFfaSpmcReclaimFlags, "flags %#x", flags);
    return set_error(out, kInvalidParameters);
  }
  Transaction* t = find_mut(handle);
  // The handle names a complete transaction whose owner is the caller.
  if (!t || !t->complete || t->sender != kHostId) {
    h.broke(kFfaSpmcReclaimHandle, "no transaction %#llx", static_cast<unsigned long long>(handle));
    return set_error(out, kInvalidParameters);
  }
  h.pass(kFfaSpmcReclaimHandle);
  if (t->any_retrieved()) {
    h.broke(kFfaSpmcReclaimRetrieved, "handle %#llx retrieved", static_cast<unsigned long long>(handle));
    return set_error(out, kDenied);
  }
  h.pass(kFfaSpmcReclaimRetrieved);
  // Zeroing shared memory is not the lender's to ask (ours: mirrors DESC:FLAGS).
  if ((flags & kReclaimZero) && t->kind == MemKind::kShare) {
    h.broke(kFfaSpmcReclaimFlags, "zero flag on a share");
    return set_error(out, kInvalidParameters);
  }
  h.pass(kFfaSpmcReclaimFlags);
  if (flags & kReclaimZero) {
    uint64_t base = 0;
    for (uint32_t i = 0; i < t->n_ranges; ++i) {
      for (uint32_t p = 0; p < t->ranges[i].pages; ++p)
        if (!t->page_reclaimed(static_cast<uint32_t>(base + p)))
          if (uint8_t* m = phys(t->ranges[i].address + static_cast<uint64_t>(p) * kFfaPage, kFfaPage))
            for (uint64_t k = 0; k < kFfaPage; ++k) m[k] = 0;
      base += t->ranges[i].pages;
    }
  }
  if (resp_active_ && resp_handle_ == t->handle) resp_active_ = false;
  t->live = false;
  set_success(out);
}

void Spmc::reclaim2(const uint64_t* in, uint64_t* out, Hits* hits) {
  Hits scratch;
  Hits& h = hits ? *hits : scratch;
  const Reclaim2Abi& P = kReclaim2;
  const uint64_t handle = handle_of(in[P.reg_handle_lo], in[P.reg_handle_hi]);
  const uint32_t flags = w(in[P.reg_flags]);
  const uint32_t off = w(in[P.reg_offset]);
  const uint32_t count = w(in[P.reg_count]);
  const uint64_t index = P.page_index_is_64bit ? in[P.reg_page_index] : w(in[P.reg_page_index]);
  const uint32_t total = w(in[P.reg_total]);
  if (flags & ~P.flags_allowed) {
    h.broke(kFfaR2Flags, "flags %#x", flags);
    return set_error(out, P.err_args);
  }
  if (off % P.offset_align) {
    h.broke(kFfaR2OffsetAlign, "offset %#x not %u-aligned", off, P.offset_align);
    return set_error(out, P.err_args);
  }
  h.pass(kFfaR2OffsetAlign);
  if (count == 0 || (P.max_count && count > P.max_count)) {
    h.broke(kFfaR2Count, "count %u", count);
    return set_error(out, P.err_args);
  }
  h.pass(kFfaR2Count);
  if (!mapped_) {
    h.broke(kFfaMboxTxRequired, "no TX buffer");
    return set_error(out, kDenied);
  }
  if (static_cast<uint64_t>(off) + static_cast<uint64_t>(count) * P.desc_size > mbox_bytes_) {
    h.broke(kFfaR2Bounds, "offset %#x + %u descriptors > TX %#llx", off, count,
            static_cast<unsigned long long>(mbox_bytes_));
    return set_error(out, P.err_args);
  }
  h.pass(kFfaR2Bounds);
  Transaction* t = find_mut(handle);
  if (!t || !t->complete || t->sender != kHostId) {
    h.broke(kFfaR2Handle, "no transaction %#llx", static_cast<unsigned long long>(handle));
    return set_error(out, P.err_handle);
  }
  h.pass(kFfaR2Handle);
  std::span<const uint8_t> txb(phys(tx_pa_, mbox_bytes_), mbox_bytes_);
  uint64_t sum = 0;
  for (uint32_t i = 0; i < count; ++i) {
    Constituent c;
    read_constituent(txb, off + static_cast<uint64_t>(i) * P.desc_size, &c);
    if ((P.desc_reserved_mbz && c.reserved) || c.pages == 0 || c.address % kFfaPage ||
        c.address > ~0ull - static_cast<uint64_t>(c.pages) * kFfaPage) {
      h.broke(kFfaR2DescValid, "descriptor %u (%#llx, %u pages, reserved %#x)", i,
              static_cast<unsigned long long>(c.address), c.pages, c.reserved);
      return set_error(out, P.err_args);
    }
    sum += c.pages;
  }
  h.pass(kFfaR2DescValid);
  if (sum != total) {
    h.broke(kFfaR2Total, "total %u != sum %llu", total, static_cast<unsigned long long>(sum));
    return set_error(out, P.err_args);
  }
  h.pass(kFfaR2Total);
  Constituent first;
  read_constituent(txb, off, &first);
  if (index >= first.pages) {
    h.broke(kFfaR2PageIndex, "page index %llu >= %u", static_cast<unsigned long long>(index), first.pages);
    return set_error(out, P.err_args);
  }
  h.pass(kFfaR2PageIndex);
  for (uint32_t i = 0; i < count; ++i) {
    Constituent ci;
    read_constituent(txb, off + static_cast<uint64_t>(i) * P.desc_size, &ci);
    const uint64_t ei = ci.address + static_cast<uint64_t>(ci.pages) * kFfaPage;
    for (uint32_t j = 0; j < i; ++j) {
      Constituent cj;
      read_constituent(txb, off + static_cast<uint64_t>(j) * P.desc_size, &cj);
      if (ci.address < cj.address + static_cast<uint64_t>(cj.pages) * kFfaPage && cj.address < ei) {
        h.broke(kFfaR2Overlap, "descriptors %u and %u overlap", j, i);
        return set_error(out, P.err_args);
      }
    }
    bool inside = false;
    for (uint32_t k = 0; k < t->n_ranges && !inside; ++k) {
      const uint64_t a = t->ranges[k].address, e = a + static_cast<uint64_t>(t->ranges[k].pages) * kFfaPage;
      inside = ci.address >= a && ei <= e;
    }
    if (!inside) {
      h.broke(kFfaR2NotInTx, "descriptor %u (%#llx, %u pages) not in the transaction", i,
              static_cast<unsigned long long>(ci.address), ci.pages);
      return set_error(out, P.err_not_in_tx);
    }
  }
  h.pass(kFfaR2Overlap);
  h.pass(kFfaR2NotInTx);
  if ((flags & kReclaimZero) && t->kind == MemKind::kShare) {
    h.broke(kFfaR2Flags, "zero flag on a share");
    return set_error(out, P.err_args);
  }
  h.pass(kFfaR2Flags);
  if (t->any_retrieved()) {
    h.broke(kFfaR2Retrieved, "handle %#llx retrieved", static_cast<unsigned long long>(handle));
    return set_error(out, P.err_retrieved);
  }
  h.pass(kFfaR2Retrieved);
  // Every page asked for is still held.
  for (uint32_t i = 0; i < count; ++i) {
    Constituent c;
    read_constituent(txb, off + static_cast<uint64_t>(i) * P.desc_size, &c);
    for (uint64_t p = i == 0 ? index : 0; p < c.pages; ++p) {
      const int64_t k = t->page_index(c.address + p * kFfaPage);
      if (k < 0 || t->page_reclaimed(static_cast<uint32_t>(k))) {
        h.broke(kFfaR2Reclaimed, "page %#llx already reclaimed",
                static_cast<unsigned long long>(c.address + p * kFfaPage));
        return set_error(out, P.err_reclaimed);
      }
    }
  }
  h.pass(kFfaR2Reclaimed);
  uint64_t asked = total - index, n = asked;
  if (fault_ == Fault::kShortCount) {
    fault_ = Fault::kNone;
    if (fault_value_ < asked) n = fault_value_;
  }
  const uint64_t done = for_each_reclaim2_page(txb, off, count, index, n, [&](uint64_t pa) {
    const uint32_t k = static_cast<uint32_t>(t->page_index(pa));
    t->reclaimed[k / 64] |= 1ull << (k % 64);
    ++t->reclaimed_count;
    if (flags & kReclaimZero)
      if (uint8_t* m = phys(pa, kFfaPage))
        for (uint64_t b = 0; b < kFfaPage; ++b) m[b] = 0;
    return true;
  });
  uint64_t reported = done;
  if (fault_ == Fault::kLongCount) {
    fault_ = Fault::kNone;
    reported += fault_value_;
  }
  if (t->reclaimed_count == t->total_pages) {
    if (resp_active_ && resp_handle_ == t->handle) resp_active_ = false;
    t->live = false;
    h.pass(kFfaR2Equivalence);
  }
  set_success(out, reported);
}

void Spmc::sp_retrieve(uint64_t handle, uint16_t sp, uint64_t out[kNumRegs], Hits* hits) {
  Transaction* t = find_mut(handle);
  if (!t || !t->complete) return set_error(out, kInvalidParameters);
  for (uint32_t i = 0; i < t->n_receivers; ++i)
    if (t->recv_id[i] == sp) {
      // ours: a region partly reclaimed can no longer be retrieved.
      if (t->retrieved[i] || t->reclaimed_count) return set_error(out, kDenied);
      t->retrieved[i] = true;
      return set_success(out);
    }
  set_error(out, kInvalidParameters);
}

void Spmc::sp_relinquish(uint64_t handle, uint16_t sp, uint64_t out[kNumRegs], Hits* hits) {
  Transaction* t = find_mut(handle);
  if (!t || !t->complete) return set_error(out, kInvalidParameters);
  for (uint32_t i = 0; i < t->n_receivers; ++i)
    if (t->recv_id[i] == sp && t->retrieved[i]) {
      t->retrieved[i] = false;
      return set_success(out);
    }
  set_error(out, kInvalidParameters);
}

void Spmc::digest(Fnv1a& h) const {
  uint32_t n = 0;
  for (const Transaction& t : tx_) n += t.live;
  h.u32(n);
  uint64_t last = 0;
  for (uint32_t k = 0; k < n; ++k) {
    // Next live transaction in ascending handle order.
    const Transaction* best = nullptr;
    for (const Transaction& t : tx_)
      if (t.live && (k == 0 || t.handle > last) && (!best || t.handle < best->handle)) best = &t;
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
    for (uint32_t i = 0; i < t.n_ranges; ++i) {
      h.u64(t.ranges[i].address);
      h.u32(t.ranges[i].pages);
    }
    h.u32(t.total_pages);
    h.u32(t.reclaimed_count);
    for (uint32_t i = 0; i < (t.total_pages + 7) / 8; ++i)
      h.u8(static_cast<uint8_t>(t.reclaimed[i / 8] >> (8 * (i % 8))));
  }
}

}  // namespace kconform::ffa
