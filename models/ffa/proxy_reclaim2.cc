// FFA_MEM_RECLAIM2 through the proxy (SPEC.md R2:*): the proxy checks what it
// will walk (R2:PROFILE, with the table's own validator, reclaim2_abi.h),
// relays, and unshares the host pages EL3 no longer holds (R2:UNSHARE,
// R2:GRANULE), distrusting an impossible count (PKVM:DISTRUST).
#include "models/ffa/proxy_ops.h"
#include "models/ffa/reclaim2_abi.h"

namespace kconform::ffa {
namespace {

// Which host pages a relayed call gives back (R2:GRANULE allows both).
enum class Unshare {
  kNoneHeld,      // every host page of which EL3 holds no 4K page any more
  kWhollyInside,  // only host pages wholly inside what this call reclaimed
};

// Unshares, in the current variant, the host pages of the first `count` pages
// the call asked for, as `rule` says, and lists the success (R2:RESULT).
void unshare_reclaimed(const World& w, std::span<const uint8_t> tx, const Reclaim2Args& args, uint64_t count,
                       Unshare rule, Plan& p) {
  const uint64_t ps = w.profile->page_size;
  p.hits.pass(kFfaR2CountBound);
  for_each_reclaim2_page(tx, args, count, [&](uint64_t pa) {
    const int64_t k = w.host_page(pa);
    if (k < 0 || p.view(k) != PageView::kSharedFfa) return true;
    const uint64_t host_page = pa - pa % ps;
    bool free = true;
    for (uint64_t q = host_page; q < host_page + ps && free; q += kFfaPage) {
      if (rule == Unshare::kNoneHeld) {
        free = !p.el3_page_held(q);
      } else {
        // q must be among this call's first `count` pages.
        bool inside = false;
        for_each_reclaim2_page(tx, args, count, [&](uint64_t r) {
          inside = q >= r && q < r + kFfaPage;
          return !inside;
        });
        free = inside;
      }
    }
    if (free) p.set_page(k, PageView::kOwned);
    return true;
  });
  if (!p.el3_find(args.handle)) p.hits.pass(kFfaR2Equivalence);
  p.success(kFfaR2Unshare, kX0 | kX2, count);
  p.success(kFfaR2CountBound, kX0 | kX2, count);
}

// R2:PROFILE: the proxy walks the host's list to unshare it, so it checks
// what it reads; EL3 checks the rest (handle, membership, overlap, pages).
// Returns whether the call may be relayed.
bool arguments_ok(const World& w, const Reclaim2Args& args, std::span<const uint8_t> tx, Plan& p) {
  const Reclaim2Abi& P = kReclaim2;
  const Reclaim2Checks check(args, p.hits);
  if (!w.proxy.mbox.mapped) {
    p.hits.broke(kFfaMboxTxRequired, "no TX buffer");
    p.fail(kFfaMboxTxRequired, {kInvalidParameters, kDenied});
  }
  if (!check.flags_mbz()) p.fail(kFfaR2Flags, {P.err_args});
  if (!check.offset_aligned()) p.fail(kFfaR2OffsetAlign, {P.err_args});
  if (!check.count_in_range()) p.fail(kFfaR2Count, {P.err_args});
  const bool inside = check.list_inside(w.profile->mbox_bytes());
  if (!inside) p.fail(kFfaR2Bounds, {P.err_args});
  if (!w.proxy.mbox.mapped || !inside || args.count == 0) return false;
  const Reclaim2List list = read_reclaim2_list(tx, args);
  if (!check.descriptors_valid(list)) p.fail(kFfaR2DescValid, {P.err_args});
  if (!check.total_matches(list)) p.fail(kFfaR2Total, {P.err_args});
  if (!check.page_index_in_first(list)) p.fail(kFfaR2PageIndex, {P.err_args});
  return !p.failed;
}

// R2:GRANULE: the asked pages start and the descriptors lie on host pages.
bool on_host_pages(const World& w, const Reclaim2Args& args, std::span<const uint8_t> tx) {
  const uint64_t ps = w.profile->page_size;
  bool aligned = args.page_index * kFfaPage % ps == 0;
  for (uint32_t i = 0; i < args.count; ++i) {
    const Constituent c = reclaim2_descriptor(tx, args, i);
    if (c.address % ps || uint64_t{c.pages} * kFfaPage % ps) aligned = false;
  }
  return aligned;
}

}  // namespace

void expect_mem_reclaim2(const World& w, const CallArgs& a, Plan& p) {
  const Reclaim2Abi& P = kReclaim2;
  const uint64_t mbox = w.profile->mbox_bytes();
  const Reclaim2Args args = Reclaim2Args::of(a.x);
  const std::span<const uint8_t> tx = w.host_tx(mbox);
  if (!arguments_ok(w, args, tx, p)) return;
  // R2:GRANULE: with host pages larger than 4K, a call that starts or ends
  // inside one may be refused, and a relayed one unshares either way.
  const bool two_ways = w.profile->page_size > kFfaPage;
  if (two_ways && !on_host_pages(w, args, tx)) {
    p.hits.pass(kFfaR2HostGranule);
    p.error(kFfaR2HostGranule, kInvalidParameters);
  }
  // Relay: the proxy's copy of the list goes to EL3 in its own TX.
  uint64_t regs[kCallRegs], out[kNumRegs];
  args.to_regs(regs);
  p.relay(Relay::call_with_host_tx(mbox, {regs[0], regs[1], regs[2], regs[3], regs[4], regs[5], regs[6], regs[7]}),
          out, &p.hits);
  if (!is_success(out)) {
    const RuleId rule = last_broken(p.hits, kFfaProxyNoChangeOnError);
    p.hits.pass(kFfaProxyNoChangeOnError);
    if (w32(out[0]) == kSmcUnk) {
      // R2:EL3-UNK: EL3 does not implement RECLAIM2 (SPMC:ROUTED). Nothing
      // was reclaimed; the host gets NOT_SUPPORTED, or EL3's own SMC_UNK as
      // pKVM relays EL3's refusals.
      p.error(rule, kNotSupported, true);
      const uint64_t unk[kCallRegs] = {out[0]};
      p.exact(rule, unk, kX0, true);
      return;
    }
    p.error(rule, el3_error(out), false);
    return;
  }
  const uint64_t asked = args.pages_asked();
  const uint64_t count = out[P.reg_result_count];
  if (count == 0 || count > asked) {
    // PKVM:DISTRUST: EL3 reported an impossible count. An error (stage-2
    // untouched) is always right; the proxy may instead trust what EL3 did up
    // to what was asked, if it can tell.
    p.hits.add(kFfaProxyEl3Fault, false);
    p.hits.add(kFfaR2CountBound, true);
    p.any_error(kFfaProxyEl3Fault, false);
    if (count == 0) return;
    p.fork();
    unshare_reclaimed(w, tx, args, asked, Unshare::kWhollyInside, p);
    return;
  }
  if (!two_ways) return unshare_reclaimed(w, tx, args, count, Unshare::kNoneHeld, p);
  const uint32_t whole_pages_only = p.fork();
  p.select(0);
  unshare_reclaimed(w, tx, args, count, Unshare::kNoneHeld, p);
  p.select(whole_pages_only);
  unshare_reclaimed(w, tx, args, count, Unshare::kWhollyInside, p);
}

}  // namespace kconform::ffa
