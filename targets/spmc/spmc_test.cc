// TF-A's EL3 SPMC (the tree's unmodified sources, targets/spmc) driven at the
// register level through spmc_smc_handler(): a share's lifetime, refusals,
// quirks of this SPMC, and exact snapshot/restore.
//
// Expected values come from the FF-A specification (DEN0077 v1.1/v1.2, ABI
// sections named as in the document: "FFA_MEM_SHARE", "FFA_MEM_RECLAIM", ...;
// descriptor layouts from its memory-management chapter, table numbers as in
// harness/scenario/ffa_spec.h, v1.1 numbering, to be re-checked against the
// PDF) and from the clauses of models/ffa/SPEC.md (SPMC:RECLAIM, ...). Never
// from TF-A: a test that restates TF-A's code could not fail. Where this SPMC
// does something the specification does not ask for, the test says "quirk":
// it documents behaviour, it is not a requirement.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "harness/scenario/ffa_spec.h"
#include "targets/spmc/kc_spmc_hooks.h"

namespace {

using namespace kconform::ffa;

constexpr uint16_t kSpId = 0x8001;      // the SP's ID: bit 15 set, a secure endpoint
constexpr uint16_t kNsId = 0;           // the normal world's endpoint (the sender)
constexpr uint64_t kPage = 4096;

// Mailboxes: one page each, host memory (the SPMC maps NS buffers PA == VA).
alignas(4096) uint8_t ns_tx[kPage], ns_rx[kPage], sp_tx[kPage], sp_rx[kPage];

struct Regs {
  uint64_t x[KC_SPMC_NREGS] = {};
  int status = KC_SPMC_OK;
  uint32_t w(int i) const { return static_cast<uint32_t>(x[i]); }
};

Regs smc(int origin, uint64_t x0, uint64_t x1 = 0, uint64_t x2 = 0, uint64_t x3 = 0, uint64_t x4 = 0,
         uint64_t x5 = 0, uint64_t x6 = 0, uint64_t x7 = 0) {
  const uint64_t in[KC_SPMC_NREGS] = {x0, x1, x2, x3, x4, x5, x6, x7};
  Regs r;
  r.status = kc_spmc_smc(origin, in, r.x);
  return r;
}
Regs ns(uint64_t x0, uint64_t x1 = 0, uint64_t x2 = 0, uint64_t x3 = 0, uint64_t x4 = 0) {
  return smc(KC_SPMC_FROM_NS, x0, x1, x2, x3, x4);
}
Regs sp(uint64_t x0, uint64_t x1 = 0, uint64_t x2 = 0, uint64_t x3 = 0, uint64_t x4 = 0) {
  return smc(KC_SPMC_FROM_SP, x0, x1, x2, x3, x4);
}

// FFA_ERROR (DEN0077 "FFA_ERROR", SPEC.md CALL:ERROR): w0 = 0x84000060, w2 =
// the error code.
void expect_error(const Regs& r, int32_t code) {
  EXPECT_EQ(r.status, KC_SPMC_OK);
  EXPECT_EQ(r.w(0), kFnError);
  EXPECT_EQ(static_cast<int32_t>(r.w(2)), code);
}

template <typename T>
void put(uint8_t* b, size_t off, T v) { std::memcpy(b + off, &v, sizeof v); }
template <typename T>
T get(const uint8_t* b, size_t off) { T v; std::memcpy(&v, b + off, sizeof v); return v; }

// A v1.1 memory transaction descriptor (DEN0077 v1.1 "Memory transaction
// descriptor", 48 bytes: sender @0, attributes @2, flags @4, handle @8, tag @16,
// endpoint descriptor size @24, count @28, array offset @32, 12 reserved bytes)
// with one endpoint memory access descriptor (16 bytes: receiver @0,
// permissions @2, flags @3, composite offset @4, reserved @8) at 48, and
// optionally the composite memory region descriptor (total pages @0, range
// count @4, reserved @8) at 64 with n constituents (address @0, pages @8,
// reserved @12; 16 bytes each), one 4K page each.
uint32_t transaction(uint8_t* b, uint64_t handle, uint16_t attrs, uint32_t n_cons, uint64_t base) {
  const uint32_t len = 48 + 16 + (n_cons ? 16 + 16 * n_cons : 0);
  std::memset(b, 0, len);
  put<uint16_t>(b, 0, kNsId);
  put<uint16_t>(b, 2, attrs);
  put<uint64_t>(b, 8, handle);
  put<uint32_t>(b, 24, 16);
  put<uint32_t>(b, 28, 1);
  put<uint32_t>(b, 32, 48);
  put<uint16_t>(b, 48, kSpId);
  b[50] = kPermDataRw;
  put<uint32_t>(b, 52, n_cons ? 64 : 0);
  if (n_cons) {
    put<uint32_t>(b, 64, n_cons);
    put<uint32_t>(b, 68, n_cons);
    for (uint32_t i = 0; i < n_cons; i++) {
      put<uint64_t>(b, 80 + 16 * i, base + 2 * kPage * i);
      put<uint32_t>(b, 88 + 16 * i, 1);
    }
  }
  return len;
}
uint32_t share_desc(uint8_t* b, uint32_t n_cons, uint64_t base) {
  return transaction(b, 0, kAttrNormalWbInner, n_cons, base);
}
// The borrower's retrieve request (DEN0077 v1.1 "FFA_MEM_RETRIEVE_REQ": a
// memory transaction descriptor naming the handle and the receiver), with no
// composite of its own (offset 0): the borrower takes the regions as sent.
uint32_t retrieve_desc(uint8_t* b, uint64_t handle) { return transaction(b, handle, kAttrNormalWbInner, 0, 0); }
// DEN0077 v1.1 "Descriptor to relinquish a memory region": handle @0, flags @8,
// endpoint count @12, endpoint IDs from @16.
uint32_t relinquish_desc(uint8_t* b, uint64_t handle) {
  std::memset(b, 0, 32);
  put<uint64_t>(b, 0, handle);
  put<uint32_t>(b, 12, 1);
  put<uint16_t>(b, 16, kSpId);
  return 18;
}

uint64_t handle_of(uint32_t lo, uint32_t hi) { return lo | (uint64_t{hi} << 32); }

std::vector<uint8_t> save() {
  std::vector<uint8_t> s(kc_spmc_snapshot_size());
  EXPECT_EQ(kc_spmc_snapshot_save(s.data(), s.size()), s.size());
  return s;
}
std::vector<uint8_t> piece(int p) {
  std::vector<uint8_t> b(kc_spmc_piece_bytes(p, nullptr));
  kc_spmc_piece_bytes(p, b.data());
  return b;
}

// One SPMC per process (its state is global): booted once, then every test
// starts from the snapshot taken after the normal world and the SP set up
// their mailboxes.
class Spmc : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!base().empty()) return;
    kc_spmc_config cfg{kSpId, kVersion11, {0x12345678, 0x9abcdef0, 0x11111111, 0x22222222}};
    ASSERT_EQ(kc_spmc_init(&cfg), 0) << "spmc_setup() failed";
    // FFA_VERSION (DEN0077 "FFA_VERSION"): the callee answers its own version
    // in w0, bit 31 clear, the same major version as the caller's.
    Regs v = ns(kFnVersion, kVersion11);
    ASSERT_EQ(v.w(0) >> 31, 0u);
    ASSERT_EQ(version_major(v.w(0)), 1u);
    ASSERT_GE(version_minor(v.w(0)), 1u);
    // FFA_RXTX_MAP (DEN0077 "FFA_RXTX_MAP"): x1 TX, x2 RX, w3 page count; FFA_SUCCESS.
    ASSERT_EQ(ns(kFnRxtxMap64, uintptr_t(ns_tx), uintptr_t(ns_rx), 1).w(0), kFnSuccess32);
    ASSERT_EQ(sp(kFnRxtxMap64, uintptr_t(sp_tx), uintptr_t(sp_rx), 1).w(0), kFnSuccess32);
    ASSERT_EQ(kc_spmc_counters.locks_held, 0);
    base() = save();
  }
  static std::vector<uint8_t>& base() { static std::vector<uint8_t> b; return b; }

  void SetUp() override {
    ASSERT_FALSE(base().empty());
    kc_spmc_restore_skip = 0;
    kc_spmc_snapshot_load(base().data(), base().size());
    for (uint8_t* m : {ns_tx, ns_rx, sp_tx, sp_rx}) std::memset(m, 0, kPage);
  }
  void TearDown() override {
    EXPECT_EQ(kc_spmc_counters.locks_held, 0) << "a lock was left held";
    kc_spmc_restore_skip = 0;
  }

  // FFA_MEM_SHARE in one fragment (DEN0077 "FFA_MEM_SHARE": w1 total length,
  // w2 fragment length, x3 buffer address 0 = TX, w4 page count MBZ then);
  // success is FFA_SUCCESS with the handle in w2 (low) and w3 (high).
  uint64_t share(uint32_t n_cons, uint64_t base_addr) {
    uint32_t len = share_desc(ns_tx, n_cons, base_addr);
    Regs r = ns(kFnMemShare64, len, len);
    EXPECT_EQ(r.w(0), kFnSuccess32);
    return handle_of(r.w(2), r.w(3));
  }
};

