// Unit tests of the SPMC model driven directly by SMCs: share -> reclaim,
// fragments, hypervisor retrieve, borrower retrieve, RECLAIM2 partial
// sequences against one FFA_MEM_RECLAIM, and the misbehaviour knob.
#include <cstring>
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "models/ffa/digest.h"
#include "models/ffa/reclaim2_abi.h"
#include "models/ffa/spmc.h"
#include "models/ffa/spmc_fixture_test.h"

namespace kconform::ffa {
namespace {

using test::kBase;
using test::kRx;
using test::kTx;

class SpmcTest : public test::SpmcFixture {
 protected:
  // The SPMC reset as c configures it over this RAM, v1.2 negotiated and the
  // mailboxes mapped.
  void reset_mapped(SpmcConfig c) {
    c.ns_base = kBase;
    c.ns_size = mem.size();
    spmc->reset(c, mem, kBase);
    call({kFnVersion, kVersion12});
    call({kFnRxtxMap64, kTx, kRx, 1});
  }
  uint8_t* tx() { return mem.data() + (kTx - kBase); }
  uint8_t* rx() { return mem.data() + (kRx - kBase); }
  uint32_t write_desc(std::vector<Constituent> rs, MemKind kind = MemKind::kShare) {
    DescSpec s;
    s.layout = Layout::kV12;
    s.ranges = rs.data();
    s.n_ranges = static_cast<uint32_t>(rs.size());
    if (kind != MemKind::kShare) s.attributes = 0;
    return static_cast<uint32_t>(build_region(s, std::span<uint8_t>(tx(), 0x1000)));
  }
  uint64_t share(std::vector<Constituent> rs) {
    const uint32_t n = write_desc(rs);
    call({kFnMemShare64, n, n});
    EXPECT_TRUE(is_success(out)) << std::hex << out[0] << " " << out[2];
    return out[2] | out[3] << 32;
  }
  void constituents(std::vector<Constituent> rs, uint32_t off = 0) {
    build_constituents(rs.data(), static_cast<uint32_t>(rs.size()), std::span<uint8_t>(tx() + off, 0x1000 - off));
  }
  uint64_t reclaim2(uint64_t h, uint32_t off, uint32_t count, uint64_t index, uint32_t total, uint32_t flags = 0) {
    call({kFnMemReclaim2, h & 0xffffffff, h >> 32, flags, off, count, index, total});
    return out[2];
  }
  uint64_t digest() const { return state_digest({}, *spmc); }

};

// PROFILE:PERMISSIVE-EL3: what the default SPMC refuses (and so hides a
// Relayer's own check behind), the permissive one accepts; the rest it still
// refuses.
TEST_F(SpmcTest, PermissiveAcceptsWhatTheRelayerMustRefuse) {
  auto send = [&](std::vector<Constituent> rs, uint16_t sender) {
    DescSpec s;
    s.layout = Layout::kV12;
    s.sender = sender;
    s.ranges = rs.data();
    s.n_ranges = static_cast<uint32_t>(rs.size());
    const uint32_t n = static_cast<uint32_t>(build_region(s, std::span<uint8_t>(tx(), 0x1000)));
    call({kFnMemShare64, n, n});
    return is_success(out);
  };
  const std::vector<Constituent> overlap = {{kBase, 2, 0}, {kBase + 0x1000, 1, 0}};
  for (bool permissive : {false, true}) {
    SCOPED_TRACE(permissive);
    SetUp();
    spmc->set_permissive(permissive);
    EXPECT_EQ(send({{kBase, 1, 0}}, 0x1234), permissive);         // sender is not the caller
    EXPECT_EQ(send(overlap, 0), permissive);                        // overlapping constituents
    EXPECT_TRUE(send({{kBase + 0x10000, 1, 0}}, 0));
    EXPECT_EQ(send({{kBase + 0x10000, 1, 0}}, 0), permissive);     // a page a live transaction holds
    EXPECT_FALSE(send({{kBase + 0x20001, 1, 0}}, 0));              // still: a misaligned constituent
    EXPECT_FALSE(send({{0x10000000, 1, 0}}, 0));                   // still: outside NS memory
    // An endpoint count of 0: the permissive SPMC reads the one endpoint descriptor there.
    {
      const Constituent one[] = {{kBase + 0x30000, 1, 0}};
      DescSpec d;
      d.layout = Layout::kV12;
      d.ep_count = 0;
      d.ranges = one;
      d.n_ranges = 1;
      const uint32_t n = static_cast<uint32_t>(build_region(d, std::span<uint8_t>(tx(), 0x1000)));
      call({kFnMemShare64, n, n});
      EXPECT_EQ(is_success(out), permissive);
      d.ep_count = 9;  // still: more endpoints than the SPMC holds
      const uint32_t m = static_cast<uint32_t>(build_region(d, std::span<uint8_t>(tx(), 0x1000)));
      call({kFnMemShare64, m, m});
      EXPECT_FALSE(is_success(out));
    }
    // v1.2, the endpoint array at 16 (inside the header; the endpoint's fields
    // are the tag), the composite at 48, its one constituent in a second
    // fragment: the permissive SPMC takes the first 64 bytes (FRAG_RX).
    {
      auto put = [&](uint32_t off, uint64_t v, int bytes) { std::memcpy(tx() + off, &v, bytes); };
      std::memset(tx(), 0, 80);
      put(2, kAttrNormalWbInner, 2);
      put(16, 0x0000003000028001ull, 8);  // receiver 0x8001, RW, composite offset 48
      put(24, 32, 4);                      // endpoint descriptor size (v1.2)
      put(28, 1, 4);                       // one endpoint
      put(32, 16, 4);                      // endpoint array offset: inside the header
      put(48, 1, 4);                       // composite: 1 page, 1 range
      put(52, 1, 4);
      put(64, kBase + 0x40000, 8);         // the constituent (second fragment)
      put(72, 1, 4);
      call({kFnMemShare64, 80, 64});
      EXPECT_EQ(static_cast<uint32_t>(out[0]) == kFnMemFragRx, permissive) << std::hex << out[0];
      if (permissive) {
        std::memcpy(tx(), tx() + 64, 16);
        call({kFnMemFragTx, out[1], out[2], 16});
        EXPECT_TRUE(is_success(out)) << std::hex << out[0] << " " << out[2];
      }
    }
  }
  // reset() restores the default.
  SetUp();
  EXPECT_FALSE(spmc->permissive());
}

// DIGEST (digest.h): the state digest is FNV-1a-64, byte by byte, over the
// documented sequence; a transaction's constituents enter it as their own
// FNV-1a-64 R, hashed once when the transaction completes. Built here by hand
// from the slot's fields, with a plain byte loop.
TEST_F(SpmcTest, DigestIsTheDocumentedByteSequence) {
  std::vector<uint8_t> seq;
  auto put = [&seq](uint64_t v, int bytes) {
    for (int k = 0; k < bytes; ++k) seq.push_back(static_cast<uint8_t>(v >> (8 * k)));
  };
  auto fnv = [](const std::vector<uint8_t>& b) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint8_t c : b) h = (h ^ c) * 0x100000001b3ull;
    return h;
  };
  const std::vector<Constituent> rs = {{kBase + 0x5000, 2, 0}, {kBase + 0x1000, 1, 0}, {kBase + 0x80000, 7, 0}};
  share(rs);
  uint32_t live = 0;
  for (uint32_t i = 0; i < kMaxTransactions; ++i) live += spmc->slot(i).live;
  ASSERT_EQ(live, 1u);
  const Transaction* t = nullptr;
  for (uint32_t i = 0; i < kMaxTransactions; ++i)
    if (spmc->slot(i).live) t = &spmc->slot(i);
  std::vector<uint8_t> ranges;
  for (const Constituent& c : rs) {
    for (int k = 0; k < 8; ++k) ranges.push_back(static_cast<uint8_t>(c.address >> (8 * k)));
    for (int k = 0; k < 4; ++k) ranges.push_back(static_cast<uint8_t>(c.pages >> (8 * k)));
  }
  put(0, 4);  // no host pages
  put(1, 4);
  put(t->handle, 8);
  put(1, 1);  // complete
  put(1, 1);  // share
  put(t->sender, 2);
  put(t->attributes, 2);
  put(t->flags, 4);
  put(t->tag, 8);
  put(1, 1);
  put(0x8001, 2);
  put(t->recv_perms[0], 1);
  put(0, 1);  // not retrieved
  put(3, 4);
  put(fnv(ranges), 8);
  put(10, 4);  // total pages
  put(0, 4);   // none reclaimed
  put(0, 1);   // ceil(10 / 8) bytes of bitmap
  put(0, 1);
  EXPECT_EQ(digest(), fnv(seq));
}

