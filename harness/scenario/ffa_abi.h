// FF-A ABI (host calls through pKVM's EL2 proxy, plus harness ops): op codes,
// argument positions and named values, as used by the FF-A model (models/ffa)
// and the EL2 target. The table that gives them names and kinds is in
// ffa_abi.cc; models/ffa/SPEC.md (HARNESS:*) says what each harness op does.
#pragma once

#include <cstdint>

namespace kconform::ffa {

// The el3_fault op's argument (the SPMC model implements them, models/ffa/spmc.cc):
// One-shot misbehaviour, applied to the next memory-management SMC (function
// numbers 0x71-0x7B and RECLAIM2) for which it is meaningful.
enum class Fault : uint8_t {
  kNone = 0,
  kError = 1,       // return FFA_ERROR(value) without doing anything
  kFragLen = 2,     // report fragment length `value` in the next RETRIEVE_RESP / FRAG_TX
  kBogusDesc = 3,   // the next descriptor written to RX has constituent 0 at address `value`
  kShortCount = 4,  // the next RECLAIM2 reclaims and reports only `value` pages (if fewer than asked)
  kLongCount = 5,   // the next RECLAIM2 reports `value` pages more than it reclaimed
  // The reclaim path's retrieve response (models/ffa/SPEC.md HARNESS:EL3). Chunk k of
  // a response: k = 0 the RETRIEVE_RESP, k >= 1 the k-th FRAG_TX answering FRAG_RX.
  kRespTotalLen = 6,       // the next RETRIEVE_RESP reports total length `value` (w1)
  kChunkFragLen = 7,       // chunk value[63:32] reports fragment length value[31:0] (w2 / FRAG_TX w3)
  kChunkFid = 8,           // chunk value[63:32] is answered with function ID value[31:0] (x0)
  kFragStall = 9,          // from chunk `value` (>= 1) of the next response on, FRAG_TX reports length 0, no progress
  kRespCompositeOff = 10,  // the next response's endpoint 0 composite offset is `value`
  kRespRangeCount = 11,    // the next response's composite address-range count is `value`
  kRespEmadOff = 12,       // the next response's endpoint-array offset (v1.1+ header) is `value`
  kRespConstituent = 13,   // the next response's constituent value[63:48] is at address value[47:0]
  kMaxFrag = 14,           // not a lie, persistent: responses in chunks of at most `value` bytes (0: a mailbox)
  // 20-29: replies on the send path and to FFA_PARTITION_INFO_GET (SPEC.md
  // HARNESS:EL3). EL3's state is what the call really did; only its reply lies.
  kFragRxOffset = 20,    // the next FFA_MEM_FRAG_RX answering SHARE/LEND/FRAG_TX says offset `value`
  kFragRxHandle = 21,    // ... names the handle XOR `value`
  kFragRxReserved = 22,  // ... has `value` in the reserved (MBZ) w5
  kEarlySuccess = 23,    // the next FFA_MEM_FRAG_RX answering SHARE/LEND/FRAG_TX is FFA_SUCCESS(handle) instead
  kFragRxWhole = 24,     // the next FFA_SUCCESS answering SHARE/LEND/FRAG_TX is FFA_MEM_FRAG_RX(handle, `value`)
  kPartCount = 25,       // the next FFA_PARTITION_INFO_GET that writes RX reports count `value`
  kPartSize = 26,        // ... reports descriptor size `value`
};


// Resource kinds (slot namespaces).
enum Resource : int { kHandleRes = 0 };

// Op codes, in table order. Arguments are listed as "a0, a1, ...".
enum OpCode : uint8_t {
  kOpVersion = 0,         // version
  kOpFeatures = 1,        // id, props
  kOpIdGet = 2,           //
  kOpPartitionInfo = 3,   // uuid0, uuid1, uuid2, uuid3, flags
  kOpRxtxMap = 4,         // tx, rx, pages, conv
  kOpRxtxUnmap = 5,       // id
  kOpRxRelease = 6,       // id
  kOpTxWrite = 7,         // offset, data                        (harness: bytes into host TX)
  kOpTxMemDesc = 8,       // layout, sender, receiver, perms, receiver2, perms2, attrs, flags, tag,
                          // ranges, total_pages, composite_off, ep_count, range_count, ep_mem_size, offset
  kOpTxConstituents = 9,  // offset, ranges, reserved             (harness)
  kOpMemShare = 10,       // total_len, frag_len, addr, pages, conv   -> handle
  kOpMemLend = 11,        // total_len, frag_len, addr, pages, conv   -> handle
  kOpMemDonate = 12,      // total_len, frag_len, addr, pages, conv   -> handle
  kOpMemFragTx = 13,      // handle, frag_len, sender
  kOpMemReclaim = 14,     // handle, flags, handle_xor
  kOpMemReclaim2 = 15,    // handle, flags, offset, count, page_index, total_pages, handle_xor
  kOpRaw = 16,            // fid, x1 .. x7
  kOpEl3Misbehave = 17,   // kind, value                          (harness: arms the SPMC)
  kOpSpRetrieve = 18,     // handle, sp                           (harness: borrower at the SPMC)
  kOpSpRelinquish = 19,   // handle, sp
  kOpEl3Profile = 20,     // permissive                           (harness: the SPMC's profile from here on)
  kOpHostFill = 21,       // addr, pages, value                   (harness: bytes into host memory)
  kOpHostCount = 22,      // addr, pages, value                   (harness: how many bytes equal value)
  kOpCount
};

// tx_mem_desc layouts (the descriptor format of FF-A v1.0, v1.1, v1.2).
inline constexpr uint64_t kLayoutV10 = 0, kLayoutV11 = 1, kLayoutV12 = 2;
// Calling convention of calls that have both.
inline constexpr uint64_t kConvSmc64 = 0, kConvSmc32 = 1;
// "Compute it" for derived fields and lengths.
inline constexpr uint64_t kArgAuto = ~0ull;
// receiver2 absent.
inline constexpr uint64_t kNoReceiver = 0x10000;
// ranges byte strings: records of (address u64 LE, pages u32 LE), 12 bytes each.
inline constexpr uint64_t kRangeRecordBytes = 12;

// Capabilities a scenario can require (Scenario::requires_caps bits).
enum Capability : uint32_t {
  kCapReclaim2 = 1u << 0,  // the handler implements FFA_MEM_RECLAIM2
  kCapPage4k = 1u << 1,    // host PAGE_SIZE 4K
  kCapPage16k = 1u << 2,   // 16K
  kCapPage64k = 1u << 3,   // 64K
};

}  // namespace kconform::ffa
