// Tests of the el2 target with a real EL3 (`--target el2 --el3 tf-a`): pKVM's
// ffa.c of this build with TF-A's EL3 SPMC behind it, judged by the FF-A model
// with a real EL3 (ProxyProfile::real_el3). A share lands in TF-A's own table
// and in stage-2 and passes; an EL3 that answers wrong through the same path
// is caught (its reply, its state, its handle); a fault armed at the SMC
// boundary fires as the model's; restore is exact.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/runner/verdict_capture_test.h"
#include "harness/scenario/codec.h"
#include "harness/scenario/ffa_abi.h"
#include "models/ffa/model.h"
#include "models/ffa/regs.h"
#include "models/ffa/spmc_view.h"
#include "targets/el2/ffa_target.h"
#include "targets/spmc/tfa_el3.h"

namespace kconform::el2 {
namespace {

namespace F = kconform::ffa;
using test::violated;

// A real EL3 that passes everything to TF-A's but can make one answer lie after
// TF-A has acted on the call (the EL3 "under test" then deviates).
class LyingEl3 final : public RealEl3 {
 public:
  enum class Lie { kNone, kErrorAfterShare, kHandleBit63 };
  explicit LyingEl3(std::unique_ptr<RealEl3> real, Lie lie) : real_(std::move(real)), lie_(lie) {}
  std::string release() const override { return real_->release(); }
  RealEl3Profile profile() const override { return real_->profile(); }
  uint64_t nomem_va(uint64_t pa) const override { return real_->nomem_va(pa); }
  void save_start() override { real_->save_start(); }
  void restore_start() override { real_->restore_start(); }
  bool smc(const uint64_t in[8], uint64_t out[8], std::vector<InvariantBreak>* breaks) override {
    if (!real_->smc(in, out, breaks)) return false;
    const uint32_t fn = static_cast<uint32_t>(in[0]) & ~F::kSmc64Bit;
    if (fn == F::kFnMemShare32 && F::is_success(out)) {
      if (lie_ == Lie::kErrorAfterShare) {  // TF-A holds the transaction; the reply says it failed
        for (int k = 0; k < 8; ++k) out[k] = 0;
        out[0] = F::kFnError;
        out[2] = static_cast<uint32_t>(F::kNoMemory);
      } else if (lie_ == Lie::kHandleBit63) {
        out[3] |= 0x80000000u;  // the handle's bit 63: a hypervisor's
      }
    }
    return true;
  }
  int sp_op(bool r, uint64_t h, uint16_t sp, uint64_t out[8], std::vector<InvariantBreak>* b) override {
    return real_->sp_op(r, h, sp, out, b);
  }
  void arm(uint8_t f, uint64_t v) override { real_->arm(f, v); }
  uint8_t armed() const override { return real_->armed(); }
  std::span<const RealEl3Tx> transactions() override { return real_->transactions(); }
  uint64_t table_digest() override { return real_->table_digest(); }
  std::vector<uint8_t> state_bytes() const override { return real_->state_bytes(); }