TEST_F(SpmcTest, ShareThenReclaim) {
  const uint64_t before = digest();
  const uint64_t h = share({{kBase, 2, 0}});
  EXPECT_EQ(h, kHandleBase | 1);
  EXPECT_TRUE(spmc->page_held(kBase + 0x1000));
  EXPECT_NE(digest(), before);
  call({kFnMemReclaim, h & 0xffffffff, h >> 32, 0});
  EXPECT_TRUE(is_success(out));
  EXPECT_FALSE(spmc->page_held(kBase));
  EXPECT_EQ(digest(), before);
  // The handle is gone and never reused.
  call({kFnMemReclaim, h & 0xffffffff, h >> 32, 0});
  EXPECT_EQ(error_code(out), kInvalidParameters);
  EXPECT_EQ(share({{kBase, 1, 0}}), kHandleBase | 2);
}

// Transaction::page_index finds a page's constituent by binary search when
// record() found the constituents ascending and disjoint: on random such
// sets it answers as the scan in constituent order does, for every 4K page
// in and around them.
TEST(SpmcTransaction, BinarySearchAnswersAsTheScan) {
  uint64_t seed = 777;
  auto next = [&seed]() {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed >> 33;
  };
  auto t = std::make_unique<Transaction>();
  int found = 0;
  for (int round = 0; round < 300; ++round) {
    t->n_ranges = 1 + static_cast<uint32_t>(next() % 12);
    uint64_t a = kBase + (next() % 4) * kFfaPage;
    for (uint32_t i = 0; i < t->n_ranges; ++i) {
      t->ranges[i] = Constituent{a, static_cast<uint32_t>(1 + next() % 3), 0};
      a += (t->ranges[i].pages + next() % 3) * kFfaPage;  // touching or with a gap
    }
    for (uint64_t pa = kBase; pa < a + 2 * kFfaPage; pa += kFfaPage) {
      t->ascending = false;
      const int64_t scan = t->page_index(pa);
      const Constituent* by_scan = t->constituent_of(pa);
      t->ascending = true;
      ASSERT_EQ(t->page_index(pa), scan) << "round " << round << " pa " << std::hex << pa;
      ASSERT_EQ(t->constituent_of(pa), by_scan) << "round " << round << " pa " << std::hex << pa;
      found += scan >= 0;
    }
  }
  EXPECT_GT(found, 1000);
}

