// Direct checks of the suite's reference FFA_MEM_RECLAIM2 handler
// (reclaim2-reference.patch) through el2_handler.h, with the SPMC model as EL3.
// Each test names the SPEC.md clauses / rules it checks. These are unit tests
// of our own patch, not the conformance run: that is the EL2 target's job.
// They are built against a tree that carries the patch (CMakeLists.txt); built
// against one without a RECLAIM2 handler, every test fails (a build that
// cannot test the patch is a wrong build, not a skip). Every test runs at
// every host PAGE_SIZE: where 16K and 4K differ (R2:GRANULE), a test asserts
// what each one must do.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "models/ffa/desc.h"
#include "harness/scenario/ffa_spec.h"
#include "models/ffa/reclaim2_abi.h"
#include "models/ffa/spmc.h"
#include "targets/el2/el2_handler.h"

namespace kconform {
namespace {

using ffa::Constituent;
using ffa::kFfaPage;
using ffa::kReclaim2;

constexpr uint64_t kNoOverride = ~0ull;

struct Regs {
  uint64_t r[el2::kNumRegs] = {};
};

// A RECLAIM2 call: the descriptors go into the host TX at `offset`.
struct R2 {
  uint64_t handle = 0;
  uint32_t flags = 0;
  uint32_t offset = 0;
  std::vector<Constituent> descs;
  uint64_t index = 0;
  uint64_t total = kNoOverride;  // kNoOverride: the sum of the descriptors' pages
  uint64_t count = kNoOverride;  // kNoOverride: descs.size()
};

class Reclaim2 : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(el2::el2_build_info().handles_reclaim2)
        << "tree " << el2::el2_build_info().tree_path << " has no FFA_MEM_RECLAIM2 handler: build these tests "
        << "against a tree with reclaim2-reference.patch applied (targets/el2/reclaim2/CMakeLists.txt)";
    Start();
  }
  void TearDown() override { el2::el2_set_el3(nullptr); }

  // A fresh handler and SPMC; the host negotiates v1.2 and maps host pages 0
  // (TX) and 1 (RX).
  void Start() {
    std::string err;
    ASSERT_TRUE(el2::el2_init(&err)) << err;
    ffa::SpmcConfig c;
    c.ns_base = el2::el2_phys_base();
    c.ns_size = el2::el2_phys_mem().size();
    spmc_.reset(c, el2::el2_phys_mem(), el2::el2_phys_base());
    el3_log_.clear();
    el2::el2_set_el3([this](const uint64_t in[el2::kNumRegs], uint64_t out[el2::kNumRegs]) {
      ffa::Hits h;
      spmc_.smc(in, out, &h);
      el3_log_.push_back({static_cast<uint32_t>(in[0]), h});
    });
    // hyp_ffa_init() asked the default EL3 for its version before the SPMC
    // was attached: tell the SPMC what the hypervisor speaks (v1.2 in 7.3).
    uint64_t in[ffa::kNumRegs] = {ffa::kFnVersion, ffa::kVersion12}, out[ffa::kNumRegs];
    spmc_.smc(in, out);
    ASSERT_EQ(static_cast<uint32_t>(Call({ffa::kFnVersion, ffa::kVersion12}).r[0]), ffa::kVersion12);
    ASSERT_EQ(Call({ffa::kFnRxtxMap64, HostPa(0), HostPa(1), ps() / kFfaPage}).r[0], ffa::kFnSuccess32);
  }

  static uint64_t ps() { return el2::el2_build_info().page_size; }
  static uint32_t k() { return static_cast<uint32_t>(ps() / kFfaPage); }  // 4K pages per host page
  static uint64_t HostPa(uint64_t i) { return el2::el2_host_page_pa(i); }
  static uint64_t TxBytes() { return el2::el2_build_info().ffa_mbox_pages * ps(); }
  static Constituent Pages(uint64_t first_host_page, uint64_t n_host_pages) {
    return {HostPa(first_host_page), static_cast<uint32_t>(n_host_pages * k()), 0};
  }

