// FFA_MEM_RECLAIM through the proxy (SPEC.md PKVM:RECLAIM, PKVM:DISTRUST,
// R2:MIXED, MBOX:TX-REQUIRED): the proxy keeps no transaction state, so it
// asks EL3 for the region (a hypervisor retrieve request, SPMC:HYP-RETRIEVE),
// releases RX, reclaims, and on FFA_SUCCESS gives the pages back to the host.
#include "models/ffa/proxy_ops.h"

namespace kconform::ffa {
namespace {

// 1. Learns the transaction's pages from EL3: the retrieve request, then the
// response in RX, fragment by fragment, each RX given back. Fills desc with
// the response and returns its length, or 0 if EL3's answer is unusable;
// *failed says the request itself was refused (out holds EL3's error);
// *too_big that the response is longer than the proxy's buffer (PROFILE:DESC-BUF).
uint32_t retrieve_region(const World& w, uint64_t handle, Layout l, uint64_t out[kNumRegs], bool* refused,
                         bool* too_big, Plan& p) {
  Relay req = Relay::call({kFnMemRetrieveReq64, header_size(l), header_size(l), 0, 0});
  req.tx = Relay::Tx::kRetrieveRequest;
  req.handle = handle;
  req.layout = l;
  p.relay(req, out, &p.hits);
  *refused = is_error(out);
  if (*refused) return 0;
  const uint32_t total = w32(out[1]), first = w32(out[2]);
  const uint64_t mbox = w.profile->mbox_bytes();
  uint64_t unused[kNumRegs];
  if (fid_of(out) != kFnMemRetrieveResp || first == 0 || first > total || first > mbox || total > kMaxDescBytes) {
    // The proxy owns its RX after a retrieve response, usable or not: it
    // gives it back (MBOX:RX-RELEASE), or every later reclaim would be BUSY.
    if (fid_of(out) == kFnMemRetrieveResp) p.relay(Relay::call({kFnRxRelease}), unused, nullptr);
    return 0;
  }
  // PROFILE:DESC-BUF: the whole response must fit the proxy's own buffer.
  if (total > w.profile->desc_buf_bytes) {
    p.hits.broke(kFfaProfileDescBuf, "retrieve response of %u bytes > the proxy's buffer of %llu", total,
                 static_cast<unsigned long long>(w.profile->desc_buf_bytes));
    p.relay(Relay::call({kFnRxRelease}), unused, nullptr);
    *too_big = true;
    return 0;
  }
  p.hits.pass(kFfaProfileDescBuf);
  uint32_t got = 0, len = first;
  for (;;) {
    p.read_hyp_rx(p.desc + got, len);
    got += len;
    p.relay(Relay::call({kFnRxRelease}), unused, nullptr);
    if (got == total) return total;
    uint64_t next[kNumRegs];
    p.relay(Relay::call({kFnMemFragRx, handle_lo(handle), handle_hi(handle), got, 0}), next, nullptr);
    len = w32(next[3]);
    if (fid_of(next) != kFnMemFragTx) return 0;
    if (len == 0 || len > total - got || len > mbox) {
      // A FRAG_TX gives the proxy its RX as a RETRIEVE_RESP does: given back
      // whatever its length says (PKVM:DISTRUST, MBOX:RX-RELEASE).
      p.relay(Relay::call({kFnRxRelease}), unused, nullptr);
      return 0;
    }
  }
}

// PKVM:DISTRUST: the response describes the region, in whole host pages each
// shared with FF-A. Fills r and returns true if so.
bool region_is_shared(const World& w, std::span<const uint8_t> desc, Layout l, MemRegion* r, Plan& p) {
  if (parse_region(desc, static_cast<uint32_t>(desc.size()), l, r, /*transmission=*/false) != DescError::kOk)
    return false;
  if (r->range_count > kMaxRanges) return false;
  const uint64_t ps = w.profile->page_size;
  for (uint32_t i = 0; i < r->range_count; ++i) {
    Constituent& c = p.ranges[i];
    read_constituent(desc, r->ranges_off + uint64_t{i} * kConstituentSize, &c);
    const uint64_t len = uint64_t{c.pages} * kFfaPage;
    // Never trust EL3 with pages that are not shared with FF-A.
    if (c.address % ps || len % ps || !w.range_is(c.address, len, PageView::kSharedFfa)) return false;
  }
  return true;
}

// 2. Reclaims at EL3 (its errors are returned unchanged); 3. on FFA_SUCCESS
// the region's pages, p.ranges[0, n), are the host's again.
void reclaim_at_el3(uint64_t handle, uint32_t flags, uint32_t n, bool partial, Plan& p) {
  uint64_t out[kNumRegs];
  p.relay(Relay::call({kFnMemReclaim, handle_lo(handle), handle_hi(handle), flags}), out, &p.hits);
  if (!is_success(out)) {
    const RuleId rule = last_broken(p.hits, kFfaProxyReclaimErr);
    p.hits.pass(kFfaProxyReclaimErr);
    p.hits.pass(kFfaProxyNoChangeOnError);
    p.error(rule, el3_error(out), false);
    p.error(kFfaProxyReclaimErr, el3_error(out), false);
    return;
  }
  p.set_ranges(p.ranges, n, PageView::kOwned);
  p.success(kFfaProxyReclaimOk, kX0);
  if (partial) {
    // R2:MIXED: after partial RECLAIM2 calls a proxy may refuse the rest.
    p.success(kFfaProxyReclaimAfterPartial, kX0);
    p.error(kFfaProxyReclaimAfterPartial, kInvalidParameters);
    p.error(kFfaProxyReclaimAfterPartial, kDenied);
  }
}

}  // namespace

void expect_mem_reclaim(const World& w, const CallArgs& a, Plan& p) {
  const uint64_t handle = a.handle();
  const Transaction* t = w.spmc.find(handle);
  const bool partial = t && t->complete && t->reclaimed_count;
  // MBOX:TX-REQUIRED: the proxy learns the pages through its own mailbox,
  // mapped with the SPMC only while the host has a pair mapped (PKVM:MBOX).
  if (!w.proxy.mbox.mapped) {
    p.hits.broke(kFfaMboxTxRequired, "no mailbox pair mapped: the proxy cannot retrieve %#llx",
                 static_cast<unsigned long long>(handle));
    p.fail(kFfaMboxTxRequired, {kDenied, kInvalidParameters});
    return;
  }
  p.hits.pass(kFfaMboxTxRequired);
  // MBOX:RX-RELEASE: while the host owns its RX the proxy's RX at EL3 may be
  // full too, and the retrieve request gets BUSY: the reclaim may fail with
  // BUSY, no change.
  if (w.proxy.mbox.rx_held) p.error(kFfaMboxRxRelease, kBusy);
  // SPMC:RECLAIM: the time-slicing bit may be honoured or refused
  // (INVALID_PARAMETERS, no change); the spec leaves its support open.
  if (a.w3() & kReclaimTimeSlice) {
    p.hits.pass(kFfaSpmcReclaimFlags);
    p.hits.note("time-slicing flag: reclaimed or refused");
    p.error(kFfaSpmcReclaimFlags, kInvalidParameters);
  }
  // 1. The transaction's pages.
  const Layout l = layout_for(w.spmc.ns_version());
  uint64_t out[kNumRegs];
  bool refused = false, too_big = false;
  const uint32_t len = retrieve_region(w, handle, l, out, &refused, &too_big, p);
  if (refused && t && t->complete && t->any_retrieved() && error_code(out) == kDenied) {
    // SPMC:HYP-RETRIEVE-REQ: a borrower holds the memory; the reclaim would
    // be DENIED too (SPMC:RECLAIM). EL3's answer, nothing changed.
    p.hits.add(kFfaSpmcHypRetrieveRetrieved, true);
    p.hits.add(kFfaSpmcReclaimRetrieved, true);
    p.hits.pass(kFfaProxyReclaimErr);
    p.fail(kFfaSpmcHypRetrieveRetrieved, {kDenied});
    p.error(kFfaProxyReclaimErr, kDenied);
    return;
  }
  if (refused) {
    // No such transaction (the reclaim fails likewise), or EL3 failed.
    const RuleId rule = t ? kFfaProxyEl3Fault : kFfaSpmcReclaimHandle;
    p.hits.add(rule, !t);
    if (!t) p.fail(kFfaSpmcReclaimHandle, {kInvalidParameters});
    p.error(rule, error_code(out), false);
    return;
  }
  if (too_big) {
    p.error(kFfaProfileDescBuf, kNoMemory, false);
    return;
  }
  MemRegion r;
  if (len == 0 || !region_is_shared(w, {p.desc, len}, l, &r, p)) {
    p.hits.add(kFfaProxyEl3Fault, false);
    p.hits.note("EL3's retrieve response is unusable");
    p.any_error(kFfaProxyEl3Fault, false);
    return;
  }
  reclaim_at_el3(handle, a.w3(), r.range_count, partial, p);
}

}  // namespace kconform::ffa