// A share whose constituents are not in ascending order is recorded as such
// and its pages are found by the scan: each is held, a page between them is not.
TEST_F(SpmcTest, ConstituentsInDescendingOrderAreHeld) {
  share({{kBase + 0x6000, 1, 0}, {kBase + 0x2000, 2, 0}});
  EXPECT_TRUE(spmc->page_held(kBase + 0x6000));
  EXPECT_TRUE(spmc->page_held(kBase + 0x3000));
  EXPECT_FALSE(spmc->page_held(kBase + 0x4000));
  const uint32_t n = write_desc({{kBase + 0x8000, 1, 0}, {kBase + 0x3000, 1, 0}});
  call({kFnMemShare64, n, n});
  EXPECT_EQ(error_code(out), kDenied);
}

TEST_F(SpmcTest, PageAlreadySharedIsDenied) {
  share({{kBase, 2, 0}});
  const uint32_t n = write_desc({{kBase + 0x1000, 1, 0}});
  call({kFnMemShare64, n, n});
  EXPECT_EQ(error_code(out), kDenied);
}

TEST_F(SpmcTest, TableFullIsNoMemory) {
  for (uint32_t i = 0; i < kMaxTransactions; ++i) share({{kBase + i * 0x1000ull, 1, 0}});
  const uint32_t n = write_desc({{kBase + 0x80000, 1, 0}});
  call({kFnMemShare64, n, n});
  EXPECT_EQ(error_code(out), kNoMemory);
}

TEST_F(SpmcTest, FragmentsReassemble) {
  const uint32_t n = write_desc({{kBase, 1, 0}, {kBase + 0x4000, 2, 0}});
  const uint32_t first = n - 16;
  call({kFnMemShare64, n, first});
  ASSERT_EQ(out[0], kFnMemFragRx);
  const uint64_t h = out[1] | out[2] << 32;
  EXPECT_EQ(out[3], first);
  // A new send while one is in flight.
  call({kFnMemShare64, n, n});
  EXPECT_EQ(error_code(out), kBusy);
  constituents({{kBase + 0x4000, 2, 0}});
  call({kFnMemFragTx, h & 0xffffffff, h >> 32, 16, 0});
  ASSERT_TRUE(is_success(out));
  EXPECT_EQ(out[2] | out[3] << 32, h);
  EXPECT_TRUE(spmc->page_held(kBase + 0x5000));
}

// PROFILE:ONE-SEND is a choice: an SPMC configured otherwise takes a whole
// send while a fragmented one is in flight (a second fragmented one stays
// BUSY: the model reassembles one at a time), and the first still completes.
TEST_F(SpmcTest, OneSendInFlightIsAProfileChoice) {
  SpmcConfig c;
  c.one_send_in_flight = false;
  reset_mapped(c);
  const uint32_t n = write_desc({{kBase, 1, 0}, {kBase + 0x4000, 2, 0}});
  call({kFnMemShare64, n, n - 16});
  ASSERT_EQ(out[0], kFnMemFragRx);
  const uint64_t h = out[1] | out[2] << 32;
  call({kFnMemShare64, n, n - 16});
  EXPECT_EQ(error_code(out), kBusy);
  share({{kBase + 0x10000, 1, 0}});
  constituents({{kBase + 0x4000, 2, 0}});
  call({kFnMemFragTx, h & 0xffffffff, h >> 32, 16, 0});
  ASSERT_TRUE(is_success(out));
  EXPECT_EQ(out[2] | out[3] << 32, h);
}

