// Unit tests of the FF-A descriptor codec: good descriptors of each layout
// round-trip through build/parse; a table of malformed ones each fails with
// the error (and rule) it should.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "models/ffa/desc.h"

namespace kconform::ffa {
namespace {

constexpr uint64_t kBase = 0x80000000;

bool known(uint16_t id, const void*) { return id == 0x8001 || id == 0x8002; }

std::vector<uint8_t> build(const DescSpec& s) {
  std::vector<uint8_t> b(region_size(s));
  EXPECT_EQ(build_region(s, b), b.size());
  return b;
}

DescSpec spec(Layout l, const Constituent* rs, uint32_t n) {
  DescSpec s;
  s.layout = l;
  s.ranges = rs;
  s.n_ranges = n;
  return s;
}

// Runs every check in order: structure, semantics, ranges.
DescError check(const std::vector<uint8_t>& b, Layout l, MemKind kind = MemKind::kShare) {
  MemRegion r;
  DescError e = parse_region(b, static_cast<uint32_t>(b.size()), l, &r);
  if (e != DescError::kOk) return e;
  e = check_semantics(r, kind, kHostId, known, nullptr);
  if (e != DescError::kOk) return e;
  Constituent out[kMaxRanges];
  return check_ranges(b, r, static_cast<uint32_t>(b.size()), out);
}

TEST(FfaDesc, LittleEndianAccessIsBoundsChecked) {
  const uint8_t raw[] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint64_t v;
  uint32_t v32;
  ASSERT_TRUE(get_u64(raw, 0, &v));
  EXPECT_EQ(v, 0x0807060504030201ull);
  EXPECT_TRUE(get_u32(raw, 4, &v32));
  EXPECT_EQ(v32, 0x08070605u);
  EXPECT_FALSE(get_u32(raw, 5, &v32));
  EXPECT_FALSE(get_u64(raw, ~0ull - 2, &v));
}

TEST(FfaDesc, GoodDescriptorsOfEveryLayoutParse) {
  const Constituent rs[] = {{kBase, 2, 0}, {kBase + 0x10000, 1, 0}};
  for (Layout l : {Layout::kV10, Layout::kV11, Layout::kV12}) {
    SCOPED_TRACE(static_cast<int>(l));
    auto b = build(spec(l, rs, 2));
    EXPECT_EQ(b.size(), header_size(l) + emad_size(l) + 16u + 32u);
    ASSERT_EQ(check(b, l), DescError::kOk);
    MemRegion r;
    ASSERT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), l, &r), DescError::kOk);
    EXPECT_EQ(r.ep_count, 1u);
    EXPECT_EQ(r.receivers[0].id, 0x8001);
    EXPECT_EQ(r.total_pages, 3u);
    EXPECT_EQ(r.range_count, 2u);
    Constituent c;
    ASSERT_TRUE(read_constituent(b, r.ranges_off + 16, &c));
    EXPECT_EQ(c.address, kBase + 0x10000);
    EXPECT_EQ(c.pages, 1u);
  }
}

TEST(FfaDesc, V10AndV11LayoutsDiffer) {
  const Constituent rs[] = {{kBase, 1, 0}};
  auto v10 = build(spec(Layout::kV10, rs, 1));
  // A v1.0 descriptor read as v1.1 is malformed (its ep_mem_size field is reserved 0).
  EXPECT_NE(check(v10, Layout::kV11), DescError::kOk);
  auto v11 = build(spec(Layout::kV11, rs, 1));
  EXPECT_NE(check(v11, Layout::kV10), DescError::kOk);
}

struct BadCase {
  const char* name;
  Layout layout;
  std::function<void(DescSpec&)> edit_spec;
  std::function<void(std::vector<uint8_t>&)> edit_bytes;
  DescError want;
  RuleId rule;
  MemKind kind = MemKind::kShare;
};

