// Sending memory through the proxy (SPEC.md "Descriptors", PKVM:SHARE,
// PKVM:LEND, PKVM:OWNERSHIP, PKVM:GRANULE, PKVM:ATOMIC, MEM:ARGS,
// MEM:FRAGMENT): FFA_MEM_SHARE and FFA_MEM_LEND, whole or as a first
// fragment, and FFA_MEM_FRAG_TX. The proxy checks the descriptor and every
// constituent against host stage-2, relays, and on FFA_SUCCESS (or per
// fragment) shares the pages with FF-A; what EL3 refuses leaves nothing shared.
#include "models/ffa/proxy_ops.h"

namespace kconform::ffa {
namespace {

// Where the constituent checks report: the call's plan, or (for a later
// fragment, which the proxy may refuse on its own) rules alone.
struct RangeGuard {
  Hits& hits;
  Plan* plan = nullptr;
  bool failed = false;
  bool empty_relayed = false;  // take_ranges allowed refusing a zero-page constituent (once per call)

  void fail(RuleId r, std::initializer_list<int32_t> codes) {
    if (plan) {
      plan->fail(r, codes);
    } else {
      hits.add(r, true);
      hits.pass(kFfaProxyNoChangeOnError);
      hits.pass(kFfaProxyErrorEncoding);
    }
    failed = true;
  }
};

// The constituents of the send so far: earlier fragments' (kept) and this
// call's (added).
struct RangeList {
  const Constituent* kept = nullptr;
  uint32_t n_kept = 0;
  Constituent* added = nullptr;
  uint32_t n_added = 0;

  // The highest end address of them all (once kept is counted): a constituent
  // that starts at or past it overlaps none, which spares the scan over all of
  // them when constituents come in address order, as they usually do.
  uint64_t max_end = 0;
  bool kept_counted = false;