// DESC:ATTRS at the SPMC: a lend to one borrower with a memory type is
// refused, without it lent; DESC:PERMS: NX on a v1.2 share is refused.
TEST_F(SpmcTest, LendWithATypeAndShareWithNxAreRefused) {
  DescSpec s;
  s.layout = Layout::kV12;
  const Constituent rs[] = {{kBase, 1, 0}};
  s.ranges = rs;
  s.n_ranges = 1;
  uint32_t n = static_cast<uint32_t>(build_region(s, std::span<uint8_t>(tx(), 0x1000)));
  call({kFnMemLend64, n, n});
  EXPECT_EQ(error_code(out), kInvalidParameters);
  s.receivers[0].perms = kPermDataRw | kPermInstrNx;
  n = static_cast<uint32_t>(build_region(s, std::span<uint8_t>(tx(), 0x1000)));
  call({kFnMemShare64, n, n});
  EXPECT_EQ(error_code(out), kInvalidParameters);
  n = write_desc({{kBase, 1, 0}}, MemKind::kLend);
  call({kFnMemLend64, n, n});
  EXPECT_TRUE(is_success(out));
}

TEST_F(SpmcTest, BadFragmentAbortsTheTransaction) {
  const uint32_t n = write_desc({{kBase, 1, 0}, {kBase + 0x4000, 2, 0}});
  call({kFnMemShare64, n, n - 16});
  const uint64_t h = out[1] | out[2] << 32;
  call({kFnMemFragTx, h & 0xffffffff, h >> 32, 32, 0});
  EXPECT_EQ(error_code(out), kInvalidParameters);
  EXPECT_EQ(spmc->find(h), nullptr);
}

TEST_F(SpmcTest, HypervisorRetrieveDescribesTheRegion) {
  const uint64_t h = share({{kBase, 3, 0}});
  std::fill(tx(), tx() + 48, 0);
  put_u64(std::span<uint8_t>(tx(), 48), 8, h);
  call({kFnMemRetrieveReq64, 48, 48});
  ASSERT_EQ(out[0], kFnMemRetrieveResp);
  MemRegion r;
  std::span<const uint8_t> d(rx(), out[2]);
  ASSERT_EQ(parse_region(d, static_cast<uint32_t>(out[1]), Layout::kV12, &r, false), DescError::kOk);
  EXPECT_EQ(r.handle, h);
  EXPECT_EQ(r.total_pages, 3u);
  EXPECT_TRUE(spmc->rx_full());
  call({kFnMemRetrieveReq64, 48, 48});
  EXPECT_EQ(error_code(out), kBusy);
  call({kFnRxRelease});
  EXPECT_TRUE(is_success(out));
  call({kFnRxRelease});
  EXPECT_EQ(error_code(out), kDenied);
}

// SPMC:HYP-RETRIEVE-REQ: each way the hypervisor's request can be malformed
// is INVALID_PARAMETERS under FFA.SPMC.HYP_RETRIEVE_REQ; the well-formed one
// (the model proxy's, or all zero but the handle) is answered.
TEST_F(SpmcTest, HypervisorRetrieveRequestIsCheckedUnderItsOwnRule) {
  const uint64_t h = share({{kBase, 1, 0}});
  struct Bad {
    const char* what;
    uint32_t off, width;
    uint64_t value;
    uint32_t len = 48;
    uint64_t w3 = 0;
  };
  const std::vector<Bad> bad = {
      {"sender", 0, 2, 0x8001},     {"attributes", 2, 2, 0x2f},   {"flags", 4, 4, 1},
      {"tag", 16, 8, 7},            {"reserved @36", 36, 4, 1},   {"reserved @44", 44, 4, 1},
      {"trailing", 48, 4, 1, 64},   {"short", 0, 0, 0, 40},       {"own buffer", 0, 0, 0, 48, kTx},
  };
  auto request = [&](const Bad* b) {
    std::fill(tx(), tx() + 0x1000, 0);
    std::span<uint8_t> t(tx(), 0x1000);
    put_u64(t, 8, h);
    put_u32(t, 24, 32);  // what the model proxy writes (v1.2: EMAD size, array offset)
    put_u32(t, 32, 48);
    uint32_t len = 48;
    uint64_t w3 = 0;
    if (b) {
      for (uint32_t i = 0; i < b->width; ++i) tx()[b->off + i] = static_cast<uint8_t>(b->value >> (8 * i));
      len = b->len;
      w3 = b->w3;
    }
    Hits hits;
    uint64_t in[kNumRegs] = {kFnMemRetrieveReq64, len, len, w3};
    spmc->smc(in, out, &hits);
    bool broke = false;
    for (uint32_t i = 0; i < hits.size(); ++i) broke |= hits[i].rule == kFfaSpmcHypRetrieveReq && hits[i].forbidden;
    return broke;
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.what);
    EXPECT_TRUE(request(&b));
    EXPECT_EQ(error_code(out), kInvalidParameters);
  }
  EXPECT_FALSE(request(nullptr));
  EXPECT_EQ(out[0], kFnMemRetrieveResp);
  call({kFnRxRelease});
  // Retrieved by a borrower: DENIED under its own rule; relinquished: answered.
  uint64_t r[kNumRegs];
  spmc->sp_retrieve(h, 0x8001, r);
  ASSERT_TRUE(is_success(r));
  std::fill(tx(), tx() + 48, 0);
  put_u64(std::span<uint8_t>(tx(), 48), 8, h);
  Hits hits;
  uint64_t in[kNumRegs] = {kFnMemRetrieveReq64, 48, 48};
  spmc->smc(in, out, &hits);
  EXPECT_EQ(error_code(out), kDenied);
  bool denied_by_rule = false;
  for (uint32_t i = 0; i < hits.size(); ++i)
    denied_by_rule |= hits[i].rule == kFfaSpmcHypRetrieveRetrieved && hits[i].forbidden;
  EXPECT_TRUE(denied_by_rule);
  spmc->sp_relinquish(h, 0x8001, r);
  call({kFnMemRetrieveReq64, 48, 48});
  EXPECT_EQ(out[0], kFnMemRetrieveResp);
}

