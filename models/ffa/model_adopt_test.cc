// Unit tests of FfaModel::adopt (models/model.h): after a violation the model
// goes on from the target's state when it is one the model can reach (the
// state before the call, or an effect of the call's plan), so the next op is
// judged; a state the model cannot reach is not adopted.
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

const std::string kShare = "tx_mem_desc ranges=" + R1(0x80010000, 4) + "\nmem_share\n";  // a 16K page

bool allows(const Expectation& e, uint32_t fid) {
  for (const Allowed& a : e.allowed)
    if ((a.regs_mask & kX0) && static_cast<uint32_t>(a.regs[0]) == fid) return true;
  return false;
}

// Plays ops [0, i), expects op i and returns its expectation.
Expectation expect_op(Play& run, size_t i) {
  EXPECT_TRUE(run.play(i)) << run.error;
  Expectation e;
  run.m->expect(run.s, i, e);
  return e;
}

Outcome error(int32_t code, uint64_t state) {
  Outcome o = Outcome::ok(0);
  o.regs[0] = kFnError;
  o.regs[2] = static_cast<uint32_t>(code);
  o.state = state;
  return o;
}

// A share the model expects to succeed is refused by the target with nothing
// changed: adopted as the state before the call. The same share again is then
// judged as the first one was (the pages are still the host's; had the model
// taken the share's effect, only a refusal would be allowed), and the refused
// share's slot is filled (HARNESS:SLOTS): slot 1 is the second share's.
TEST(FfaModelAdopt, ARefusalWithTheStateUnchangedIsAdoptedAndTheNextOpJudged) {
  for (uint64_t page : {4096u, 16384u}) {
    SCOPED_TRACE(page);
    const ProxyProfile p = profile(page, false);
    Play run(p, scenario(p, kFull, kShare + kShare + "mem_reclaim handle=1\n"));
    ASSERT_TRUE(run.ok()) << run.error;
    const size_t first = run.s.ops.size() - 4;
    const Expectation e = expect_op(run, first);
    ASSERT_TRUE(allows(e, kFnSuccess32));
    const Outcome refused = error(kDenied, run.last_state);
    ASSERT_EQ(judge(e, refused).kind, VerdictKind::kViolation);
    std::string note;
    ASSERT_TRUE(run.m->adopt(run.s, first, refused, &note));
    EXPECT_NE(note.find("before the call"), std::string::npos) << note;
    Expectation tx;
    run.m->expect(run.s, first + 1, tx);
    run.m->commit(run.s, first + 1, pick(tx.allowed[0]));
    Expectation again;
    run.m->expect(run.s, first + 2, again);
    ASSERT_TRUE(allows(again, kFnSuccess32)) << again.note;
    for (const Allowed& a : again.allowed)
      if (static_cast<uint32_t>(a.regs[0]) == kFnSuccess32) {
        run.m->commit(run.s, first + 2, pick(a));
        break;
      }
    Expectation reclaim;
    run.m->expect(run.s, first + 3, reclaim);
    EXPECT_TRUE(allows(reclaim, kFnSuccess32)) << reclaim.note;
  }
}

// An outcome in a state the model cannot reach is not adopted (the model has
// lost track of the target), and says so.
TEST(FfaModelAdopt, AStateMatchingNoOutcomeIsNotAdopted) {
  const ProxyProfile p = profile(4096, false);
  Play run(p, scenario(p, kFull, kShare));
  const size_t share = run.s.ops.size() - 1;
  const Expectation e = expect_op(run, share);
  std::string note;
  EXPECT_FALSE(run.m->adopt(run.s, share, error(kDenied, run.last_state ^ 1), &note));
  EXPECT_NE(note.find("matches none of the model's outcomes"), std::string::npos) << note;
  // A harness op too.
  Play fill(p, scenario(p, kFull, "host_fill addr=0x80010000 pages=1 value=7\n"));
  const size_t op = fill.s.ops.size() - 1;
  const Expectation f = expect_op(fill, op);
  Outcome o = pick(f.allowed[0]);
  o.value += 1;
  ASSERT_EQ(judge(f, o).kind, VerdictKind::kViolation);
  EXPECT_TRUE(fill.m->adopt(fill.s, op, o, &note)) << note;  // the state is the one expected
  o.state ^= 1;
  EXPECT_FALSE(fill.m->adopt(fill.s, op, o, &note));
  (void)e;
}

// A reply the model does not allow, in the state an effect of the plan leaves:
// that effect is taken (and the slot gets the handle the target returned).
// With the SPMC model as EL3, a share answered with another handle: the
// share is adopted, and the handle the host holds names nothing at EL3.
TEST(FfaModelAdopt, AWrongReplyInAPlannedStateTakesThatEffect) {
  const ProxyProfile p = profile(4096, false);
  Play run(p, scenario(p, kFull, kShare + kShare + "mem_reclaim handle=0\n"));
  const size_t share = run.s.ops.size() - 4;
  const Expectation e = expect_op(run, share);
  const Allowed* ok = nullptr;
  for (const Allowed& a : e.allowed)
    if (static_cast<uint32_t>(a.regs[0]) == kFnSuccess32) ok = &a;
  ASSERT_NE(ok, nullptr);
  Outcome o = pick(*ok);
  o.regs[2] ^= 0x10;
  ASSERT_EQ(judge(e, o).kind, VerdictKind::kViolation);
  std::string note;
  ASSERT_TRUE(run.m->adopt(run.s, share, o, &note));
  EXPECT_NE(note.find("effect 0"), std::string::npos) << note;
  // The pages are shared now: the same share again is refused.
  Expectation tx, again;
  run.m->expect(run.s, share + 1, tx);
  run.m->commit(run.s, share + 1, pick(tx.allowed[0]));
  run.m->expect(run.s, share + 2, again);
  EXPECT_FALSE(allows(again, kFnSuccess32)) << again.note;
  run.m->commit(run.s, share + 2, pick(again.allowed[0]));
  // The slot holds the target's handle, which no transaction has.
  Expectation r;
  run.m->expect(run.s, share + 3, r);
  EXPECT_FALSE(allows(r, kFnSuccess32)) << r.note;
}

// VERSION:NEGOTIATE, where an effect leaves the state as it was (FFA_VERSION
// fixes the version, which the digest does not see): an FFA_ERROR is adopted
// as the state before the call (the version is not fixed: a later call may
// still be refused for it), any other reply as the effect (fixed: it may not).
TEST(FfaModelAdopt, ARefusalPrefersTheStateBeforeTheCall) {
  const ProxyProfile p = profile(4096, false);
  for (bool refuse : {true, false}) {
    SCOPED_TRACE(refuse ? "FFA_ERROR" : "another version");
    Play run(p, scenario(p, kNothing, "version\nid_get\n"));
    ASSERT_TRUE(run.ok()) << run.error;
    const Expectation e = expect_op(run, 0);
    Outcome o = refuse ? error(kNotSupported, 0) : pick(e.allowed[0]);
    o.state = pick(e.allowed[0]).state;
    if (!refuse) o.regs[0] = 0x10005;
    ASSERT_EQ(judge(e, o).kind, VerdictKind::kViolation);
    std::string note;
    ASSERT_TRUE(run.m->adopt(run.s, 0, o, &note)) << note;
    Expectation id;
    run.m->expect(run.s, 1, id);
    EXPECT_EQ(allows(id, kFnError), refuse) << id.note;
  }
}

}  // namespace
}  // namespace kconform::ffa
