// FF-A memory transaction descriptors: parse, validate and build the v1.0 and
// v1.1+ layouts from raw little-endian bytes (DEN0077 v1.1 §10.11, Tables
// 10.14-10.20; SPEC.md DESC:*). No allocation, no exceptions: fixed capacities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "models/common/rules.h"
#include "harness/scenario/ffa_spec.h"

namespace kconform::ffa {

inline constexpr uint32_t kMaxReceivers = 4;     // ours: receivers one descriptor may name
inline constexpr uint32_t kMaxRanges = 2560;     // ours: constituents one transaction may hold (SPEC.md SPMC:HANDLE)
inline constexpr uint32_t kConstituentSize = 16;  // Table 10.14
inline constexpr uint32_t kCompositeSize = 16;    // Table 10.13 (header before the constituents)
// SPEC.md DESC:COMPOSITE: a composite offset is 16-byte aligned (so that,
// with 16-byte constituents, the descriptor's lengths are multiples of 16).
inline constexpr uint32_t kCompositeAlign = 16;
// SPEC.md DESC:EP-MEM-SIZE: an endpoint memory access descriptor size is a
// multiple of 16, at least 16.
inline constexpr uint32_t kEmadSizeUnit = 16;

// Little-endian field access with bounds checks. get_* return false when
// [off, off+width) is not inside buf.
bool get_u8(std::span<const uint8_t> buf, uint64_t off, uint8_t* v);
bool get_u16(std::span<const uint8_t> buf, uint64_t off, uint16_t* v);
bool get_u32(std::span<const uint8_t> buf, uint64_t off, uint32_t* v);
bool get_u64(std::span<const uint8_t> buf, uint64_t off, uint64_t* v);
bool put_u16(std::span<uint8_t> buf, uint64_t off, uint16_t v);
bool put_u32(std::span<uint8_t> buf, uint64_t off, uint32_t v);
bool put_u64(std::span<uint8_t> buf, uint64_t off, uint64_t v);

// The layout a descriptor is in follows the FF-A version in use (v1.0, or
// v1.1 and later, whose endpoint descriptor is 16 bytes in 1.1 and 32 in 1.2+).
enum class Layout : uint8_t { kV10 = 0, kV11 = 1, kV12 = 2 };
Layout layout_for(uint32_t version);
uint32_t header_size(Layout l);  // 32 or 48
uint32_t emad_size(Layout l);    // 16, 16, 32
// Offset of the reserved u64 in an endpoint memory access descriptor: 8, or
// 24 from v1.2, whose 16 IMPDEF bytes come at 8 (SPEC.md DESC:LAYOUT).
uint32_t emad_reserved_off(Layout l);
// The layout of the endpoint memory access descriptors of a v1.1+ descriptor
// read at version l whose header says they are size bytes (SPEC.md
// DESC:EP-MEM-SIZE): v1.1's (16 bytes, reserved at 8) when size is 16 or the
// caller negotiated v1.1; otherwise v1.2's (IMPDEF at 8, reserved at 24), of
// which a larger size (a later version's) is read as far as v1.2 goes.
Layout emad_layout(Layout l, uint32_t size);

struct Constituent {
  uint64_t address = 0;
  uint32_t pages = 0;
  uint32_t reserved = 0;
};

// Room for kMaxRanges constituents on the stack, not initialised: the scratch
// list of one call, which whoever fills it writes before anything reads it
// (check_ranges, unreclaimed_runs). A Constituent[kMaxRanges] is zeroed at
// every call: 40 KiB, one memset per element under ASan (issue 14).
class ConstituentScratch {
 public:
  Constituent* data() { return reinterpret_cast<Constituent*>(bytes_); }  // implicit-lifetime objects