TEST(FfaDesc, MalformedDescriptorsFailWithTheirRule) {
  static const Constituent one[] = {{kBase, 1, 0}};
  static const Constituent zero[] = {{kBase, 0, 0}};
  static const Constituent unaligned[] = {{kBase + 0x800, 1, 0}};
  static const Constituent wrap[] = {{0xfffffffffffff000ull, 2, 0}};
  static const Constituent overlap[] = {{kBase, 2, 0}, {kBase + 0x1000, 1, 0}};
  static const Constituent reserved[] = {{kBase, 1, 7}};
  static const Constituent big[] = {{kBase, 0xffffffffu, 0}, {kBase + (1ull << 45), 2, 0}};
  auto ranges = [](const Constituent* r, uint32_t n) {
    return [r, n](DescSpec& s) { s.ranges = r, s.n_ranges = n; };
  };
  auto none = [](std::vector<uint8_t>&) {};
  auto keep = [](DescSpec&) {};
  const BadCase cases[] = {
      {"short", Layout::kV11, keep, [](std::vector<uint8_t>& b) { b.resize(40); }, DescError::kHeader, kFfaDescHeader},
      {"no receiver", Layout::kV11, [](DescSpec& s) { s.ep_count = 0; }, none, DescError::kEpCount, kFfaDescEpCount},
      {"many receivers", Layout::kV11, [](DescSpec& s) { s.ep_count = 9; }, none, DescError::kEpCount, kFfaDescEpCount},
      {"v1.2 emad 24", Layout::kV12, [](DescSpec& s) { s.ep_mem_size = 24; }, none, DescError::kEpMemSize, kFfaDescEpMemSize},
      {"v1.1 emad 8", Layout::kV11, [](DescSpec& s) { s.ep_mem_size = 8; }, none, DescError::kEpMemSize, kFfaDescEpMemSize},
      {"v1.1 emad 0", Layout::kV11, [](DescSpec& s) { s.ep_mem_size = 0; }, none, DescError::kEpMemSize, kFfaDescEpMemSize},
      {"ep offset in header", Layout::kV11, keep, [](std::vector<uint8_t>& b) { put_u32(b, 32, 16); }, DescError::kEpMemOffset, kFfaDescEpMemOffset},
      {"ep offset unaligned", Layout::kV11, keep, [](std::vector<uint8_t>& b) { put_u32(b, 32, 52); }, DescError::kEpMemOffset, kFfaDescEpMemOffset},
      {"header reserved", Layout::kV11, keep, [](std::vector<uint8_t>& b) { b[44] = 1; }, DescError::kReserved, kFfaDescReservedMbz},
      {"v1.0 reserved", Layout::kV10, keep, [](std::vector<uint8_t>& b) { b[3] = 1; }, DescError::kReserved, kFfaDescReservedMbz},
      {"emad reserved", Layout::kV11, keep, [](std::vector<uint8_t>& b) { b[48 + 9] = 1; }, DescError::kReserved, kFfaDescReservedMbz},
      {"composite reserved", Layout::kV11, keep, [](std::vector<uint8_t>& b) { b[64 + 12] = 1; }, DescError::kReserved, kFfaDescReservedMbz},
      {"handle", Layout::kV11, [](DescSpec& s) { s.handle = 5; }, none, DescError::kHandle, kFfaDescHandleMbz},
      {"composite 0", Layout::kV11, keep, [](std::vector<uint8_t>& b) { put_u32(b, 52, 0); }, DescError::kCompositeOffset, kFfaDescCompositeOffset},
      {"composite unaligned", Layout::kV11, [](DescSpec& s) { s.composite_off = 68; }, none, DescError::kCompositeOffset, kFfaDescCompositeOffset},
      {"composite 8 not 16-aligned", Layout::kV11, [](DescSpec& s) { s.composite_off = 72; }, none, DescError::kCompositeOffset, kFfaDescCompositeOffset},
      {"composite in emads", Layout::kV11, keep, [](std::vector<uint8_t>& b) { put_u32(b, 52, 56); }, DescError::kCompositeOffset, kFfaDescCompositeOffset},
      {"composite past end", Layout::kV11, [](DescSpec& s) { s.composite_off = 0x10000; }, [](std::vector<uint8_t>& b) { b.resize(96); }, DescError::kCompositeOffset, kFfaDescCompositeOffset},
      {"no ranges", Layout::kV11, [](DescSpec& s) { s.range_count = 0; }, none, DescError::kRangeCount, kFfaDescRangeCount},
      {"range count too big", Layout::kV11, [](DescSpec& s) { s.range_count = 2; }, none, DescError::kRangeCount, kFfaDescRangeCount},
      {"trailing bytes", Layout::kV11, keep, [](std::vector<uint8_t>& b) { b.resize(b.size() + 16); }, DescError::kLength, kFfaDescLength},
      {"total pages", Layout::kV11, [](DescSpec& s) { s.total_pages = 2; }, none, DescError::kTotalPages, kFfaDescTotalPages},
      {"total wraps 32 bits", Layout::kV11, [&](DescSpec& s) { ranges(big, 2)(s); s.total_pages = 1; }, none, DescError::kTotalPages, kFfaDescTotalPages},
      {"zero pages", Layout::kV11, ranges(zero, 1), none, DescError::kPageCount, kFfaDescPageCount},
      {"unaligned", Layout::kV11, ranges(unaligned, 1), none, DescError::kAddrAlign, kFfaDescAddrAlign},
      {"wraps 2^64", Layout::kV11, ranges(wrap, 1), none, DescError::kAddrOverflow, kFfaDescAddrOverflow},
      {"overlap", Layout::kV11, ranges(overlap, 2), none, DescError::kOverlap, kFfaDescOverlap},
      {"constituent reserved", Layout::kV11, ranges(reserved, 1), none, DescError::kConstituentReserved, kFfaDescConstituentMbz},
      {"sender", Layout::kV11, [](DescSpec& s) { s.sender = 3; }, none, DescError::kSender, kFfaDescSender},
      {"unknown receiver", Layout::kV11, [](DescSpec& s) { s.receivers[0].id = 0x8009; }, none, DescError::kReceiver, kFfaDescReceiver},
      {"receiver twice", Layout::kV11, [](DescSpec& s) { s.n_receivers = 2; s.receivers[1] = s.receivers[0]; }, none, DescError::kReceiver, kFfaDescReceiver},
      {"receiver is sender", Layout::kV11, [](DescSpec& s) { s.receivers[0].id = kHostId; }, none, DescError::kReceiver, kFfaDescReceiver},
      {"no data access", Layout::kV11, [](DescSpec& s) { s.receivers[0].perms = 0; }, none, DescError::kPerms, kFfaDescPerms},
      {"executable", Layout::kV11, [](DescSpec& s) { s.receivers[0].perms = kPermDataRw | kPermInstrX; }, none, DescError::kPerms, kFfaDescPerms},
      {"device", Layout::kV11, [](DescSpec& s) { s.attributes = kAttrTypeDevice; }, none, DescError::kAttrs, kFfaDescAttrs},
      {"unspecified share", Layout::kV11, [](DescSpec& s) { s.attributes = 0; }, none, DescError::kAttrs, kFfaDescAttrs},
      {"non-shareable", Layout::kV11, [](DescSpec& s) { s.attributes = kAttrTypeNormal | kAttrCacheWriteBack; }, none, DescError::kAttrs, kFfaDescAttrs},
      {"high attr bit", Layout::kV11, [](DescSpec& s) { s.attributes = kAttrNormalWbInner | 0x100; }, none, DescError::kAttrs, kFfaDescAttrs},
      {"zero on share", Layout::kV11, [](DescSpec& s) { s.flags = kFlagZeroMemory; }, none, DescError::kFlags, kFfaDescFlags},
      {"flag bit 5", Layout::kV11, [](DescSpec& s) { s.flags = 1u << 5; s.attributes = 0; }, none, DescError::kFlags, kFfaDescFlags, MemKind::kLend},
      {"v1.2 emad reserved at +24", Layout::kV12, keep, [](std::vector<uint8_t>& b) { b[48 + 24] = 1; }, DescError::kReserved, kFfaDescReservedMbz},
      {"v1.0 share NX", Layout::kV10, [](DescSpec& s) { s.receivers[0].perms = kPermDataRw | kPermInstrNx; }, none, DescError::kPerms, kFfaDescPerms},
      {"v1.1 share NX", Layout::kV11, [](DescSpec& s) { s.receivers[0].perms = kPermDataRw | kPermInstrNx; }, none, DescError::kPerms, kFfaDescPerms},
      {"v1.2 lend NX", Layout::kV12, [](DescSpec& s) { s.receivers[0].perms = kPermDataRw | kPermInstrNx; s.attributes = 0; }, none, DescError::kPerms, kFfaDescPerms, MemKind::kLend},
      {"lend to one with a type", Layout::kV11, keep, none, DescError::kAttrs, kFfaDescAttrs, MemKind::kLend},
      {"donate with a type", Layout::kV11, [](DescSpec& s) { s.receivers[0].perms = 0; }, none, DescError::kAttrs, kFfaDescAttrs, MemKind::kDonate},
      {"donate with data access", Layout::kV11, [](DescSpec& s) { s.attributes = 0; }, none, DescError::kPerms, kFfaDescPerms, MemKind::kDonate},
      {"emad flags", Layout::kV11, [](DescSpec& s) { s.receivers[0].flags = 2; }, none, DescError::kEmadFlags, kFfaDescEmadFlags},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    DescSpec s = spec(c.layout, one, 1);
    c.edit_spec(s);
    auto b = build(s);
    c.edit_bytes(b);
    const DescError e = check(b, c.layout, c.kind);
    EXPECT_EQ(e, c.want) << desc_error_name(e);
    EXPECT_EQ(desc_error_rule(e), c.rule);
  }
}

