// FF-A constants the FF-A model speaks in: function IDs, status codes, version
// encoding, descriptor field values (DEN0077 v1.1/v1.2, DEN0140; RECLAIM2 from
// the v1.3 cover letter). Taken from the specification, never from a kernel tree.
#pragma once

#include <cstdint>

namespace kconform::ffa {

// --- Function IDs (DEN0077 v1.2 Table 13.x "Function IDs"; SMC32 0x84000060+n, SMC64 0xC4000060+n)
inline constexpr uint32_t kFnError = 0x84000060;
inline constexpr uint32_t kFnSuccess32 = 0x84000061;
inline constexpr uint32_t kFnSuccess64 = 0xC4000061;
inline constexpr uint32_t kFnInterrupt = 0x84000062;
inline constexpr uint32_t kFnVersion = 0x84000063;
inline constexpr uint32_t kFnFeatures = 0x84000064;
inline constexpr uint32_t kFnRxRelease = 0x84000065;
inline constexpr uint32_t kFnRxtxMap32 = 0x84000066;
inline constexpr uint32_t kFnRxtxMap64 = 0xC4000066;
inline constexpr uint32_t kFnRxtxUnmap = 0x84000067;
inline constexpr uint32_t kFnPartitionInfoGet = 0x84000068;
inline constexpr uint32_t kFnIdGet = 0x84000069;
inline constexpr uint32_t kFnMsgPoll = 0x8400006A;
inline constexpr uint32_t kFnMsgWait = 0x8400006B;
inline constexpr uint32_t kFnYield = 0x8400006C;
inline constexpr uint32_t kFnRun = 0x8400006D;
inline constexpr uint32_t kFnMsgSend = 0x8400006E;
inline constexpr uint32_t kFnDirectReq32 = 0x8400006F;
inline constexpr uint32_t kFnDirectReq64 = 0xC400006F;
inline constexpr uint32_t kFnDirectResp32 = 0x84000070;
inline constexpr uint32_t kFnDirectResp64 = 0xC4000070;
inline constexpr uint32_t kFnMemDonate32 = 0x84000071;
inline constexpr uint32_t kFnMemDonate64 = 0xC4000071;
inline constexpr uint32_t kFnMemLend32 = 0x84000072;
inline constexpr uint32_t kFnMemLend64 = 0xC4000072;
inline constexpr uint32_t kFnMemShare32 = 0x84000073;
inline constexpr uint32_t kFnMemShare64 = 0xC4000073;
inline constexpr uint32_t kFnMemRetrieveReq32 = 0x84000074;
inline constexpr uint32_t kFnMemRetrieveReq64 = 0xC4000074;
inline constexpr uint32_t kFnMemRetrieveResp = 0x84000075;
inline constexpr uint32_t kFnMemRelinquish = 0x84000076;
inline constexpr uint32_t kFnMemReclaim = 0x84000077;
inline constexpr uint32_t kFnMemOpPause = 0x84000078;
inline constexpr uint32_t kFnMemOpResume = 0x84000079;
inline constexpr uint32_t kFnMemFragRx = 0x8400007A;
inline constexpr uint32_t kFnMemFragTx = 0x8400007B;
inline constexpr uint32_t kFnNormalWorldResume = 0x8400007C;
inline constexpr uint32_t kFnNotificationBitmapCreate = 0x8400007D;
inline constexpr uint32_t kFnNotificationInfoGet64 = 0xC4000083;
inline constexpr uint32_t kFnRxAcquire = 0x84000084;
inline constexpr uint32_t kFnSpmIdGet = 0x84000085;
inline constexpr uint32_t kFnMsgSend2 = 0x84000086;
inline constexpr uint32_t kFnMemPermGet32 = 0x84000088;
inline constexpr uint32_t kFnMemPermSet32 = 0x84000089;
inline constexpr uint32_t kFnPartitionInfoGetRegs = 0xC400008B;
inline constexpr uint32_t kFnDirectReq2 = 0xC400008D;
inline constexpr uint32_t kFnDirectResp2 = 0xC400008E;
inline constexpr uint32_t kFnMemReclaim2 = 0xC4000091;  // cover letter: "FFA_MEM_RECLAIM2 (0xC4000091)"

// SMCCC function-ID fields (SMCCC v1.4 §2.5): bit 31 fast call, bit 30 SMC64,
// bits [29:24] owning entity (4 = standard secure service), bits [15:0] number.
inline constexpr bool is_smc64(uint64_t fid) { return (fid >> 30) & 1; }
inline constexpr uint32_t fn_num(uint64_t fid) { return fid & 0xffff; }
// FF-A function numbers are 0x60..0x7F (v1.0) extended up to 0x91 (v1.3); a
// call is an FF-A call when it is a fast standard-service call in that range.
// SMCCC v1.3 §2.5: bit 16 of a function ID is the caller's hint that it holds
// no live SVE state; the function called is the ID with the bit clear (SPEC.md
// SMCCC:HINT). Linux sets it on its SMCCC calls (smccc-call.S).
inline constexpr uint64_t kSmcccSveHint = 1u << 16;
inline constexpr uint64_t without_hint(uint64_t x0) { return x0 & ~kSmcccSveHint; }
inline constexpr bool is_ffa_fid(uint64_t fid) {
  return (fid >> 32) == 0 && ((fid >> 24) & 0xbf) == 0x84 && ((fid >> 16) & 0xff) == 0 &&
         fn_num(fid) >= 0x60 && fn_num(fid) <= 0xff;
}

// --- Status codes (DEN0077 v1.2 Table 12.x "Error status codes")
inline constexpr int32_t kNotSupported = -1;
// SMCCC: w0 of the answer to a function ID no service implements (SMC_UNK, -1).
inline constexpr uint32_t kSmcUnk = 0xffffffffu;
inline constexpr int32_t kInvalidParameters = -2;
inline constexpr int32_t kNoMemory = -3;
inline constexpr int32_t kBusy = -4;
inline constexpr int32_t kInterrupted = -5;
inline constexpr int32_t kDenied = -6;
inline constexpr int32_t kRetry = -7;
inline constexpr int32_t kAborted = -8;
inline constexpr int32_t kNoData = -9;
const char* error_name(int32_t code);

// --- Versions (DEN0077 §13.2 FFA_VERSION: bit 31 MBZ, [30:16] major, [15:0] minor)
inline constexpr uint32_t version(uint32_t major, uint32_t minor) { return major << 16 | minor; }
inline constexpr uint32_t kVersion10 = version(1, 0);
inline constexpr uint32_t kVersion11 = version(1, 1);
inline constexpr uint32_t kVersion12 = version(1, 2);
inline constexpr uint32_t version_major(uint32_t v) { return (v >> 16) & 0x7fff; }
inline constexpr uint32_t version_minor(uint32_t v) { return v & 0xffff; }

// --- Granule and endpoints
inline constexpr uint64_t kFfaPage = 4096;  // DEN0077: memory is described in 4K pages
inline constexpr uint16_t kHostId = 0;      // pKVM: the host is the only NS endpoint, ID 0
inline constexpr uint16_t kSpmcId = 0x8000; // ours: the SPMC's ID (bit 15: secure world)
inline constexpr uint64_t kInvalidHandle = ~0ull;  // FFA_MEMORY_HANDLE_INVALID (DEN0077 §10.x)

// --- Memory region attributes (DEN0077 v1.1 Table 10.18), 16 bits in v1.1+, 8 in v1.0
inline constexpr uint16_t kAttrTypeMask = 3u << 4;
inline constexpr uint16_t kAttrTypeNotSpecified = 0u << 4;
inline constexpr uint16_t kAttrTypeDevice = 1u << 4;
inline constexpr uint16_t kAttrTypeNormal = 2u << 4;
inline constexpr uint16_t kAttrCacheMask = 3u << 2;
inline constexpr uint16_t kAttrCacheNonCacheable = 1u << 2;
inline constexpr uint16_t kAttrCacheWriteBack = 3u << 2;
inline constexpr uint16_t kAttrShareMask = 3u;
inline constexpr uint16_t kAttrShareNon = 0, kAttrShareOuter = 2, kAttrShareInner = 3;
inline constexpr uint16_t kAttrNormalWbInner = kAttrTypeNormal | kAttrCacheWriteBack | kAttrShareInner;

// --- Memory access permissions (DEN0077 v1.1 Table 10.15)
inline constexpr uint8_t kPermDataMask = 3u, kPermDataRo = 1u, kPermDataRw = 2u;
inline constexpr uint8_t kPermInstrMask = 3u << 2, kPermInstrNx = 1u << 2, kPermInstrX = 2u << 2;

// --- Memory transaction flags on transmission (DEN0077 v1.1 Table 10.21)
inline constexpr uint32_t kFlagZeroMemory = 1u << 0;
inline constexpr uint32_t kFlagTimeSlice = 1u << 1;
// --- FFA_MEM_RECLAIM flags (DEN0077 v1.1 §13.x FFA_MEM_RECLAIM w3)
inline constexpr uint32_t kReclaimZero = 1u << 0;
inline constexpr uint32_t kReclaimTimeSlice = 1u << 1;

// Transaction kinds.
enum class MemKind : uint8_t { kNone = 0, kShare = 1, kLend = 2, kDonate = 3 };

}  // namespace kconform::ffa
