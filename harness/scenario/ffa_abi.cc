// The FF-A op table: names, argument kinds and defaults, and what the fuzz
// engines need (EngineHints).
#include "harness/scenario/ffa_abi.h"

#include "harness/scenario/abi.h"
#include "harness/scenario/ffa_spec.h"

namespace kconform::ffa {
namespace {

constexpr NamedValue kConv[] = {{"SMC64", kConvSmc64}, {"SMC32", kConvSmc32}};
constexpr NamedValue kLayouts[] = {{"V1_0", kLayoutV10}, {"V1_1", kLayoutV11}, {"V1_2", kLayoutV12}};
constexpr NamedValue kVersions[] = {
    {"V1_0", kVersion10}, {"V1_1", kVersion11}, {"V1_2", kVersion12}, {"V1_3", version(1, 3)}};
constexpr NamedValue kPerms[] = {
    {"RO", kPermDataRo}, {"RW", kPermDataRw}, {"NX", kPermInstrNx}, {"X", kPermInstrX}};
constexpr NamedValue kAttrs[] = {{"NORMAL_WB_INNER", kAttrNormalWbInner},
                                 {"NORMAL_WB_OUTER", kAttrTypeNormal | kAttrCacheWriteBack | kAttrShareOuter},
                                 {"NORMAL_NC_INNER", kAttrTypeNormal | kAttrCacheNonCacheable | kAttrShareInner},
                                 {"DEVICE", kAttrTypeDevice},
                                 {"UNSPECIFIED", 0}};
constexpr NamedValue kMemFlags[] = {{"ZERO", kFlagZeroMemory}, {"TIME_SLICE", kFlagTimeSlice}};
constexpr NamedValue kReclaimFlags[] = {{"ZERO", kReclaimZero}, {"TIME_SLICE", kReclaimTimeSlice}};
constexpr NamedValue kAuto[] = {{"auto", kArgAuto}};
constexpr NamedValue kReceiver2[] = {{"none", kNoReceiver}};
constexpr NamedValue kSp[] = {{"SP1", 0x8001}, {"SP2", 0x8002}};
constexpr NamedValue kFaults[] = {{"ERROR", static_cast<uint64_t>(Fault::kError)},
                                  {"FRAG_LEN", static_cast<uint64_t>(Fault::kFragLen)},
                                  {"BOGUS_DESC", static_cast<uint64_t>(Fault::kBogusDesc)},
                                  {"SHORT_COUNT", static_cast<uint64_t>(Fault::kShortCount)},
                                  {"LONG_COUNT", static_cast<uint64_t>(Fault::kLongCount)},
                                  {"RESP_TOTAL_LEN", static_cast<uint64_t>(Fault::kRespTotalLen)},
                                  {"CHUNK_FRAG_LEN", static_cast<uint64_t>(Fault::kChunkFragLen)},
                                  {"CHUNK_FID", static_cast<uint64_t>(Fault::kChunkFid)},
                                  {"FRAG_STALL", static_cast<uint64_t>(Fault::kFragStall)},
                                  {"RESP_COMPOSITE_OFF", static_cast<uint64_t>(Fault::kRespCompositeOff)},
                                  {"RESP_RANGE_COUNT", static_cast<uint64_t>(Fault::kRespRangeCount)},
                                  {"RESP_EMAD_OFF", static_cast<uint64_t>(Fault::kRespEmadOff)},
                                  {"RESP_CONSTITUENT", static_cast<uint64_t>(Fault::kRespConstituent)},
                                  {"MAX_FRAG", static_cast<uint64_t>(Fault::kMaxFrag)},
                                  {"FRAG_RX_OFFSET", static_cast<uint64_t>(Fault::kFragRxOffset)},
                                  {"FRAG_RX_HANDLE", static_cast<uint64_t>(Fault::kFragRxHandle)},
                                  {"FRAG_RX_RESERVED", static_cast<uint64_t>(Fault::kFragRxReserved)},
                                  {"EARLY_SUCCESS", static_cast<uint64_t>(Fault::kEarlySuccess)},
                                  {"FRAG_RX_WHOLE", static_cast<uint64_t>(Fault::kFragRxWhole)},
                                  {"PART_COUNT", static_cast<uint64_t>(Fault::kPartCount)},
                                  {"PART_SIZE", static_cast<uint64_t>(Fault::kPartSize)}};
constexpr NamedValue kFids[] = {
    {"VERSION", kFnVersion},          {"FEATURES", kFnFeatures},
    {"RX_RELEASE", kFnRxRelease},     {"RXTX_MAP_32", kFnRxtxMap32},
    {"RXTX_MAP_64", kFnRxtxMap64},    {"RXTX_UNMAP", kFnRxtxUnmap},
    {"PARTITION_INFO_GET", kFnPartitionInfoGet}, {"ID_GET", kFnIdGet},
    {"MEM_DONATE_32", kFnMemDonate32}, {"MEM_DONATE_64", kFnMemDonate64},
    {"MEM_LEND_32", kFnMemLend32},    {"MEM_LEND_64", kFnMemLend64},
    {"MEM_SHARE_32", kFnMemShare32},  {"MEM_SHARE_64", kFnMemShare64},
    {"MEM_RETRIEVE_REQ_32", kFnMemRetrieveReq32}, {"MEM_RETRIEVE_REQ_64", kFnMemRetrieveReq64},
    {"MEM_RETRIEVE_RESP", kFnMemRetrieveResp}, {"MEM_RELINQUISH", kFnMemRelinquish},
    {"MEM_RECLAIM", kFnMemReclaim},   {"MEM_FRAG_RX", kFnMemFragRx},
    {"MEM_FRAG_TX", kFnMemFragTx},    {"MEM_RECLAIM2", kFnMemReclaim2},
    {"SPM_ID_GET", kFnSpmIdGet},      {"DIRECT_REQ_32", kFnDirectReq32},
    {"RX_ACQUIRE", kFnRxAcquire},     {"MEM_PERM_GET", kFnMemPermGet32},
};

constexpr ArgSpec kHandleArg{"handle", ArgKind::kSlot, kHandleRes};
constexpr ArgSpec kHandleXor{"handle_xor", ArgKind::kInt, -1, {}, true, 0};
constexpr ArgSpec kAutoLen(const char* name) { return {name, ArgKind::kInt, -1, kAuto, true, kArgAuto}; }
constexpr ArgSpec kOpt(const char* name, uint64_t dflt = 0) { return {name, ArgKind::kInt, -1, {}, true, dflt}; }

constexpr ArgSpec kVersionArgs[] = {{"version", ArgKind::kEnum, -1, kVersions, true, kVersion12}};
constexpr ArgSpec kFeaturesArgs[] = {{"id", ArgKind::kEnum, -1, kFids}, kOpt("props")};
constexpr ArgSpec kPartInfoArgs[] = {kOpt("uuid0"), kOpt("uuid1"), kOpt("uuid2"), kOpt("uuid3"), kOpt("flags")};
constexpr ArgSpec kMapArgs[] = {{"tx", ArgKind::kInt},
                                {"rx", ArgKind::kInt},
                                {"pages", ArgKind::kInt},
                                {"conv", ArgKind::kEnum, -1, kConv, true, kConvSmc64}};
constexpr ArgSpec kIdArgs[] = {kOpt("id")};
constexpr ArgSpec kTxWriteArgs[] = {{"offset", ArgKind::kInt}, {"data", ArgKind::kBytes}};
constexpr ArgSpec kTxMemDescArgs[] = {
    {"layout", ArgKind::kEnum, -1, kLayouts, true, kLayoutV12},
    kOpt("sender", kHostId),
    {"receiver", ArgKind::kEnum, -1, kSp, true, 0x8001},
    {"perms", ArgKind::kFlags, -1, kPerms, true, kPermDataRw},
    {"receiver2", ArgKind::kEnum, -1, kReceiver2, true, kNoReceiver},
    {"perms2", ArgKind::kFlags, -1, kPerms, true, kPermDataRw},
    {"attrs", ArgKind::kEnum, -1, kAttrs, true, kAttrNormalWbInner},
    {"flags", ArgKind::kFlags, -1, kMemFlags, true, 0},
    kOpt("tag"),
    {"ranges", ArgKind::kBytes},
    kAutoLen("total_pages"),
    kAutoLen("composite_off"),
    kAutoLen("ep_count"),
    kAutoLen("range_count"),
    kAutoLen("ep_mem_size"),
    kOpt("offset"),
};
constexpr ArgSpec kTxConstituentsArgs[] = {{"offset", ArgKind::kInt}, {"ranges", ArgKind::kBytes}, kOpt("reserved")};
constexpr ArgSpec kSendArgs[] = {kAutoLen("total_len"), kAutoLen("frag_len"), kOpt("addr"), kOpt("pages"),
                                 {"conv", ArgKind::kEnum, -1, kConv, true, kConvSmc64}};
constexpr ArgSpec kFragTxArgs[] = {kHandleArg, {"frag_len", ArgKind::kInt}, kOpt("sender")};
constexpr ArgSpec kReclaimArgs[] = {kHandleArg, {"flags", ArgKind::kFlags, -1, kReclaimFlags, true, 0}, kHandleXor};
constexpr ArgSpec kReclaim2Args[] = {kHandleArg,
                                     {"flags", ArgKind::kFlags, -1, kReclaimFlags, true, 0},
                                     kOpt("offset"),
                                     {"count", ArgKind::kInt},
                                     kOpt("page_index"),
                                     {"total_pages", ArgKind::kInt},
                                     kHandleXor};
constexpr ArgSpec kRawArgs[] = {{"fid", ArgKind::kEnum, -1, kFids}, kOpt("x1"), kOpt("x2"), kOpt("x3"),
                                kOpt("x4"), kOpt("x5"), kOpt("x6"), kOpt("x7")};
constexpr ArgSpec kMisbehaveArgs[] = {{"kind", ArgKind::kEnum, -1, kFaults}, kOpt("value")};
constexpr ArgSpec kSpArgs[] = {kHandleArg, {"sp", ArgKind::kEnum, -1, kSp, true, 0x8001}};
constexpr ArgSpec kEl3ProfileArgs[] = {{"permissive", ArgKind::kInt}};
constexpr ArgSpec kHostMemArgs[] = {{"addr", ArgKind::kInt}, {"pages", ArgKind::kInt}, {"value", ArgKind::kInt}};

constexpr OpSpec kOps[] = {
    {"version", kVersionArgs, -1, "FFA_VERSION"},
    {"features", kFeaturesArgs, -1, "FFA_FEATURES of a function ID"},
    {"id_get", {}, -1, "FFA_ID_GET"},
    {"partition_info_get", kPartInfoArgs, -1, "FFA_PARTITION_INFO_GET (uuid words, flags)"},
    {"rxtx_map", kMapArgs, -1, "FFA_RXTX_MAP of the host's TX/RX buffers (4K page count)"},
    {"rxtx_unmap", kIdArgs, -1, "FFA_RXTX_UNMAP"},
    {"rx_release", kIdArgs, -1, "FFA_RX_RELEASE"},
    {"tx_write", kTxWriteArgs, -1, "harness: write bytes into the host TX buffer at offset"},
    {"tx_mem_desc", kTxMemDescArgs, -1, "harness: write a memory transaction descriptor into the host TX buffer"},
    {"tx_constituents", kTxConstituentsArgs, -1, "harness: write constituent descriptors into the host TX buffer"},
    {"mem_share", kSendArgs, kHandleRes, "FFA_MEM_SHARE of the descriptor in TX"},
    {"mem_lend", kSendArgs, kHandleRes, "FFA_MEM_LEND of the descriptor in TX"},
    {"mem_donate", kSendArgs, kHandleRes, "FFA_MEM_DONATE of the descriptor in TX"},
    {"mem_frag_tx", kFragTxArgs, -1, "FFA_MEM_FRAG_TX: the next fragment, in TX"},
    {"mem_reclaim", kReclaimArgs, -1, "FFA_MEM_RECLAIM of a handle (xor handle_xor)"},
    {"mem_reclaim2", kReclaim2Args, -1, "FFA_MEM_RECLAIM2 of a handle with constituents in TX"},
    {"raw", kRawArgs, -1, "any SMC: function ID and x1..x7"},
    {"el3_misbehave", kMisbehaveArgs, -1, "harness: the SPMC misbehaves once"},
    {"sp_retrieve", kSpArgs, -1, "harness: the borrower retrieves the memory at the SPMC"},
    {"sp_relinquish", kSpArgs, -1, "harness: the borrower relinquishes the memory at the SPMC"},
    {"el3_profile", kEl3ProfileArgs, -1,
     "harness: permissive=1 makes the SPMC accept what the relayer must refuse (sender, overlap, pages in use)"},
    {"host_fill", kHostMemArgs, -1, "harness: fill 4K pages of host memory with byte value"},
    {"host_count", kHostMemArgs, -1, "harness: how many bytes of 4K pages of host memory equal value"},
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kOpCount);

constexpr const char* kResources[] = {"handle"};
constexpr NamedValue kCaps[] = {{"reclaim2", 0}, {"page_4k", 1}, {"page_16k", 2}, {"page_64k", 3}};

// Addresses of the host's memory (0x80000000..), SP IDs, function IDs, sizes.
constexpr uint64_t kFuzzValues[] = {
    0x80000000, 0x80001000, 0x80004000, 0x80008000, 0x80010000, 0x80014000, 0x80020000, 0x8003f000,
    0x80040000, 0x800ff000, 0x80100000, 0x8001, 0x8002, 0x8003, 0x8000, 0x10000, 0x10000001, 0x0fffffff,
    0x84000060, 0xC4000091, 0x84000077, 0xC4000073, 0xC4000072, 0x8400007B, 0x10001, 0x20002, 0x30000,
    0x2f, 0x24, 0x10, 0xf0, 0x70, 0x60,
    // TX offsets at the end of a one-page mailbox (4K, 16K): less one and two
    // 16-byte constituent descriptors (FF-A v1.3 Table 5.16), and 8 bytes short.
    0xfe0, 0xff0, 0xff8, 0x3fe0, 0x3ff0, 0x3ff8};
// ranges byte strings: (address u64, pages u32) records (kRangeRecordBytes),
// around the host memory the scenarios share, 1..8 pages.
constexpr RecordField kRangeRecord[] = {{8, 0x80010000, 0x4000, 16}, {4, 1, 1, 7}};
static_assert(8 + 4 == kRangeRecordBytes);

// Where the fuzzers start (EngineHints::starters): generic uses of the memory
// calls, valid at host PAGE_SIZE 4K and 16K. pKVM's mailbox is one host page
// (FFA.MBOX.MAP_SIZE), so each maps TX/RX of one 4K page, then of one 16K page:
// the second map is refused at 4K (a pair is mapped), the first at 16K (the
// size). Regions of 16 4K pages at 64K-aligned addresses, every page index a
// multiple of 16K. Regions: A = 0x80020000, B = 0x80030000; a ranges record is
// (address u64, 4K pages u32), little endian.
constexpr const char* kStarters[] = {
    // Share A, reclaim it (FFA_MEM_SHARE, FFA_MEM_RECLAIM). The first: what an
    // empty fuzz input runs.
    "version\n"
    "rxtx_map tx=0x80000000 rx=0x80010000 pages=1\n"
    "rxtx_map tx=0x80000000 rx=0x80010000 pages=4\n"
    "tx_mem_desc ranges=hex:000002800000000010000000\n"
    "mem_share\n"
    "mem_reclaim handle=0\n",
    // Share A, then FFA_MEM_RECLAIM2 of all of it: one constituent descriptor in
    // TX at offset 0 (w4), count 1 (w5), first page index 0 (x6), total pages 16 (w7).
    "version\n"
    "rxtx_map tx=0x80000000 rx=0x80010000 pages=1\n"
    "rxtx_map tx=0x80000000 rx=0x80010000 pages=4\n"
    "tx_mem_desc ranges=hex:000002800000000010000000\n"
    "mem_share\n"
    "tx_constituents offset=0 ranges=hex:000002800000000010000000\n"
    "mem_reclaim2 handle=0 count=1 total_pages=16\n",
    // Lend A and B, then reclaim them in two FFA_MEM_RECLAIM2 calls: the second
    // half of B (page index 8 of one descriptor), then A and the first half of B
    // (two descriptors at TX offset 32, zero before reclaim: allowed on a lend).
    "version\n"
    "rxtx_map tx=0x80000000 rx=0x80010000 pages=1\n"
    "rxtx_map tx=0x80000000 rx=0x80010000 pages=4\n"
    "tx_mem_desc attrs=UNSPECIFIED ranges=hex:000002800000000010000000000003800000000010000000\n"
    "mem_lend\n"
    "tx_constituents offset=0 ranges=hex:000003800000000010000000\n"
    "mem_reclaim2 handle=0 count=1 page_index=8 total_pages=16\n"
    "tx_constituents offset=32 ranges=hex:000002800000000010000000000003800000000008000000\n"
    "mem_reclaim2 handle=0 flags=ZERO offset=32 count=2 total_pages=24\n",
    // Share A and B in two fragments (FFA_MEM_FRAG_RX, FFA_MEM_FRAG_TX), then
    // reclaim: a v1.1 descriptor's first 96 bytes (header 48, endpoint 16,
    // composite 16, A's constituent 16), then B's constituent alone.
    "version version=V1_1\n"
    "rxtx_map tx=0x80000000 rx=0x80010000 pages=1\n"
    "rxtx_map tx=0x80000000 rx=0x80010000 pages=4\n"
    "tx_mem_desc layout=V1_1 ranges=hex:000002800000000010000000000003800000000010000000\n"
    "mem_share frag_len=96\n"
    "tx_constituents offset=0 ranges=hex:000003800000000010000000\n"
    "mem_frag_tx handle=0 frag_len=16\n"
    "mem_reclaim handle=0\n",
};

// FFA_MEM_RECLAIM2's w4 is the TX offset of its constituent descriptors, which
// the harness writes with tx_constituents (EngineHints::ties).
constexpr ArgTie kTies[] = {{"mem_reclaim2", "offset", "tx_constituents", "offset"}};

constexpr EngineHints kEngine{
    .values = kFuzzValues,
    .record = kRangeRecord,
    .max_records = 3,
    .starters = kStarters,
    .ties = kTies,
    .fuzz_max_ops = 48,  // a memory call needs about five ops of set-up
};

}  // namespace

extern const AbiSpec kFfaAbi;
const AbiSpec kFfaAbi{Abi::kFfa, "ffa", kOps, kResources, kCaps, kEngine};

}  // namespace kconform::ffa
