// Unit tests of the FF-A model with a real SPMC as EL3 (ProxyProfile::real_el3):
// the state is DIGEST:TABLE-VIEW (handle values do not count), and a new
// transaction's handle is the SPMC's choice (SPMC:HANDLE-SPEC): a send answered
// with another handle than the model's is admitted (and rejected with the SPMC
// model as EL3), and the model then holds the SPMC's handle, so later calls
// naming it are judged against that transaction.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "models/ffa/model.h"
#include "models/ffa/model_test_util.h"
#include "models/ffa/scenario_ops.h"
#include "oracles/oracle.h"

namespace kconform::ffa {
namespace {

using namespace test;

// TF-A 2.12.1's first handles (spmc_shared_mem.c: next_handle from 0xffffffc0).
constexpr uint64_t kTheirs = 0xffffffc0;

ProxyProfile real(bool on) {
  ProxyProfile p = profile(4096, false);
  p.real_el3 = on;
  return p;
}

const std::string kShare = "tx_mem_desc ranges=" + R1(0x80010000, 2) + "\nmem_share\n";

// The allowed outcome of the last op of run whose x0 is fid (nullptr: none).
const Allowed* allowed_with(const Expectation& e, uint32_t fid) {
  for (const Allowed& a : e.allowed)
    if ((a.regs_mask & kX0) && static_cast<uint32_t>(a.regs[0]) == fid) return &a;
  return nullptr;
}

// The share's FFA_SUCCESS as the target gives it, with handle h.
Outcome success_with(const Allowed& a, uint64_t h) {
  Outcome o = pick(a);
  o.regs[0] = a.regs[0];
  o.regs[2] = handle_lo(h);
  o.regs[3] = handle_hi(h);
  return o;
}

TEST(FfaModelRealEl3, AShareAnsweredWithTheSpmcsHandleIsAdmittedOnlyWithARealEl3) {
  for (bool on : {false, true}) {
    SCOPED_TRACE(on ? "real EL3" : "SPMC model");
    const ProxyProfile p = real(on);
    Play run(p, scenario(p, kFull, kShare));
    ASSERT_TRUE(run.ok()) << run.error;
    ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
    const Expectation e = run.expect_last();
    const Allowed* ok = allowed_with(e, kFnSuccess32);
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(judge(e, success_with(*ok, produced_handle(ok->regs.data()))).kind, VerdictKind::kPass);
    EXPECT_EQ(judge(e, success_with(*ok, kTheirs)).kind, on ? VerdictKind::kPass : VerdictKind::kViolation);
    // Only the handle registers are the SPMC's: the rest is still judged.
    Outcome wrong = success_with(*ok, kTheirs);
    wrong.regs[0] = kFnError;
    EXPECT_EQ(judge(e, wrong).kind, VerdictKind::kViolation);
  }
}

// Commits the share with handle h; returns the model, ready for the next op.
struct SharedWith {
  Play run;
  SharedWith(const ProxyProfile& p, const std::string& rest, uint64_t h) : run(p, scenario(p, kFull, kShare + rest)) {
    EXPECT_TRUE(run.ok()) << run.error;
    const size_t share_op = run.s.ops.size() - 1 - count_ops(rest);
    EXPECT_TRUE(run.play(share_op)) << run.error;
    Expectation e;
    run.m->expect(run.s, share_op, e);
    const Allowed* ok = allowed_with(e, kFnSuccess32);
    EXPECT_NE(ok, nullptr);
    if (!ok) return;
    const Outcome o = success_with(*ok, h);
    EXPECT_EQ(judge(e, o).kind, VerdictKind::kPass);
    run.m->commit(run.s, share_op, o);
    run.last_state = o.state;
  }
  static size_t count_ops(const std::string& text) {
    size_t n = 0;
    for (char c : text) n += c == '\n';
    return n;
  }
  Expectation expect(size_t i) {
    Expectation e;
    run.m->expect(run.s, i, e);
    return e;
  }
};

// A reclaim naming the SPMC's handle (the slot holds it) is judged against the
// renamed transaction: it succeeds and gives every page back.
TEST(FfaModelRealEl3, AReclaimOfTheSpmcsHandleIsJudgedAgainstTheRenamedTransaction) {
  const ProxyProfile p = real(true);
  const uint64_t before = Play(p, scenario(p, kFull, "id_get\n")).final_state();
  SharedWith sh(p, "mem_reclaim handle=0\n", kTheirs);
  const Expectation e = sh.expect(sh.run.s.ops.size() - 1);
  const Allowed* ok = allowed_with(e, kFnSuccess32);
  ASSERT_NE(ok, nullptr) << e.note;
  EXPECT_EQ(ok->state, before);
  EXPECT_NE(sh.run.last_state, before);
  // The model's own handle names nothing any more (the slot XOR model ^ theirs).
  const uint64_t mine = kHandleBase | 1;
  SharedWith bogus(p, "mem_reclaim handle=0 handle_xor=" + std::to_string(mine ^ kTheirs) + "\n", kTheirs);
  const Expectation b = bogus.expect(bogus.run.s.ops.size() - 1);
  EXPECT_EQ(allowed_with(b, kFnSuccess32), nullptr);
  EXPECT_NE(allowed_with(b, kFnError), nullptr);
}

// A fragmented send: the first reply (FFA_MEM_FRAG_RX) names the SPMC's
// handle; the proxy's send in flight takes it, and the last fragment's
// FFA_SUCCESS is judged on it (w2/w3 checked, no longer masked).
TEST(FfaModelRealEl3, ALaterReplyNamingTheHandleIsJudgedNormally) {
  const ProxyProfile p = real(true);
  const std::string rs = R({{0x80010000, 1}, {0x80020000, 2}});
  Play run(p, scenario(p, kFull, "tx_mem_desc ranges=" + rs + "\nmem_share frag_len=112\n" +
                                      "tx_constituents offset=0 ranges=" + R1(0x80020000, 2) +
                                      "\nmem_frag_tx handle=0 frag_len=16\n"));
  ASSERT_TRUE(run.ok()) << run.error;
  const size_t first = run.s.ops.size() - 3;
  ASSERT_TRUE(run.play(first)) << run.error;
  Expectation e;
  run.m->expect(run.s, first, e);
  const Allowed* rx = allowed_with(e, kFnMemFragRx);
  ASSERT_NE(rx, nullptr);
  EXPECT_EQ(rx->regs_mask & (kX1 | kX2), 0) << "the new handle is the SPMC's";
  Outcome o = pick(*rx);
  o.regs[1] = handle_lo(kTheirs);
  o.regs[2] = handle_hi(kTheirs);
  ASSERT_EQ(judge(e, o).kind, VerdictKind::kPass);
  run.m->commit(run.s, first, o);
  Expectation t;
  run.m->expect(run.s, first + 1, t);
  run.m->commit(run.s, first + 1, pick(t.allowed[0]));
  const Expectation last = run.expect_last();
  const Allowed* done = allowed_with(last, kFnSuccess32);
  ASSERT_NE(done, nullptr) << last.note;
  EXPECT_EQ(done->regs_mask & (kX2 | kX3), kX2 | kX3);
  EXPECT_EQ(handle_of(done->regs[2], done->regs[3]), kTheirs);
}

// adopt() takes the SPMC's handle as commit() does: a first fragment's
// FFA_MEM_FRAG_RX with a wrong offset (w3) but the state the model predicts is
// adopted, and the last fragment is judged on the SPMC's handle.
TEST(FfaModelRealEl3, AdoptTakesTheSpmcsHandle) {
  const ProxyProfile p = real(true);
  const std::string rs = R({{0x80010000, 1}, {0x80020000, 2}});
  Play run(p, scenario(p, kFull, "tx_mem_desc ranges=" + rs + "\nmem_share frag_len=112\n" +
                                      "tx_constituents offset=0 ranges=" + R1(0x80020000, 2) +
                                      "\nmem_frag_tx handle=0 frag_len=16\n"));
  ASSERT_TRUE(run.ok()) << run.error;
  const size_t first = run.s.ops.size() - 3;
  ASSERT_TRUE(run.play(first)) << run.error;
  Expectation e;
  run.m->expect(run.s, first, e);
  const Allowed* rx = allowed_with(e, kFnMemFragRx);
  ASSERT_NE(rx, nullptr);
  Outcome o = pick(*rx);
  o.regs[1] = handle_lo(kTheirs);
  o.regs[2] = handle_hi(kTheirs);
  o.regs[3] += 16;
  ASSERT_EQ(judge(e, o).kind, VerdictKind::kViolation);
  std::string note;
  ASSERT_TRUE(run.m->adopt(run.s, first, o, &note));
  EXPECT_NE(note.find("0xffffffc0"), std::string::npos) << note;
  Expectation t;
  run.m->expect(run.s, first + 1, t);
  run.m->commit(run.s, first + 1, pick(t.allowed[0]));
  const Expectation last = run.expect_last();
  const Allowed* done = allowed_with(last, kFnSuccess32);
  ASSERT_NE(done, nullptr) << last.note;
  EXPECT_EQ(handle_of(done->regs[2], done->regs[3]), kTheirs);
}

// DIGEST:TABLE-VIEW: the model's state does not hold its handle values. A
// share made after another share came and went has another handle: another
// state with the SPMC model as EL3, the same with a real EL3.
TEST(FfaModelRealEl3, TheStateHoldsNoHandleValue) {
  const std::string other = "tx_mem_desc ranges=" + R1(0x80030000, 1) + "\nmem_share\nmem_reclaim handle=0\n";
  for (bool on : {false, true}) {
    SCOPED_TRACE(on ? "real EL3" : "SPMC model");
    const ProxyProfile p = real(on);
    const uint64_t first = Play(p, scenario(p, kFull, kShare)).final_state();
    const uint64_t second = Play(p, scenario(p, kFull, other + kShare)).final_state();
    EXPECT_EQ(first == second, on);
  }
}

// ProxyProfile::state_hidden (a real machine, targets/qemu_arm64): no allowed
// outcome checks the state digest, so a share's success is judged by its
// registers alone; after a violation the model goes on from a refusal only.
TEST(FfaModelRealEl3, WithTheStateHiddenOnlyTheRegistersAreJudged) {
  ProxyProfile p = real(true);
  p.state_hidden = true;
  EXPECT_EQ(profile_name(p), "ffa-4k-real-el3-regs-only");
  Play run(p, scenario(p, kFull, kShare));
  ASSERT_TRUE(run.ok()) << run.error;
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  const Expectation e = run.expect_last();
  for (const Allowed& a : e.allowed) EXPECT_FALSE(a.check_state);
  const Allowed* ok = allowed_with(e, kFnSuccess32);
  ASSERT_NE(ok, nullptr);
  Outcome o = success_with(*ok, kTheirs);
  o.state = 0x1234;  // whatever the target says of its state, it is not looked at
  EXPECT_EQ(judge(e, o).kind, VerdictKind::kPass);
  // A refusal (FFA_ERROR) where success is expected: a violation the model adopts.
  Outcome refused = pick(*ok);
  refused.regs[0] = kFnError;
  refused.regs[2] = static_cast<uint32_t>(-2);
  EXPECT_EQ(judge(e, refused).kind, VerdictKind::kViolation);
  std::string note;
  EXPECT_TRUE(run.m->adopt(run.s, run.s.ops.size() - 1, refused, &note)) << note;
  // A success the model did not expect cannot be adopted: its effect is unseen.
  Play again(p, scenario(p, kFull, kShare));
  ASSERT_TRUE(again.play(again.s.ops.size() - 1)) << again.error;
  const Expectation e2 = again.expect_last();
  Outcome odd = success_with(*allowed_with(e2, kFnSuccess32), kTheirs);
  odd.regs[1] = 0x77;  // not what any outcome allows
  odd.regs[0] = kFnSuccess64;
  EXPECT_FALSE(again.m->adopt(again.s, again.s.ops.size() - 1, odd, &note));
}

}  // namespace
}  // namespace kconform::ffa