  Regs Call(std::initializer_list<uint64_t> args) {
    Regs in, out;
    size_t i = 0;
    for (uint64_t a : args) in.r[i++] = a;
    EXPECT_TRUE(el2::el2_host_call(in.r, out.r)) << std::hex << "x0=" << in.r[0];
    EXPECT_EQ(el2::el2_last_status(), el2::CallStatus::kOk);
    EXPECT_EQ(el2::el2_locks_held(), 0);
    return out;
  }

  // FFA_MEM_SHARE (or LEND) of the given constituents to partition 0x8001; the handle.
  uint64_t Share(std::vector<Constituent> ranges, uint64_t fid = ffa::kFnMemShare64) {
    ffa::DescSpec d;
    d.layout = ffa::Layout::kV12;
    // SPEC.md DESC:ATTRS: a lend to one borrower specifies no memory attributes.
    if (fid == ffa::kFnMemLend64) d.attributes = 0;
    d.n_ranges = static_cast<uint32_t>(ranges.size());
    d.ranges = ranges.data();
    const uint64_t len = ffa::build_region(d, {el2::el2_phys(HostPa(0), TxBytes()), TxBytes()});
    EXPECT_GT(len, 0u);
    Regs out = Call({fid, len, len, 0, 0});
    EXPECT_EQ(out.r[0], ffa::kFnSuccess32) << "share failed: w2=" << static_cast<int32_t>(out.r[2]);
    for (const Constituent& c : ranges) EXPECT_TRUE(Shared(c.address, c.pages));
    return out.r[2] | out.r[3] << 32;
  }

  Regs Reclaim(const R2& a) {
    uint8_t* tx = el2::el2_phys(HostPa(0), TxBytes());
    uint64_t sum = 0;
    for (size_t i = 0; i < a.descs.size(); ++i) {
      const uint64_t off = a.offset + i * kReclaim2.desc_size;
      if (off + kReclaim2.desc_size <= TxBytes())
        ffa::build_constituents(&a.descs[i], 1, {tx + off, kReclaim2.desc_size});
      sum += a.descs[i].pages;
    }
    Regs in, out;
    in.r[0] = kReclaim2.fid;
    in.r[kReclaim2.reg_handle_lo] = a.handle & 0xffffffff;
    in.r[kReclaim2.reg_handle_hi] = a.handle >> 32;
    in.r[kReclaim2.reg_flags] = a.flags;
    in.r[kReclaim2.reg_offset] = a.offset;
    in.r[kReclaim2.reg_count] = a.count == kNoOverride ? a.descs.size() : a.count;
    in.r[kReclaim2.reg_page_index] = a.index;
    in.r[kReclaim2.reg_total] = a.total == kNoOverride ? sum : a.total;
    EXPECT_TRUE(el2::el2_host_call(in.r, out.r));
    EXPECT_EQ(el2::el2_last_status(), el2::CallStatus::kOk);
    EXPECT_EQ(el2::el2_locks_held(), 0);
    return out;
  }

  // Every host page of [pa, pa + 4K*pages) is in view v.
  static bool All(uint64_t pa, uint64_t pages, el2::PageView v) {
    for (uint64_t a = pa; a < pa + pages * kFfaPage; a += ps())
      if (el2::el2_tracker().View(a) != v) return false;
    return true;
  }
  static bool Shared(uint64_t pa, uint64_t pages) { return All(pa, pages, el2::PageView::kSharedWithFfa); }
  static bool Owned(uint64_t pa, uint64_t pages) { return All(pa, pages, el2::PageView::kHostOwned); }

  // PKVM:DISTRUST / R2:UNSHARE safety: no host-owned page of which EL3 still holds a 4K page.
  void ExpectNoPageOwnedByBoth() {
    for (uint64_t i = 0; i < 64; ++i) {
      if (el2::el2_tracker().View(HostPa(i)) != el2::PageView::kHostOwned) continue;
      for (uint64_t a = HostPa(i); a < HostPa(i) + ps(); a += kFfaPage)
        EXPECT_FALSE(spmc_.page_held(a)) << "host page " << i << " is host-owned but EL3 holds 4K page 0x"
                                         << std::hex << a;
    }
  }

