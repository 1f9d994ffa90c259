// FF-A memory transaction descriptors: little-endian field access, structural
// and semantic checks, and the builder (SPEC.md DESC:*).
#include "models/ffa/desc.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace kconform::ffa {

namespace {
// Table 10.15: permissions bits [7:4] MBZ; on transmission the instruction
// access is "not specified" (v1.0 too), and a donor specifies no access.
constexpr uint8_t kPermReservedMask = 0xf0;
constexpr uint8_t kPermDataNotSpecified = 0;
constexpr uint8_t kPermInstrNotSpecified = 0;
// Table 10.16: endpoint flags, bit 0 (non-retrieval borrower) only.
constexpr uint8_t kEmadFlagsReservedMask = 0xfe;
// Table 10.18: attributes bits [5:0] on transmission (bit 6, NS, is the
// Relayer's).
constexpr uint16_t kAttrTransmitMask = 0x3f;
}  // namespace

// --- Field access ------------------------------------------------------------

namespace {
bool fits(std::span<const uint8_t> buf, uint64_t off, uint64_t width) {
  return off <= buf.size() && width <= buf.size() - off;
}
uint64_t load_le(std::span<const uint8_t> buf, uint64_t off, unsigned width) {
  uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) v |= static_cast<uint64_t>(buf[off + i]) << (8 * i);
  return v;
}
bool store_le(std::span<uint8_t> buf, uint64_t off, unsigned width, uint64_t v) {
  if (off > buf.size() || width > buf.size() - off) return false;
  for (unsigned i = 0; i < width; ++i) buf[off + i] = static_cast<uint8_t>(v >> (8 * i));
  return true;
}
}  // namespace

bool get_u8(std::span<const uint8_t> b, uint64_t off, uint8_t* v) {
  if (!fits(b, off, 1)) return false;
  *v = b[off];
  return true;
}
bool get_u16(std::span<const uint8_t> b, uint64_t off, uint16_t* v) {
  if (!fits(b, off, 2)) return false;
  *v = static_cast<uint16_t>(load_le(b, off, 2));
  return true;
}
bool get_u32(std::span<const uint8_t> b, uint64_t off, uint32_t* v) {
  if (!fits(b, off, 4)) return false;
  *v = static_cast<uint32_t>(load_le(b, off, 4));
  return true;
}
bool get_u64(std::span<const uint8_t> b, uint64_t off, uint64_t* v) {
  if (!fits(b, off, 8)) return false;
  *v = load_le(b, off, 8);
  return true;
}
bool put_u16(std::span<uint8_t> b, uint64_t off, uint16_t v) { return store_le(b, off, 2, v); }
bool put_u32(std::span<uint8_t> b, uint64_t off, uint32_t v) { return store_le(b, off, 4, v); }
bool put_u64(std::span<uint8_t> b, uint64_t off, uint64_t v) { return store_le(b, off, 8, v); }

// --- Layouts -----------------------------------------------------------------

Layout layout_for(uint32_t v) {
  if (version_minor(v) == 0) return Layout::kV10;
  return version_minor(v) == 1 ? Layout::kV11 : Layout::kV12;
}
uint32_t header_size(Layout l) { return l == Layout::kV10 ? 32 : 48; }
uint32_t emad_size(Layout l) { return l == Layout::kV12 ? 32 : 16; }
uint32_t emad_reserved_off(Layout l) { return l == Layout::kV12 ? 24 : 8; }
Layout emad_layout(Layout l, uint32_t size) {
  return l == Layout::kV12 && size >= emad_size(Layout::kV12) ? Layout::kV12 : Layout::kV11;
}

