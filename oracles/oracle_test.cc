// The oracle admits exactly the allowed outcomes and blames the right rules.
#include "oracles/oracle.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>

namespace kconform {
namespace {

constexpr RuleId kR1 = 1, kR2 = 2;

TEST(Oracle, AdmitsAnAllowedErrno) {
  Expectation e;
  e.allowed = {Allowed::err(kR1, EINVAL), Allowed::err(kR2, ENODEV)};
  EXPECT_EQ(judge(e, Outcome::err(ENODEV)).kind, VerdictKind::kPass);
}

TEST(Oracle, WrongErrnoViolatesEveryLicensingRule) {
  Expectation e;
  e.allowed = {Allowed::err(kR1, EINVAL), Allowed::err(kR2, ENODEV), Allowed::err(kR1, EFAULT)};
  Verdict v = judge(e, Outcome::err(EIO));
  EXPECT_EQ(v.kind, VerdictKind::kViolation);
  EXPECT_EQ(v.violated, (std::vector<RuleId>{kR1, kR2}));
}

TEST(Oracle, SuccessWhereAnErrorIsRequiredIsAViolation) {
  Expectation e;
  e.allowed = {Allowed::err(kR2, EINVAL)};
  Verdict v = judge(e, Outcome::ok(4096));
  EXPECT_EQ(v.kind, VerdictKind::kViolation);
  EXPECT_EQ(v.violated, std::vector<RuleId>{kR2});
}

TEST(Oracle, RangesAndAuxAreChecked) {
  Expectation e;
  e.allowed = {Allowed::ok_range(kR1, 4096, 8192)};
  EXPECT_EQ(judge(e, Outcome::ok(4096)).kind, VerdictKind::kPass);
  EXPECT_EQ(judge(e, Outcome::ok(8192)).kind, VerdictKind::kPass);
  EXPECT_EQ(judge(e, Outcome::ok(8193)).kind, VerdictKind::kViolation);
  e.allowed = {Allowed::ok_aux(kR2, 0, 0xabc)};
  EXPECT_EQ(judge(e, Outcome::ok(0, 0xabc)).kind, VerdictKind::kPass);
  EXPECT_EQ(judge(e, Outcome::ok(0, 0xabd)).kind, VerdictKind::kViolation);
}

TEST(Oracle, KindsAreNotInterchangeable) {
  Expectation e;
  e.allowed = {Allowed::sig(kR1, SIGBUS)};
  EXPECT_EQ(judge(e, Outcome::sig(SIGBUS)).kind, VerdictKind::kPass);
  EXPECT_EQ(judge(e, Outcome::err(SIGBUS)).kind, VerdictKind::kViolation);
  EXPECT_EQ(judge(e, Outcome::sig(SIGSEGV)).kind, VerdictKind::kViolation);
}

TEST(Oracle, AnEmptyAllowedSetIsAlwaysAViolation) {
  Expectation e;
  Verdict v = judge(e, Outcome::ok());
  EXPECT_EQ(v.kind, VerdictKind::kViolation);
  EXPECT_EQ(v.violated, std::vector<RuleId>{kNoRule});
}

TEST(Oracle, BlamesOnlyTheRulesOnWhoseForbiddenSideTheOpWas) {
  // kR1 demands EINVAL (forbidden side); kR2 permits EFBIG but was met.
  Expectation e;
  e.hits = {{kR1, true}, {kR2, false}};
  e.allowed = {Allowed::err(kR1, EINVAL), Allowed::err(kR2, EFBIG)};
  Verdict v = judge(e, Outcome::ok(4096));
  EXPECT_EQ(v.kind, VerdictKind::kViolation);
  EXPECT_EQ(v.violated, std::vector<RuleId>{kR1});
}

TEST(Oracle, AForbiddenRuleThatLicensesNothingLeavesTheBlameToTheRuleThatDoes) {
  // kR1: the descriptor is bad (forbidden), the rejection is kR2's to spell out
  // (an FF-A proxy must roll back): a wrong state breaks kR2, not kR1.
  Expectation e;
  e.hits = {{kR1, true}, {kR2, false}};
  Allowed rollback = Allowed::ok(kR2, 0);
  rollback.check_state = true;
  rollback.state = 0x1234;
  e.allowed = {rollback};
  Outcome wrong_state = Outcome::ok(0);
  wrong_state.state = 0x9999;
  EXPECT_EQ(judge(e, wrong_state).violated, std::vector<RuleId>{kR2});
}

TEST(Oracle, WithNoForbiddenRuleBlamesTheRulesThatWouldHaveHadToAllowIt) {
  // Both rules on their allowed side: kR1 licenses success, kR2 permits EFBIG.
  Expectation e;
  e.hits = {{kR1, false}, {kR2, false}};
  e.allowed = {Allowed::ok(kR1, 8192), Allowed::err(kR2, EFBIG)};
  // A wrong count: only the rule licensing counts would have had to allow it.
  EXPECT_EQ(judge(e, Outcome::ok(4096)).violated, std::vector<RuleId>{kR1});
  // A wrong errno: only the rule permitting errors.
  EXPECT_EQ(judge(e, Outcome::err(EIO)).violated, std::vector<RuleId>{kR2});
  // A signal, which no rule licenses in kind: every licensing rule.
  EXPECT_EQ(judge(e, Outcome::sig(SIGBUS)).violated, (std::vector<RuleId>{kR1, kR2}));
}

}  // namespace
}  // namespace kconform