// --- the lifetime -------------------------------------------------------------

TEST_F(Spmc, ShareOneFragmentRetrieveRelinquishReclaim) {
  const uint32_t len = share_desc(ns_tx, 1, 0x880000000);
  const uint32_t bad_return = kc_spmc_counters.bad_return;
  Regs r = ns(kFnMemShare64, len, len);
  ASSERT_EQ(r.w(0), kFnSuccess32);
  EXPECT_EQ(kc_spmc_counters.bad_return, bad_return) << "SMC_RET did not return the context";
  const uint64_t h = handle_of(r.w(2), r.w(3));
  EXPECT_NE(h, kInvalidHandle);
  EXPECT_GT(kc_spmc_shmem_allocated(), 0u);

  // The borrower retrieves (DEN0077 "FFA_MEM_RETRIEVE_REQ": w1 total, w2
  // fragment length; "FFA_MEM_RETRIEVE_RESP": w1 total length, w2 fragment
  // length of the descriptor now in the borrower's RX).
  const uint32_t rlen = retrieve_desc(sp_tx, h);
  r = sp(kFnMemRetrieveReq64, rlen, rlen);
  ASSERT_EQ(r.w(0), kFnMemRetrieveResp);
  EXPECT_GE(r.w(1), 48u + 16 + 16 + 16);  // header, one receiver, composite, one constituent
  EXPECT_EQ(r.w(2), r.w(1));              // it fits one fragment
  EXPECT_EQ(get<uint16_t>(sp_rx, 0), kNsId);      // sender
  EXPECT_EQ(get<uint64_t>(sp_rx, 8), h);          // handle
  EXPECT_EQ(get<uint32_t>(sp_rx, 28), 1u);        // one receiver
  const uint32_t ep = get<uint32_t>(sp_rx, 32);
  EXPECT_EQ(get<uint16_t>(sp_rx, ep), kSpId);
  const uint32_t comp = get<uint32_t>(sp_rx, ep + 4);
  ASSERT_GT(comp, 0u);
  ASSERT_LE(comp + 32, r.w(2));
  EXPECT_EQ(get<uint32_t>(sp_rx, comp), 1u);              // total pages
  EXPECT_EQ(get<uint32_t>(sp_rx, comp + 4), 1u);          // one range
  EXPECT_EQ(get<uint64_t>(sp_rx, comp + 16), 0x880000000u);
  EXPECT_EQ(get<uint32_t>(sp_rx, comp + 24), 1u);

  // While the borrower holds it, the owner cannot reclaim (SPEC.md
  // SPMC:RECLAIM; DEN0077 "FFA_MEM_RECLAIM": DENIED while a borrower has not
  // relinquished access). Nothing changes.
  expect_error(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0), kDenied);

  // FFA_RX_RELEASE (DEN0077): the borrower gives its RX back; FFA_SUCCESS.
  EXPECT_EQ(sp(kFnRxRelease).w(0), kFnSuccess32);
  // FFA_MEM_RELINQUISH (DEN0077): the descriptor in the borrower's TX; FFA_SUCCESS.
  relinquish_desc(sp_tx, h);
  EXPECT_EQ(sp(kFnMemRelinquish).w(0), kFnSuccess32);

  // FFA_MEM_RECLAIM (DEN0077: w1/w2 handle low/high, w3 flags): FFA_SUCCESS,
  // and the handle is gone: a second reclaim names no transaction
  // (INVALID_PARAMETERS, SPEC.md SPMC:RECLAIM).
  r = ns(kFnMemReclaim, uint32_t(h), h >> 32, 0);
  EXPECT_EQ(r.w(0), kFnSuccess32);
  EXPECT_EQ(kc_spmc_shmem_allocated(), 0u);
  expect_error(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0), kInvalidParameters);
}