  uint32_t size() const { return n_kept + n_added; }
  bool overlaps(const Constituent& c) {
    if (!kept_counted) {
      for (uint32_t j = 0; j < n_kept; ++j) note_end(kept[j]);
      kept_counted = true;
    }
    if (c.address >= max_end) return false;
    for (uint32_t j = 0; j < size(); ++j)
      if (ranges_overlap(c, j < n_kept ? kept[j] : added[j - n_kept])) return true;
    return false;
  }
  void push(const Constituent& c) {
    if (size() >= kMaxRanges) return;
    added[n_added++] = c;
    note_end(c);
  }
  void note_end(const Constituent& c) {
    const uint64_t end = c.address + uint64_t{c.pages} * kFfaPage;
    if (end > max_end) max_end = end;
  }
  static bool ranges_overlap(const Constituent& a, const Constituent& b) {
    return a.address < b.address + uint64_t{b.pages} * kFfaPage && b.address < a.address + uint64_t{a.pages} * kFfaPage;
  }
};

// Where DEN0077 leaves a Relayer a choice (DescLeeway: DESC:EP-MEM-SIZE,
// DESC:ATTRS, DESC:FLAGS): each other answer is allowed, with no change.
void allow_leeway(const DescLeeway& lw, Plan& p) {
  for (uint32_t i = 0; i < lw.n; ++i) {
    p.hits.pass(lw.alt[i].rule);
    p.hits.note("%s also allowed (the specification leaves it open)", error_name(lw.alt[i].code));
    p.error(lw.alt[i].rule, lw.alt[i].code);
  }
}

// A descriptor fault (DESC:*): INVALID_PARAMETERS; an overlap may be DENIED.
void fail_descriptor(DescError e, RangeGuard& g) {
  if (e == DescError::kOk) return;
  g.hits.broke(desc_error_rule(e), "descriptor: %s", desc_error_name(e));
  if (e == DescError::kOverlap)
    g.fail(kFfaDescOverlap, {kInvalidParameters, kDenied});
  else
    g.fail(desc_error_rule(e), {kInvalidParameters});
}

// PKVM:GRANULE and PKVM:OWNERSHIP for constituent i (host stage-2 as it is).
void check_host_range(const World& w, const Constituent& c, uint32_t i, RangeGuard& g) {
  const uint64_t ps = w.profile->page_size, len = uint64_t{c.pages} * kFfaPage;
  // Whole host pages only: host stage-2 tracks PAGE_SIZE pages.
  if (c.address % ps || len % ps) {
    g.hits.broke(kFfaProxyGranule, "constituent %u (%#llx, %u pages) not %#llx-granular", i,
                 static_cast<unsigned long long>(c.address), c.pages, static_cast<unsigned long long>(ps));
    g.fail(kFfaProxyGranule, {kInvalidParameters, kDenied});
  } else {
    g.hits.pass(kFfaProxyGranule);
  }
  // Only memory the host owns exclusively: not the hypervisor's, not outside
  // RAM, not its mailboxes, not already shared.
  if (!w.range_is(c.address, len, PageView::kOwned)) {
    g.hits.broke(kFfaProxyHostMemory, "constituent %u (%#llx, %u pages) not host-owned", i,
                 static_cast<unsigned long long>(c.address), c.pages);
    g.fail(kFfaProxyHostMemory, {kInvalidParameters, kDenied});
  } else {
    g.hits.pass(kFfaProxyHostMemory);
  }
}

// Checks the n constituents at byte offset off of buf (each on its own, then
// against those before it) and adds the good ones to list. relay_empty: the
// first fragment of several, where a constituent of zero pages shares nothing
// and the SPMC refuses the complete descriptor at its last fragment, so the
// proxy may refuse it (DESC:PAGES) or relay it (it adds nothing to list).
void take_ranges(const World& w, std::span<const uint8_t> buf, uint64_t off, uint32_t n, RangeList& list,
                 RangeGuard& g, bool relay_empty = false) {
  for (uint32_t i = 0; i < n; ++i) {
    Constituent c;
    read_constituent(buf, off + uint64_t{i} * kConstituentSize, &c);
    DescError e = constituent_error(c);
    if (e == DescError::kPageCount && relay_empty && g.plan) {
      // One refusal to allow, however many such constituents there are (a
      // plan lists kMaxAlts outcomes: more would crowd out the relay's).
      if (!g.empty_relayed) {
        g.hits.pass(kFfaDescPageCount);
        g.hits.note("constituent %u (%#llx) of 0 pages in a first fragment: refused or relayed", list.size(),
                    static_cast<unsigned long long>(c.address));
        g.plan->error(kFfaDescPageCount, kInvalidParameters);
        g.empty_relayed = true;
      }
      continue;
    }
    if (e == DescError::kOk && list.overlaps(c)) e = DescError::kOverlap;
    fail_descriptor(e, g);
    if (e == DescError::kPageCount && !w.range_is(c.address, kFfaPage, PageView::kOwned)) {
      // A zero-page constituent whose address is not memory the host owns
      // breaks PKVM:OWNERSHIP too: the union of both guards' errors.
      g.hits.broke(kFfaProxyHostMemory, "constituent %u (%#llx, 0 pages) not at host-owned memory", list.size(),
                   static_cast<unsigned long long>(c.address));
      g.fail(kFfaProxyHostMemory, {kInvalidParameters, kDenied});
    }
    // A constituent-local fault (alignment, wrap-around) also fails the
    // proxy's granule/ownership guards: the allowed errors are the union.
    if (e == DescError::kAddrAlign || e == DescError::kAddrOverflow) check_host_range(w, c, list.size(), g);
    if (e != DescError::kOk) continue;
    check_host_range(w, c, list.size(), g);
    list.push(c);
  }
}

bool known_receiver(uint16_t id, const void* ctx) {
  const SpmcConfig& c = *static_cast<const SpmcConfig*>(ctx);
  for (uint32_t i = 0; i < c.n_sps; ++i)
    if (c.sp_ids[i] == id) return true;
  return false;
}

// The proxy's copy of the first len bytes of the host's TX: what it checks
// is what it forwards.
std::span<const uint8_t> copy_host_tx(const World& w, uint32_t len, Plan& p) {
  const uint8_t* src = w.at(w.proxy.mbox.tx_pa, len);
  for (uint32_t i = 0; i < len; ++i) p.desc[i] = src ? src[i] : 0;
  return {p.desc, len};
}

RuleId send_ok_rule(MemKind kind) { return kind == MemKind::kLend ? kFfaProxyLendAsShare : kFfaProxyShareOk; }

// HARNESS:EL3: whether the fault armed before the relays (`before`) fired in them.
bool el3_lied(Fault before, const Plan& p) { return before != Fault::kNone && p.el3_armed() == Fault::kNone; }

// A whole descriptor: what the SPMC would say and what pKVM checks itself,
// then the relay (PKVM:SHARE, PKVM:LEND, PKVM:ATOMIC).
void send_whole(const World& w, const CallArgs& a, MemKind kind, std::span<const uint8_t> desc, const MemRegion& r,
                DescLeeway& lw, Plan& p) {
  Hits spmc_hits;
  const int32_t spmc_err = w.spmc.check_send(kind, desc, &spmc_hits, &lw);
  for (uint32_t i = 0; i < spmc_hits.size(); ++i) p.hits.add(spmc_hits[i].rule, spmc_hits[i].forbidden);
  RangeList list{nullptr, 0, p.ranges, 0};
  RangeGuard g{p.hits, &p};
  take_ranges(w, desc, r.ranges_off, r.range_count, list, g);
  if (spmc_err) {
    const RuleId rule = last_broken(spmc_hits, kFfaProxyNoChangeOnError);
    p.hits.note("SPMC: %s", spmc_hits.text());
    p.fail(rule, {spmc_err});
  }
  allow_leeway(lw, p);
  if (p.failed) return;
  const uint32_t total = a.w1(), frag = a.w2();
  uint64_t out[kNumRegs];
  const Fault armed = p.el3_armed();
  p.relay(Relay::call_with_host_tx(frag, {a.fid(), total, frag, 0, 0}), out, &p.hits);
  if (!is_success(out) && !is_error(out) && el3_lied(armed, p)) {
    // PKVM:DISTRUST: EL3 answered a whole send with something other than
    // FFA_SUCCESS or FFA_ERROR (HARNESS:EL3 FRAG_RX_WHOLE). The proxy knows the
    // send was whole: an error, and nothing of it stays shared (EL3 may hold
    // the pages; the proxy cannot know, SPEC.md PKVM:DISTRUST).
    p.hits.add(kFfaProxyEl3Fault, true);
    p.hits.note("EL3 answered a whole send with %#llx", static_cast<unsigned long long>(out[0]));
    p.any_error(kFfaProxyEl3Fault, false);
    return;
  }
  if (!is_success(out)) {
    // EL3 refused after the proxy's checks: nothing stays shared.
    p.hits.pass(kFfaProxyRollback);
    p.error(kFfaProxyRollback, el3_error(out), false);
    return;
  }
  p.set_ranges(list.added, list.n_added, PageView::kSharedFfa);
  p.success(send_ok_rule(kind), kX0 | kX2 | kX3, out[2], out[3]);
  if (kind == MemKind::kLend) p.hits.pass(kFfaProxyShareOk);
  // DESC:EP-MEM-SIZE: endpoint descriptors of an earlier compatible version
  // (16 bytes from a v1.2 caller) are taken: evaluated on its allowed side.
  if (r.layout != Layout::kV10 && r.ep_mem_size < emad_size(r.layout)) p.hits.pass(kFfaDescEpMemSize);
}

// The first of several fragments (MEM:FRAGMENT): the header and endpoint
// array are all here (DESC:HEADER), and whole constituents only.
void send_first_fragment(const World& w, const CallArgs& a, MemKind kind, std::span<const uint8_t> frag_bytes,
                         const MemRegion& r, DescLeeway& lw, Plan& p) {
  // A Relayer may already refuse what the header breaks, or relay and let the
  // SPMC refuse the whole descriptor at the last fragment; so too what the
  // header leaves it free to refuse (DescLeeway).
  const DescError early = check_semantics(r, kind, kHostId, known_receiver, &w.spmc.config(), &lw);
  if (early != DescError::kOk) {
    p.hits.add(desc_error_rule(early), true);
    p.hits.note("first fragment: %s", desc_error_name(early));
    p.error(desc_error_rule(early), kInvalidParameters);
    if (early == DescError::kSender) p.error(kFfaDescSender, kDenied);
  }
  allow_leeway(lw, p);
  const uint32_t total = a.w1(), frag = a.w2();
  const uint64_t here = frag > r.ranges_off ? frag - r.ranges_off : 0;
  if (here % kConstituentSize) {
    p.hits.broke(kFfaProxyFragment, "fragment ends inside a constituent");
    p.fail(kFfaProxyFragment, {kInvalidParameters});
    return;
  }
  RangeList list{nullptr, 0, p.ranges, 0};
  RangeGuard g{p.hits, &p};
  take_ranges(w, frag_bytes, r.ranges_off, static_cast<uint32_t>(here / kConstituentSize), list, g,
              /*relay_empty=*/true);
  if (p.failed) return;
  uint64_t out[kNumRegs];
  const Fault armed = p.el3_armed();
  p.relay(Relay::call_with_host_tx(frag, {a.fid(), total, frag, 0, 0}), out, &p.hits);
  const bool lied = el3_lied(armed, p);
  if (lied && !is_error(out) && (fid_of(out) != kFnMemFragRx || w32(out[3]) != frag || out[5] != 0)) {
    // PKVM:DISTRUST: a reply the proxy can tell is wrong from what it sent
    // (HARNESS:EL3 EARLY_SUCCESS, FRAG_RX_OFFSET, FRAG_RX_RESERVED): an error,
    // and nothing of the send stays shared (EL3 keeps it in flight).
    p.hits.add(kFfaProxyEl3Fault, true);
    p.hits.note("EL3 answered a first fragment of %u bytes with %#llx, w3 %#llx, w5 %#llx", frag,
                static_cast<unsigned long long>(out[0]), static_cast<unsigned long long>(out[3]),
                static_cast<unsigned long long>(out[5]));
    p.any_error(kFfaProxyEl3Fault, false);
    return;
  }
  if (fid_of(out) != kFnMemFragRx) {
    p.error(kFfaProxyRollback, el3_error(out), false);
    return;
  }
  // The send is in flight with EL3's handle.
  FragSend& f = p.frag();
  f = {.active = true, .eager = true, .handle = handle_of(out[1], out[2]), .kind = kind, .total = total,
       .received = frag, .n = list.n_added};
  p.add_frag_ranges(list.added, list.n_added);
  const uint64_t regs[kCallRegs] = {kFnMemFragRx, out[1], out[2], frag};
  // Variant 0 shares each fragment's pages as it arrives, variant 1 at the end.
  const uint32_t lazy = p.fork();
  p.frag().eager = false;
  p.select(0);
  p.set_ranges(list.added, list.n_added, PageView::kSharedFfa);
  p.exact(kFfaProxyFragment, regs, kX0 | kX1 | kX2 | kX3, false);
  p.hits.pass(kFfaProxyFragState);
  p.select(lazy);
  p.exact(kFfaProxyFragment, regs, kX0 | kX1 | kX2 | kX3, false);
  p.hits.pass(kFfaProxyFragState);
  if (lied) {
    // HARNESS:EL3 FRAG_RX_HANDLE: a stateless proxy cannot tell EL3's handle
    // is wrong (PKVM:DISTRUST): relaying it (above) or refusing with nothing
    // shared are both allowed.
    p.hits.add(kFfaProxyEl3Fault, false);
    p.hits.note("EL3 reply fault fired; handle %#llx relayed or refused",
                static_cast<unsigned long long>(handle_of(out[1], out[2])));
    p.fork();
    p.frag().active = false;
    p.frag().n = 0;
    p.any_error(kFfaProxyEl3Fault, false);
  }
}

// A bad later fragment: the proxy may refuse it alone (everything as it was)
// or abort the transaction at EL3 and roll back (PKVM:ATOMIC).
void refuse_fragment(const World& w, uint64_t handle, RuleId rule, Plan& p) {
  const FragSend& fs = w.proxy.frag;
  p.fail(rule, {kInvalidParameters, kDenied});
  uint64_t out[kNumRegs];
  p.relay(Relay::call({kFnMemFragTx, handle_lo(handle), handle_hi(handle), 0, 0}), out, nullptr);
  if (fs.eager) p.set_ranges(w.proxy.frag_ranges, fs.n, PageView::kOwned);
  p.frag().active = false;
  p.frag().n = 0;
  p.error(kFfaProxyRollback, kInvalidParameters, false);
  p.error(kFfaProxyRollback, kDenied, false);
  p.hits.pass(kFfaProxyRollback);
}

// A good later fragment, relayed: EL3 wants more (FFA_MEM_FRAG_RX), completes
// the send (FFA_SUCCESS: every page shared), or refuses (every page the host's
// again, PKVM:ATOMIC).
void relay_fragment(const World& w, uint64_t handle, uint32_t frag, const RangeList& list, Plan& p) {
  const FragSend& fs = w.proxy.frag;
  uint64_t out[kNumRegs];
  const Fault armed = p.el3_armed();
  p.relay(Relay::call_with_host_tx(frag, {kFnMemFragTx, handle_lo(handle), handle_hi(handle), frag, 0}), out, &p.hits);
  if (is_error(out) && armed != Fault::kNone && p.el3_armed() == Fault::kNone) {
    // EL3 misbehaved (HARNESS:EL3) and may still hold the send in flight:
    // PKVM:DISTRUST, not PKVM:ATOMIC. Undoing this fragment only (the state
    // before the call) is allowed besides a full rollback.
    p.hits.add(kFfaProxyEl3Fault, false);
    p.error(kFfaProxyEl3Fault, error_code(out));
  }
  if (is_error(out)) {
    if (fs.eager) p.set_ranges(w.proxy.frag_ranges, fs.n, PageView::kOwned);
    p.frag().active = false;
    p.frag().n = 0;
    p.hits.pass(kFfaProxyRollback);
    p.error(kFfaProxyRollback, error_code(out), false);
    return;
  }
  if (armed != Fault::kNone && p.el3_armed() == Fault::kNone) {
    // A reply fault fired (HARNESS:EL3 20-24), PKVM:DISTRUST. What the proxy
    // can check without state (FFA_MEM_FRAG_RX naming another handle than the
    // host's, a reserved register set) must end the call with an error; what
    // only the earlier fragments would tell (the offset, whether this was the
    // last fragment) it may relay as EL3 said, or refuse as well. An error
    // rolls back every page of the send, or (a stateless proxy has lost the
    // earlier fragments) this fragment's only; EL3 may still hold them.
    const bool detectable =
        fid_of(out) == kFnMemFragRx && (handle_of(out[1], out[2]) != handle || out[5] != 0);
    p.hits.add(kFfaProxyEl3Fault, detectable);
    p.hits.note("EL3 answered a fragment with %#llx, handle %#llx, w3 %#llx, w5 %#llx: %s",
                static_cast<unsigned long long>(out[0]), static_cast<unsigned long long>(handle_of(out[1], out[2])),
                static_cast<unsigned long long>(out[3]), static_cast<unsigned long long>(out[5]),
                detectable ? "an error" : "relayed or an error");
    const uint32_t relayed = detectable ? 0 : p.fork();
    p.fork();  // this fragment undone only
    p.frag().active = false;
    p.frag().n = 0;
    p.any_error(kFfaProxyEl3Fault, false);
    p.select(0);  // every page of the send rolled back
    if (fs.eager) p.set_ranges(w.proxy.frag_ranges, fs.n, PageView::kOwned);
    p.frag().active = false;
    p.frag().n = 0;
    p.any_error(kFfaProxyEl3Fault, false);
    if (detectable) return;
    p.select(relayed);
  }
  FragSend& f = p.frag();
  f.n = list.size();
  f.received += frag;
  if (fid_of(out) == kFnMemFragRx) {
    // More to come: EL3 says how much it has.
    p.add_frag_ranges(list.added, list.n_added);
    if (fs.eager) p.set_ranges(list.added, list.n_added, PageView::kSharedFfa);
    // (what EL3 said it has, when a reply fault made it lie)
    const uint64_t regs[kCallRegs] = {kFnMemFragRx, out[1], out[2], p.el3_armed() != armed ? out[3] : f.received};
    p.exact(kFfaProxyFragment, regs, kX0 | kX1 | kX2 | kX3, false);
    p.hits.pass(kFfaProxyFragState);
    return;
  }
  if (!fs.eager) p.set_ranges(w.proxy.frag_ranges, fs.n, PageView::kSharedFfa);
  p.set_ranges(list.added, list.n_added, PageView::kSharedFfa);
  f.active = false;
  f.n = 0;
  p.success(send_ok_rule(fs.kind), kX0 | kX2 | kX3, out[2], out[3]);
  p.hits.pass(kFfaProxyFragState);
}

// MEM:ARGS, MBOX:TX-REQUIRED, SPMC:FRAG: the registers of a send. Returns
// whether the descriptor can be read at all.
bool send_args_ok(const World& w, const CallArgs& a, Plan& p) {
  const uint32_t total = a.w1(), frag = a.w2();
  const uint64_t mbox = w.profile->mbox_bytes();
  // The descriptor is in TX, not in a buffer of the caller's own (w3/w4,
  // address and page count, MBZ).
  if (a.x3() != 0 || a.w4() != 0) {
    p.hits.broke(kFfaProxyMemArgs, "own buffer %#llx, %u pages", static_cast<unsigned long long>(a.x3()), a.w4());
    p.fail(kFfaProxyMemArgs, {kInvalidParameters, kNotSupported});
  }
  if (!w.proxy.mbox.mapped) {
    p.hits.broke(kFfaMboxTxRequired, "no TX buffer");
    p.fail(kFfaMboxTxRequired, {kInvalidParameters, kDenied});
  } else {
    p.hits.pass(kFfaMboxTxRequired);
  }
  if (total == 0 || frag == 0 || frag > total || frag > mbox) {
    p.hits.broke(kFfaProxyMemArgs, "total %u, fragment %u, mailbox %#llx", total, frag,
                 static_cast<unsigned long long>(mbox));
    p.fail(kFfaProxyMemArgs, {kInvalidParameters});
  } else {
    p.hits.pass(kFfaProxyMemArgs);
  }
  if (p.failed) return false;
  // PROFILE:ONE-SEND: with a fragmented send in flight the proxy may refuse a
  // new send on its own (nothing changes), or relay it and return what EL3
  // says (an SPMC that keeps one send in flight answers BUSY).
  if (w.proxy.frag.active) {
    p.hits.pass(kFfaProfileOneSend);
    p.hits.note("fragmented send %#llx in flight", static_cast<unsigned long long>(w.proxy.frag.handle));
    for (const int32_t code : {kBusy, kDenied, kInvalidParameters}) p.error(kFfaProfileOneSend, code);
  }
  // PROFILE:DESC-BUF: a descriptor longer than the proxy's own buffer could
  // not be reclaimed through it: the proxy may refuse the send (NO_MEMORY,
  // nothing changes) or relay it.
  if (total > w.profile->desc_buf_bytes) {
    p.hits.pass(kFfaProfileDescBuf);
    p.hits.note("descriptor of %u bytes > the proxy's buffer of %llu", total,
                static_cast<unsigned long long>(w.profile->desc_buf_bytes));
    p.error(kFfaProfileDescBuf, kNoMemory);
  }
  // A descriptor the SPMC cannot hold.
  if (total > kMaxDescBytes) {
    p.hits.broke(kFfaSpmcDescTooBig, "descriptor of %u bytes", total);
    p.fail(kFfaSpmcDescTooBig, {kNoMemory, kInvalidParameters});
    return false;
  }
  return true;
}

}  // namespace

void expect_mem_send(const World& w, const CallArgs& a, MemKind kind, Plan& p) {
  if (!send_args_ok(w, a, p)) return;
  const uint32_t total = a.w1(), frag = a.w2();
  const std::span<const uint8_t> desc = copy_host_tx(w, frag, p);
  // DESC:LAYOUT: in the layout of the version the host negotiated.
  p.hits.pass(kFfaDescLayout);
  MemRegion r;
  RangeGuard g{p.hits, &p};
  DescLeeway lw;
  fail_descriptor(parse_region(desc, total, layout_for(w.proxy.host_version), &r, /*transmission=*/true,
                               /*lenient=*/false, &lw),
                  g);
  if (p.failed) return;
  // DESC:SENDER: INVALID_PARAMETERS (pKVM's reading) or DENIED (Hafnium's);
  // the verdict's "gave" says which one the target chose.
  if (r.sender != kHostId) {
    p.hits.broke(kFfaDescSender, "sender %#x: INVALID_PARAMETERS or DENIED", r.sender);
    p.fail(kFfaDescSender, {kInvalidParameters, kDenied});
  }
  // DESC:EP-COUNT: a Relayer may support a single borrower; refusing more is
  // allowed, with no change.
  if (r.ep_count > 1) {
    p.hits.pass(kFfaDescEpCount);
    p.error(kFfaDescEpCount, kInvalidParameters);
  }
  if (frag == total)
    send_whole(w, a, kind, desc, r, lw, p);
  else
    send_first_fragment(w, a, kind, desc, r, lw, p);
}

void expect_mem_frag_tx(const World& w, const CallArgs& a, Plan& p) {
  const FragSend& fs = w.proxy.frag;
  const uint64_t handle = a.handle();
  const uint32_t frag = a.w3();
  // MEM:FRAGMENT: w1/w2 the handle of the send in flight.
  if (!fs.active || handle != fs.handle || !w.proxy.mbox.mapped) {
    p.hits.broke(kFfaProxyFragment, "no send in flight with handle %#llx", static_cast<unsigned long long>(handle));
    p.fail(kFfaProxyFragment, {kInvalidParameters, kDenied});
    return;
  }
  // w3 the fragment's length (whole constituents, within what remains), w4
  // the sender ID only a hypervisor passes.
  const uint32_t remaining = fs.total - fs.received;
  bool bad = false;
  if (frag == 0 || frag > remaining || frag > w.profile->mbox_bytes() || frag % kConstituentSize || a.w4() != 0) {
    p.hits.broke(kFfaProxyFragment, "fragment of %u bytes, %u remaining, w4 %#x", frag, remaining, a.w4());
    bad = true;
  } else {
    p.hits.pass(kFfaProxyFragment);
  }
  // The constituents, checked as the first fragment's were (their notes are not kept).
  Hits probe;
  RangeList list{w.proxy.frag_ranges, fs.n, p.ranges, 0};
  if (!bad) {
    RangeGuard g{probe};
    take_ranges(w, copy_host_tx(w, frag, p), 0, frag / kConstituentSize, list, g);
    bad = g.failed;
  }
  for (uint32_t i = 0; i < probe.size(); ++i) p.hits.add(probe[i].rule, probe[i].forbidden);
  if (bad)
    refuse_fragment(w, handle, last_broken(probe, kFfaProxyFragment), p);
  else
    relay_fragment(w, handle, frag, list, p);
}

}  // namespace kconform::ffa