// DESC:LAYOUT: the v1.2 IMPDEF bytes (+8..+23 of an endpoint descriptor) take
// any value and round-trip; the reserved u64 is read at +24.
TEST(FfaDesc, V12ImpdefBytesAreNotReserved) {
  const Constituent rs[] = {{kBase, 1, 0}};
  DescSpec s = spec(Layout::kV12, rs, 1);
  s.receivers[0].impdef[0] = 0x0123456789abcdefull;
  s.receivers[0].impdef[1] = ~0ull;
  auto b = build(s);
  EXPECT_EQ(check(b, Layout::kV12), DescError::kOk);
  MemRegion r;
  ASSERT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), Layout::kV12, &r), DescError::kOk);
  EXPECT_EQ(r.receivers[0].impdef[0], s.receivers[0].impdef[0]);
  EXPECT_EQ(r.receivers[0].impdef[1], ~0ull);
  s.receivers[0].reserved = 1;
  EXPECT_EQ(check(build(s), Layout::kV12), DescError::kReserved);
}

// DESC:PERMS/ATTRS: what a sender may leave out or give.
TEST(FfaDesc, DonateSpecifiesNothingAndAV10SenderNoInstructionAccess) {
  const Constituent rs[] = {{kBase, 1, 0}};
  DescSpec d = spec(Layout::kV11, rs, 1);
  d.attributes = 0;
  d.receivers[0].perms = 0;
  EXPECT_EQ(check(build(d), Layout::kV11, MemKind::kDonate), DescError::kOk);
  // v1.0 as v1.1: the sender leaves the instruction access not specified.
  DescSpec v10 = spec(Layout::kV10, rs, 1);
  EXPECT_EQ(check(build(v10), Layout::kV10), DescError::kOk);
  v10.receivers[0].perms = kPermDataRw | kPermInstrNx;
  EXPECT_EQ(check(build(v10), Layout::kV10), DescError::kPerms);
  // Two borrowers: a lend may give Normal memory (ours).
  DescSpec two = spec(Layout::kV11, rs, 1);
  two.n_receivers = 2;
  two.receivers[1] = {0x8002, kPermDataRw, 0, 0, 0};
  EXPECT_EQ(check(build(two), Layout::kV11, MemKind::kLend), DescError::kOk);
}