TEST_F(SpmcTest, RetrievedRegionCannotBeReclaimed) {
  const uint64_t h = share({{kBase, 1, 0}});
  uint64_t r[kNumRegs];
  spmc->sp_retrieve(h, 0x8001, r);
  ASSERT_TRUE(is_success(r));
  call({kFnMemReclaim, h & 0xffffffff, h >> 32, 0});
  EXPECT_EQ(error_code(out), kDenied);
  constituents({{kBase, 1, 0}});
  reclaim2(h, 0, 1, 0, 1);
  EXPECT_EQ(error_code(out), kDenied);
  spmc->sp_relinquish(h, 0x8001, r);
  call({kFnMemReclaim, h & 0xffffffff, h >> 32, 0});
  EXPECT_TRUE(is_success(out));
}

TEST_F(SpmcTest, Reclaim2SequencesEqualOneReclaim) {
  // Reference: share then FFA_MEM_RECLAIM.
  const uint64_t start = digest();
  const uint64_t h0 = share({{kBase, 4, 0}, {kBase + 0x10000, 3, 0}});
  call({kFnMemReclaim, h0 & 0xffffffff, h0 >> 32, 0});
  const uint64_t after_reclaim = digest();
  // Every split of the 7 pages into 1..3 RECLAIM2 calls ends in the same state
  // up to the handle counter (the digest covers live transactions only).
  const uint32_t splits[][3] = {{7, 0, 0}, {1, 6, 0}, {4, 3, 0}, {2, 2, 3}, {5, 1, 1}};
  for (const auto& sp : splits) {
    const uint64_t h = share({{kBase, 4, 0}, {kBase + 0x10000, 3, 0}});
    constituents({{kBase, 4, 0}, {kBase + 0x10000, 3, 0}});
    uint64_t done = 0;
    for (uint32_t k : sp) {
      if (!k) continue;
      // Resume: skip whole descriptors already done (offset), then the page index.
      const uint32_t off = done >= 4 ? 16 : 0, count = done >= 4 ? 1 : 2;
      const uint64_t index = done >= 4 ? done - 4 : done;
      const uint32_t total = done >= 4 ? 3 : 7;
      // Only ask for k pages: shrink the list's view by lying about nothing;
      // the SPMC returns the count it reclaimed (here: all asked for), so ask
      // exactly k pages with a short-count fault.
      spmc->arm(Fault::kShortCount, k);
      EXPECT_EQ(reclaim2(h, off, count, index, total), k) << std::hex << out[0] << " " << out[2];
      done += k;
    }
    EXPECT_EQ(spmc->find(h), nullptr);
    EXPECT_EQ(digest(), after_reclaim);
  }
  EXPECT_EQ(after_reclaim, start);
}

TEST_F(SpmcTest, Reclaim2ArgumentErrors) {
  const Reclaim2Abi& P = kReclaim2;
  const uint64_t h = share({{kBase, 4, 0}});
  constituents({{kBase, 4, 0}});
  struct Case {
    uint32_t flags, off, count;
    uint64_t index;
    uint32_t total;
    int32_t want;
  } cases[] = {
      {2, 0, 1, 0, 4, P.err_args},        // flags MBZ
      {1, 0, 1, 0, 4, P.err_args},        // zero on a share
      {0, 8, 1, 0, 4, P.err_args},        // offset alignment
      {0, 0, 0, 0, 0, P.err_args},        // no descriptor
      {0, 0x1000 - 16, 2, 0, 4, P.err_args},  // past TX
      {0, 0, 1, 0, 3, P.err_args},        // total != sum
      {0, 0, 1, 4, 4, P.err_args},        // index past the first descriptor
      {0, 0, 2, 0, 4, P.err_args},        // second descriptor all zero: malformed
  };
  for (const Case& c : cases) {
    reclaim2(h, c.off, c.count, c.index, c.total, c.flags);
    EXPECT_EQ(error_code(out), c.want) << c.flags << " " << c.off << " " << c.count;
  }
  reclaim2(h ^ 1, 0, 1, 0, 4);
  EXPECT_EQ(error_code(out), P.err_handle);
  constituents({{kBase + 0x8000, 1, 0}});
  reclaim2(h, 0, 1, 0, 1);
  EXPECT_EQ(error_code(out), P.err_not_in_tx);
  constituents({{kBase, 2, 0}, {kBase + 0x1000, 1, 0}});
  reclaim2(h, 0, 2, 0, 3);
  EXPECT_EQ(error_code(out), P.err_args);  // overlap
  constituents({{kBase, 2, 0}});
  EXPECT_EQ(reclaim2(h, 0, 1, 0, 2), 2u);
  reclaim2(h, 0, 1, 1, 2);
  EXPECT_EQ(error_code(out), P.err_reclaimed);
  constituents({{kBase + 0x2000, 2, 0}});
  EXPECT_EQ(reclaim2(h, 0, 1, 0, 2), 2u);
  EXPECT_EQ(spmc->find(h), nullptr);
}