 private:
  std::unique_ptr<RealEl3> real_;
  Lie lie_;
};

// One host page shared (corpora/ffa share/ok, v1.1: the version TF-A 2.12.1
// shares memory with): the data page at 0x80010000.
constexpr uint64_t kDataPage = 0x80010000;
Scenario share_scenario(uint64_t page_size, const std::string& before_share = "") {
  const std::string rx = page_size == 4096 ? "0x80001000" : "0x80004000";
  const std::string pages = page_size == 4096 ? "01" : "04";
  const std::string text = "kconform-scenario 1\nabi ffa\nname el2tfa/share\nversion version=V1_1\n"
                           "rxtx_map tx=0x80000000 rx=" + rx + " pages=" + std::to_string(page_size / 4096) + "\n"
                           "tx_mem_desc layout=V1_1 ranges=hex:0000018000000000" + pages + "000000\n" +
                           before_share + "mem_share\n";
  std::vector<Scenario> out;
  std::string err;
  EXPECT_TRUE(parse_text(text, "el2_tfa_runner_test", &out, &err)) << err;
  return out.empty() ? Scenario{} : out.front();
}

// SPEC.md DIGEST:TABLE-VIEW, by hand with a plain FNV-1a-64 loop, of the
// state share_scenario() leaves: FNV-1a-64 over u32 n_host_pages, one u8
// view per host page (digest.h: 0 host-owned, 1 shared with FF-A, 2 shared
// with the hypervisor), then u64 T, the SPMC:TABLE digest of EL3's table
// (spmc_view.h): u32 n_live, then per live transaction u8 complete, u8 kind,
// u16 sender, u64 tag, u8 retrieved, u32 n_receivers, n x (u16 id, u8 perms),
// u32 n_ranges, n x (u64 address, u32 pages), u32 total_pages; the handle is
// left out. The views: the TX and RX mailboxes (one host page each) shared
// with the hypervisor, the data page shared with FF-A, every other host page
// the host's. The table: one complete share (kind 1) from the host (ID 0) to
// SP 0x8001 with read-write data access (perms 0b10), tag 0, not retrieved,
// of one constituent, the data page's 4K pages. Only the RAM's layout (where
// host page 0 is, how many there are) comes from the target's profile.
uint64_t expected_share_state(const F::ProxyProfile& p) {
  auto fnv = [](const std::vector<uint8_t>& b) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint8_t c : b) h = (h ^ c) * 0x100000001b3ull;
    return h;
  };
  auto put = [](std::vector<uint8_t>& seq, uint64_t v, int bytes) {
    for (int k = 0; k < bytes; ++k) seq.push_back(static_cast<uint8_t>(v >> (8 * k)));
  };
  const uint64_t ps = p.page_size, pages_4k = ps / 4096;
  const uint64_t tx = 0x80000000, rx = 0x80000000 + ps;  // share_scenario()'s rxtx_map
  std::vector<uint8_t> table;
  put(table, 1, 4);         // one live transaction
  put(table, 1, 1);         // complete
  put(table, 1, 1);         // share
  put(table, 0, 2);         // sender: the host
  put(table, 0, 8);         // tag
  put(table, 0, 1);         // not retrieved
  put(table, 1, 4);         // one receiver
  put(table, 0x8001, 2);    //   SP 0x8001
  put(table, 0b10, 1);      //   read-write
  put(table, 1, 4);         // one constituent
  put(table, kDataPage, 8);
  put(table, pages_4k, 4);
  put(table, pages_4k, 4);  // total pages
  std::vector<uint8_t> seq;
  put(seq, p.host_pages, 4);
  for (uint64_t i = 0; i < p.host_pages; ++i) {
    const uint64_t pa = p.phys_base + i * ps;
    put(seq, pa == tx || pa == rx ? 2 : pa == kDataPage ? 1 : 0, 1);
  }
  put(seq, fnv(table), 8);
  return fnv(seq);
}

struct Opened {
  std::unique_ptr<El2FfaTarget> target;
  std::unique_ptr<Model> model;
};

Opened open(LyingEl3::Lie lie = LyingEl3::Lie::kNone) {
  std::string err;
  std::unique_ptr<RealEl3> el3 = spmc::TfaEl3::open(&err);
  EXPECT_TRUE(el3) << err;
  if (el3 && lie != LyingEl3::Lie::kNone) el3 = std::make_unique<LyingEl3>(std::move(el3), lie);
  Opened o;
  if (el3) o.target = open_el2_ffa_target(&err, std::move(el3));
  EXPECT_TRUE(o.target) << err;
  if (o.target) o.model = F::make_model(o.target->profile());
  return o;
}

test::RunResult run(Opened& o, const Scenario& s) {
  return test::run_captured(*o.target, *o.model, o.target.get(), {LoadedScenario{s, "test", 0, 0}});
}

TEST(El2Tfa, AShareLandsInTfasTableAndStage2AndPasses) {
  Opened o = open();
  ASSERT_TRUE(o.target);
  EXPECT_TRUE(o.target->profile().real_el3);
  EXPECT_NE(o.target->identity().release.find("+tf-a-"), std::string::npos);
  const uint64_t ps = o.target->profile().page_size;
  const test::RunResult r = run(o, share_scenario(ps));
  ASSERT_EQ(r.ops.size(), 4u);
  for (const nlohmann::json& rec : r.ops) EXPECT_EQ(rec["verdict"], "pass") << rec.dump();
  // TF-A holds it: one complete transaction of the host page, its handle the SPMC's.
  const std::span<const RealEl3Tx> txs = o.target->real_el3()->transactions();
  ASSERT_EQ(txs.size(), 1u);
  EXPECT_TRUE(txs[0].complete);
  EXPECT_EQ(txs[0].handle >> 63, 0u);
  ASSERT_EQ(txs[0].ranges.size(), 1u);
  EXPECT_EQ(txs[0].ranges[0].first, kDataPage);
  EXPECT_EQ(txs[0].ranges[0].second, ps / 4096);
  EXPECT_EQ(el2_tracker().View(kDataPage), PageView::kSharedWithFfa);
  // The outcome's state is SPEC.md DIGEST:TABLE-VIEW of what the scenario
  // did, built here by hand from the documented byte sequence. The RAM holds
  // the 64 host pages from 0x80000000 the directed scenarios address, and
  // more below them (scenario_ops.h: harness_ram).
  const F::ProxyProfile& prof = o.target->profile();
  EXPECT_LE(prof.phys_base, 0x80000000u);
  EXPECT_EQ(prof.phys_base + prof.host_pages * ps, 0x80000000u + 64 * ps);
  EXPECT_EQ(o.target->state_digest(), expected_share_state(o.target->profile()));
}

