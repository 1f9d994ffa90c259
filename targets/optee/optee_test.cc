// OP-TEE's S-EL1 SPMC (the tree's unmodified thread_spmc.c and mobj_ffa.c,
// targets/optee) driven at the register level through thread_spmc_msg_recv():
// a share lands in OP-TEE's table, OP-TEE borrows it, refusals, and exact
// snapshot/restore.
//
// Expected values come from the FF-A specification (DEN0077 v1.1/v1.2; ABI
// sections named as in the document) and models/ffa/SPEC.md. Where OP-TEE
// does something the specification leaves to the implementation, the test says
// "OP-TEE's choice" and names the source; it documents behaviour.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "harness/scenario/ffa_spec.h"
#include "targets/optee/kc_optee_hooks.h"

namespace {

using namespace kconform::ffa;

constexpr uint16_t kOpteeId = 0x8001;   // OP-TEE's endpoint (thread_spmc.c: my_endpoint_id from FFA_ID_GET + 1)
constexpr uint16_t kSpmcId = 0x8000;    // the SPMC's ID (kc_optee_glue.c's FFA_ID_GET)
constexpr uint16_t kSpmdId = 0xffff;    // the SPMD (FFA_SPM_ID_GET)
constexpr uint16_t kNsId = 0x0001;      // a Normal-world endpoint (the sender)
constexpr uint64_t kPage = 4096;
constexpr uint64_t kTx = KC_NS_RAM_PA, kRx = KC_NS_RAM_PA + kPage;
constexpr uint64_t kShared = KC_NS_RAM_PA + 16 * kPage;
constexpr uint32_t kFrameworkVersionReq = (1u << 31) | 0x8;   // DEN0077 v1.2 "framework message", FFA_VERSION request
constexpr uint32_t kOpteeUnregisterShm = 3;                  // OP-TEE's ABI (optee_ffa.h), a direct request

struct Regs {
  kc_optee_regs r{};
  int status = 0;
  uint32_t w(int i) const { return static_cast<uint32_t>(r.a[i]); }
  uint64_t handle() const { return r.a[2] | (r.a[3] << 32); }
};

Regs smc(uint64_t x0, uint64_t x1 = 0, uint64_t x2 = 0, uint64_t x3 = 0, uint64_t x4 = 0, uint64_t x5 = 0) {
  Regs r;
  r.r.a[0] = x0; r.r.a[1] = x1; r.r.a[2] = x2; r.r.a[3] = x3; r.r.a[4] = x4; r.r.a[5] = x5;
  r.status = kc_optee_smc(&r.r);
  return r;
}

void expect_error(const Regs& r, int32_t code) {
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.w(0), kFnError);
  EXPECT_EQ(static_cast<int32_t>(r.w(2)), code);
}

template <typename T>
void put(uint8_t* b, size_t off, T v) { std::memcpy(b + off, &v, sizeof v); }

// A v1.1 memory transaction descriptor (DEN0077 v1.1 "Memory transaction
// descriptor", 48 bytes: sender @0, attributes @2, flags @4, handle @8, tag @16,
// endpoint descriptor size @24, count @28, array offset @32) with one endpoint
// memory access descriptor (16 bytes: receiver @0, permissions @2, flags @3,
// composite offset @4) at 48 and the composite memory region descriptor
// (total pages @0, range count @4) at 64 with one constituent (address @0,
// pages @8).
uint32_t transaction(uint16_t receiver, uint16_t attrs, uint64_t base, uint32_t pages) {
  auto* b = static_cast<uint8_t*>(kc_optee_ns(kTx));
  const uint32_t len = 48 + 16 + 16 + 16;
  std::memset(b, 0, kPage);
  put<uint16_t>(b, 0, kNsId);
  put<uint16_t>(b, 2, attrs);
  put<uint32_t>(b, 24, 16);
  put<uint32_t>(b, 28, 1);
  put<uint32_t>(b, 32, 48);
  put<uint16_t>(b, 48, receiver);
  put<uint8_t>(b, 50, 0x2);            // read-write (DEN0077 "Memory access permissions")
  put<uint32_t>(b, 52, 64);
  put<uint32_t>(b, 64, pages);
  put<uint32_t>(b, 68, 1);
  put<uint64_t>(b, 80, base);
  put<uint32_t>(b, 88, pages);
  return len;
}
// Normal memory, write-back cacheable, inner shareable (DEN0077 "Memory region attributes").
constexpr uint16_t kNormalWbIs = 0x2f;

