// Unit tests of the host stage-2 page tracker (the model of mem_protect.c).
#include "targets/el2/page_tracker.h"

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

}  // namespace
}  // namespace kconform::el2