  int Reclaim2CallsAtEl3() const {
    int n = 0;
    for (const auto& e : el3_log_) n += e.fid == kReclaim2.fid;
    return n;
  }

  ffa::Spmc spmc_;
  struct El3Call {
    uint32_t fid;
    ffa::Hits hits;
  };
  std::vector<El3Call> el3_log_;
};

int32_t ErrorCode(const Regs& r) { return static_cast<int32_t>(r.r[2] & 0xffffffff); }

// R2:UNSHARE, R2:EQUIVALENCE: one call that asks for every page.
TEST_F(Reclaim2, WholeRegionInOneCall) {
  const Constituent region = Pages(8, 4);
  const uint64_t h = Share({region});
  Regs out = Reclaim({.handle = h, .descs = {region}});
  ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
  EXPECT_EQ(out.r[2], region.pages);
  EXPECT_TRUE(Owned(region.address, region.pages));
  EXPECT_EQ(spmc_.find(h), nullptr);
  EXPECT_TRUE(el2::el2_warnings().empty());
}

// R2:RESULT, R2:UNSHARE: a short count from EL3 unshares exactly what it
// reclaimed, across descriptors; the host resumes with a new offset and index;
// the last call ends the transaction (R2:EQUIVALENCE).
TEST_F(Reclaim2, ResumesWithOffsetAndIndex) {
  const Constituent a = Pages(8, 4), b = Pages(12, 4);
  const uint64_t h = Share({a, b});
  // Pages 10..13 (host pages): 2 from a, 2 from b.
  spmc_.arm(ffa::Fault::kShortCount, 4 * k());
  Regs out = Reclaim({.handle = h, .descs = {a, b}, .index = 2 * k()});
  ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
  EXPECT_EQ(out.r[2], 4u * k());
  EXPECT_TRUE(Shared(HostPa(8), 2 * k()));
  EXPECT_TRUE(Owned(HostPa(10), 4 * k()));
  EXPECT_TRUE(Shared(HostPa(14), 2 * k()));
  ExpectNoPageOwnedByBoth();
  // The rest of b: its descriptor is the second one in TX (offset 16), index 2.
  out = Reclaim({.handle = h, .offset = 16, .descs = {b}, .index = 2 * k()});
  ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
  EXPECT_EQ(out.r[2], 2u * k());
  EXPECT_TRUE(Owned(HostPa(14), 2 * k()));
  // The first two pages of a, as a descriptor of their own.
  out = Reclaim({.handle = h, .descs = {Pages(8, 2)}});
  ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
  EXPECT_TRUE(Owned(HostPa(8), 8 * k()));
  EXPECT_EQ(spmc_.find(h), nullptr);
  EXPECT_TRUE(el2::el2_warnings().empty());
}

// R2:UNSHARE: descriptors need not be whole constituents, nor in order.
TEST_F(Reclaim2, SubRangesOutOfOrder) {
  const uint64_t h = Share({Pages(8, 8)});
  Regs out = Reclaim({.handle = h, .descs = {Pages(13, 2), Pages(9, 1)}});
  ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
  EXPECT_EQ(out.r[2], 3u * k());
  EXPECT_TRUE(Owned(HostPa(13), 2 * k()));
  EXPECT_TRUE(Owned(HostPa(9), k()));
  EXPECT_TRUE(Shared(HostPa(8), k()));
  EXPECT_TRUE(Shared(HostPa(10), 3 * k()));
  EXPECT_TRUE(Shared(HostPa(15), k()));
  ExpectNoPageOwnedByBoth();
}