std::vector<uint64_t> g_pages(4096);
std::vector<kc_optee_obj> table() {
  std::vector<kc_optee_obj> t(64);
  size_t np = 0;
  t.resize(kc_optee_table(t.data(), t.size(), g_pages.data(), g_pages.size(), &np));
  return t;
}

class Optee : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    constexpr uint64_t kBytes = KC_NS_RAM_PAGES * kPage;
    ASSERT_EQ(kc_optee_init(KC_NS_RAM_PA, kBytes, KC_NS_RAM_PA, kBytes), 0);
    // The Normal world's FFA_VERSION reaches an S-EL1 SPMC as the SPMD's
    // framework message (DEN0077 v1.2 "FFA_VERSION" forwarded by the SPMD).
    Regs v = smc(kFnDirectReq32, (uint64_t{kSpmdId} << 16) | kSpmcId, kFrameworkVersionReq, 0x10001);
    ASSERT_EQ(v.w(0), kFnDirectResp32);
    ASSERT_EQ(v.w(3), 0x10002u);   // OP-TEE answers v1.2 (thread_spmc.c: my_version)
    ASSERT_EQ(smc(kFnRxtxMap64, kTx, kRx, 1).w(0), kFnSuccess32);
    base = kc_optee_snapshot_save();
  }
  void SetUp() override { kc_optee_snapshot_load(base); }
  static kc_optee_snapshot* base;
};
kc_optee_snapshot* Optee::base = nullptr;

TEST_F(Optee, ShareLandsInTheTable) {
  ASSERT_TRUE(table().empty());
  uint32_t len = transaction(kOpteeId, kNormalWbIs, kShared, 2);
  Regs r = smc(kFnMemShare64, len, len);
  ASSERT_EQ(r.w(0), kFnSuccess32);
  // OP-TEE's choice of handle (SPEC.md SPMC:HANDLE-SPEC): index | BIT(44), the
  // "allocated by the SPMC, non-secure" bit (mobj_ffa.c, ffa.h FFA_MEMORY_HANDLE_NON_SECURE_BIT).
  EXPECT_EQ(r.handle() >> 44, 1u);
  auto t = table();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].cookie, r.handle());
  EXPECT_FALSE(t[0].active);
  ASSERT_EQ(t[0].npages, 2u);
  EXPECT_EQ(g_pages[t[0].pages_at], kShared);
  EXPECT_EQ(g_pages[t[0].pages_at + 1], kShared + kPage);
  // FFA_MEM_RECLAIM of a handle nobody uses: SUCCESS, the table is empty again.
  EXPECT_EQ(smc(kFnMemReclaim, r.w(2), r.w(3)).w(0), kFnSuccess32);
  EXPECT_TRUE(table().empty());
}

