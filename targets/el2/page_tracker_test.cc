// Unit tests of the host stage-2 page tracker (the model of mem_protect.c).
#include "targets/el2/page_tracker.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include <cerrno>

namespace kconform::el2 {
namespace {

constexpr uint64_t kBase = 0x80000000;
constexpr unsigned kShift = 12;
constexpr uint64_t kPfn0 = kBase >> kShift;

TEST(PageTracker, ShareHypThenPinBlocksUnshare) {
  PageTracker t(kBase, 8, 2, kShift);
  EXPECT_EQ(t.ShareHyp(kPfn0 + 1), 0);
  EXPECT_EQ(t.View(kBase + 0x1000), PageView::kSharedWithHyp);
  EXPECT_EQ(t.ShareHyp(kPfn0 + 1), -EPERM);
  EXPECT_EQ(t.Pin(kBase + 0x1000, kBase + 0x2000), 0);
  EXPECT_EQ(t.UnshareHyp(kPfn0 + 1), -EBUSY);
  EXPECT_EQ(t.Unpin(kBase + 0x1000, kBase + 0x2000), 0);
  EXPECT_EQ(t.UnshareHyp(kPfn0 + 1), 0);
  EXPECT_EQ(t.View(kBase + 0x1000), PageView::kHostOwned);
  EXPECT_EQ(t.log().size(), 6u);
}

TEST(PageTracker, HypPagesCannotBeShared) {
  PageTracker t(kBase, 8, 2, kShift);
  EXPECT_EQ(t.View(kBase + 8 * 0x1000), PageView::kHypOwned);
  EXPECT_EQ(t.ShareFfa(kPfn0 + 8, 1), -EPERM);
  EXPECT_EQ(t.ShareHyp(kPfn0 + 9), -EPERM);
}

TEST(PageTracker, RangesOutsideMemory) {
  PageTracker t(kBase, 8, 2, kShift);
  EXPECT_EQ(t.ShareFfa(kPfn0 + 10, 1), -EPERM);  // wholly past the end
  EXPECT_EQ(t.ShareFfa(kPfn0 + 7, 4), -EINVAL);  // straddles memory and the gap
  EXPECT_EQ(t.ShareFfa(kPfn0 - 1, 1), -EPERM);   // below memory
  EXPECT_EQ(t.ShareFfa(uint64_t{1} << 40, 1), -EINVAL);  // beyond the IPA space
  EXPECT_EQ(t.View(kBase + 0x1000 * 7), PageView::kHostOwned);
}

// Quirk: documents mem_protect.c's behaviour, not a requirement.
TEST(PageTracker, QuirkZeroPagesAtRegionStartIsInvalidElsewhereSucceeds) {
  PageTracker t(kBase, 8, 2, kShift);
  EXPECT_EQ(t.ShareFfa(kPfn0, 0), -EINVAL);  // end - 1 falls below the region
  EXPECT_EQ(t.ShareFfa(kPfn0 + 3, 0), 0);    // an empty range inside it
}

// Quirk: __pkvm_host_unshare_ffa checks only the host side, so a page the
// host shared with the hyp (a mailbox) can be "unshared" through FF-A.
TEST(PageTracker, QuirkUnshareFfaIgnoresHypState) {
  PageTracker t(kBase, 8, 2, kShift);
  ASSERT_EQ(t.ShareHyp(kPfn0 + 2), 0);
  EXPECT_EQ(t.UnshareFfa(kPfn0 + 2, 1), 0);
  EXPECT_EQ(t.Page(kBase + 0x2000)->host, HostState::kOwned);
  EXPECT_EQ(t.Page(kBase + 0x2000)->hyp, HypState::kSharedBorrowed);
}

TEST(PageTracker, UnbalancedUnpinIsReported) {
  PageTracker t(kBase, 8, 2, kShift);
  EXPECT_NE(t.Unpin(kBase, kBase + 0x1000), 0);
}

TEST(PageTracker, ShareFfaThenUnshareFfa) {
  PageTracker t(kBase, 8, 2, kShift);
  EXPECT_EQ(t.ShareFfa(kPfn0 + 2, 3), 0);
  for (int i = 2; i < 5; i++) EXPECT_EQ(t.View(kBase + i * 0x1000), PageView::kSharedWithFfa);
  EXPECT_EQ(t.ShareFfa(kPfn0 + 4, 1), -EPERM);
  EXPECT_EQ(t.UnshareFfa(kPfn0 + 2, 3), 0);
  EXPECT_EQ(t.UnshareFfa(kPfn0 + 2, 1), -EPERM);
  EXPECT_EQ(t.log().back().ToString(), "unshare_ffa(pfn=0x80002, nr=1) = -1");
}

// The undo log of views (ChangedThisOp, what invariant I1 reads instead of
// comparing every page) names exactly the pages whose view differs from the
// one before BeginOp, with that view; RestoreFrom (dirty pages only) leaves
// the tracker equal to its snapshot. Random calls, checked against the full
// comparison.
TEST(PageTracker, UndoLogAndRestoreMatchTheFullComparison) {
  PageTracker t(kBase, 64, 4, kShift);
  const PageTracker snap = t;
  uint64_t seed = 7;
  auto next = [&seed](uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  int changed_ops = 0;
  for (int round = 0; round < 400; ++round) {
    const std::vector<uint8_t> before = t.views();
    t.BeginOp();
    for (int k = 0, n = 1 + next(4); k < n; ++k) {
      const uint64_t pfn = kPfn0 + next(70), nr = 1 + next(4);
      switch (next(6)) {
        case 0: t.ShareHyp(pfn); break;
        case 1: t.UnshareHyp(pfn); break;
        case 2: t.ShareFfa(pfn, nr); break;
        case 3: t.UnshareFfa(pfn, nr); break;
        case 4: t.Pin(pfn << kShift, (pfn + nr) << kShift); break;
        default: t.Unpin(pfn << kShift, (pfn + 1) << kShift); break;
      }
    }
    std::vector<uint8_t> expect_diff(before.size(), 0), undo_diff(before.size(), 0);
    for (size_t i = 0; i < before.size(); ++i) {
      expect_diff[i] = before[i] != t.views()[i];
      EXPECT_EQ(t.views()[i], static_cast<uint8_t>(PageTracker::ViewOf(t.pages()[i])));
    }
    for (const PageTracker::Changed& c : t.ChangedThisOp()) {
      EXPECT_EQ(c.view_before, before[c.page]) << "round " << round << " page " << c.page;
      undo_diff[c.page] = c.view_before != t.views()[c.page];
    }
    EXPECT_EQ(undo_diff, expect_diff) << "round " << round;
    changed_ops += std::count(expect_diff.begin(), expect_diff.end(), 1) > 0;
    if (round % 25 == 24) {
      t.RestoreFrom(snap);
      EXPECT_TRUE(t == snap);
      EXPECT_EQ(t.views(), snap.views());
      EXPECT_EQ(t.pages(), snap.pages());
    }
  }
  EXPECT_GT(changed_ops, 100);
}

}  // namespace
}  // namespace kconform::el2