// R2:PROFILE edges that must be accepted: descriptors ending exactly at the
// end of TX (FFA.R2.BOUNDS), zero-before-reclaim on a lend (FFA.R2.FLAGS).
TEST_F(Reclaim2, ValidEdgesAreRelayed) {
  const Constituent a = Pages(8, 1), b = Pages(9, 1);
  uint64_t h = Share({a, b});
  Regs out = Reclaim({.handle = h, .offset = static_cast<uint32_t>(TxBytes() - 32), .descs = {b, a}});
  ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
  EXPECT_TRUE(Owned(a.address, 2 * k()));

  h = Share({Pages(12, 2)}, ffa::kFnMemLend64);
  std::memset(el2::el2_phys(HostPa(12), 2 * ps()), 0xa5, 2 * ps());
  out = Reclaim({.handle = h, .flags = 1, .descs = {Pages(12, 2)}});
  ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
  EXPECT_TRUE(Owned(HostPa(12), 2 * k()));
  EXPECT_EQ(el2::el2_phys(HostPa(13), ps())[ps() - 1], 0);  // EL3 zeroed it
}

// PKVM:ATOMIC, FFA.R2.RECLAIMED: EL3's error comes back unchanged, nothing is unshared.
TEST_F(Reclaim2, El3ErrorChangesNothing) {
  const Constituent region = Pages(8, 2);
  const uint64_t h = Share({region, Pages(20, 1)});
  ASSERT_EQ(Reclaim({.handle = h, .descs = {region}}).r[0], ffa::kFnSuccess32);
  // Asking again for pages already reclaimed, plus pages still held.
  Regs out = Reclaim({.handle = h, .descs = {Pages(20, 1), region}});
  EXPECT_EQ(out.r[0], ffa::kFnError);
  EXPECT_EQ(ErrorCode(out), kReclaim2.err_reclaimed);
  EXPECT_TRUE(Shared(HostPa(20), k()));
  // An EL3 that fails the call outright (HARNESS:EL3 ERROR).
  spmc_.arm(ffa::Fault::kError, static_cast<uint32_t>(ffa::kDenied));
  out = Reclaim({.handle = h, .descs = {Pages(20, 1)}});
  EXPECT_EQ(out.r[0], ffa::kFnError);
  EXPECT_EQ(ErrorCode(out), ffa::kDenied);
  EXPECT_TRUE(Shared(HostPa(20), k()));
  ExpectNoPageOwnedByBoth();
}

// FFA.R2.RETRIEVED: while a borrower holds the memory EL3 says DENIED; nothing changes.
TEST_F(Reclaim2, RetrievedRegionIsDenied) {
  const Constituent region = Pages(8, 2);
  const uint64_t h = Share({region});
  uint64_t out_sp[ffa::kNumRegs];
  spmc_.sp_retrieve(h, 0x8001, out_sp);
  ASSERT_TRUE(ffa::is_success(out_sp));
  Regs out = Reclaim({.handle = h, .descs = {region}});
  EXPECT_EQ(out.r[0], ffa::kFnError);
  EXPECT_EQ(ErrorCode(out), kReclaim2.err_retrieved);
  EXPECT_TRUE(Shared(region.address, region.pages));
}

// PKVM:DISTRUST, FFA.R2.COUNT_BOUND: a count of 0 or above what was asked is an
// error and stage-2 is not touched.
TEST_F(Reclaim2, ImpossibleCountFromEl3IsAnError) {
  const Constituent region = Pages(8, 2);
  uint64_t h = Share({region});
  spmc_.arm(ffa::Fault::kLongCount, 1);
  Regs out = Reclaim({.handle = h, .descs = {region}});
  EXPECT_EQ(out.r[0], ffa::kFnError);
  EXPECT_TRUE(Shared(region.address, region.pages));

  Start();
  h = Share({region});
  spmc_.arm(ffa::Fault::kShortCount, 0);
  out = Reclaim({.handle = h, .descs = {region}});
  EXPECT_EQ(out.r[0], ffa::kFnError);
  EXPECT_TRUE(Shared(region.address, region.pages));

  // The bound is what was asked (total - index), not total.
  Start();
  h = Share({region});
  spmc_.arm(ffa::Fault::kLongCount, 1);
  out = Reclaim({.handle = h, .descs = {region}, .index = k()});
  EXPECT_EQ(out.r[0], ffa::kFnError) << "w2=" << out.r[2];
  EXPECT_TRUE(Shared(region.address, region.pages));
  EXPECT_TRUE(el2::el2_warnings().empty());
}