TEST_F(SpmcTest, FaultsAreOneShot) {
  spmc->arm(Fault::kError, static_cast<uint64_t>(static_cast<uint32_t>(kAborted)));
  call({kFnIdGet});
  EXPECT_TRUE(is_success(out));  // not a memory call: still armed
  const uint32_t n = write_desc({{kBase, 1, 0}});
  call({kFnMemShare64, n, n});
  EXPECT_EQ(error_code(out), kAborted);
  EXPECT_EQ(spmc->armed(), Fault::kNone);
  const uint64_t h = share({{kBase, 2, 0}});
  constituents({{kBase, 2, 0}});
  spmc->arm(Fault::kLongCount, 5);
  EXPECT_EQ(reclaim2(h, 0, 1, 0, 2), 7u);
  EXPECT_EQ(spmc->find(h), nullptr);
}

// HARNESS:EL3 reclaim path: MAX_FRAG splits a retrieve response into chunks
// (RETRIEVE_RESP, then FRAG_TX per FRAG_RX), and each reply lie changes the one
// field it names on the chunk it names.
class SpmcRetrieveTest : public SpmcTest {
 protected:
  // v1.2 response of 3 constituents: 48 + 32 + 16 + 3 x 16 = 144 bytes.
  uint64_t share3() { return share({{kBase, 1, 0}, {kBase + 0x2000, 1, 0}, {kBase + 0x4000, 1, 0}}); }
  void request(uint64_t h) {
    std::fill(tx(), tx() + 48, 0);
    put_u64(std::span<uint8_t>(tx(), 48), 8, h);
    call({kFnMemRetrieveReq64, 48, 48});
  }
  // Reads the whole response chunk by chunk; the replies' (x0, length) in order.
  std::vector<std::pair<uint64_t, uint64_t>> fetch(uint64_t h, std::vector<uint8_t>* bytes = nullptr) {
    std::vector<std::pair<uint64_t, uint64_t>> replies;
    request(h);
    uint32_t got = 0;
    for (int i = 0; i < 8; ++i) {
      const bool first = i == 0;
      const uint64_t len = first ? out[2] : out[3];
      replies.push_back({out[0], len});
      if (out[0] != (first ? kFnMemRetrieveResp : kFnMemFragTx)) break;
      if (bytes) bytes->insert(bytes->end(), rx(), rx() + std::min<uint64_t>(len, 0x1000));
      got += static_cast<uint32_t>(len);
      call({kFnRxRelease});
      if (got >= 144) break;
      call({kFnMemFragRx, h & 0xffffffff, h >> 32, got});
    }
    return replies;
  }
};

TEST_F(SpmcRetrieveTest, MaxFragSplitsTheResponse) {
  const uint64_t h = share3();
  spmc->arm(Fault::kMaxFrag, 64);
  EXPECT_EQ(spmc->armed(), Fault::kNone);  // a setting, not a one-shot fault
  std::vector<uint8_t> bytes;
  const auto replies = fetch(h, &bytes);
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0], std::make_pair(uint64_t{kFnMemRetrieveResp}, uint64_t{64}));
  EXPECT_EQ(replies[1], std::make_pair(uint64_t{kFnMemFragTx}, uint64_t{64}));
  EXPECT_EQ(replies[2], std::make_pair(uint64_t{kFnMemFragTx}, uint64_t{16}));
  MemRegion r;
  ASSERT_EQ(parse_region(bytes, 144, Layout::kV12, &r, false), DescError::kOk);
  EXPECT_EQ(r.range_count, 3u);
  // Without the setting the response is one chunk again.
  spmc->arm(Fault::kMaxFrag, 0);
  EXPECT_EQ(fetch(h).size(), 1u);
}

TEST_F(SpmcRetrieveTest, ChunkLiesHitTheirChunkOnly) {
  const uint64_t h = share3();
  spmc->arm(Fault::kMaxFrag, 64);
  spmc->arm(Fault::kChunkFragLen, (uint64_t{2} << 32) | 32);
  auto replies = fetch(h);
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[1].second, 64u);
  EXPECT_EQ(replies[2].second, 32u);  // the lie; the truth is 16
  EXPECT_EQ(spmc->armed(), Fault::kNone);
  spmc->arm(Fault::kChunkFid, (uint64_t{1} << 32) | kFnSuccess32);
  replies = fetch(h);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].first, uint64_t{kFnSuccess32});
  call({kFnRxRelease});
  spmc->arm(Fault::kRespTotalLen, 0x100000);
  request(h);
  EXPECT_EQ(out[1], 0x100000u);
  EXPECT_EQ(out[2], 64u);
}