const char* desc_error_name(DescError e) {
  switch (e) {
    case DescError::kOk: return "ok";
    case DescError::kHeader: return "header";
    case DescError::kEpCount: return "ep_count";
    case DescError::kEpMemSize: return "ep_mem_size";
    case DescError::kEpMemOffset: return "ep_mem_offset";
    case DescError::kReserved: return "reserved";
    case DescError::kHandle: return "handle";
    case DescError::kCompositeOffset: return "composite_offset";
    case DescError::kRangeCount: return "range_count";
    case DescError::kLength: return "length";
    case DescError::kTotalPages: return "total_pages";
    case DescError::kPageCount: return "page_count";
    case DescError::kAddrAlign: return "addr_align";
    case DescError::kAddrOverflow: return "addr_overflow";
    case DescError::kOverlap: return "overlap";
    case DescError::kConstituentReserved: return "constituent_reserved";
    case DescError::kSender: return "sender";
    case DescError::kReceiver: return "receiver";
    case DescError::kPerms: return "perms";
    case DescError::kAttrs: return "attrs";
    case DescError::kFlags: return "flags";
    case DescError::kEmadFlags: return "emad_flags";
  }
  return "?";
}

RuleId desc_error_rule(DescError e) {
  switch (e) {
    case DescError::kOk: return kNoRule;
    case DescError::kHeader: return kFfaDescHeader;
    case DescError::kEpCount: return kFfaDescEpCount;
    case DescError::kEpMemSize: return kFfaDescEpMemSize;
    case DescError::kEpMemOffset: return kFfaDescEpMemOffset;
    case DescError::kReserved: return kFfaDescReservedMbz;
    case DescError::kHandle: return kFfaDescHandleMbz;
    case DescError::kCompositeOffset: return kFfaDescCompositeOffset;
    case DescError::kRangeCount: return kFfaDescRangeCount;
    case DescError::kLength: return kFfaDescLength;
    case DescError::kTotalPages: return kFfaDescTotalPages;
    case DescError::kPageCount: return kFfaDescPageCount;
    case DescError::kAddrAlign: return kFfaDescAddrAlign;
    case DescError::kAddrOverflow: return kFfaDescAddrOverflow;
    case DescError::kOverlap: return kFfaDescOverlap;
    case DescError::kConstituentReserved: return kFfaDescConstituentMbz;
    case DescError::kSender: return kFfaDescSender;
    case DescError::kReceiver: return kFfaDescReceiver;
    case DescError::kPerms: return kFfaDescPerms;
    case DescError::kAttrs: return kFfaDescAttrs;
    case DescError::kFlags: return kFfaDescFlags;
    case DescError::kEmadFlags: return kFfaDescEmadFlags;
  }
  return kNoRule;
}

// --- Parsing -----------------------------------------------------------------