// The leeway of a descriptor (DescLeeway): its alternatives, as (rule, code) pairs.
std::vector<std::pair<RuleId, int32_t>> leeway_of(const std::vector<uint8_t>& b, Layout l, MemKind kind,
                                                  DescError* e) {
  MemRegion r;
  DescLeeway lw;
  *e = parse_region(b, static_cast<uint32_t>(b.size()), l, &r, true, false, &lw);
  if (*e == DescError::kOk) *e = check_semantics(r, kind, kHostId, known, nullptr, &lw);
  std::vector<std::pair<RuleId, int32_t>> v;
  for (uint32_t i = 0; i < lw.n; ++i) v.push_back({lw.alt[i].rule, lw.alt[i].code});
  return v;
}

// DESC:EP-MEM-SIZE: a multiple of 16, at least 16. The negotiated version's
// size and, from v1.2, v1.1's 16 are taken (nothing else allowed); a larger
// one (a later version's) is taken or refused.
TEST(FfaDesc, EndpointDescriptorSizes) {
  const Constituent rs[] = {{kBase, 1, 0}};
  using V = std::vector<std::pair<RuleId, int32_t>>;
  const V may_refuse = {{kFfaDescEpMemSize, kInvalidParameters}};
  struct Case {
    Layout l;
    uint64_t size;
    DescError want;
    V leeway;
  } cases[] = {
      {Layout::kV11, 16, DescError::kOk, {}},         {Layout::kV11, 32, DescError::kOk, may_refuse},
      {Layout::kV11, 48, DescError::kOk, may_refuse}, {Layout::kV11, 8, DescError::kEpMemSize, {}},
      {Layout::kV11, 24, DescError::kEpMemSize, {}},  {Layout::kV12, 32, DescError::kOk, {}},
      {Layout::kV12, 16, DescError::kOk, {}},         {Layout::kV12, 64, DescError::kOk, may_refuse},
      {Layout::kV12, 40, DescError::kEpMemSize, {}},  {Layout::kV12, 0, DescError::kEpMemSize, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(static_cast<int>(c.l)) + "/" + std::to_string(c.size));
    DescSpec s = spec(c.l, rs, 1);
    s.ep_mem_size = c.size;
    DescError e;
    const V lw = leeway_of(build(s), c.l, MemKind::kShare, &e);
    EXPECT_EQ(e, c.want) << desc_error_name(e);
    EXPECT_EQ(lw, c.leeway);
  }
  // A v1.1 entry from a v1.2 caller: its reserved u64 is at +8 (no IMPDEF bytes).
  DescSpec s = spec(Layout::kV12, rs, 1);
  s.ep_mem_size = 16;
  auto b = build(s);
  MemRegion r;
  ASSERT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), Layout::kV12, &r), DescError::kOk);
  EXPECT_EQ(r.emad_layout, Layout::kV11);
  b[48 + 8] = 1;
  EXPECT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), Layout::kV12, &r), DescError::kReserved);
}

