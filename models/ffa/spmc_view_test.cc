// Unit tests of the SPMC:TABLE view's digest (spmc_view.h) and the state in
// that view (SPEC.md DIGEST:TABLE-VIEW): the SPMC model's table fed without
// allocating gives the value of the vector path the spmc target uses, for a
// table of complete and incomplete transactions and with an overlay; what the
// view holds changes it, the handle values do not (only their order).
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "models/ffa/desc.h"
#include "models/ffa/hits.h"
#include "models/ffa/spmc.h"
#include "models/ffa/spmc_view.h"
#include "models/ffa/spmc_fixture_test.h"

namespace kconform::ffa {
namespace {

using test::kBase;
using test::kTx;

class SpmcViewTest : public test::SpmcFixture {
 protected:
  void SetUp() override {
    SpmcFixture::SetUp();
    // A share, a lend to two borrowers of two ranges, the share retrieved by
    // its borrower, and a fragmented share in flight (incomplete).
    shared = send(kFnMemShare64, {{kBase + 0x10000, 1, 0}}, 1, 0x11);
    lent = send(kFnMemLend64, {{kBase + 0x20000, 2, 0}, {kBase + 0x30000, 1, 0}}, 2, 0x22);
    uint64_t r[kNumRegs];
    spmc->sp_retrieve(shared, 0x8001, r);
    EXPECT_TRUE(is_success(r));
    const uint32_t n = write_desc({{kBase + 0x40000, 1, 0}, {kBase + 0x50000, 1, 0}}, 1, 0x33);
    call({kFnMemShare64, n, n - 16});
    EXPECT_EQ(fid_of(out), kFnMemFragRx);
    in_flight = handle_of(out[1], out[2]);
  }
  uint32_t write_desc(std::vector<Constituent> rs, uint32_t n_receivers, uint64_t tag, bool lend = false) {
    DescSpec s;
    if (lend) s.attributes = 0;
    s.layout = Layout::kV12;
    s.n_receivers = n_receivers;
    s.receivers[1] = {0x8002, kPermDataRo, 0, 0, 0};
    s.tag = tag;
    s.ranges = rs.data();
    s.n_ranges = static_cast<uint32_t>(rs.size());
    return static_cast<uint32_t>(build_region(s, std::span<uint8_t>(mem.data() + (kTx - kBase), 0x1000)));
  }
  uint64_t send(uint64_t fid, std::vector<Constituent> rs, uint32_t n_receivers, uint64_t tag) {
    const uint32_t n = write_desc(rs, n_receivers, tag, fid == kFnMemLend64);
    call({fid, n, n});
    EXPECT_TRUE(is_success(out)) << std::hex << out[0] << " " << out[2];
    return handle_of(out[2], out[3]);
  }
  // A copy of the transaction handle names, to overlay.
  std::unique_ptr<Transaction> copy_of(uint64_t handle, int32_t* slot) const {
    const Transaction* t = spmc->find(handle);
    EXPECT_NE(t, nullptr);
    auto c = std::make_unique<Transaction>();
    copy_transaction(*c, *t);
    *slot = spmc->slot_of(t);
    return c;
  }
  uint64_t both_paths(TableOverlay o = {}) const {
    const uint64_t fed = spmc_view_digest(*spmc, o);
    EXPECT_EQ(fed, spmc_view_digest(spmc_view_of(*spmc, o)));
    return fed;
  }