TEST_F(Spmc, ShareInTwoFragments) {
  // The first fragment is the header and the receiver (64 of 112 bytes).
  const uint32_t total = share_desc(ns_tx, 2, 0x890000000);
  ASSERT_EQ(total, 112u);
  Regs r = ns(kFnMemShare64, total, 64);
  // DEN0077 "FFA_MEM_FRAG_RX" (SPEC.md MEM:FRAGMENT): the Relayer asks for the
  // next fragment: w1/w2 the handle (low/high), w3 the bytes received so far;
  // w4 carries a hypervisor sender's ID in [31:16], reserved bits MBZ: 0 here.
  ASSERT_EQ(r.w(0), kFnMemFragRx);
  EXPECT_EQ(r.w(3), 64u);
  EXPECT_EQ(r.w(4), uint32_t{kNsId} << 16);
  const uint64_t h = handle_of(r.w(1), r.w(2));
  EXPECT_NE(h, kInvalidHandle);
  // Incomplete, so not reclaimable yet (SPEC.md SPMC:RECLAIM: no complete
  // transaction of the caller has that handle).
  expect_error(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0), kInvalidParameters);

  // DEN0077 "FFA_MEM_FRAG_TX" (SPEC.md MEM:FRAGMENT): w1/w2 handle, w3 fragment
  // length, w4 0 from the host; the last fragment completes it: FFA_SUCCESS,
  // handle in w2/w3.
  std::memmove(ns_tx, ns_tx + 64, total - 64);
  r = ns(kFnMemFragTx, uint32_t(h), h >> 32, total - 64, 0);
  ASSERT_EQ(r.w(0), kFnSuccess32);
  EXPECT_EQ(handle_of(r.w(2), r.w(3)), h);

  // Retrieved whole: both constituents.
  const uint32_t rlen = retrieve_desc(sp_tx, h);
  r = sp(kFnMemRetrieveReq64, rlen, rlen);
  ASSERT_EQ(r.w(0), kFnMemRetrieveResp);
  const uint32_t comp = get<uint32_t>(sp_rx, get<uint32_t>(sp_rx, 32) + 4);
  EXPECT_EQ(get<uint32_t>(sp_rx, comp), 2u);
  EXPECT_EQ(get<uint32_t>(sp_rx, comp + 4), 2u);
  EXPECT_EQ(get<uint64_t>(sp_rx, comp + 32), 0x890000000u + 2 * kPage);
  EXPECT_EQ(sp(kFnRxRelease).w(0), kFnSuccess32);
  relinquish_desc(sp_tx, h);
  EXPECT_EQ(sp(kFnMemRelinquish).w(0), kFnSuccess32);
  EXPECT_EQ(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0).w(0), kFnSuccess32);
  EXPECT_EQ(kc_spmc_shmem_allocated(), 0u);
}