DescError parse_region(std::span<const uint8_t> frag, uint32_t total_len, Layout l, MemRegion* r,
                       bool transmission, bool lenient, DescLeeway* leeway) {
  *r = MemRegion{};
  r->layout = l;
  r->emad_layout = l == Layout::kV10 ? Layout::kV10 : Layout::kV11;
  const uint32_t hdr = header_size(l);
  // The header must be in the first fragment (Table 10.20 / 5.19).
  if (frag.size() < hdr || total_len < hdr) return DescError::kHeader;
  uint32_t reserved32 = 0;
  get_u16(frag, 0, &r->sender);
  get_u32(frag, 4, &r->flags);
  get_u64(frag, 8, &r->handle);
  get_u64(frag, 16, &r->tag);
  get_u32(frag, 28, &r->ep_count);
  if (l == Layout::kV10) {
    uint8_t attr8 = 0, res8 = 0;
    get_u8(frag, 2, &attr8);
    get_u8(frag, 3, &res8);
    get_u32(frag, 24, &reserved32);
    r->attributes = attr8;
    r->header_reserved_nonzero = res8 != 0 || reserved32 != 0;
    r->ep_mem_size = 16;
    r->ep_mem_offset = 32;
  } else {
    uint32_t res[3] = {};
    get_u16(frag, 2, &r->attributes);
    get_u32(frag, 24, &r->ep_mem_size);
    get_u32(frag, 32, &r->ep_mem_offset);
    for (int i = 0; i < 3; ++i) get_u32(frag, 36 + 4 * i, &res[i]);
    r->header_reserved_nonzero = (res[0] | res[1] | res[2]) != 0;
  }
  // At least one receiver, at most what we hold (lenient: 0 is read as 1).
  if (lenient && r->ep_count == 0) r->ep_count = 1;
  if (r->ep_count == 0 || r->ep_count > kMaxReceivers) return DescError::kEpCount;
  if (l != Layout::kV10) {
    // DESC:EP-MEM-SIZE: a multiple of 16, at least 16: the negotiated
    // version's size or an earlier compatible one (16 from v1.2); a larger
    // one (a later version's descriptor, read as far as this version goes)
    // may be taken or refused.
    if (r->ep_mem_size < kEmadSizeUnit || r->ep_mem_size % kEmadSizeUnit != 0) return DescError::kEpMemSize;
    if (r->ep_mem_size > emad_size(l) && leeway) leeway->add(kFfaDescEpMemSize, kInvalidParameters);
    r->emad_layout = emad_layout(l, r->ep_mem_size);
    // The endpoint array follows the header, 16-byte aligned.
    if ((!lenient && r->ep_mem_offset < hdr) || r->ep_mem_offset % 16 != 0) return DescError::kEpMemOffset;
  }
  const uint64_t ep_end = static_cast<uint64_t>(r->ep_mem_offset) +
                          static_cast<uint64_t>(r->ep_count) * r->ep_mem_size;
  if (ep_end > frag.size() || ep_end > total_len)
    return l == Layout::kV10 ? DescError::kHeader : DescError::kEpMemOffset;
  for (uint32_t i = 0; i < r->ep_count; ++i) {
    const uint64_t e = r->ep_mem_offset + static_cast<uint64_t>(i) * r->ep_mem_size;
    Receiver& rc = r->receivers[i];
    get_u16(frag, e, &rc.id);
    get_u8(frag, e + 2, &rc.perms);
    get_u8(frag, e + 3, &rc.flags);
    get_u32(frag, e + 4, &rc.composite_off);
    // A v1.2 entry: IMPDEF bytes at +8, the reserved u64 at +24 (both inside
    // the at least 32 bytes ep_mem_size was checked to be); a v1.1 entry (16
    // bytes, also from a v1.2 caller): the reserved u64 at +8.
    get_u64(frag, e + emad_reserved_off(r->emad_layout), &rc.reserved);
    if (r->emad_layout == Layout::kV12) {
      get_u64(frag, e + 8, &rc.impdef[0]);
      get_u64(frag, e + 16, &rc.impdef[1]);
    }
  }
  // Reserved fields of the header and the endpoint descriptors are MBZ.
  if (r->header_reserved_nonzero) return DescError::kReserved;
  for (uint32_t i = 0; i < r->ep_count; ++i)
    if (r->receivers[i].reserved != 0) return DescError::kReserved;
  // Handle MBZ on transmission.
  if (transmission && r->handle != 0) return DescError::kHandle;
  // One composite descriptor, shared by all receivers, after the endpoint
  // array, 16-byte aligned, its header in the first fragment.
  r->composite_off = r->receivers[0].composite_off;
  for (uint32_t i = 1; i < r->ep_count; ++i)
    if (r->receivers[i].composite_off != r->composite_off) return DescError::kCompositeOffset;
  if (r->composite_off == 0 || r->composite_off % kCompositeAlign != 0 || r->composite_off < ep_end ||
      static_cast<uint64_t>(r->composite_off) + kCompositeSize > frag.size())
    return DescError::kCompositeOffset;
  get_u32(frag, r->composite_off, &r->total_pages);
  get_u32(frag, r->composite_off + 4, &r->range_count);
  get_u64(frag, r->composite_off + 8, &r->composite_reserved);
  if (r->composite_reserved != 0) return DescError::kReserved;
  r->ranges_off = r->composite_off + kCompositeSize;
  // The constituent array fits the total length.
  if (r->range_count == 0 || r->range_count > kMaxRanges ||
      static_cast<uint64_t>(r->ranges_off) + static_cast<uint64_t>(r->range_count) * kConstituentSize >
          total_len)
    return DescError::kRangeCount;
  // ours: nothing may follow the constituent array.
  if (static_cast<uint64_t>(r->ranges_off) + static_cast<uint64_t>(r->range_count) * kConstituentSize !=
      total_len)
    return DescError::kLength;
  return DescError::kOk;
}