  uint64_t shared = 0, lent = 0, in_flight = 0;
};

TEST_F(SpmcViewTest, BothPathsGiveTheSameValue) {
  const std::vector<SpmcViewEntry> v = spmc_view_of(*spmc);
  ASSERT_EQ(v.size(), 3u);
  size_t complete = 0, retrieved = 0, two_ranges = 0;
  for (const SpmcViewEntry& e : v) {
    complete += e.complete;
    retrieved += e.retrieved;
    two_ranges += e.ranges.size() == 2 && e.receivers.size() == 2;
  }
  EXPECT_EQ(complete, 2u);
  EXPECT_EQ(retrieved, 1u);
  EXPECT_EQ(two_ranges, 1u);
  const uint64_t table = both_paths();
  // An overlay: the share relinquished (answer_sp), and the in-flight send freed.
  const std::unique_ptr<SpmcAnswer> owned = std::make_unique<SpmcAnswer>();
  SpmcAnswer& ans = *owned;
  spmc->answer_sp(false, shared, 0x8001, ans);
  ASSERT_TRUE(is_success(ans.out));
  EXPECT_NE(both_paths({ans.slot, &ans.tx}), table);
  int32_t slot = -1;
  const std::unique_ptr<Transaction> gone = copy_of(in_flight, &slot);
  gone->live = false;
  EXPECT_NE(both_paths({slot, gone.get()}), table);
  // The empty table.
  const SpmcConfig c = spmc->config();
  spmc->reset(c, mem, kBase);
  EXPECT_EQ(both_paths(), spmc_view_digest(std::vector<SpmcViewEntry>{}));
}

TEST_F(SpmcViewTest, WhatTheViewHoldsChangesIt) {
  const uint64_t table = both_paths();
  int32_t slot = -1;
  {
    const std::unique_ptr<Transaction> t = copy_of(lent, &slot);
    t->sender = 0x0001;
    EXPECT_NE(both_paths({slot, t.get()}), table) << "sender";
  }
  {
    const std::unique_ptr<Transaction> t = copy_of(lent, &slot);
    t->tag ^= 1;
    EXPECT_NE(both_paths({slot, t.get()}), table) << "tag";
  }
  {
    const std::unique_ptr<Transaction> t = copy_of(lent, &slot);
    t->recv_perms[1] = kPermDataRw;
    EXPECT_NE(both_paths({slot, t.get()}), table) << "permissions";
  }
  {
    const std::unique_ptr<Transaction> t = copy_of(in_flight, &slot);
    t->received += 16;
    EXPECT_NE(both_paths({slot, t.get()}), table) << "bytes received";
  }
  // What the view leaves out does not change it.
  {
    const std::unique_ptr<Transaction> t = copy_of(lent, &slot);
    t->attributes ^= 1;
    t->flags ^= 1;
    EXPECT_EQ(both_paths({slot, t.get()}), table) << "attributes, flags";
  }
}

// SPMC:HANDLE-SPEC: the values are the SPMC's choice; only their order counts.
TEST_F(SpmcViewTest, HandleValuesDoNotCountOnlyTheirOrder) {
  const uint64_t table = both_paths();
  ASSERT_LT(shared, lent);
  ASSERT_LT(lent, in_flight);
  Spmc& s = *spmc;
  // TF-A's numbering (bit 63 clear, from 0xffffffc0), the same order.
  ASSERT_TRUE(s.rename_handle(shared, 0xffffffc0));
  ASSERT_TRUE(s.rename_handle(lent, 0xffffffc1));
  ASSERT_TRUE(s.rename_handle(in_flight, 0x100000000));
  EXPECT_EQ(both_paths(), table);
  // Another order: the share last.
  ASSERT_TRUE(s.rename_handle(0xffffffc0, 0x200000000));
  EXPECT_NE(both_paths(), table);
}

// DIGEST:TABLE-VIEW: u32 n_host_pages, the views, u64 the table's digest.
TEST(StateDigestTableView, IsTheViewsThenTheTableDigest) {
  const uint8_t views[] = {0, 1, 2, 3, 0, 0, 0, 0, 0, 1};
  Fnv1a h;
  h.u32(sizeof views);
  for (uint8_t v : views) h.u8(v);
  h.u64(0x0123456789abcdefull);
  EXPECT_EQ(state_digest_table_view(views, 0x0123456789abcdefull), h.h);
  EXPECT_NE(state_digest_table_view(views, 0x0123456789abcdeeull), h.h);
}

}  // namespace
}  // namespace kconform::ffa