TEST_F(Spmc, ReclaimWithoutRetrieve) {
  const uint64_t h = share(1, 0x8a0000000);
  EXPECT_EQ(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0).w(0), kFnSuccess32);
}

// --- refusals -----------------------------------------------------------------

TEST_F(Spmc, ReclaimOfAnUnknownHandleIsInvalidParameters) {
  // SPEC.md SPMC:RECLAIM: a handle that names no complete transaction of the
  // caller: INVALID_PARAMETERS (DEN0077 "FFA_MEM_RECLAIM" errors).
  expect_error(ns(kFnMemReclaim, 0x1234, 0x5678, 0), kInvalidParameters);
  const uint64_t h = share(1, 0x8b0000000);
  expect_error(ns(kFnMemReclaim, uint32_t(h + 1), (h + 1) >> 32, 0), kInvalidParameters);
  EXPECT_EQ(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0).w(0), kFnSuccess32);
}

TEST_F(Spmc, ReclaimFlagsBeyondTheDefinedBitsAreRefused) {
  // DEN0077 "FFA_MEM_RECLAIM" w3: bit 0 zero before reclaim, bit 1 time
  // slicing, [31:2] reserved MBZ: a set reserved bit is INVALID_PARAMETERS and
  // the transaction stays.
  const uint64_t h = share(1, 0x8c0000000);
  expect_error(ns(kFnMemReclaim, uint32_t(h), h >> 32, 1u << 2), kInvalidParameters);
  EXPECT_EQ(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0).w(0), kFnSuccess32);
}