bool read_constituent(std::span<const uint8_t> buf, uint64_t off, Constituent* c) {
  return get_u64(buf, off, &c->address) && get_u32(buf, off + 8, &c->pages) &&
         get_u32(buf, off + 12, &c->reserved);
}

DescError constituent_error(const Constituent& c) {
  if (c.reserved != 0) return DescError::kConstituentReserved;
  if (c.pages == 0) return DescError::kPageCount;
  if (c.address % kFfaPage != 0) return DescError::kAddrAlign;
  const uint64_t bytes = static_cast<uint64_t>(c.pages) * kFfaPage;
  if (c.address > ~0ull - bytes) return DescError::kAddrOverflow;  // end must be representable
  return DescError::kOk;
}

DescError check_semantics(const MemRegion& r, MemKind kind, uint16_t caller,
                          bool (*known)(uint16_t, const void*), const void* ctx, DescLeeway* leeway) {
  DescLeeway scratch;
  DescLeeway& lw = leeway ? *leeway : scratch;
  // The sender is the caller.
  if (r.sender != caller) return DescError::kSender;
  // Receivers: known partitions, distinct, not the sender.
  for (uint32_t i = 0; i < r.ep_count; ++i) {
    const uint16_t id = r.receivers[i].id;
    if (id == r.sender || !known(id, ctx)) return DescError::kReceiver;
    for (uint32_t j = 0; j < i; ++j)
      if (r.receivers[j].id == id) return DescError::kReceiver;
  }
  for (uint32_t i = 0; i < r.ep_count; ++i) {
    const uint8_t p = r.receivers[i].perms;
    const uint8_t data = p & kPermDataMask, instr = (p & kPermInstrMask) >> 2;
    if ((p & kPermReservedMask) != 0) return DescError::kPerms;  // bits [7:4] MBZ
    if (kind == MemKind::kDonate) {
      // A donor specifies neither data nor instruction access (DESC:PERMS).
      if (data != kPermDataNotSpecified || instr != kPermInstrNotSpecified) return DescError::kPerms;
    } else {
      // Data access RO or RW.
      if (data != kPermDataRo && data != kPermDataRw) return DescError::kPerms;
      // Instruction access: "not specified" (v1.0 too: DESC:PERMS).
      if (instr != kPermInstrNotSpecified) return DescError::kPerms;
    }
    // Endpoint flags: only bit 0 (non-retrieval borrower) is defined.
    if ((r.receivers[i].flags & kEmadFlagsReservedMask) != 0) return DescError::kEmadFlags;
  }
  // Attributes (DESC:ATTRS): bits above [5:0] MBZ on transmission (v1.1
  // bit 6, NS, is set only by the Relayer): INVALID_PARAMETERS.
  const uint16_t a = r.attributes;
  const uint16_t type = a & kAttrTypeMask, cache = a & kAttrCacheMask, sh = a & kAttrShareMask;
  if ((a & ~kAttrTransmitMask) != 0) return DescError::kAttrs;
  if (kind == MemKind::kDonate || (kind == MemKind::kLend && r.ep_count == 1)) {
    // A donation, or a lend to a single borrower: the sender must not
    // specify the attributes, all bits 0: INVALID_PARAMETERS.
    if (a != 0) return DescError::kAttrs;
  } else if (!(kind == MemKind::kLend && a == 0)) {
    // A share, or a lend to several borrowers that gives them (ours: one may
    // leave them all unspecified): Normal memory, write-back or
    // non-cacheable, inner or outer shareable. Anything else (device memory,
    // no or a reserved type, a reserved cacheability, non-shareable or a
    // reserved shareability) is refused, INVALID_PARAMETERS or DENIED.
    const bool normal = type == kAttrTypeNormal && (cache == kAttrCacheWriteBack || cache == kAttrCacheNonCacheable) &&
                        (sh == kAttrShareInner || sh == kAttrShareOuter);
    if (!normal) {
      lw.add(kFfaDescAttrs, kDenied);
      return DescError::kAttrs;
    }
    // Normal memory other than write-back inner shareable: a Relayer may
    // support it, or refuse it (INVALID_PARAMETERS or DENIED, no change).
    if (cache != kAttrCacheWriteBack || sh != kAttrShareInner) {
      lw.add(kFfaDescAttrs, kInvalidParameters);
      lw.add(kFfaDescAttrs, kDenied);
    }
  }
  // Flags (DESC:FLAGS): bit 0 zero memory (not on a share), bit 1 time
  // slicing; [31:2] MBZ.
  if ((r.flags & ~(kFlagZeroMemory | kFlagTimeSlice)) != 0) return DescError::kFlags;
  if (kind == MemKind::kShare && (r.flags & kFlagZeroMemory)) return DescError::kFlags;
  // Time slicing may be honoured or refused (INVALID_PARAMETERS, no change).
  if (r.flags & kFlagTimeSlice) lw.add(kFfaDescFlags, kInvalidParameters);
  return DescError::kOk;
}