// DESC:ATTRS, DESC:FLAGS: what the references leave a Relayer to choose.
TEST(FfaDesc, AttributesAndTimeSlicingLeeway) {
  const Constituent rs[] = {{kBase, 1, 0}};
  using V = std::vector<std::pair<RuleId, int32_t>>;
  const V either = {{kFfaDescAttrs, kInvalidParameters}, {kFfaDescAttrs, kDenied}};
  const V denied_too = {{kFfaDescAttrs, kDenied}};
  struct Case {
    uint16_t attrs;
    uint32_t flags;
    DescError want;
    V leeway;
  } cases[] = {
      {kAttrNormalWbInner, 0, DescError::kOk, {}},
      {kAttrTypeNormal | kAttrCacheNonCacheable | kAttrShareInner, 0, DescError::kOk, either},
      {kAttrTypeNormal | kAttrCacheWriteBack | kAttrShareOuter, 0, DescError::kOk, either},
      {kAttrTypeNormal | kAttrCacheWriteBack | kAttrShareNon, 0, DescError::kAttrs, denied_too},
      {kAttrTypeNormal | kAttrCacheWriteBack | 1, 0, DescError::kAttrs, denied_too},  // reserved shareability
      {kAttrTypeNormal | kAttrShareInner, 0, DescError::kAttrs, denied_too},          // reserved cacheability
      {kAttrTypeDevice | kAttrShareInner, 0, DescError::kAttrs, denied_too},
      {0x3f, 0, DescError::kAttrs, denied_too},                                        // reserved type
      {0, 0, DescError::kAttrs, denied_too},                                           // a share gives the type
      {kAttrNormalWbInner | 0x40, 0, DescError::kAttrs, {}},                           // NS: INVALID_PARAMETERS only
      {kAttrNormalWbInner, kFlagTimeSlice, DescError::kOk, {{kFfaDescFlags, kInvalidParameters}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.attrs) + "/" + std::to_string(c.flags));
    DescSpec s = spec(Layout::kV11, rs, 1);
    s.attributes = c.attrs;
    s.flags = c.flags;
    DescError e;
    const V lw = leeway_of(build(s), Layout::kV11, MemKind::kShare, &e);
    EXPECT_EQ(e, c.want) << desc_error_name(e);
    EXPECT_EQ(lw, c.leeway);
  }
}