TEST_F(Optee, BorrowerSeesTheDataAndReclaimWaitsForUnregister) {
  uint32_t len = transaction(kOpteeId, kNormalWbIs, kShared, 1);
  Regs r = smc(kFnMemShare64, len, len);
  ASSERT_EQ(r.w(0), kFnSuccess32);
  *static_cast<uint32_t*>(kc_optee_ns(kShared)) = 0xfeedc0de;
  void* m = nullptr;
  ASSERT_EQ(kc_optee_borrow(r.handle(), &m), 0);
  EXPECT_EQ(*static_cast<volatile uint32_t*>(kc_optee_borrow_va(m, 0)), 0xfeedc0deu);
  EXPECT_TRUE(table()[0].active);
  // In use by the receiver: reclaim is DENIED (DEN0077 "FFA_MEM_RECLAIM").
  expect_error(smc(kFnMemReclaim, r.w(2), r.w(3)), kDenied);
  ASSERT_EQ(kc_optee_unborrow(m), 0);
  // OP-TEE's choice: once used, the handle stays registered until the
  // OP-TEE-specific OPTEE_FFA_UNREGISTER_SHM (mobj_ffa.c: registered_by_cookie).
  expect_error(smc(kFnMemReclaim, r.w(2), r.w(3)), kDenied);
  Regs u = smc(kFnDirectReq64, (uint64_t{kNsId} << 16) | kOpteeId, 0, kOpteeUnregisterShm, r.w(2), r.w(3));
  EXPECT_EQ(u.w(0), kFnDirectResp64);
  EXPECT_EQ(u.w(3), 0u);
  EXPECT_EQ(smc(kFnMemReclaim, r.w(2), r.w(3)).w(0), kFnSuccess32);
  EXPECT_TRUE(table().empty());
}

TEST_F(Optee, Refusals) {
  // Memory that is not the Normal world's (DEN0077 "FFA_MEM_SHARE": the SPMC
  // must check the sender owns it): outside NS RAM.
  uint32_t len = transaction(kOpteeId, kNormalWbIs, 0x0e000000, 1);
  expect_error(smc(kFnMemShare64, len, len), kInvalidParameters);
  // A receiver other than OP-TEE's endpoint: no such endpoint here.
  len = transaction(0x8002, kNormalWbIs, kShared, 1);
  expect_error(smc(kFnMemShare64, len, len), kInvalidParameters);
  // An unknown handle.
  expect_error(smc(kFnMemReclaim, 0x1234, 0), kInvalidParameters);
  // No retrieve from the Normal world (thread_spmc.c's dispatch has none).
  expect_error(smc(kFnMemRetrieveReq64, len, len), kNotSupported);
  EXPECT_TRUE(table().empty());
}

TEST_F(Optee, RestoreIsExact) {
  uint32_t len = transaction(kOpteeId, kNormalWbIs, kShared, 1);
  Regs a = smc(kFnMemShare64, len, len);
  ASSERT_EQ(a.w(0), kFnSuccess32);
  void* m = nullptr;
  ASSERT_EQ(kc_optee_borrow(a.handle(), &m), 0);   // maps a page in OP-TEE's SHM VA space
  kc_optee_snapshot* mid = kc_optee_snapshot_save();
  ASSERT_EQ(kc_optee_unborrow(m), 0);
  kc_optee_snapshot_load(base);
  EXPECT_TRUE(table().empty());
  // The same call after restore gives the same answer and the same handle.
  len = transaction(kOpteeId, kNormalWbIs, kShared, 1);
  Regs b = smc(kFnMemShare64, len, len);
  EXPECT_EQ(b.w(0), kFnSuccess32);
  EXPECT_EQ(b.handle(), a.handle());
  // And back to the middle: borrowed, mapped, the data visible through OP-TEE's map.
  kc_optee_snapshot_load(mid);
  auto t = table();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t[0].active);
  *static_cast<uint32_t*>(kc_optee_ns(kShared)) = 0x5a5a5a5a;
  EXPECT_EQ(*static_cast<volatile uint32_t*>(kc_optee_borrow_va(m, 0)), 0x5a5a5a5au);
  ASSERT_EQ(kc_optee_unborrow(m), 0);
  kc_optee_snapshot_free(mid);
}

TEST_F(Optee, YieldingCallEndsInTheFatalStandIn) {
  // Yielding calls need OP-TEE threads (not built): the stand-in ends the call.
  Regs y = smc(kFnDirectReq64, (uint64_t{kNsId} << 16) | kOpteeId, 0, 0x80000000u /* yielding, with arg */);
  EXPECT_EQ(y.status, -1);
  // The next call still works.
  uint32_t len = transaction(kOpteeId, kNormalWbIs, kShared, 1);
  EXPECT_EQ(smc(kFnMemShare64, len, len).w(0), kFnSuccess32);
}

}  // namespace