DescError check_ranges(std::span<const uint8_t> buf, const MemRegion& r, uint32_t total_len,
                       Constituent* out) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < r.range_count; ++i) {
    Constituent c;
    if (!read_constituent(buf, r.ranges_off + static_cast<uint64_t>(i) * kConstituentSize, &c))
      return DescError::kRangeCount;
    if (const DescError e = constituent_error(c); e != DescError::kOk) return e;
    sum += c.pages;
    out[i] = c;
  }
  if (sum != r.total_pages) return DescError::kTotalPages;
  // Two constituents overlap (ai < ej && aj < ei for some i != j): every one
  // is non-empty and does not wrap (constituent_error), so sorted by start,
  // some start lies below the furthest end before it. Constituents given in
  // ascending order (the usual case) are checked as they are, O(n); others
  // are sorted first, O(n log n), in a per-thread scratch (no allocation).
  if (r.range_count > kMaxRanges) return DescError::kRangeCount;
  {
    uint64_t end = 0;
    uint32_t i = 0;
    for (; i < r.range_count; ++i) {
      if (i > 0 && out[i].address < out[i - 1].address) break;  // not ascending: sort below
      if (i > 0 && out[i].address < end) return DescError::kOverlap;
      end = std::max(end, out[i].address + static_cast<uint64_t>(out[i].pages) * kFfaPage);
    }
    if (i == r.range_count) return DescError::kOk;
  }
  thread_local std::pair<uint64_t, uint64_t> by_start[kMaxRanges];
  for (uint32_t i = 0; i < r.range_count; ++i)
    by_start[i] = {out[i].address, out[i].address + static_cast<uint64_t>(out[i].pages) * kFfaPage};
  std::sort(by_start, by_start + r.range_count);
  uint64_t end = 0;
  for (uint32_t i = 0; i < r.range_count; ++i) {
    if (i > 0 && by_start[i].first < end) return DescError::kOverlap;
    end = std::max(end, by_start[i].second);
  }
  (void)total_len;
  return DescError::kOk;
}

// --- Building ----------------------------------------------------------------

namespace {
struct Geometry {
  uint64_t hdr, ep_off, ep_size, ep_count, comp_off, size;
};
Geometry geometry(const DescSpec& s) {
  Geometry g;
  g.hdr = header_size(s.layout);
  g.ep_off = g.hdr;
  g.ep_size = s.ep_mem_size == kAuto ? emad_size(s.layout) : s.ep_mem_size;
  if (s.layout == Layout::kV10) g.ep_size = 16;
  g.ep_count = s.n_receivers;
  uint64_t auto_comp = g.ep_off + g.ep_count * g.ep_size;
  auto_comp = (auto_comp + 15) & ~15ull;
  g.comp_off = s.composite_off == kAuto ? auto_comp : s.composite_off;
  g.size = (g.comp_off > auto_comp ? g.comp_off : auto_comp) + kCompositeSize +
           static_cast<uint64_t>(s.n_ranges) * kConstituentSize;
  if (g.comp_off + kCompositeSize + static_cast<uint64_t>(s.n_ranges) * kConstituentSize > g.size)
    g.size = g.comp_off + kCompositeSize + static_cast<uint64_t>(s.n_ranges) * kConstituentSize;
  return g;
}
}  // namespace