TEST_F(SpmcRetrieveTest, FragStallNeverAdvances) {
  const uint64_t h = share3();
  spmc->arm(Fault::kMaxFrag, 64);
  spmc->arm(Fault::kFragStall, 1);
  request(h);
  call({kFnRxRelease});
  for (int i = 0; i < 3; ++i) {
    call({kFnMemFragRx, h & 0xffffffff, h >> 32, 64});
    ASSERT_EQ(out[0], kFnMemFragTx);
    EXPECT_EQ(out[3], 0u);
    call({kFnRxRelease});
  }
  // A new exchange is not stalled.
  EXPECT_EQ(fetch(h).size(), 3u);
}

TEST_F(SpmcRetrieveTest, DescriptorLiesChangeOneField) {
  const uint64_t h = share3();
  std::vector<uint8_t> truth;
  fetch(h, &truth);
  MemRegion r;
  ASSERT_EQ(parse_region(truth, 144, Layout::kV12, &r, false), DescError::kOk);
  const struct {
    Fault f;
    uint64_t value;
    uint32_t off;
    uint64_t want;  // the u32 (or u64 for a constituent) now at off
  } cases[] = {
      {Fault::kRespCompositeOff, 0xfffffff0, r.ep_mem_offset + 4, 0xfffffff0},
      {Fault::kRespRangeCount, 7, r.composite_off + 4, 7},
      {Fault::kRespEmadOff, 0x1000, 32, 0x1000},
      {Fault::kRespConstituent, (uint64_t{2} << 48) | 0x80038000, r.ranges_off + 32, 0x80038000},
  };
  for (const auto& c : cases) {
    spmc->arm(c.f, c.value);
    std::vector<uint8_t> lie;
    fetch(h, &lie);
    ASSERT_EQ(lie.size(), truth.size());
    uint64_t v = 0;
    if (c.f == Fault::kRespConstituent)
      get_u64(lie, c.off, &v);
    else {
      uint32_t v32 = 0;
      get_u32(lie, c.off, &v32);
      v = v32;
    }
    EXPECT_EQ(v, c.want) << static_cast<int>(c.f);
    uint32_t diff = 0;
    for (size_t i = 0; i < lie.size(); ++i) diff += lie[i] != truth[i];
    EXPECT_GE(diff, 1u);
    EXPECT_LE(diff, 8u) << static_cast<int>(c.f);  // that field only
    EXPECT_EQ(spmc->armed(), Fault::kNone);
  }
}

// HARNESS:EL3 20-26: only the reply lies; EL3's state is what the call did.
TEST_F(SpmcTest, SendReplyFaultsChangeOnlyTheReply) {
  const uint32_t n = write_desc({{kBase, 1, 0}, {kBase + 0x4000, 2, 0}});
  spmc->arm(Fault::kFragRxWhole, 0x40);
  call({kFnIdGet});
  EXPECT_EQ(spmc->armed(), Fault::kFragRxWhole);  // not a send: still armed
  call({kFnMemShare64, n, n - 16});                 // FRAG_RX anyway: not consumed
  ASSERT_EQ(out[0], kFnMemFragRx);
  EXPECT_EQ(spmc->armed(), Fault::kFragRxWhole);
  const uint64_t h = out[1] | out[2] << 32;
  constituents({{kBase + 0x4000, 2, 0}});
  call({kFnMemFragTx, h & 0xffffffff, h >> 32, 16, 0});
  ASSERT_EQ(out[0], kFnMemFragRx);  // the lie: FRAG_RX although complete
  EXPECT_EQ(out[1] | out[2] << 32, h);
  EXPECT_EQ(out[3], 0x40u);
  EXPECT_EQ(spmc->armed(), Fault::kNone);
  ASSERT_NE(spmc->find(h), nullptr);
  EXPECT_TRUE(spmc->find(h)->complete);  // the truth

  uint64_t at = kBase + 0x10000;
  for (const auto& [f, v] : {std::pair{Fault::kFragRxOffset, uint64_t{0x20}}, {Fault::kFragRxHandle, uint64_t{1}},
                             {Fault::kFragRxReserved, uint64_t{7}}, {Fault::kEarlySuccess, uint64_t{0}}}) {
    at += 0x10000;
    const uint32_t m = write_desc({{at, 1, 0}, {at + 0x4000, 1, 0}});
    spmc->arm(f, v);
    call({kFnMemShare64, m, m - 16});
    EXPECT_EQ(spmc->armed(), Fault::kNone);
    const Transaction* t = spmc->find(spmc->session().send_handle);
    ASSERT_NE(t, nullptr);
    EXPECT_FALSE(t->complete);  // in flight, whatever the reply says
    const uint64_t real = t->handle;
    if (f == Fault::kEarlySuccess) {
      EXPECT_TRUE(is_success(out));
      EXPECT_EQ(out[2] | out[3] << 32, real);
    } else {
      ASSERT_EQ(out[0], kFnMemFragRx);
      EXPECT_EQ(out[3], f == Fault::kFragRxOffset ? 0x20u : m - 16);
      EXPECT_EQ(out[1] | out[2] << 32, f == Fault::kFragRxHandle ? real ^ 1 : real);
      EXPECT_EQ(out[5], f == Fault::kFragRxReserved ? 7u : 0u);
    }
    constituents({{at + 0x4000, 1, 0}});
    call({kFnMemFragTx, real & 0xffffffff, real >> 32, 16, 0});
    ASSERT_TRUE(is_success(out));
  }
}