TEST(FfaDesc, LendMayLeaveTypeUnspecifiedAndZero) {
  const Constituent rs[] = {{kBase, 1, 0}};
  DescSpec s = spec(Layout::kV11, rs, 1);
  s.attributes = 0;
  s.flags = kFlagZeroMemory;
  EXPECT_EQ(check(build(s), Layout::kV11, MemKind::kLend), DescError::kOk);
}

TEST(FfaDesc, RetrieveResponseMayCarryAHandle) {
  const Constituent rs[] = {{kBase, 1, 0}};
  DescSpec s = spec(Layout::kV12, rs, 1);
  s.handle = 0x8000000000000001ull;
  auto b = build(s);
  MemRegion r;
  EXPECT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), Layout::kV12, &r), DescError::kHandle);
  EXPECT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), Layout::kV12, &r, false), DescError::kOk);
  EXPECT_EQ(r.handle, s.handle);
}

// PROFILE:PERMISSIVE-EL3: the lenient reading accepts an endpoint count of 0
// (read as one) and a v1.1+ endpoint array inside the header, and nothing
// else the strict one refuses.
TEST(FfaDesc, LenientReadsEpCountZeroAndEpOffsetInHeader) {
  static const Constituent one[] = {{0x80000000, 1, 0}};
  DescSpec s;
  s.layout = Layout::kV12;
  s.ranges = one;
  s.n_ranges = 1;
  s.ep_count = 0;
  std::vector<uint8_t> b(region_size(s));
  build_region(s, b);
  MemRegion r;
  EXPECT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), Layout::kV12, &r), DescError::kEpCount);
  EXPECT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), Layout::kV12, &r, true, true), DescError::kOk);
  EXPECT_EQ(r.ep_count, 1u);
  EXPECT_EQ(r.receivers[0].id, 0x8001);
  // v1.2: the 32-byte endpoint at 16 (its receiver, permissions and composite
  // offset are the tag), the composite at 48, one constituent at 64.
  std::vector<uint8_t> h(80, 0);
  put_u16(h, 2, kAttrNormalWbInner);
  put_u64(h, 16, 0x0000003000028001ull);
  put_u32(h, 24, 32);
  put_u32(h, 28, 1);
  put_u32(h, 32, 16);
  put_u32(h, 48, 1);
  put_u32(h, 52, 1);
  put_u64(h, 64, 0x80000000);
  put_u32(h, 72, 1);
  EXPECT_EQ(parse_region(h, 80, Layout::kV12, &r), DescError::kEpMemOffset);
  ASSERT_EQ(parse_region(std::span<const uint8_t>(h).first(64), 80, Layout::kV12, &r, true, true), DescError::kOk);
  EXPECT_EQ(r.ep_mem_offset, 16u);
  EXPECT_EQ(r.receivers[0].id, 0x8001);
  EXPECT_EQ(r.composite_off, 48u);
  // Still refused leniently: an unaligned offset, more endpoints than held.
  put_u32(h, 32, 8);
  EXPECT_EQ(parse_region(h, 80, Layout::kV12, &r, true, true), DescError::kEpMemOffset);
  s.ep_count = 9;
  build_region(s, b);
  EXPECT_EQ(parse_region(b, static_cast<uint32_t>(b.size()), Layout::kV12, &r, true, true), DescError::kEpCount);
}