TEST_F(Spmc, ShareFromTheSecureSideIsRefused) {
  // A send with a buffer of its own (x3/w4; SPEC.md MEM:ARGS: the own-buffer
  // form may be refused, INVALID_PARAMETERS or NOT_SUPPORTED), and the same
  // descriptor sent by the SP, whose sender field (0, the normal world) is not
  // the caller (DESC:SENDER: INVALID_PARAMETERS): refused, nothing allocated.
  const uint32_t len = share_desc(ns_tx, 1, 0x8d0000000);
  expect_error(ns(kFnMemShare64, len, len, uintptr_t(ns_tx), 1), kInvalidParameters);
  expect_error(sp(kFnMemShare64, len, len), kInvalidParameters);
  EXPECT_EQ(kc_spmc_shmem_allocated(), 0u);
}

TEST_F(Spmc, VersionWithBit31SetIsNotSupported) {
  // DEN0077 "FFA_VERSION" (SPEC.md VERSION:FORMAT): bit 31 of w1 MBZ; the
  // callee answers NOT_SUPPORTED in w0, not an FFA_ERROR frame.
  Regs r = ns(kFnVersion, 0x80010001);
  EXPECT_EQ(static_cast<int32_t>(r.w(0)), kNotSupported);
}

// --- quirks of this SPMC (they document behaviour, not a requirement) ---------

TEST_F(Spmc, QuirkShareFromAVersion12CallerIsRefused) {
  // Quirk: TF-A 2.12's EL3 SPMC answers FFA_VERSION with 1.2 but its
  // FFA_MEM_SHARE accepts only callers that negotiated 1.0 or 1.1; v1.2 keeps
  // v1.1's descriptor layout, so the spec gives no reason to refuse.
  ASSERT_EQ(version_minor(ns(kFnVersion, kVersion12).w(0)), 2u);
  const uint32_t len = share_desc(ns_tx, 1, 0x8e0000000);
  expect_error(ns(kFnMemShare64, len, len), kInvalidParameters);
  EXPECT_EQ(kc_spmc_shmem_allocated(), 0u);
}

TEST_F(Spmc, QuirkDonateIsNotSupported) {
  // Quirk (allowed: DEN0077, a callee returns NOT_SUPPORTED for a function it
  // does not implement): no FFA_MEM_DONATE.
  const uint32_t len = share_desc(ns_tx, 1, 0x8f0000000);
  expect_error(ns(kFnMemDonate64, len, len), kNotSupported);
}

TEST_F(Spmc, Bl31RoutesOnlyWhatItsIsFfaFidTakes) {
  // SPMC:ROUTED. BL31 hands the SPMC only fast standard-service calls with
  // bits [23:17] clear whose number is_ffa_fid() takes (TF-A 2.12.1:
  // 0x60-0x8E); anything else is SMC_UNK in x0, x1-x7 as passed, and never
  // reaches the SPMC (on QEMU, TF-A answers FFA_MEM_RECLAIM2 this way).
  EXPECT_EQ(kc_spmc_ffa_fnum_max(), 0x8eu);
  const uint32_t unrouted = kc_spmc_counters.unrouted;
  for (const uint64_t fid : {uint64_t{kFnMemReclaim2}, uint64_t{kFnMemReclaim2 & ~(1u << 30)},
                             uint64_t{0xC400008F}, uint64_t{kFnVersion} | (1u << 17),
                             uint64_t{kFnVersion & ~(1u << 31)}, uint64_t{0xC5000070}}) {
    const Regs r = smc(KC_SPMC_FROM_NS, fid, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77);
    EXPECT_EQ(r.status, KC_SPMC_OK) << std::hex << fid;
    EXPECT_EQ(r.x[0], ~0ull) << std::hex << fid;
    for (int i = 1; i < KC_SPMC_NREGS; ++i) EXPECT_EQ(r.x[i], 0x11u * i) << std::hex << fid << " x" << i;
  }
  EXPECT_EQ(kc_spmc_counters.unrouted, unrouted + 6);
  // The highest number it routes still reaches the SPMC, as does a call with
  // the SVE hint bit (16), which BL31 masks off: FFA_VERSION answers.
  EXPECT_NE(ns(0x8400008E).x[0], ~0ull);
  EXPECT_EQ(ns(kFnVersion | (1u << 16), 0x10001).w(0), ns(kFnVersion, 0x10001).w(0));
  EXPECT_EQ(kc_spmc_counters.unrouted, unrouted + 6);
}