// R2:GRANULE: EL3 may stop after any 4K page; the proxy unshares only the
// host pages EL3 reclaimed whole. EL3 stops one 4K page past the first host
// page of three. With host pages larger than 4K it stopped inside the second:
// that page stays shared (EL3 still holds part of it), and a call that
// resumes inside it is refused before EL3. With 4K host pages every stop is
// a host-page boundary: the first two are the host's, the host resumes at
// the third and gets it back.
TEST_F(Reclaim2, ShortCountUnsharesWholeHostPagesOnly) {
  const Constituent region = Pages(8, 3);
  const uint64_t h = Share({region});
  const uint32_t stop = k() + 1;  // 4K pages EL3 reclaims
  spmc_.arm(ffa::Fault::kShortCount, stop);
  Regs out = Reclaim({.handle = h, .descs = {region}});
  ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
  EXPECT_EQ(out.r[2], stop);
  EXPECT_TRUE(Owned(HostPa(8), k()));
  if (k() == 1) {
    EXPECT_TRUE(Owned(HostPa(9), 1));
    EXPECT_TRUE(Shared(HostPa(10), 1));
  } else {
    EXPECT_TRUE(Shared(HostPa(9), 2 * k()));  // the page EL3 stopped in, and the one after
  }
  ExpectNoPageOwnedByBoth();
  const int before = Reclaim2CallsAtEl3();
  out = Reclaim({.handle = h, .descs = {region}, .index = stop});
  if (k() == 1) {
    ASSERT_EQ(out.r[0], ffa::kFnSuccess32) << "w2=" << ErrorCode(out);
    EXPECT_EQ(out.r[2], 1u);
    EXPECT_EQ(Reclaim2CallsAtEl3(), before + 1);
    EXPECT_TRUE(Owned(region.address, region.pages));
    EXPECT_EQ(spmc_.find(h), nullptr);
  } else {
    EXPECT_EQ(out.r[0], ffa::kFnError);
    EXPECT_EQ(ErrorCode(out), ffa::kInvalidParameters);
    EXPECT_EQ(Reclaim2CallsAtEl3(), before);
    EXPECT_TRUE(Shared(HostPa(9), 2 * k()));
  }
  ExpectNoPageOwnedByBoth();
  EXPECT_TRUE(el2::el2_warnings().empty());
}

// After EL3 stopped one 4K page into the second of three host pages, the host
// takes the rest back with FFA_MEM_RECLAIM. With 4K host pages that is a
// clean reclaim: the retrieve response lists the third page, ffa.c unshares
// it, no warning. Quirk with larger host pages: documents behaviour, not a
// requirement (R2:GRANULE with R2:MIXED). The host cannot resume with
// RECLAIM2 (the page index would start inside that page) and FFA_MEM_RECLAIM
// of the rest gets a retrieve response whose first constituent is not
// host-page granular: EL3 reclaims it, ffa.c's reclaim path cannot unshare
// it, WARNs, and the host pages stay shared with nobody holding them.
TEST_F(Reclaim2, QuirkReclaimAfterShortCountInsideHostPage) {
  const Constituent region = Pages(8, 3);
  const uint64_t h = Share({region});
  spmc_.arm(ffa::Fault::kShortCount, k() + 1);
  ASSERT_EQ(Reclaim({.handle = h, .descs = {region}}).r[0], ffa::kFnSuccess32);
  Regs out = Call({ffa::kFnMemReclaim, h & 0xffffffff, h >> 32, 0});
  EXPECT_EQ(out.r[0], ffa::kFnSuccess32);
  EXPECT_EQ(spmc_.find(h), nullptr);
  if (k() == 1) {
    EXPECT_TRUE(Owned(region.address, region.pages));
    EXPECT_TRUE(el2::el2_warnings().empty());
  } else {
    EXPECT_TRUE(Owned(HostPa(8), k()));
    EXPECT_TRUE(Shared(HostPa(9), 2 * k()));
    EXPECT_EQ(el2::el2_warnings().size(), 1u);
  }
  ExpectNoPageOwnedByBoth();
}