// Regression (a SEGV the fuzzer found in build_region, issue 14): an
// overridden endpoint size wraps the geometry, so the second receiver's entry
// lands 2^63 bytes past the region; it is left out, and nothing is written
// outside the region (the guard bytes after it stay as they were).
TEST(FfaDesc, AWrappedEndpointEntryIsNotWrittenOutsideTheRegion) {
  DescSpec s = spec(Layout::kV11, nullptr, 0);
  s.n_receivers = 2;
  s.receivers[1] = {0x8002, kPermDataRw, 0, 0, 0};
  s.ep_mem_size = 1ull << 63;
  const uint64_t size = region_size(s);
  ASSERT_EQ(size, 64u);  // header, one 16-byte entry before the wrapped composite, composite
  std::vector<uint8_t> b(size + 64, 0xa5);
  EXPECT_EQ(build_region(s, std::span<uint8_t>(b.data(), size)), size);
  for (uint64_t i = size; i < b.size(); ++i) ASSERT_EQ(b[i], 0xa5) << "byte " << i << " past the region";
}

// check_ranges finds overlap in address order (sorting what is not given
// ascending); it must answer as the pairwise test (ai < ej && aj < ei for
// some i != j) on random small sets of constituents: touching, nested, equal,
// disjoint, in any order and in ascending order.
TEST(FfaDesc, OverlapBySortingIsThePairwiseTest) {
  uint64_t seed = 12345;
  auto next = [&seed]() {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed >> 33;
  };
  int overlapping = 0, disjoint = 0;
  for (int round = 0; round < 3000; ++round) {
    const uint32_t n = 1 + next() % 6;
    Constituent rs[6];
    uint32_t total = 0;
    for (uint32_t i = 0; i < n; ++i) {
      rs[i] = Constituent{0x80000000 + (next() % 24) * kFfaPage, static_cast<uint32_t>(1 + next() % 4), 0};
      total += rs[i].pages;
    }
    bool pairwise = false;
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < i; ++j) {
        const uint64_t ai = rs[i].address, ei = ai + uint64_t{rs[i].pages} * kFfaPage;
        const uint64_t aj = rs[j].address, ej = aj + uint64_t{rs[j].pages} * kFfaPage;
        pairwise |= ai < ej && aj < ei;
      }
    (void)total;
    // As drawn (any order: sorted by check_ranges), then in ascending address
    // order (checked as given, without sorting).
    for (int ascending = 0; ascending < 2; ++ascending) {
      if (ascending)
        std::sort(rs, rs + n, [](const Constituent& a, const Constituent& b) { return a.address < b.address; });
      DescSpec sp = spec(Layout::kV11, rs, n);
      const std::vector<uint8_t> b = build(sp);
      const DescError e = check(b, Layout::kV11);
      ASSERT_EQ(e == DescError::kOverlap, pairwise) << "round " << round << " ascending " << ascending;
      if (!pairwise) ASSERT_EQ(e, DescError::kOk) << "round " << round << " ascending " << ascending;
    }
    (pairwise ? overlapping : disjoint)++;
  }
  EXPECT_GT(overlapping, 100);
  EXPECT_GT(disjoint, 100);
}

}  // namespace
}  // namespace kconform::ffa
