// The registers of an FF-A call, in the words of the specification: a call
// passes x0..x7 (the function ID in w0), an SMC32 callee reads only the W
// halves (SMCCC §2.6), a memory handle travels as two 32-bit halves, and a
// result names the registers it defines. Header-only, no allocation.
#pragma once

#include <cstdint>

#include "harness/scenario/ffa_spec.h"

namespace kconform::ffa {

inline constexpr uint32_t kNumRegs = 18;  // x0..x17 of an SMC (SMCCC v1.2)
inline constexpr uint32_t kCallRegs = 8;  // x0..x7: what an FF-A call and its result use

// The low 32 bits of an X register: its W register.
inline constexpr uint64_t kW32 = 0xffffffffull;
// The one narrowing of the model: the W register of x.
inline constexpr uint32_t w32(uint64_t x) { return static_cast<uint32_t>(x); }

// A memory handle from its two 32-bit halves (low in the first register).
inline constexpr uint64_t handle_of(uint64_t lo, uint64_t hi) { return (lo & kW32) | (hi & kW32) << 32; }
inline constexpr uint32_t handle_lo(uint64_t h) { return w32(h); }
inline constexpr uint32_t handle_hi(uint64_t h) { return w32(h >> 32); }

// SMCCC bit 30: the SMC64 form of a function ID (SMC32 form with it clear).
inline constexpr uint32_t kSmc64Bit = 1u << 30;

// The argument registers of a call as the callee reads them: x0 is the
// function ID (its W register), and an SMC32 call's upper halves are zero.
struct CallArgs {
  uint64_t x[kCallRegs] = {};

  // Narrows the caller's registers as the callee sees them; upper_halves is
  // set when an SMC32 call carried bits the callee ignores (SMCCC:32).
  static CallArgs of(const uint64_t in[kCallRegs], bool* upper_halves = nullptr) {
    CallArgs a;
    const uint32_t fid = w32(in[0]);
    bool upper = false;
    for (uint32_t i = 0; i < kCallRegs; ++i) {
      a.x[i] = is_smc64(fid) ? in[i] : in[i] & kW32;
      upper |= i > 0 && !is_smc64(fid) && (in[i] >> 32);
    }
    a.x[0] = fid;
    if (upper_halves) *upper_halves = upper;
    return a;
  }

  // The registers the handlers read by name (RECLAIM2 reads its own by the
  // table's indices, reclaim2_abi.h).
  uint32_t fid() const { return w32(x[0]); }
  uint64_t x1() const { return x[1]; }
  uint64_t x2() const { return x[2]; }
  uint64_t x3() const { return x[3]; }
  uint32_t w1() const { return w32(x[1]); }
  uint32_t w2() const { return w32(x[2]); }
  uint32_t w3() const { return w32(x[3]); }
  uint32_t w4() const { return w32(x[4]); }
  uint32_t w5() const { return w32(x[5]); }
  // w1/w2: the handle of FFA_MEM_FRAG_TX, FFA_MEM_RECLAIM, FFA_MEM_FRAG_RX.
  uint64_t handle() const { return handle_of(x[1], x[2]); }
};

// Result registers an allowed outcome defines (bit i: x_i must match).
inline constexpr uint8_t kX0 = 1u << 0, kX1 = 1u << 1, kX2 = 1u << 2, kX3 = 1u << 3;

// The function ID in x0 of a result or a call.
inline constexpr uint32_t fid_of(const uint64_t regs[]) { return w32(regs[0]); }

// SPMC:HANDLE-SPEC: the registers of reply (a bit per x0..x7) that carry the
// handle an SPMC chose for a new transaction, where reply is the first reply
// of a send (call: FFA_MEM_SHARE/LEND/DONATE, SMC32 or SMC64): w2/w3 of
// FFA_SUCCESS, w1/w2 of FFA_MEM_FRAG_RX. 0 for any other call or reply.
// The call's SVE hint does not change the call (SMCCC:HINT).
inline constexpr uint8_t new_handle_regs(const uint64_t call[], const uint64_t reply[]) {
  const uint32_t f = w32(without_hint(call[0])) & ~kSmc64Bit;
  if (f != kFnMemShare32 && f != kFnMemLend32 && f != kFnMemDonate32) return 0;
  if (fid_of(reply) == kFnSuccess32 || reply[0] == kFnSuccess64) return kX2 | kX3;
  if (fid_of(reply) == kFnMemFragRx) return kX1 | kX2;
  return 0;
}

}  // namespace kconform::ffa