TEST_F(Spmc, QuirkRetrieveFromTheNormalWorldIsRefused) {
  // Quirk: the hypervisor retrieve request (SPEC.md SPMC:HYP-RETRIEVE), which
  // pKVM sends before every reclaim, is refused: INVALID_PARAMETERS.
  const uint64_t h = share(1, 0x900000000);
  std::memset(ns_tx, 0, 48);
  put<uint64_t>(ns_tx, 8, h);
  expect_error(ns(kFnMemRetrieveReq64, 48, 48), kInvalidParameters);
}

TEST_F(Spmc, QuirkReclaimSuccessLeavesTheCallersRegisters) {
  // Quirk: FFA_SUCCESS of FFA_MEM_RECLAIM writes w0 only (SMC_RET1): x1-x7
  // come back as the caller left them, where DEN0077 has them reserved (MBZ).
  const uint64_t h = share(1, 0x910000000);
  Regs r = ns(kFnMemReclaim, uint32_t(h), h >> 32, 0);
  ASSERT_EQ(r.w(0), kFnSuccess32);
  EXPECT_EQ(r.x[1], uint32_t(h));
  EXPECT_EQ(r.x[2], h >> 32);
}

// --- the harness boundary -----------------------------------------------------

TEST_F(Spmc, AFailedAssertEndsTheCallAsFatal) {
  // spmc_main.c asserts that an SP's FFA_VERSION matches its manifest; a
  // failed assert() ends the call (as panic() ends EL3) and the harness
  // restores the state.
  const uint32_t fatal = kc_spmc_counters.fatal;
  Regs r = sp(kFnVersion, kVersion12);
  EXPECT_EQ(r.status, KC_SPMC_FATAL);
  EXPECT_EQ(kc_spmc_counters.fatal, fatal + 1);
}

TEST_F(Spmc, APlatformRefusalOfReclaimIsPassedOnAndUnlocks) {
  // The stand-in's platform hook (FVP's plat_spmc_shmem_reclaim returns 0)
  // set to refuse: the SPMC passes the refusal on as FFA_ERROR, releases its
  // locks on that path (TearDown checks) and the transaction stays.
  const uint64_t h = share(1, 0x920000000);
  kc_spmc_knobs.plat_reclaim_ret = kDenied;
  expect_error(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0), kDenied);
  kc_spmc_knobs.plat_reclaim_ret = 0;
  EXPECT_EQ(kc_spmc_counters.locks_held, 0);
  EXPECT_EQ(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0).w(0), kFnSuccess32);
}

TEST_F(Spmc, APlatformRefusalOfShareLeavesNoTransaction) {
  // The other platform hook (plat_spmc_shmem_begin) set to refuse: the send
  // fails with that error (SPEC.md CALL:ERROR: FFA_ERROR, the code in w2) and
  // leaves no transaction behind: the datastore is empty again.
  kc_spmc_knobs.plat_begin_ret = kNoMemory;
  const uint32_t len = share_desc(ns_tx, 1, 0x930000000);
  Regs r = ns(kFnMemShare64, len, len);
  kc_spmc_knobs.plat_begin_ret = 0;
  expect_error(r, kNoMemory);
  EXPECT_EQ(kc_spmc_shmem_allocated(), 0u);
  // The same share then succeeds.
  const uint64_t h = share(1, 0x930000000);
  EXPECT_EQ(ns(kFnMemReclaim, uint32_t(h), h >> 32, 0).w(0), kFnSuccess32);
}