uint64_t region_size(const DescSpec& s) { return geometry(s).size; }

uint64_t build_region(const DescSpec& s, std::span<uint8_t> out) {
  const Geometry g = geometry(s);
  if (s.n_receivers > kMaxReceivers || g.size > out.size() || g.comp_off > (1ull << 32)) return 0;
  std::memset(out.data(), 0, g.size);
  put_u16(out, 0, s.sender);
  if (s.layout == Layout::kV10) {
    out[2] = static_cast<uint8_t>(s.attributes);
  } else {
    put_u16(out, 2, s.attributes);
    put_u32(out, 24, static_cast<uint32_t>(g.ep_size));
    put_u32(out, 32, static_cast<uint32_t>(g.ep_off));
  }
  put_u32(out, 4, s.flags);
  put_u64(out, 8, s.handle);
  put_u64(out, 16, s.tag);
  put_u32(out, 28, static_cast<uint32_t>(s.ep_count == kAuto ? s.n_receivers : s.ep_count));
  for (uint32_t i = 0; i < s.n_receivers; ++i) {
    const uint64_t e = g.ep_off + i * g.ep_size;
    // Overridden offsets and sizes may wrap the geometry: write only what fits.
    if (e >= g.size || g.size - e < 16) continue;
    put_u16(out, e, s.receivers[i].id);
    out[e + 2] = s.receivers[i].perms;
    out[e + 3] = s.receivers[i].flags;
    put_u32(out, e + 4, static_cast<uint32_t>(g.comp_off));
    // A v1.2 entry (32 bytes): IMPDEF at +8, reserved at +24; an entry of
    // another size (an overridden ep_mem_size) keeps the v1.1 field order.
    if (s.layout == Layout::kV12 && g.ep_size >= 32 && g.size - e >= 32) {
      put_u64(out, e + 8, s.receivers[i].impdef[0]);
      put_u64(out, e + 16, s.receivers[i].impdef[1]);
      put_u64(out, e + 24, s.receivers[i].reserved);
    } else {
      put_u64(out, e + 8, s.receivers[i].reserved);
    }
  }
  uint64_t sum = 0;
  for (uint32_t i = 0; i < s.n_ranges; ++i) sum += s.ranges[i].pages;
  put_u32(out, g.comp_off, static_cast<uint32_t>(s.total_pages == kAuto ? sum : s.total_pages));
  put_u32(out, g.comp_off + 4, static_cast<uint32_t>(s.range_count == kAuto ? s.n_ranges : s.range_count));
  build_constituents(s.ranges, s.n_ranges, out.subspan(g.comp_off + kCompositeSize));
  return g.size;
}

uint64_t build_constituents(const Constituent* ranges, uint32_t n, std::span<uint8_t> out) {
  uint64_t off = 0;
  for (uint32_t i = 0; i < n; ++i, off += kConstituentSize) {
    if (!put_u64(out, off, ranges[i].address) || !put_u32(out, off + 8, ranges[i].pages) ||
        !put_u32(out, off + 12, ranges[i].reserved))
      return off;
  }
  return off;
}

const char* error_name(int32_t code) {
  switch (code) {
    case 0: return "SUCCESS";
    case kNotSupported: return "NOT_SUPPORTED";
    case kInvalidParameters: return "INVALID_PARAMETERS";
    case kNoMemory: return "NO_MEMORY";
    case kBusy: return "BUSY";
    case kInterrupted: return "INTERRUPTED";
    case kDenied: return "DENIED";
    case kRetry: return "RETRY";
    case kAborted: return "ABORTED";
    case kNoData: return "NO_DATA";
  }
  return "?";
}

}  // namespace kconform::ffa
