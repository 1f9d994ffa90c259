// The proxy model: pKVM's FF-A handler as the specification and pKVM's design
// require it (SPEC.md PKVM:*, MBOX:*, MEM:*, R2:*). Guard clauses collect every
// failing rule (the allowed errors are their union); effects follow the checks.
#include "models/ffa/proxy.h"

#include "models/ffa/reclaim2_profile.h"

namespace kconform::ffa {

// --- Step --------------------------------------------------------------------

void Step::error(RuleId r, int32_t code, bool unchanged) {
  Alt a;
  a.mask = 0b101;
  a.regs[0] = kFnError;
  a.regs[2] = static_cast<uint32_t>(code);
  a.rule = r;
  a.unchanged = unchanged;
  add(a);
  a.regs[2] = static_cast<uint64_t>(static_cast<int64_t>(code));
  add(a);
}

void Step::fail(RuleId r, std::initializer_list<int32_t> codes) {
  hits.add(r, true);
  hits.pass(kFfaProxyNoChangeOnError);
  hits.pass(kFfaProxyErrorEncoding);
  for (int32_t c : codes) error(r, c, true);
  failed = true;
}

void Step::any_error(RuleId r, bool unchanged) {
  for (int32_t c = kNotSupported; c >= kNoData; --c) error(r, c, unchanged);
}

void Step::success(RuleId r, uint8_t mask, uint64_t w2, uint64_t w3, bool unchanged) {
  Alt a;
  a.mask = static_cast<uint8_t>(mask | 1);
  a.regs[0] = kFnSuccess32;
  a.regs[2] = w2;
  a.regs[3] = w3;
  a.rule = r;
  a.unchanged = unchanged;
  add(a);
  a.regs[0] = kFnSuccess64;
  add(a);
  hits.pass(r);
}

void Step::exact(RuleId r, const uint64_t regs[8], uint8_t mask, bool unchanged) {
  Alt a;
  for (int i = 0; i < 8; ++i) a.regs[i] = regs[i];
  a.mask = mask;
  a.rule = r;
  a.unchanged = unchanged;
  add(a);
  hits.pass(r);
}

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

uint8_t* World::at(uint64_t pa, uint64_t len) {
  const uint64_t base = profile->phys_base;
  if (pa < base || pa - base > phys.size() || len > phys.size() - (pa - base)) return nullptr;
  return phys.data() + (pa - base);
}

uint64_t World::digest() const {
  return state_digest(std::span<const uint8_t>(proxy.view, profile->host_pages), spmc);
}

namespace {

uint32_t w32(uint64_t x) { return static_cast<uint32_t>(x); }

// --- Host stage-2 ------------------------------------------------------------

// Index of the host page holding pa, or -1 outside host memory.
int64_t host_page(const World& w, uint64_t pa) {
  const ProxyProfile& p = *w.profile;
  if (pa < p.phys_base) return -1;
  const uint64_t i = (pa - p.phys_base) / p.page_size;
  return i < p.host_pages ? static_cast<int64_t>(i) : -1;
}

// All of [pa, pa+len) is host memory in view want.
bool range_is(const World& w, uint64_t pa, uint64_t len, PageView want) {
  if (len == 0) return true;
  if (pa + len < pa) return false;
  for (uint64_t a = pa - pa % w.profile->page_size; a < pa + len; a += w.profile->page_size) {
    const int64_t i = host_page(w, a);
    if (i < 0 || w.proxy.view[i] != static_cast<uint8_t>(want)) return false;
  }
  return true;
}

void set_range(World& w, uint64_t pa, uint64_t len, PageView v) {
  for (uint64_t a = pa - pa % w.profile->page_size; a < pa + len; a += w.profile->page_size) {
    const int64_t i = host_page(w, a);
    if (i >= 0) w.proxy.view[i] = static_cast<uint8_t>(v);
  }
}

void spmc_call(World& w, std::initializer_list<uint64_t> regs, uint64_t out[kNumRegs], Hits* hits) {
  uint64_t in[kNumRegs] = {};
  uint32_t i = 0;
  for (uint64_t r : regs) in[i++] = r;
  w.spmc.smc(in, out, hits);
}

// The last rule a callee broke, or fallback.
RuleId last_broken(const Hits& h, RuleId fallback) {
  for (uint32_t i = h.size(); i-- > 0;)
    if (h[i].forbidden) return h[i].rule;
  return fallback;
}

void copy_host_tx(World& w, uint64_t len) {
  uint8_t* src = w.at(w.proxy.tx_pa, len);
  uint8_t* dst = w.at(w.hyp_tx_pa(), len);
  if (src && dst)
    for (uint64_t i = 0; i < len; ++i) dst[i] = src[i];
}

// --- Checks on constituents the host wants to share ---------------------------

// Proxy-level checks of one constituent: granule and ownership. Structural
// checks were made by the descriptor codec.
void check_host_range(const World& w, const Constituent& c, uint32_t i, Step* s) {
  const uint64_t ps = w.profile->page_size, len = static_cast<uint64_t>(c.pages) * kFfaPage;
  // Whole host pages only: host stage-2 tracks PAGE_SIZE pages.
  if (c.address % ps || len % ps) {
    s->hits.broke(kFfaProxyGranule, "constituent %u (%#llx, %u pages) not %#llx-granular", i,
                  static_cast<unsigned long long>(c.address), c.pages, static_cast<unsigned long long>(ps));
    s->fail(kFfaProxyGranule, {kInvalidParameters, kDenied});
  } else {
    s->hits.pass(kFfaProxyGranule);
  }
  // Only memory the host owns exclusively: not the hypervisor's, not outside
  // RAM, not its mailboxes, not already shared.
  if (!range_is(w, c.address, len, PageView::kOwned)) {
    s->hits.broke(kFfaProxyHostMemory, "constituent %u (%#llx, %u pages) not host-owned", i,
                  static_cast<unsigned long long>(c.address), c.pages);
    s->fail(kFfaProxyHostMemory, {kInvalidParameters, kDenied});
  } else {
    s->hits.pass(kFfaProxyHostMemory);
  }
}

void check_desc_error(DescError e, Step* s) {
  if (e == DescError::kOk) return;
  s->hits.broke(desc_error_rule(e), "descriptor: %s", desc_error_name(e));
  if (e == DescError::kOverlap)
    s->fail(kFfaDescOverlap, {kInvalidParameters, kDenied});
  else
    s->fail(desc_error_rule(e), {kInvalidParameters});
}

bool overlaps_any(const Constituent& c, const Constituent* rs, uint32_t n) {
  const uint64_t e = c.address + static_cast<uint64_t>(c.pages) * kFfaPage;
  for (uint32_t j = 0; j < n; ++j)
    if (c.address < rs[j].address + static_cast<uint64_t>(rs[j].pages) * kFfaPage && rs[j].address < e)
      return true;
  return false;
}

// --- Framework calls -----------------------------------------------------------

void do_version(World& w, const uint64_t* a, Step* s) {
  const uint32_t req = w32(a[1]);
  const ProxyProfile& p = *w.profile;
  const uint32_t mine = version_minor(p.version) < version_minor(p.spmc.version) ? version_minor(p.version)
                                                                                 : version_minor(p.spmc.version);
  uint64_t r[8] = {};
  // Bit 31 MBZ.
  if (req >> 31) {
    r[0] = static_cast<uint32_t>(kNotSupported);
    s->exact(kFfaVersionBit31, r, 1, true);
    r[0] = ~0ull;
    s->exact(kFfaVersionBit31, r, 1, true);
    s->hits.add(kFfaVersionBit31, true);
    return;
  }
  s->hits.pass(kFfaVersionBit31);
  if (version_major(req) != 1) {
    r[0] = static_cast<uint32_t>(kNotSupported);
    s->exact(kFfaVersionNegotiate, r, 1, true);
    r[0] = ~0ull;
    s->exact(kFfaVersionNegotiate, r, 1, true);
    r[0] = version(1, mine);
    s->exact(kFfaVersionNegotiate, r, 1, true);
    return;
  }
  const uint32_t minor = version_minor(req);
  if (w.proxy.version_fixed && minor < version_minor(w.proxy.host_version)) {
    // pKVM: the host may not go below the version already negotiated.
    s->hits.add(kFfaVersionDowngrade, true);
    r[0] = static_cast<uint32_t>(kNotSupported);
    s->exact(kFfaVersionDowngrade, r, 1, true);
    r[0] = ~0ull;
    s->exact(kFfaVersionDowngrade, r, 1, true);
    return;
  }
  s->hits.pass(kFfaVersionDowngrade);
  r[0] = version(1, mine);
  s->exact(kFfaVersionNegotiate, r, 1, false);
  if (minor < mine) {
    r[0] = version(1, minor);
    s->exact(kFfaVersionNegotiate, r, 1, false);
  }
  if (!w.proxy.version_fixed) {
    w.proxy.version_fixed = true;
    w.proxy.host_version = version(1, minor < mine ? minor : mine);
    uint64_t out[kNumRegs];
    spmc_call(w, {kFnVersion, w.proxy.host_version}, out, nullptr);
  }
}

bool proxy_unsupported(const ProxyProfile& p, uint32_t fid) {
  switch (fid) {
    case kFnMemDonate32: case kFnMemDonate64: case kFnMemRetrieveReq32: case kFnMemRetrieveReq64:
    case kFnMemRetrieveResp: case kFnMemRelinquish: case kFnMemOpPause: case kFnMemOpResume:
    case kFnMemFragRx: case kFnMemPermGet32: case kFnMemPermSet32: case kFnRxAcquire:
    case kFnMemPermGet32 | 0x40000000u: case kFnMemPermSet32 | 0x40000000u:
      return true;
    default:
      return fid == kReclaim2.fid && !p.reclaim2;
  }
}

void do_features(World& w, const uint64_t* a, Step* s) {
  const uint32_t id = w32(a[1]);
  // What the proxy rejects it must not advertise.
  if (proxy_unsupported(*w.profile, id)) {
    s->error(kFfaFeaturesConsistent, kNotSupported, true);
    s->hits.pass(kFfaFeaturesConsistent);
    return;
  }
  s->error(kFfaFeaturesConsistent, kNotSupported, true);
  s->success(kFfaFeaturesConsistent, 1, 0, 0, true);
}

void do_rxtx_map(World& w, const uint64_t* a, Step* s) {
  const uint64_t tx = a[1], rx = a[2];
  const uint32_t pages = w32(a[3]) & 0x3f;
  const uint64_t len = static_cast<uint64_t>(pages) * kFfaPage, ps = w.profile->page_size;
  // w3[31:6] reserved; a page count; 4K-aligned, disjoint buffers.
  if ((w32(a[3]) >> 6) || pages == 0 || tx % kFfaPage || rx % kFfaPage ||
      (tx < rx + len && rx < tx + len) || tx + len < tx || rx + len < rx) {
    s->hits.broke(kFfaMboxMapArgs, "tx %#llx rx %#llx w3 %#x", static_cast<unsigned long long>(tx),
                  static_cast<unsigned long long>(rx), w32(a[3]));
    s->fail(kFfaMboxMapArgs, {kInvalidParameters});
  } else {
    s->hits.pass(kFfaMboxMapArgs);
  }
  if (w.proxy.mapped) {
    s->hits.broke(kFfaMboxMapTwice, "a pair is mapped");
    s->fail(kFfaMboxMapTwice, {kDenied});
  } else {
    s->hits.pass(kFfaMboxMapTwice);
  }
  if (pages && len != w.profile->mbox_bytes()) {
    s->hits.broke(kFfaMboxMapSize, "%u pages, mailbox is %#llx bytes", pages,
                  static_cast<unsigned long long>(w.profile->mbox_bytes()));
    s->fail(kFfaMboxMapSize, {kInvalidParameters, kNoMemory});
  } else {
    s->hits.pass(kFfaMboxMapSize);
  }
  if (tx % ps || rx % ps) {
    s->hits.broke(kFfaMboxMapArgs, "buffers not %#llx-aligned", static_cast<unsigned long long>(ps));
    s->fail(kFfaMboxMapArgs, {kInvalidParameters});
  }
  if (pages && (!range_is(w, tx, len, PageView::kOwned) || !range_is(w, rx, len, PageView::kOwned))) {
    s->hits.broke(kFfaMboxMapOwned, "buffers not host-owned memory");
    s->fail(kFfaMboxMapOwned, {kInvalidParameters, kDenied});
  } else {
    s->hits.pass(kFfaMboxMapOwned);
  }
  if (s->failed) return;
  // The proxy relays the registration: its own pair is mapped with the SPMC
  // now (PKVM:MBOX). If EL3 refuses, the host's call fails with its error and
  // nothing changes.
  uint64_t out[kNumRegs];
  spmc_call(w, {kFnRxtxMap64, w.hyp_tx_pa(), w.hyp_rx_pa(), w.profile->mbox_bytes() / kFfaPage}, out, nullptr);
  if (!is_success(out)) {
    s->hits.pass(kFfaMboxMapOk);
    s->error(kFfaMboxMapOk, is_error(out) ? error_code(out) : kAborted, true);
    return;
  }
  set_range(w, tx, len, PageView::kSharedHyp);
  set_range(w, rx, len, PageView::kSharedHyp);
  w.proxy.mapped = true;
  w.proxy.tx_pa = tx;
  w.proxy.rx_pa = rx;
  w.proxy.rx_held = false;
  s->success(kFfaMboxMapOk, 1);
}

void do_rxtx_unmap(World& w, const uint64_t* a, Step* s) {
  if (w32(a[1]) != 0 || !w.proxy.mapped) {
    s->hits.broke(kFfaMboxUnmap, "id field %#x, mapped %d", w32(a[1]), w.proxy.mapped);
    s->fail(kFfaMboxUnmap, {kInvalidParameters});
    return;
  }
  // The proxy's own pair is unmapped from the SPMC with the host's (PKVM:MBOX).
  uint64_t out[kNumRegs];
  spmc_call(w, {kFnRxtxUnmap, 0}, out, nullptr);
  const uint64_t len = w.profile->mbox_bytes();
  set_range(w, w.proxy.tx_pa, len, PageView::kOwned);
  set_range(w, w.proxy.rx_pa, len, PageView::kOwned);
  w.proxy.mapped = false;
  w.proxy.rx_held = false;
  s->success(kFfaMboxUnmap, 1);
}

void do_rx_release(World& w, const uint64_t* a, Step* s) {
  if (!w.proxy.mapped || !w.proxy.rx_held) {
    s->hits.broke(kFfaMboxRxRelease, "the host does not own RX");
    s->fail(kFfaMboxRxRelease, {kDenied});
    return;
  }
  w.proxy.rx_held = false;
  s->success(kFfaMboxRxRelease, 1);
}

void do_partition_info(World& w, const uint64_t* a, Step* s) {
  const SpmcConfig& c = w.spmc.config();
  const uint32_t want[4] = {w32(a[1]), w32(a[2]), w32(a[3]), w32(a[4])};
  const uint32_t flags = w32(a[5]);
  const bool nil = (want[0] | want[1] | want[2] | want[3]) == 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < c.n_sps; ++i)
    if (nil || (want[0] == 0x6b636f6e && want[1] == 0x666f726d && want[2] == 0 && want[3] == c.sp_ids[i])) ++n;
  if ((flags & ~1u) || n == 0) {
    s->hits.broke(kFfaPartitionInfo, "flags %#x, %u partitions match", flags, n);
    s->fail(kFfaPartitionInfo, {kInvalidParameters});
  }
  if (!(flags & 1)) {
    if (!w.proxy.mapped) {
      s->hits.broke(kFfaMboxRxBusy, "no RX buffer");
      s->fail(kFfaMboxRxBusy, {kDenied, kInvalidParameters, kBusy});
    } else if (w.proxy.rx_held) {
      s->hits.broke(kFfaMboxRxBusy, "the host owns RX");
      s->fail(kFfaMboxRxBusy, {kBusy});
    } else {
      s->hits.pass(kFfaMboxRxBusy);
    }
  }
  if (s->failed) return;
  if (!(flags & 1)) w.proxy.rx_held = true;
  s->success(kFfaPartitionInfo, 0b101, n);
}

// --- Share / lend ----------------------------------------------------------------

void share_ranges(World& w, const Constituent* rs, uint32_t n, PageView v) {
  for (uint32_t i = 0; i < n; ++i) set_range(w, rs[i].address, static_cast<uint64_t>(rs[i].pages) * kFfaPage, v);
}

// Undo the stage-2 shares of the in-flight transaction and forget it.
void rollback_frag(World& w) {
  if (w.proxy.frag_eager) share_ranges(w, w.proxy.frag_ranges, w.proxy.frag_n, PageView::kOwned);
  w.proxy.frag_active = false;
  w.proxy.frag_n = 0;
}

// Reads the constituents [first, first+n) at byte offset off of buf, checks
// them (structure, granule, ownership, overlap with earlier ones) and appends
// them to the in-flight list. Returns false if a guard failed.
bool take_ranges(World& w, std::span<const uint8_t> buf, uint64_t off, uint32_t n, Constituent* list,
                 uint32_t* count, Step* s) {
  for (uint32_t i = 0; i < n; ++i) {
    Constituent c;
    read_constituent(buf, off + static_cast<uint64_t>(i) * kConstituentSize, &c);
    DescError e = DescError::kOk;
    if (c.reserved) e = DescError::kConstituentReserved;
    else if (c.pages == 0) e = DescError::kPageCount;
    else if (c.address % kFfaPage) e = DescError::kAddrAlign;
    else if (c.address > ~0ull - static_cast<uint64_t>(c.pages) * kFfaPage) e = DescError::kAddrOverflow;
    else if (overlaps_any(c, list, *count)) e = DescError::kOverlap;
    check_desc_error(e, s);
    if (e == DescError::kPageCount && !range_is(w, c.address, kFfaPage, PageView::kOwned)) {
      // A zero-page constituent whose address is not memory the host owns
      // breaks PKVM:OWNERSHIP too: the union of both guards' errors.
      s->hits.broke(kFfaProxyHostMemory, "constituent %u (%#llx, 0 pages) not at host-owned memory", *count,
                    static_cast<unsigned long long>(c.address));
      s->fail(kFfaProxyHostMemory, {kInvalidParameters, kDenied});
    }
    // A constituent-local fault (alignment, wrap-around) also fails the
    // proxy's granule/ownership guards: the allowed errors are the union.
    if (e == DescError::kAddrAlign || e == DescError::kAddrOverflow) check_host_range(w, c, *count, s);
    if (e != DescError::kOk) continue;
    check_host_range(w, c, *count, s);
    if (*count < kMaxRanges) list[(*count)++] = c;
  }
  return !s->failed;
}

bool known_receiver(uint16_t id, const void* ctx) {
  const SpmcConfig& c = *static_cast<const SpmcConfig*>(ctx);
  for (uint32_t i = 0; i < c.n_sps; ++i)
    if (c.sp_ids[i] == id) return true;
  return false;
}

// DESC:EP-COUNT: a Relayer may support fewer receivers than the model's limit
// (a single borrower, say). Refusing more than one is allowed, with no change.
void allow_receiver_limit(const MemRegion& r, Step* s) {
  if (r.ep_count <= 1) return;
  s->hits.pass(kFfaDescEpCount);
  s->error(kFfaDescEpCount, kInvalidParameters, true);
}

void do_send(World& w, uint32_t fid, MemKind kind, const uint64_t* a, uint32_t variant, Step* s) {
  const uint32_t total = w32(a[1]), frag = w32(a[2]);
  const uint64_t mbox = w.profile->mbox_bytes();
  const RuleId ok_rule = kind == MemKind::kLend ? kFfaProxyLendAsShare : kFfaProxyShareOk;
  // The descriptor is in TX: no own buffer (address, page count MBZ).
  if (a[3] != 0 || w32(a[4]) != 0) {
    s->hits.broke(kFfaProxyMemArgs, "own buffer %#llx, %u pages", static_cast<unsigned long long>(a[3]), w32(a[4]));
    s->fail(kFfaProxyMemArgs, {kInvalidParameters, kNotSupported});
  }
  if (!w.proxy.mapped) {
    s->hits.broke(kFfaMboxTxRequired, "no TX buffer");
    s->fail(kFfaMboxTxRequired, {kInvalidParameters, kDenied});
  } else {
    s->hits.pass(kFfaMboxTxRequired);
  // PKVM:MBOX: the proxy's RX mirrors the host's; while the host owns its RX
  // (data not yet released) the proxy's RX at EL3 may be full too, and the
  // retrieve request gets BUSY: the reclaim may fail with BUSY, no change.
  if (w.proxy.rx_held) s->error(kFfaMboxRxRelease, kBusy, true);
  }
  if (total == 0 || frag == 0 || frag > total || frag > mbox) {
    s->hits.broke(kFfaProxyMemArgs, "total %u, fragment %u, mailbox %#llx", total, frag,
                  static_cast<unsigned long long>(mbox));
    s->fail(kFfaProxyMemArgs, {kInvalidParameters});
  } else {
    s->hits.pass(kFfaProxyMemArgs);
  }
  if (w.proxy.frag_active) {
    s->hits.broke(kFfaSpmcBusy, "fragmented send %#llx in flight", static_cast<unsigned long long>(w.proxy.frag_handle));
    s->fail(kFfaSpmcBusy, {kBusy, kDenied, kInvalidParameters});
  }
  if (s->failed) return;
  if (total > kMaxDescBytes) {
    s->hits.broke(kFfaSpmcDescTooBig, "descriptor of %u bytes", total);
    s->fail(kFfaSpmcDescTooBig, {kNoMemory, kInvalidParameters});
    return;
  }
  // The proxy reads the host's descriptor once (its copy is what it checks and forwards).
  const uint8_t* src = w.at(w.proxy.tx_pa, frag);
  uint8_t* buf = w.proxy.scratch;
  for (uint32_t i = 0; i < frag; ++i) buf[i] = src ? src[i] : 0;
  std::span<const uint8_t> fb(buf, frag);
  MemRegion r;
  const Layout layout = layout_for(w.proxy.host_version);
  s->hits.pass(kFfaDescLayout);
  DescError e = parse_region(fb, total, layout, &r);
  check_desc_error(e, s);
  if (s->failed) return;
  if (r.sender != kHostId) {
    s->hits.broke(kFfaDescSender, "sender %#x", r.sender);
    s->fail(kFfaDescSender, {kInvalidParameters});
  }
  allow_receiver_limit(r, s);
  Constituent list[kMaxRanges];
  uint32_t n = 0;
  if (frag == total) {
    // Whole descriptor: what the SPMC would say, and what pKVM must check itself.
    Hits spmc_hits;
    const int32_t spmc_err = w.spmc.check_send(kind, fb, &spmc_hits);
    for (uint32_t i = 0; i < spmc_hits.size(); ++i) s->hits.add(spmc_hits[i].rule, spmc_hits[i].forbidden);
    take_ranges(w, fb, r.ranges_off, r.range_count, list, &n, s);
    if (spmc_err) {
      const RuleId rule = last_broken(spmc_hits, kFfaProxyNoChangeOnError);
      s->hits.note("SPMC: %s", spmc_hits.text());
      s->fail(rule, {spmc_err});
    }
    if (s->failed) return;
    copy_host_tx(w, frag);
    uint64_t out[kNumRegs];
    spmc_call(w, {fid, total, frag, 0, 0}, out, &s->hits);
    if (!is_success(out)) {
      // EL3 refused after the proxy's checks: nothing stays shared.
      s->hits.pass(kFfaProxyRollback);
      s->error(kFfaProxyRollback, is_error(out) ? error_code(out) : kAborted, false);
      return;
    }
    share_ranges(w, list, n, PageView::kSharedFfa);
    s->success(ok_rule, 0b1101, out[2], out[3]);
    if (kind == MemKind::kLend) s->hits.pass(kFfaProxyShareOk);
    return;
  }
  // First of several fragments. The header and endpoint array are all here
  // (DESC:HEADER): a Relayer may already refuse what they break, or relay and
  // let the SPMC refuse the whole descriptor at the last fragment.
  const DescError early = check_semantics(r, kind, kHostId, known_receiver, &w.spmc.config());
  if (early != DescError::kOk) {
    s->hits.add(desc_error_rule(early), true);
    s->hits.note("first fragment: %s", desc_error_name(early));
    s->error(desc_error_rule(early), kInvalidParameters, true);
  }
  // Whole constituents only.
  const uint64_t here = frag > r.ranges_off ? frag - r.ranges_off : 0;
  if (here % kConstituentSize) {
    s->hits.broke(kFfaProxyFragment, "fragment ends inside a constituent");
    s->fail(kFfaProxyFragment, {kInvalidParameters});
    return;
  }
  take_ranges(w, fb, r.ranges_off, static_cast<uint32_t>(here / kConstituentSize), list, &n, s);
  if (s->failed) return;
  copy_host_tx(w, frag);
  uint64_t out[kNumRegs];
  spmc_call(w, {fid, total, frag, 0, 0}, out, &s->hits);
  if ((out[0] & 0xffffffffu) != kFnMemFragRx) {
    s->error(kFfaProxyRollback, is_error(out) ? error_code(out) : kAborted, false);
    return;
  }
  s->n_variants = 2;
  w.proxy.frag_active = true;
  // Variant 0 shares each fragment's pages as it arrives, variant 1 at the end.
  w.proxy.frag_eager = variant == 0;
  if (w.proxy.frag_eager) share_ranges(w, list, n, PageView::kSharedFfa);
  w.proxy.frag_handle = (out[1] & 0xffffffffu) | (out[2] & 0xffffffffu) << 32;
  w.proxy.frag_kind = kind;
  w.proxy.frag_total = total;
  w.proxy.frag_received = frag;
  w.proxy.frag_n = n;
  for (uint32_t i = 0; i < n; ++i) w.proxy.frag_ranges[i] = list[i];
  uint64_t regs[8] = {kFnMemFragRx, out[1], out[2], frag};
  s->exact(kFfaProxyFragment, regs, 0b1111, false);
  s->hits.pass(kFfaProxyFragState);
}

void do_frag_tx(World& w, const uint64_t* a, uint32_t variant, Step* s) {
  const uint64_t handle = (a[1] & 0xffffffffu) | (a[2] & 0xffffffffu) << 32;
  const uint32_t frag = w32(a[3]);
  ProxyState& ps = w.proxy;
  if (!ps.frag_active || handle != ps.frag_handle || !ps.mapped) {
    s->hits.broke(kFfaProxyFragment, "no send in flight with handle %#llx", static_cast<unsigned long long>(handle));
    s->fail(kFfaProxyFragment, {kInvalidParameters, kDenied});
    return;
  }
  const uint32_t remaining = ps.frag_total - ps.frag_received;
  bool bad = false;
  if (frag == 0 || frag > remaining || frag > w.profile->mbox_bytes() || frag % kConstituentSize ||
      w32(a[4]) != 0) {
    s->hits.broke(kFfaProxyFragment, "fragment of %u bytes, %u remaining, w4 %#x", frag, remaining, w32(a[4]));
    bad = true;
  } else {
    s->hits.pass(kFfaProxyFragment);
  }
  const uint8_t* src = bad ? nullptr : w.at(ps.tx_pa, frag);
  uint8_t* buf = ps.scratch;
  if (!bad)
    for (uint32_t i = 0; i < frag; ++i) buf[i] = src ? src[i] : 0;
  Step probe;
  Constituent* list = ps.frag_ranges;
  uint32_t n = ps.frag_n;
  if (!bad) bad = !take_ranges(w, std::span<const uint8_t>(buf, frag), 0, frag / kConstituentSize, list, &n, &probe);
  for (uint32_t i = 0; i < probe.hits.size(); ++i) s->hits.add(probe.hits[i].rule, probe.hits[i].forbidden);
  if (bad) {
    // The proxy may reject alone (everything as it was) or abort the
    // transaction at EL3 and roll back (variant 0).
    RuleId rule = last_broken(probe.hits, kFfaProxyFragment);
    s->fail(rule, {kInvalidParameters, kDenied});
    uint64_t out[kNumRegs];
    spmc_call(w, {kFnMemFragTx, handle & 0xffffffffu, handle >> 32, 0, 0}, out, nullptr);
    rollback_frag(w);
    s->error(kFfaProxyRollback, kInvalidParameters, false);
    s->error(kFfaProxyRollback, kDenied, false);
    s->hits.pass(kFfaProxyRollback);
    return;
  }
  const uint32_t added_from = ps.frag_n;
  copy_host_tx(w, frag);
  uint64_t out[kNumRegs];
  const Fault armed = w.spmc.armed();
  spmc_call(w, {kFnMemFragTx, handle & 0xffffffffu, handle >> 32, frag, 0}, out, &s->hits);
  if (is_error(out) && armed != Fault::kNone && w.spmc.armed() == Fault::kNone) {
    // EL3 misbehaved (HARNESS:EL3) and may still hold the send in flight:
    // PKVM:DISTRUST, not PKVM:ATOMIC. Undoing this fragment only (the state
    // before the call) is allowed besides a full rollback.
    s->hits.add(kFfaProxyEl3Fault, false);
    s->error(kFfaProxyEl3Fault, error_code(out), true);
  }
  if (is_error(out)) {
    ps.frag_n = added_from;
    rollback_frag(w);
    s->hits.pass(kFfaProxyRollback);
    s->error(kFfaProxyRollback, error_code(out), false);
    return;
  }
  ps.frag_n = n;
  ps.frag_received += frag;
  if ((out[0] & 0xffffffffu) == kFnMemFragRx) {
    if (ps.frag_eager) share_ranges(w, list + added_from, n - added_from, PageView::kSharedFfa);
    uint64_t regs[8] = {kFnMemFragRx, out[1], out[2], ps.frag_received};
    s->exact(kFfaProxyFragment, regs, 0b1111, false);
    s->hits.pass(kFfaProxyFragState);
    return;
  }
  // Complete: every page is shared now.
  if (ps.frag_eager)
    share_ranges(w, list + added_from, n - added_from, PageView::kSharedFfa);
  else
    share_ranges(w, list, n, PageView::kSharedFfa);
  const RuleId ok_rule = ps.frag_kind == MemKind::kLend ? kFfaProxyLendAsShare : kFfaProxyShareOk;
  ps.frag_active = false;
  ps.frag_n = 0;
  s->success(ok_rule, 0b1101, out[2], out[3]);
  s->hits.pass(kFfaProxyFragState);
  (void)variant;
}

// --- Reclaim -------------------------------------------------------------------

void do_reclaim(World& w, const uint64_t* a, Step* s) {
  const uint64_t handle = (a[1] & 0xffffffffu) | (a[2] & 0xffffffffu) << 32;
  const uint32_t flags = w32(a[3]);
  const Transaction* t = w.spmc.find(handle);
  const bool partial = t && t->complete && t->reclaimed_count;
  // The proxy learns the pages through its own mailbox, which is mapped with
  // the SPMC only while the host has a pair mapped (PKVM:MBOX): without one it
  // cannot reclaim.
  if (!w.proxy.mapped) {
    s->hits.broke(kFfaMboxTxRequired, "no mailbox pair mapped: the proxy cannot retrieve %#llx",
                  static_cast<unsigned long long>(handle));
    s->fail(kFfaMboxTxRequired, {kDenied, kInvalidParameters});
    return;
  }
  s->hits.pass(kFfaMboxTxRequired);
  // PKVM:MBOX: the proxy's RX mirrors the host's; while the host owns its RX
  // (data not yet released) the proxy's RX at EL3 may be full too, and the
  // retrieve request gets BUSY: the reclaim may fail with BUSY, no change.
  if (w.proxy.rx_held) s->error(kFfaMboxRxRelease, kBusy, true);
  // 1. Learn the transaction's pages: hypervisor retrieve request.
  const Layout l = layout_for(w.spmc.ns_version());
  const uint32_t req_len = header_size(l);
  if (uint8_t* tx = w.at(w.hyp_tx_pa(), req_len)) {
    for (uint32_t i = 0; i < req_len; ++i) tx[i] = 0;
    std::span<uint8_t> b(tx, req_len);
    put_u64(b, 8, handle);
    if (l != Layout::kV10) {
      put_u32(b, 24, emad_size(l));
      put_u32(b, 32, header_size(l));
    }
  }
  uint64_t out[kNumRegs];
  spmc_call(w, {kFnMemRetrieveReq64, req_len, req_len, 0, 0}, out, &s->hits);
  if (is_error(out)) {
    // No such transaction (the reclaim fails likewise), or EL3 failed.
    const RuleId rule = t ? kFfaProxyEl3Fault : kFfaSpmcReclaimHandle;
    s->hits.add(rule, !t);
    if (!t) s->fail(kFfaSpmcReclaimHandle, {kInvalidParameters});
    s->error(rule, error_code(out), false);
    return;
  }
  const uint32_t total = w32(out[1]), flen = w32(out[2]);
  const uint64_t mbox = w.profile->mbox_bytes();
  uint8_t* buf = w.proxy.scratch;
  bool bogus = false;
  if ((out[0] & 0xffffffffu) != kFnMemRetrieveResp || flen == 0 || flen > total || flen > mbox ||
      total > kMaxDescBytes) {
    bogus = true;
    // The proxy owns its RX after a retrieve response, usable or not: it
    // gives it back (MBOX:RX-RELEASE), or every later reclaim would be BUSY.
    if ((out[0] & 0xffffffffu) == kFnMemRetrieveResp) {
      uint64_t rel[kNumRegs];
      spmc_call(w, {kFnRxRelease}, rel, nullptr);
    }
  } else {
    uint32_t got = 0;
    uint32_t len = flen;
    for (;;) {
      const uint8_t* rx = w.at(w.hyp_rx_pa(), len);
      for (uint32_t i = 0; i < len; ++i) buf[got + i] = rx ? rx[i] : 0;
      got += len;
      uint64_t rel[kNumRegs];
      spmc_call(w, {kFnRxRelease}, rel, nullptr);
      if (got == total) break;
      uint64_t fr[kNumRegs];
      spmc_call(w, {kFnMemFragRx, handle & 0xffffffffu, handle >> 32, got, 0}, fr, nullptr);
      len = w32(fr[3]);
      if ((fr[0] & 0xffffffffu) != kFnMemFragTx || len == 0 || len > total - got || len > mbox) {
        bogus = true;
        break;
      }
    }
  }
  Constituent list[kMaxRanges];
  MemRegion r;
  if (!bogus) {
    std::span<const uint8_t> d(buf, total);
    bogus = parse_region(d, total, l, &r, /*transmission=*/false) != DescError::kOk;
    if (!bogus) {
      Constituent* c = list;
      bogus = r.range_count > kMaxRanges;
      for (uint32_t i = 0; !bogus && i < r.range_count; ++i) {
        read_constituent(d, r.ranges_off + static_cast<uint64_t>(i) * kConstituentSize, &c[i]);
        const uint64_t len = static_cast<uint64_t>(c[i].pages) * kFfaPage;
        // Never trust EL3 with pages that are not shared with FF-A.
        if (c[i].address % w.profile->page_size || len % w.profile->page_size ||
            !range_is(w, c[i].address, len, PageView::kSharedFfa))
          bogus = true;
      }
    }
  }
  if (bogus) {
    s->hits.add(kFfaProxyEl3Fault, false);
    s->hits.note("EL3's retrieve response is unusable");
    s->any_error(kFfaProxyEl3Fault, false);
    return;
  }
  // 2. Reclaim at EL3.
  spmc_call(w, {kFnMemReclaim, handle & 0xffffffffu, handle >> 32, flags}, out, &s->hits);
  if (!is_success(out)) {
    const RuleId rule = last_broken(s->hits, kFfaProxyReclaimErr);
    s->hits.pass(kFfaProxyReclaimErr);
    s->hits.pass(kFfaProxyNoChangeOnError);
    s->error(rule, is_error(out) ? error_code(out) : kAborted, false);
    s->error(kFfaProxyReclaimErr, is_error(out) ? error_code(out) : kAborted, false);
    return;
  }
  // 3. The pages are the host's again.
  share_ranges(w, list, r.range_count, PageView::kOwned);
  s->success(kFfaProxyReclaimOk, 1);
  if (partial) {
    // After partial RECLAIM2 calls a proxy may refuse the rest (ours).
    s->success(kFfaProxyReclaimAfterPartial, 1);
    s->error(kFfaProxyReclaimAfterPartial, kInvalidParameters, true);
    s->error(kFfaProxyReclaimAfterPartial, kDenied, true);
  }
}

// --- RECLAIM2 ------------------------------------------------------------------

void do_reclaim2(World& w, const uint64_t* in, uint32_t variant, Step* s) {
  const Reclaim2Abi& P = kReclaim2;
  const ProxyProfile& prof = *w.profile;
  const uint64_t handle = (in[P.reg_handle_lo] & 0xffffffffu) | (in[P.reg_handle_hi] & 0xffffffffu) << 32;
  const uint32_t flags = w32(in[P.reg_flags]), off = w32(in[P.reg_offset]), count = w32(in[P.reg_count]);
  const uint64_t index = P.page_index_is_64bit ? in[P.reg_page_index] : w32(in[P.reg_page_index]);
  const uint32_t total = w32(in[P.reg_total]);
  const uint64_t mbox = prof.mbox_bytes();
  // The proxy walks the host's list to unshare it: it must check what it reads.
  if (!w.proxy.mapped) {
    s->hits.broke(kFfaMboxTxRequired, "no TX buffer");
    s->fail(kFfaMboxTxRequired, {kInvalidParameters, kDenied});
  }
  if (flags & ~P.flags_allowed) {
    s->hits.broke(kFfaR2Flags, "flags %#x", flags);
    s->fail(kFfaR2Flags, {P.err_args});
  }
  if (off % P.offset_align) {
    s->hits.broke(kFfaR2OffsetAlign, "offset %#x", off);
    s->fail(kFfaR2OffsetAlign, {P.err_args});
  } else {
    s->hits.pass(kFfaR2OffsetAlign);
  }
  if (count == 0 || (P.max_count && count > P.max_count)) {
    s->hits.broke(kFfaR2Count, "count %u", count);
    s->fail(kFfaR2Count, {P.err_args});
  } else {
    s->hits.pass(kFfaR2Count);
  }
  const bool in_bounds = static_cast<uint64_t>(off) + static_cast<uint64_t>(count) * P.desc_size <= mbox;
  if (!in_bounds) {
    s->hits.broke(kFfaR2Bounds, "offset %#x + %u descriptors > TX %#llx", off, count,
                  static_cast<unsigned long long>(mbox));
    s->fail(kFfaR2Bounds, {P.err_args});
  } else {
    s->hits.pass(kFfaR2Bounds);
  }
  if (!w.proxy.mapped || !in_bounds || count == 0) return;
  const uint8_t* tx = w.at(w.proxy.tx_pa, mbox);
  std::span<const uint8_t> txb(tx, tx ? mbox : 0);
  uint64_t sum = 0;
  bool desc_ok = true;
  bool aligned = index * kFfaPage % prof.page_size == 0;
  for (uint32_t i = 0; i < count; ++i) {
    Constituent c;
    read_constituent(txb, off + static_cast<uint64_t>(i) * P.desc_size, &c);
    if ((P.desc_reserved_mbz && c.reserved) || c.pages == 0 || c.address % kFfaPage ||
        c.address > ~0ull - static_cast<uint64_t>(c.pages) * kFfaPage)
      desc_ok = false;
    if (c.address % prof.page_size || (static_cast<uint64_t>(c.pages) * kFfaPage) % prof.page_size) aligned = false;
    sum += c.pages;
  }
  if (!desc_ok) {
    s->hits.broke(kFfaR2DescValid, "a descriptor is malformed");
    s->fail(kFfaR2DescValid, {P.err_args});
  } else {
    s->hits.pass(kFfaR2DescValid);
  }
  if (sum != total) {
    s->hits.broke(kFfaR2Total, "total %u != sum %llu", total, static_cast<unsigned long long>(sum));
    s->fail(kFfaR2Total, {P.err_args});
  } else {
    s->hits.pass(kFfaR2Total);
  }
  Constituent first;
  read_constituent(txb, off, &first);
  if (index >= first.pages) {
    s->hits.broke(kFfaR2PageIndex, "page index %llu >= %u", static_cast<unsigned long long>(index), first.pages);
    s->fail(kFfaR2PageIndex, {P.err_args});
  } else {
    s->hits.pass(kFfaR2PageIndex);
  }
  if (s->failed) return;
  // Host pages larger than 4K: a call that starts or ends inside one may be refused.
  if (prof.page_size > kFfaPage) {
    if (!aligned) {
      s->hits.pass(kFfaR2HostGranule);
      s->error(kFfaR2HostGranule, kInvalidParameters, true);
    }
    s->n_variants = 2;
  }
  // Relay: the proxy's copy of the list goes to EL3 in its own TX.
  if (uint8_t* dst = w.at(w.hyp_tx_pa(), mbox))
    for (uint64_t i = 0; i < mbox; ++i) dst[i] = tx ? tx[i] : 0;
  uint64_t out[kNumRegs];
  spmc_call(w, {P.fid, handle & 0xffffffffu, handle >> 32, flags, off, count, index, total}, out, &s->hits);
  if (!is_success(out)) {
    const RuleId rule = last_broken(s->hits, kFfaProxyNoChangeOnError);
    s->hits.pass(kFfaProxyNoChangeOnError);
    s->error(rule, is_error(out) ? error_code(out) : kAborted, false);
    return;
  }
  const uint64_t asked = total - index;
  uint64_t c = out[P.reg_result_count];
  if (c == 0 || c > asked) {
    // EL3 reported an impossible count: an error (stage-2 untouched) is always
    // right; the proxy may instead trust what EL3 did if it can tell (v1).
    s->hits.add(kFfaProxyEl3Fault, false);
    s->hits.add(kFfaR2CountBound, true);
    s->n_variants = 2;
    if (variant == 0 || c == 0) {
      s->any_error(kFfaProxyEl3Fault, false);
      return;
    }
    c = asked;
  }
  s->hits.pass(kFfaR2CountBound);
  // Unshare: variant 0 every host page of which EL3 holds no 4K page any more;
  // variant 1 only host pages wholly inside what this call reclaimed.
  for_each_reclaim2_page(txb, off, count, index, c, [&](uint64_t pa) {
    const uint64_t hp = pa - pa % prof.page_size;
    const int64_t k = host_page(w, pa);
    if (k < 0 || w.proxy.view[k] != static_cast<uint8_t>(PageView::kSharedFfa)) return true;
    bool free = true;
    for (uint64_t q = hp; q < hp + prof.page_size && free; q += kFfaPage) {
      if (variant == 0) {
        free = !w.spmc.page_held(q);
      } else {
        // q must be among this call's first c pages.
        bool inside = false;
        for_each_reclaim2_page(txb, off, count, index, c, [&](uint64_t r) {
          inside = q >= r && q < r + kFfaPage;
          return !inside;
        });
        free = inside;
      }
    }
    if (free) w.proxy.view[k] = static_cast<uint8_t>(PageView::kOwned);
    return true;
  });
  if (!w.spmc.find(handle)) s->hits.pass(kFfaR2Equivalence);
  s->success(kFfaR2Unshare, 0b101, c);
  s->success(kFfaR2CountBound, 0b101, c);
}

}  // namespace