TEST_F(Spmc, SnapshotNeedsRoom) {
  std::vector<uint8_t> small(kc_spmc_snapshot_size() - 1);
  EXPECT_EQ(kc_spmc_snapshot_save(small.data(), small.size()), 0u);
}

// --- exact restore --------------------------------------------------------------

// A scenario touching every piece of the state: a share retrieved and
// reclaimed, one left in flight (fragmented), one left complete, a send that
// allocates and then fails (its bytes stay behind the datastore's used
// prefix), a fatal call, and the counters.
void scenario() {
  uint32_t len = share_desc(ns_tx, 1, 0xa00000000);
  Regs r = ns(kFnMemShare64, len, len);
  const uint64_t h = handle_of(r.w(2), r.w(3));
  const uint32_t rlen = retrieve_desc(sp_tx, h);
  sp(kFnMemRetrieveReq64, rlen, rlen);
  sp(kFnRxRelease);
  relinquish_desc(sp_tx, h);
  sp(kFnMemRelinquish);
  ns(kFnMemReclaim, uint32_t(h), h >> 32, 0);
  len = share_desc(ns_tx, 2, 0xa10000000);
  ns(kFnMemShare64, len, 64);  // in flight
  len = share_desc(ns_tx, 3, 0xa20000000);
  ns(kFnMemShare64, len, len);  // complete, left live
  len = share_desc(ns_tx, 1, 0xa30000000);
  put<uint32_t>(ns_tx, 28, 0);  // no receiver: refused after allocation
  ns(kFnMemShare64, len, len);
  sp(kFnVersion, kVersion12);  // fatal
  ns(kFnVersion, kVersion12);
}

TEST_F(Spmc, RestoreIsExact) {
  const std::vector<uint8_t> snap = save();
  const auto tree = piece(KC_SPMC_PIECE_TREE), glue = piece(KC_SPMC_PIECE_GLUE),
             ds = piece(KC_SPMC_PIECE_DATASTORE);
  ASSERT_GT(tree.size(), 0u);
  ASSERT_GT(glue.size(), 0u);
  scenario();
  // The scenario changed every piece (else this test could not fail).
  EXPECT_NE(piece(KC_SPMC_PIECE_TREE), tree);
  EXPECT_NE(piece(KC_SPMC_PIECE_GLUE), glue);
  EXPECT_NE(piece(KC_SPMC_PIECE_DATASTORE), ds);
  kc_spmc_snapshot_load(snap.data(), snap.size());
  EXPECT_TRUE(piece(KC_SPMC_PIECE_TREE) == tree) << "the tree's statics differ after restore";
  EXPECT_TRUE(piece(KC_SPMC_PIECE_GLUE) == glue) << "the glue's statics differ after restore";
  EXPECT_TRUE(piece(KC_SPMC_PIECE_DATASTORE) == ds) << "the datastore differs after restore";
}

TEST_F(Spmc, RestoreLeavingOutAnyPieceIsCaught) {
  for (int skip : {KC_SPMC_PIECE_TREE, KC_SPMC_PIECE_GLUE, KC_SPMC_PIECE_DATASTORE}) {
    SCOPED_TRACE(skip);
    kc_spmc_restore_skip = 0;
    kc_spmc_snapshot_load(base().data(), base().size());
    const std::vector<uint8_t> snap = save();
    const auto before = piece(skip);
    scenario();
    kc_spmc_restore_skip = skip;
    kc_spmc_snapshot_load(snap.data(), snap.size());
    EXPECT_NE(piece(skip), before);
  }
  kc_spmc_restore_skip = 0;
  kc_spmc_snapshot_load(base().data(), base().size());
}

TEST_F(Spmc, RestoredSpmcBehavesAsBefore) {
  // The same share after a restore gets the same handle and the same answer.
  const std::vector<uint8_t> snap = save();
  const uint64_t h1 = share(1, 0xb00000000);
  scenario();
  kc_spmc_snapshot_load(snap.data(), snap.size());
  const uint64_t h2 = share(1, 0xb00000000);
  EXPECT_EQ(h1, h2);
  EXPECT_EQ(ns(kFnMemReclaim, uint32_t(h2), h2 >> 32, 0).w(0), kFnSuccess32);
}

}  // namespace