TEST_F(SpmcTest, PartitionInfoFaultsLieAboutCountAndSize) {
  spmc->arm(Fault::kPartCount, 0x1000);
  call({kFnPartitionInfoGet, 0, 0, 0, 0, 1});  // count only: RX unused, not consumed
  EXPECT_EQ(out[2], 2u);
  EXPECT_EQ(spmc->armed(), Fault::kPartCount);
  call({kFnPartitionInfoGet});
  EXPECT_EQ(out[2], 0x1000u);
  EXPECT_EQ(out[3], 24u);
  call({kFnRxRelease});
  spmc->arm(Fault::kPartSize, 0x10000);
  call({kFnPartitionInfoGet});
  EXPECT_EQ(out[2], 2u);
  EXPECT_EQ(out[3], 0x10000u);
  EXPECT_EQ(spmc->armed(), Fault::kNone);
}

TEST_F(SpmcTest, NonFfaAndUnknownCalls) {
  call({0x84000000});  // PSCI_VERSION
  EXPECT_EQ(out[0], ~0ull);
  call({kFnMsgPoll});
  EXPECT_EQ(error_code(out), kNotSupported);
  call({kFnFeatures, kFnMemReclaim2});
  EXPECT_TRUE(is_success(out));
  call({kFnVersion, 0x80000000u});
  EXPECT_EQ(out[0], 0xffffffffu);
}

// A firmware whose dispatcher routes FF-A numbers up to max_fnum (SPMC:ROUTED).
class SpmcRoutingTest : public SpmcTest {
 protected:
  void reset_routing(uint32_t max_fnum) {
    SpmcConfig c;
    c.max_fnum = max_fnum;
    reset_mapped(c);
  }
};

// SPMC:ROUTED: a firmware whose dispatcher hands the SPMC only FF-A numbers up
// to max_fnum (TF-A 2.12.1: 0x8E) answers the rest SMC_UNK and changes
// nothing, RECLAIM2 (0x91) of a live share included; numbers it routes are
// answered as before.
TEST_F(SpmcRoutingTest, FunctionsTheFirmwareDoesNotRouteAreSmcUnk) {
  reset_routing(0x8e);
  const uint64_t h = share({{kBase, 4, 0}});
  const uint64_t before = digest();
  constituents({{kBase, 4, 0}});
  reclaim2(h, 0, 1, 0, 4);
  EXPECT_EQ(out[0], ~0ull) << "SMC_UNK, not an FF-A answer";
  EXPECT_EQ(digest(), before);
  call({kFnMemReclaim, h & 0xffffffff, h >> 32, 0});
  EXPECT_TRUE(is_success(out)) << "the share is still live, and 0x77 is routed";
  // The whole of FF-A's range by default: RECLAIM2 is an FF-A answer there.
  reset_routing(SpmcConfig{}.max_fnum);
  const uint64_t h2 = share({{kBase, 4, 0}});
  constituents({{kBase, 4, 0}});
  EXPECT_EQ(reclaim2(h2, 0, 1, 0, 4), 4u);
  EXPECT_TRUE(is_success(out));
}

// HARNESS:EL3: an armed error stands for any EL3's answer to the next memory
// call, so it answers a RECLAIM2 the firmware would not route (as the real-EL3
// boundaries do, targets/spmc/tfa_el3.cc), and is used up by it.
TEST_F(SpmcRoutingTest, AnArmedErrorAnswersACallTheFirmwareDoesNotRoute) {
  reset_routing(0x8e);
  const uint64_t h = share({{kBase, 4, 0}});
  const uint64_t before = digest();
  spmc->arm(Fault::kError, static_cast<uint64_t>(static_cast<uint32_t>(kDenied)));
  constituents({{kBase, 4, 0}});
  reclaim2(h, 0, 1, 0, 4);
  EXPECT_EQ(error_code(out), kDenied);
  EXPECT_EQ(digest(), before);
  reclaim2(h, 0, 1, 0, 4);
  EXPECT_EQ(out[0], ~0ull) << "the error was used up: SMC_UNK again";
}

}  // namespace
}  // namespace kconform::ffa