 private:
  alignas(Constituent) unsigned char bytes_[kMaxRanges * sizeof(Constituent)];
};

struct Receiver {
  uint16_t id = 0;
  uint8_t perms = 0;
  uint8_t flags = 0;
  uint32_t composite_off = 0;
  uint64_t reserved = 0;   // v1.0/v1.1 @8; v1.2+ @24 (after the IMPDEF bytes)
  uint64_t impdef[2] = {};  // v1.2+: 16 implementation-defined bytes @8, not checked
};

// The fixed part of a memory region descriptor with its endpoint array and
// composite header, as read from the first fragment.
struct MemRegion {
  Layout layout = Layout::kV11;
  Layout emad_layout = Layout::kV11;  // how its endpoint descriptors are read (emad_layout())
  uint16_t sender = 0;
  uint16_t attributes = 0;
  uint32_t flags = 0;
  uint64_t handle = 0;
  uint64_t tag = 0;
  uint32_t ep_mem_size = 0;
  uint32_t ep_count = 0;
  uint32_t ep_mem_offset = 0;
  bool header_reserved_nonzero = false;
  Receiver receivers[kMaxReceivers];
  uint32_t composite_off = 0;
  uint32_t total_pages = 0;
  uint32_t range_count = 0;
  uint64_t composite_reserved = 0;
  uint32_t ranges_off = 0;  // byte offset of the first constituent
};

// Which check a descriptor failed; kOk if none. Each maps to one rule.
enum class DescError : uint8_t {
  kOk,
  kHeader,           // shorter than the header and endpoint array
  kEpCount,          // no receiver, or more than kMaxReceivers
  kEpMemSize,        // v1.1+: endpoint descriptor size below 16 or not a multiple of 16
  kEpMemOffset,      // v1.1+: endpoint array offset inside the header, misaligned or past the fragment
  kReserved,         // a reserved header/endpoint/composite field is not zero
  kHandle,           // handle field not zero on transmission
  kCompositeOffset,  // composite offset 0, misaligned, not after the endpoints, past the fragment, or differing
  kRangeCount,       // no constituent, or the array does not fit the total length
  kLength,           // total length is not the end of the constituent array
  kTotalPages,       // total page count differs from the sum of the constituents (or wraps 32 bits)
  kPageCount,        // a constituent of 0 pages
  kAddrAlign,        // a constituent address not 4K-aligned
  kAddrOverflow,     // a constituent whose end passes 2^64
  kOverlap,          // two constituents overlap
  kConstituentReserved,  // a constituent's reserved field not zero
  kSender,           // sender is not the caller
  kReceiver,         // receiver unknown, repeated or the sender
  kPerms,            // permissions not allowed for the transaction
  kAttrs,            // memory attributes not allowed for the transaction
  kFlags,            // transaction flags with reserved bits or zero-memory on a share
  kEmadFlags,        // endpoint flags with reserved bits
};
const char* desc_error_name(DescError e);
RuleId desc_error_rule(DescError e);

// Where DEN0077, as the reference SPMCs read it, leaves a Relayer a choice
// the model's own checks do not take (SPEC.md DESC:EP-MEM-SIZE, DESC:ATTRS,
// DESC:FLAGS): other answers, each an error code under its rule. A
// descriptor the checks accept may also be refused with any of them, and
// nothing changes; one they refuse may be refused with any of them as well
// as with the checks' own code.
struct DescLeeway {
  static constexpr uint32_t kMax = 8;
  struct Alt {
    RuleId rule = kNoRule;
    int32_t code = 0;
  };
  Alt alt[kMax];
  uint32_t n = 0;
  void add(RuleId r, int32_t code) {
    for (uint32_t i = 0; i < n; ++i)
      if (alt[i].rule == r && alt[i].code == code) return;
    if (n < kMax) alt[n++] = {r, code};
  }
  void merge(const DescLeeway& o) {
    for (uint32_t i = 0; i < o.n; ++i) add(o.alt[i].rule, o.alt[i].code);
  }
  void clear() { n = 0; }
};

// Reads the header, endpoint array and composite header from frag (the first
// fragment, frag.size() bytes) of a descriptor of total_len bytes. Structural
// checks only (offsets, sizes, reserved fields); see check_semantics.
// transmission: the descriptor goes to the Relayer (handle MBZ); false for a
// retrieve response, which carries the handle.
// lenient (PROFILE:PERMISSIVE-EL3, an SPMC reading as a lax implementation
// might): an endpoint count of 0 is read as one endpoint descriptor (the one
// at the array offset, as a single-borrower reader that never checks the
// count would), and (v1.1+) an endpoint array offset inside the header is
// taken as given (16-byte aligned, in the fragment); every other check stays.
// leeway (if given) gets the answers DESC:EP-MEM-SIZE leaves open: an
// endpoint descriptor larger than the negotiated version's may be refused.
DescError parse_region(std::span<const uint8_t> frag, uint32_t total_len, Layout l, MemRegion* out,
                       bool transmission = true, bool lenient = false, DescLeeway* leeway = nullptr);
// Reads constituent i (0-based) of a region whose constituents start at
// ranges_off within buf (a whole, reassembled descriptor).
bool read_constituent(std::span<const uint8_t> buf, uint64_t off, Constituent* out);

// The first fault of one constituent on its own (reserved MBZ, zero pages,
// 4K alignment, an end past 2^64; SPEC.md DESC:MBZ, PAGES, ALIGN, OVERFLOW),
// kOk if none. Every check of a constituent list starts here.
DescError constituent_error(const Constituent& c);

// Checks of the region's fields against the transaction: caller, receivers,
// permissions, attributes and flags. known(id) says whether id is a receiver
// the Relayer knows. leeway (if given) gets what DESC:ATTRS and DESC:FLAGS
// leave open: DENIED besides INVALID_PARAMETERS for memory attributes a
// Relayer refuses, a refusal of Normal memory that is not write-back inner
// shareable, of the time-slicing flag.
DescError check_semantics(const MemRegion& r, MemKind kind, uint16_t caller,
                          bool (*known)(uint16_t id, const void* ctx), const void* ctx,
                          DescLeeway* leeway = nullptr);

// Checks the constituent array of a whole descriptor: counts, total, alignment,
// overflow, overlap. On success fills ranges[0..range_count).
DescError check_ranges(std::span<const uint8_t> buf, const MemRegion& r, uint32_t total_len,
                       Constituent* ranges);

// --- Building (used by the harness op tx_mem_desc, by targets and by tests) ---
inline constexpr uint64_t kAuto = ~0ull;

struct DescSpec {
  Layout layout = Layout::kV11;
  uint16_t sender = kHostId;
  uint32_t n_receivers = 1;
  Receiver receivers[kMaxReceivers] = {{0x8001, kPermDataRw, 0, 0, 0}};
  uint16_t attributes = kAttrNormalWbInner;
  uint32_t flags = 0;
  uint64_t tag = 0;
  uint64_t handle = 0;
  uint32_t n_ranges = 0;
  const Constituent* ranges = nullptr;
  // Overrides of derived fields (kAuto: computed).
  uint64_t total_pages = kAuto;
  uint64_t composite_off = kAuto;
  uint64_t ep_count = kAuto;
  uint64_t range_count = kAuto;
  uint64_t ep_mem_size = kAuto;
};
// Size of the descriptor build_region would write.
uint64_t region_size(const DescSpec& spec);
// Writes the descriptor into out; returns the bytes written, or 0 if it does
// not fit (nothing useful is written then).
uint64_t build_region(const DescSpec& spec, std::span<uint8_t> out);
// Writes n 16-byte constituent descriptors (address, pages, reserved).
uint64_t build_constituents(const Constituent* ranges, uint32_t n, std::span<uint8_t> out);

}  // namespace kconform::ffa