// R2:PROFILE ("the proxy must check what it will walk ... before relaying"):
// each bad call is refused with INVALID_PARAMETERS, never reaches EL3, and
// changes nothing.
struct BadCase {
  const char* name;
  R2 (*make)(uint64_t handle, const Constituent& region);
  bool host_page_only = false;  // only meaningful with PAGE_SIZE > 4K
};

TEST_F(Reclaim2, BadArgumentsAreRefusedBeforeEl3) {
  const uint64_t tx = TxBytes();
  static uint64_t s_tx;
  s_tx = tx;
  static uint32_t s_k;
  s_k = k();
  const BadCase cases[] = {
      {"flags bit 1", [](uint64_t h, const Constituent& r) { return R2{.handle = h, .flags = 2, .descs = {r}}; }},
      {"flags bit 31",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .flags = 1u << 31, .descs = {r}}; }},
      {"offset 8", [](uint64_t h, const Constituent& r) { return R2{.handle = h, .offset = 8, .descs = {r}}; }},
      {"offset 1", [](uint64_t h, const Constituent& r) { return R2{.handle = h, .offset = 1, .descs = {r}}; }},
      {"count 0", [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r}, .count = 0}; }},
      {"last descriptor past TX",
       [](uint64_t h, const Constituent& r) {
         return R2{.handle = h, .offset = static_cast<uint32_t>(s_tx - 16), .descs = {r, r}};
       }},
      {"count one past TX",
       [](uint64_t h, const Constituent& r) {
         return R2{.handle = h, .descs = {r}, .total = r.pages, .count = s_tx / 16 + 1};
       }},
      {"count 2^28 (the array's length wraps 32 bits)",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r}, .count = 1u << 28}; }},
      {"count 2^32-1",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r}, .count = 0xffffffff}; }},
      {"offset wraps 32 bits",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .offset = 0xfffffff0, .descs = {r}}; }},
      {"total one short",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r}, .total = r.pages - 1}; }},
      {"total one over",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r}, .total = r.pages + 1}; }},
      {"total matches the sum only modulo 2^32",
       [](uint64_t h, const Constituent& r) {
         const uint32_t big = 0u - s_k;  // 2^32 - k pages: host-page granular, the sum passes 2^32
         return R2{.handle = h,
                   .descs = {r, {0x100000000000ull, big, 0}},
                   .total = static_cast<uint32_t>(r.pages + big)};
       }},
      {"index = pages of the first descriptor",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r}, .index = r.pages}; }},
      {"index with upper bits set",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r}, .index = 1ull << 32}; }},
      {"descriptor of zero pages",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r, {r.address, 0, 0}}}; }},
      {"descriptor reserved field",
       [](uint64_t h, const Constituent& r) {
         return R2{.handle = h, .descs = {{r.address, r.pages, 1}}};
       }},
      {"descriptor not 4K-aligned",
       [](uint64_t h, const Constituent& r) {
         return R2{.handle = h, .descs = {{r.address + 0x800, r.pages, 0}}};
       }},
      {"descriptor wraps 2^64",
       [](uint64_t h, const Constituent& r) {
         return R2{.handle = h, .descs = {r, {~0ull - 4 * s_k * kFfaPage + 1, 8 * s_k, 0}}};
       }},
      {"index inside a host page",
       [](uint64_t h, const Constituent& r) { return R2{.handle = h, .descs = {r}, .index = 1}; }, true},
      {"descriptor ends inside a host page",
       [](uint64_t h, const Constituent& r) {
         return R2{.handle = h, .descs = {{r.address, s_k + 1, 0}}};
       },
       true},
      {"descriptor starts inside a host page",
       [](uint64_t h, const Constituent& r) {
         return R2{.handle = h, .descs = {{r.address + kFfaPage, s_k, 0}}};
       },
       true},
  };
  for (const BadCase& c : cases) {
    if (c.host_page_only && k() == 1) continue;
    SCOPED_TRACE(c.name);
    Start();
    const Constituent region = Pages(8, 2);
    const uint64_t h = Share({region});
    const int before = Reclaim2CallsAtEl3();
    Regs out = Reclaim(c.make(h, region));
    EXPECT_EQ(out.r[0], ffa::kFnError);
    EXPECT_EQ(ErrorCode(out), ffa::kInvalidParameters);
    EXPECT_EQ(Reclaim2CallsAtEl3(), before) << "relayed to EL3";
    EXPECT_TRUE(Shared(region.address, region.pages));
    EXPECT_TRUE(el2::el2_warnings().empty());
  }
}