// --- Dispatch --------------------------------------------------------------------

void proxy_call(World& w, const uint64_t in[8], uint32_t variant, Step* s) {
  const uint64_t fid = in[0] & 0xffffffffu;
  if (!is_ffa_fid(fid)) {
    // Not an FF-A call: no FF-A state may change; what EL3 answers is not ours to judge.
    Alt any;
    any.rule = kFfaProxyNonFfa;
    s->add(any);
    s->hits.pass(kFfaProxyNonFfa);
    return;
  }
  uint64_t a[8];
  bool upper = false;
  for (int i = 0; i < 8; ++i) {
    a[i] = is_smc64(fid) ? in[i] : (in[i] & 0xffffffffu);
    upper |= i > 0 && !is_smc64(fid) && (in[i] >> 32);
  }
  a[0] = fid;
  if (upper) s->hits.pass(kFfaSmc32Upper);
  // VERSION:NEGOTIATE: the host negotiates with FFA_VERSION before any other
  // FF-A ABI; a proxy may refuse calls made before (no state change).
  if (!w.proxy.version_fixed && fid != kFnVersion) {
    s->hits.pass(kFfaVersionNegotiate);
    s->error(kFfaVersionNegotiate, kInvalidParameters, true);
    s->error(kFfaVersionNegotiate, kNotSupported, true);
  }
  // SMCCC:32: FFA_RXTX_MAP has an SMC32 and an SMC64 form; a callee may
  // implement only one (FFA_FEATURES tells which).
  if (fid == kFnRxtxMap32) s->error(kFfaMboxMapOk, kNotSupported, true);
  switch (fid) {
    case kFnVersion: return do_version(w, a, s);
    case kFnFeatures: return do_features(w, a, s);
    case kFnIdGet: return s->success(kFfaIdGet, 0b101, kHostId, 0, true);
    case kFnRxtxMap32:
    case kFnRxtxMap64: return do_rxtx_map(w, a, s);
    case kFnRxtxUnmap: return do_rxtx_unmap(w, a, s);
    case kFnRxRelease: return do_rx_release(w, a, s);
    case kFnPartitionInfoGet: return do_partition_info(w, a, s);
    case kFnMemShare32:
    case kFnMemShare64: return do_send(w, static_cast<uint32_t>(fid), MemKind::kShare, a, variant, s);
    case kFnMemLend32:
    case kFnMemLend64: return do_send(w, static_cast<uint32_t>(fid), MemKind::kLend, a, variant, s);
    case kFnMemFragTx: return do_frag_tx(w, a, variant, s);
    case kFnMemReclaim: return do_reclaim(w, a, s);
    default: break;
  }
  if (proxy_unsupported(*w.profile, static_cast<uint32_t>(fid))) {
    const RuleId r = fid == kReclaim2.fid ? kFfaR2NotImplemented : kFfaProxyUnsupported;
    s->hits.broke(r, "%#llx is not relayed", static_cast<unsigned long long>(fid));
    s->fail(r, {kNotSupported});
    return;
  }
  if (fid == kReclaim2.fid) return do_reclaim2(w, in, variant, s);
  // Anything else: relayed or refused, never a stage-2 change.
  Alt any;
  any.rule = kFfaProxyForwardOther;
  s->add(any);
  s->hits.pass(kFfaProxyForwardOther);
}

}  // namespace kconform::ffa