// An EL3 that answers FFA_ERROR after it took the share: the host sees the
// error, TF-A holds the pages. Caught: the reply is not the model's, and an
// error changed the state (I1).
TEST(El2Tfa, AnEl3ThatFailsAShareItTookIsCaught) {
  Opened o = open(LyingEl3::Lie::kErrorAfterShare);
  ASSERT_TRUE(o.target);
  const test::RunResult r = run(o, share_scenario(o.target->profile().page_size));
  ASSERT_EQ(r.ops.size(), 4u);
  EXPECT_EQ(r.ops[3]["verdict"], "violation") << r.ops[3].dump();
  EXPECT_FALSE(violated(r.ops[3]).empty());
}

// An EL3 that gives the host a handle with bit 63 set (a hypervisor's): the
// handle registers are the SPMC's choice (not judged by the model), so the
// target's check catches it (FFA.SPMC.HANDLE).
TEST(El2Tfa, AHandleWithBit63IsCaught) {
  Opened o = open(LyingEl3::Lie::kHandleBit63);
  ASSERT_TRUE(o.target);
  const test::RunResult r = run(o, share_scenario(o.target->profile().page_size));
  ASSERT_EQ(r.ops.size(), 4u);
  EXPECT_EQ(r.ops[3]["verdict"], "violation") << r.ops[3].dump();
  EXPECT_TRUE(violated(r.ops[3]).count("FFA.SPMC.HANDLE")) << r.ops[3].dump();
}

// PKVM:NO-PANIC: a FRAG_TX naming no send in flight (corpora/ffa
// fragments.kcs tx-none). Stock ffa.c refuses it and aborts the handle with
// FFA_MEM_RECLAIM, which TF-A refuses; its WARN_ON(res->a0 != FFA_SUCCESS)
// fires at EL2, a hyp panic in protected mode. The op is a crash, and the
// invariant names FFA.PROXY.NO_HYP_PANIC (the same op panics the real stack:
// run --target qemu-arm64, QEMU.HYP-PANIC).
TEST(El2Tfa, AWarnAtEl2IsAHypPanic) {
  Opened o = open();
  ASSERT_TRUE(o.target);
  const uint64_t ps = o.target->profile().page_size;
  const std::string text = "kconform-scenario 1\nabi ffa\nname el2tfa/warn\nversion version=V1_1\n"
                           "rxtx_map tx=0x80000000 rx=" + std::string(ps == 4096 ? "0x80001000" : "0x80004000") +
                           " pages=" + std::to_string(ps / 4096) + "\nraw fid=MEM_FRAG_TX x1=1 x2=0x80000000 x3=16\n";
  std::vector<Scenario> parsed;
  std::string err;
  ASSERT_TRUE(parse_text(text, "el2_tfa_runner_test", &parsed, &err)) << err;
  const size_t warned = el2_warnings().size();
  const test::RunResult r = run(o, parsed.front());
  ASSERT_EQ(r.ops.size(), 3u);
  ASSERT_GT(el2_warnings().size(), warned) << "the stand-in's WARN_ON did not fire";
  EXPECT_EQ(r.ops[2]["verdict"], "violation") << r.ops[2].dump();
  EXPECT_TRUE(violated(r.ops[2]).count("FFA.PROXY.NO_HYP_PANIC")) << r.ops[2].dump();
  EXPECT_NE(r.ops[2].dump().find("WARN_ON(res->a0 != FFA_SUCCESS)"), std::string::npos) << r.ops[2].dump();
}

// HARNESS:EL3 at the SMC boundary: an armed ERROR fault answers the share
// without TF-A seeing it, as the model's SPMC does: every op passes and
// TF-A's table stays empty.
TEST(El2Tfa, AFaultArmedAtTheSmcBoundaryFiresAsTheModelsDoes) {
  Opened o = open();
  ASSERT_TRUE(o.target);
  const test::RunResult r =
      run(o, share_scenario(o.target->profile().page_size, "el3_misbehave kind=ERROR value=0xfffffffa\n"));
  ASSERT_EQ(r.ops.size(), 5u);
  for (const nlohmann::json& rec : r.ops) EXPECT_EQ(rec["verdict"], "pass") << rec.dump();
  EXPECT_NE(r.ops[4]["observed"].get<std::string>().find("x0=0x84000060"), std::string::npos) << r.ops[4].dump();
  EXPECT_TRUE(o.target->real_el3()->transactions().empty());
  EXPECT_EQ(o.target->real_el3()->armed(), 0);
}

// Restore is exact: begin() after a scenario gives back every byte of ffa.c's
// state and TF-A's.
TEST(El2Tfa, RestoreIsExact) {
  Opened o = open();
  ASSERT_TRUE(o.target);
  const Scenario s = share_scenario(o.target->profile().page_size);
  o.target->begin(s);
  const std::vector<uint8_t> fresh = o.target->state_bytes();
  run(o, s);
  EXPECT_NE(o.target->state_bytes(), fresh);
  o.target->begin(s);
  EXPECT_EQ(o.target->state_bytes(), fresh);
}

}  // namespace
}  // namespace kconform::el2
