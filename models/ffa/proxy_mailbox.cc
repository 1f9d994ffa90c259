// The host's mailboxes through the proxy (SPEC.md "Mailboxes", PKVM:MBOX):
// FFA_RXTX_MAP (MBOX:MAP-ARGS, MAP-TWICE, MAP-SIZE, the buffers host-owned),
// FFA_RXTX_UNMAP (MBOX:UNMAP), FFA_RX_RELEASE (MBOX:RX-RELEASE). The proxy
// relays the registration: its own pair is mapped at EL3 with the host's.
#include "models/ffa/proxy_ops.h"

namespace kconform::ffa {

namespace {

// MBOX:MAP-ARGS, MAP-TWICE, MAP-SIZE and the buffers' ownership (PKVM:MBOX).
void check_map_args(const World& w, const CallArgs& a, Plan& p) {
  const ProxyProfile& prof = *w.profile;
  const uint64_t tx = a.x1(), rx = a.x2(), ps = prof.page_size;
  const uint32_t pages = rxtx_pages(a.w3());
  const uint64_t len = uint64_t{pages} * kFfaPage;
  // w3[31:6] reserved; a page count; 4K-aligned, disjoint buffers.
  if (rxtx_reserved_set(a.w3()) || pages == 0 || tx % kFfaPage || rx % kFfaPage ||
      (tx < rx + len && rx < tx + len) || tx + len < tx || rx + len < rx) {
    p.hits.broke(kFfaMboxMapArgs, "tx %#llx rx %#llx w3 %#x", static_cast<unsigned long long>(tx),
                 static_cast<unsigned long long>(rx), a.w3());
    p.fail(kFfaMboxMapArgs, {kInvalidParameters});
  } else {
    p.hits.pass(kFfaMboxMapArgs);
  }
  if (w.proxy.mbox.mapped) {
    p.hits.broke(kFfaMboxMapTwice, "a pair is mapped");
    p.fail(kFfaMboxMapTwice, {kDenied});
  } else {
    p.hits.pass(kFfaMboxMapTwice);
  }
  // The proxy copies through its own fixed mailbox.
  if (pages && len != prof.mbox_bytes()) {
    p.hits.broke(kFfaMboxMapSize, "%u pages, mailbox is %#llx bytes", pages,
                 static_cast<unsigned long long>(prof.mbox_bytes()));
    p.fail(kFfaMboxMapSize, {kInvalidParameters, kNoMemory});
  } else {
    p.hits.pass(kFfaMboxMapSize);
  }
  // ours: shared with the hypervisor page by page.
  if (tx % ps || rx % ps) {
    p.hits.broke(kFfaMboxMapArgs, "buffers not %#llx-aligned", static_cast<unsigned long long>(ps));
    p.fail(kFfaMboxMapArgs, {kInvalidParameters});
  }
  // Memory the host owns.
  if (pages && (!w.range_is(tx, len, PageView::kOwned) || !w.range_is(rx, len, PageView::kOwned))) {
    p.hits.broke(kFfaMboxMapOwned, "buffers not host-owned memory");
    p.fail(kFfaMboxMapOwned, {kInvalidParameters, kDenied});
  } else {
    p.hits.pass(kFfaMboxMapOwned);
  }
}

}  // namespace

void expect_rxtx_map(const World& w, const CallArgs& a, Plan& p) {
  check_map_args(w, a, p);
  if (p.failed) return;
  // PKVM:MBOX: the proxy's own pair is mapped with the SPMC now. If EL3
  // refuses, the host's call fails with its error and nothing changes.
  const uint64_t mbox = w.profile->mbox_bytes();
  uint64_t out[kNumRegs];
  p.relay(Relay::call({kFnRxtxMap64, w.hyp_tx_pa(), w.hyp_rx_pa(), mbox / kFfaPage}), out, nullptr);
  if (!is_success(out)) {
    p.hits.pass(kFfaMboxMapOk);
    p.error(kFfaMboxMapOk, el3_error(out));
    return;
  }
  // Both buffers are shared with the hypervisor; the host owns no RX data yet.
  const uint64_t tx = a.x1(), rx = a.x2(), len = uint64_t{rxtx_pages(a.w3())} * kFfaPage;
  p.set_pages(tx, len, PageView::kSharedHyp);
  p.set_pages(rx, len, PageView::kSharedHyp);
  p.mailbox() = {.mapped = true, .tx_pa = tx, .rx_pa = rx, .rx_held = false};
  p.success(kFfaMboxMapOk, kX0);
}

void expect_rxtx_unmap(const World& w, const CallArgs& a, Plan& p) {
  // MBOX:UNMAP: w1 is an endpoint ID only a hypervisor passes.
  if (a.w1() != 0 || !w.proxy.mbox.mapped) {
    p.hits.broke(kFfaMboxUnmap, "id field %#x, mapped %d", a.w1(), w.proxy.mbox.mapped);
    p.fail(kFfaMboxUnmap, {kInvalidParameters});
    return;
  }
  // PKVM:MBOX: the proxy's own pair is unmapped from the SPMC with the host's.
  uint64_t out[kNumRegs];
  p.relay(Relay::call({kFnRxtxUnmap, 0}), out, nullptr);
  const uint64_t len = w.profile->mbox_bytes();
  p.set_pages(w.proxy.mbox.tx_pa, len, PageView::kOwned);
  p.set_pages(w.proxy.mbox.rx_pa, len, PageView::kOwned);
  HostMailbox& m = p.mailbox();
  m.mapped = false;
  m.rx_held = false;
  p.success(kFfaMboxUnmap, kX0);
}

void expect_rx_release(const World& w, const CallArgs&, Plan& p) {
  // MBOX:RX-RELEASE: only the owner of RX releases it.
  if (!w.proxy.mbox.mapped || !w.proxy.mbox.rx_held) {
    p.hits.broke(kFfaMboxRxRelease, "the host does not own RX");
    p.fail(kFfaMboxRxRelease, {kDenied});
    return;
  }
  p.mailbox().rx_held = false;
  p.success(kFfaMboxRxRelease, kX0);
}

}  // namespace kconform::ffa