// FFA.R2.COUNT: no descriptor is refused even when our TX copy still holds
// the descriptors of an earlier call at that offset (with total 0 nothing else
// would stop it).
TEST_F(Reclaim2, CountZeroIsRefusedWithStaleCopy) {
  const uint64_t h = Share({Pages(8, 2)});
  ASSERT_EQ(Reclaim({.handle = h, .descs = {Pages(8, 1)}}).r[0], ffa::kFnSuccess32);
  const int before = Reclaim2CallsAtEl3();
  Regs out = Reclaim({.handle = h, .descs = {Pages(9, 1)}, .total = 0, .count = 0});
  EXPECT_EQ(out.r[0], ffa::kFnError);
  EXPECT_EQ(ErrorCode(out), ffa::kInvalidParameters);
  EXPECT_EQ(Reclaim2CallsAtEl3(), before) << "relayed to EL3";
}

// MBOX:TX-REQUIRED: no TX buffer, no RECLAIM2.
TEST_F(Reclaim2, NoTxBufferIsRefused) {
  const Constituent region = Pages(8, 1);
  const uint64_t h = Share({region});
  ASSERT_EQ(Call({ffa::kFnRxtxUnmap, 0}).r[0], ffa::kFnSuccess32);
  Regs out = Reclaim({.handle = h, .descs = {region}});
  EXPECT_EQ(out.r[0], ffa::kFnError);
  EXPECT_EQ(ErrorCode(out), ffa::kInvalidParameters);
  EXPECT_EQ(Reclaim2CallsAtEl3(), 0);
  EXPECT_TRUE(Shared(region.address, region.pages));
}

// FEATURES:CONSISTENT: the call is handled, so FFA_FEATURES may not say
// NOT_SUPPORTED on the proxy's own account: it is EL3's answer.
TEST_F(Reclaim2, FeaturesIsEl3sAnswer) {
  Regs in, out;
  in.r[0] = ffa::kFnFeatures;
  in.r[1] = kReclaim2.fid;
  EXPECT_FALSE(el2::el2_host_call(in.r, out.r));  // not handled at EL2: forwarded
  el2::el2_host_smc(in.r, out.r);
  EXPECT_EQ(out.r[0], ffa::kFnSuccess32);
}

// R2:PROFILE state: "none between calls". ffa.c's own state after a
// successful RECLAIM2 equals its state after a refused one (both take and drop
// the host buffers' lock once, which moves the ticket lock's counters).
TEST_F(Reclaim2, NoStateKeptBetweenCalls) {
  const Constituent region = Pages(8, 2);
  const uint64_t h = Share({region});
  el2::el2_snapshot();
  const R2 refused{.handle = h, .descs = {region}, .total = 1};  // refused after taking the lock
  ASSERT_EQ(Reclaim(refused).r[0], ffa::kFnError);
  ASSERT_EQ(Reclaim({.handle = h, .descs = {Pages(8, 1)}}).r[0], ffa::kFnSuccess32);
  const std::vector<uint8_t> after_success = el2::el2_ffa_state();
  el2::el2_restore();
  ASSERT_EQ(Reclaim(refused).r[0], ffa::kFnError);
  ASSERT_EQ(Reclaim(refused).r[0], ffa::kFnError);
  EXPECT_EQ(el2::el2_ffa_state(), after_success);
}

}  // namespace
}  // namespace kconform
