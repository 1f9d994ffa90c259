// The structure-aware mutator keeps every scenario valid, round-trips through
// the binary codec, and reaches each kind of mutation.
#include "harness/fuzz/mutator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <utility>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"

namespace kconform::fuzz {
namespace {

class MutatorTest : public ::testing::TestWithParam<Abi> {};

TEST_P(MutatorTest, EveryMutantIsValidAndRoundTrips) {
  Rng rng(42);
  Limits lim;
  Scenario s = starter(GetParam());
  ASSERT_FALSE(s.ops.empty());
  std::set<Mutation> seen;
  for (int i = 0; i < 5000; ++i) {
    seen.insert(mutate(s, rng, lim));
    std::string err;
    ASSERT_TRUE(validate(s, &err)) << "after mutation " << i << ": " << err;
    ASSERT_LE(s.ops.size(), lim.max_ops);
    Scenario back;
    ASSERT_TRUE(decode_binary(encode_binary(s), &back, &err)) << err;
    ASSERT_EQ(back, s);
    if (s.ops.empty() || i % 200 == 0) s = starter(GetParam());
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(Mutation::kCount));
}

TEST_P(MutatorTest, CustomMutatorBodiesAlwaysEmitAValidScenarioThatFits) {
  std::vector<uint8_t> buf(512, 0xab);  // garbage: starts from the starter scenario
  size_t n = buf.size();
  for (unsigned seed = 0; seed < 2000; ++seed) {
    n = custom_mutate(GetParam(), buf.data(), n, buf.size(), seed, Limits{}, {});
    ASSERT_GT(n, 0u);
    ASSERT_LE(n, buf.size());
    Scenario s;
    std::string err;
    ASSERT_TRUE(decode_binary({buf.data(), n}, &s, &err)) << err;
    ASSERT_EQ(s.abi, GetParam());
  }
  std::vector<uint8_t> a = encode_binary(starter(GetParam())), out(1024);
  for (unsigned seed = 0; seed < 200; ++seed) {
    size_t m = custom_cross_over(GetParam(), a.data(), a.size(), buf.data(), n, out.data(), out.size(), seed, Limits{});
    Scenario s;
    std::string err;
    ASSERT_TRUE(m == 0 || decode_binary({out.data(), m}, &s, &err)) << err;
  }
}

TEST_P(MutatorTest, EveryStarterParsesAndIsValid) {
  const AbiSpec& abi = abi_spec(GetParam());
  std::span<const Scenario> all = starters(GetParam());
  ASSERT_FALSE(abi.engine.starters.empty());
  ASSERT_EQ(all.size(), abi.engine.starters.size()) << "a starter of the table did not parse";
  const Limits lim = limits_for(GetParam());
  for (size_t i = 0; i < all.size(); ++i) {
    const Scenario& s = all[i];
    std::string err;
    EXPECT_EQ(s.abi, GetParam()) << i;
    EXPECT_FALSE(s.ops.empty()) << i;
    EXPECT_LE(s.ops.size(), lim.max_ops) << i;
    EXPECT_TRUE(validate(s, &err)) << "starter " << i << ": " << err;
    Scenario fixed = s;
    repair(fixed, lim);
    EXPECT_EQ(fixed, s) << "starter " << i << " is changed by repair(): a slot names nothing made before it";
    Scenario back;
    ASSERT_TRUE(decode_binary(encode_binary(s), &back, &err)) << err;
    EXPECT_EQ(back, s);
  }
  EXPECT_EQ(starter(GetParam()), all.front()) << "an empty input runs the first";
}

TEST_P(MutatorTest, IsDeterministicGivenTheSeed) {
  // From garbage (a starter chosen by the seed) and from a starter, twice per seed.
  std::vector<uint8_t> start = encode_binary(starter(GetParam()));
  start.resize(start.size() + 64);  // room to grow
  for (unsigned seed = 0; seed < 300; ++seed) {
    for (bool garbage : {true, false}) {
      std::vector<uint8_t> a(2048, 0xab), b(2048, 0xab);
      size_t n = garbage ? 16 : start.size() - 64;
      if (!garbage) {
        std::copy(start.begin(), start.end(), a.begin());
        std::copy(start.begin(), start.end(), b.begin());
      }
      size_t na = custom_mutate(GetParam(), a.data(), n, a.size(), seed, limits_for(GetParam()), {});
      size_t nb = custom_mutate(GetParam(), b.data(), n, b.size(), seed, limits_for(GetParam()), {});
      ASSERT_EQ(na, nb) << "seed " << seed;
      ASSERT_TRUE(std::equal(a.begin(), a.begin() + na, b.begin())) << "seed " << seed;
    }
  }
  Rng r1(7), r2(7);
  Scenario s1 = starter(GetParam()), s2 = s1;
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(mutate(s1, r1, Limits{}), mutate(s2, r2, Limits{})) << i;
    ASSERT_EQ(s1, s2) << i;
    if (s1.ops.empty()) s1 = s2 = starter(GetParam());
  }
}

TEST_P(MutatorTest, EveryTieNamesRealArguments) {
  const AbiSpec& abi = abi_spec(GetParam());
  for (const ArgTie& t : abi.engine.ties)
    for (auto [op, arg] : {std::pair{t.op, t.arg}, std::pair{t.from_op, t.from_arg}}) {
      std::optional<uint8_t> code = op_code_by_name(abi, op);
      ASSERT_TRUE(code) << op;
      bool found = false;
      for (const ArgSpec& a : abi.ops[*code].args) found |= std::string_view(a.name) == arg;
      EXPECT_TRUE(found) << op << " has no argument " << arg;
    }
}

INSTANTIATE_TEST_SUITE_P(Abis, MutatorTest, ::testing::Values(Abi::kGmem, Abi::kFfa));

TEST(MutatorFfa, TheReclaim2OffsetAndItsConstituentsMoveTogetherHalfTheTime) {
  // The third starter: a lend, then tx_constituents offset=0, mem_reclaim2 (w4 0),
  // tx_constituents offset=32, mem_reclaim2 offset=32.
  const AbiSpec& abi = abi_spec(Abi::kFfa);
  const uint8_t cons = *op_code_by_name(abi, "tx_constituents"), r2 = *op_code_by_name(abi, "mem_reclaim2");
  const Scenario& lend = starters(Abi::kFfa)[2];
  std::vector<size_t> at_cons, at_r2;
  for (size_t i = 0; i < lend.ops.size(); ++i) {
    if (lend.ops[i].code == cons) at_cons.push_back(i);
    if (lend.ops[i].code == r2) at_r2.push_back(i);
  }
  ASSERT_EQ(at_cons.size(), 2u);
  ASSERT_EQ(at_r2.size(), 2u);
  ASSERT_LT(at_cons[1], at_r2[1]);
  constexpr size_t kR2Offset = 2, kConsOffset = 0;
  const unsigned kTries = 400;
  unsigned moved_back = 0, moved_forward = 0;
  for (unsigned seed = 0; seed < kTries; ++seed) {
    Rng rng(seed);
    // The call's side changed: the nearest earlier writer follows, no other op.
    Scenario s = lend;
    s.ops[at_r2[1]].args[kR2Offset] = 0xff0;
    carry_tie(s, at_r2[1], kR2Offset, rng);
    if (s.ops[at_cons[1]].args[kConsOffset] == 0xff0) ++moved_back;
    else EXPECT_EQ(s.ops[at_cons[1]].args[kConsOffset], 32u);
    EXPECT_EQ(s.ops[at_cons[0]].args[kConsOffset], 0u) << "not the nearest writer";
    EXPECT_EQ(s.ops[at_r2[0]].args[kR2Offset], 0u);
    // The writer's side changed: the nearest later call follows.
    s = lend;
    s.ops[at_cons[0]].args[kConsOffset] = 0x3ff0;
    carry_tie(s, at_cons[0], kConsOffset, rng);
    if (s.ops[at_r2[0]].args[kR2Offset] == 0x3ff0) ++moved_forward;
    else EXPECT_EQ(s.ops[at_r2[0]].args[kR2Offset], 0u);
    EXPECT_EQ(s.ops[at_r2[1]].args[kR2Offset], 32u) << "not the nearest call";
    // An argument that is not tied moves nothing.
    s = lend;
    s.ops[at_r2[1]].args[3] = 7;  // count
    carry_tie(s, at_r2[1], 3, rng);
    EXPECT_EQ(s.ops[at_cons[1]].args[kConsOffset], 32u);
  }
  EXPECT_GT(moved_back, kTries / 4);
  EXPECT_LT(moved_back, kTries * 3 / 4);
  EXPECT_GT(moved_forward, kTries / 4);
  EXPECT_LT(moved_forward, kTries * 3 / 4);
}

// A RECLAIM2 call that can reclaim: a mem_reclaim2 with count >= 1 whose handle
// was made by an earlier share, lend or donate, and before it (after that call) a
// tx_constituents with ranges at the call's offset.
bool has_reclaim2_with_constituents(const Scenario& s) {
  const AbiSpec& abi = abi_spec(Abi::kFfa);
  const uint8_t share = *op_code_by_name(abi, "mem_share"), lend = *op_code_by_name(abi, "mem_lend"),
                donate = *op_code_by_name(abi, "mem_donate"), cons = *op_code_by_name(abi, "tx_constituents"),
                r2 = *op_code_by_name(abi, "mem_reclaim2");
  std::vector<size_t> maker;  // op index that made handle k
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.code == share || op.code == lend || op.code == donate) maker.push_back(i);
    if (op.code != r2 || op.args[3] == 0 || op.args[0] >= maker.size()) continue;
    for (size_t j = maker[op.args[0]] + 1; j < i; ++j)
      if (s.ops[j].code == cons && s.ops[j].args[0] == op.args[2] && !s.blobs[s.ops[j].args[1]].empty())
        return true;
  }
  return false;
}

TEST(MutatorFfa, FromGarbageSomeSeedsBuildAReclaim2WithAConstituentsList) {
  // From an empty corpus every input starts as bytes that do not decode. Over N
  // seeds, the mutator must produce RECLAIM2 calls that can reclaim (set up
  // with a share and a constituents list in TX): random insertion of single ops
  // alone practically never builds that set-up.
  const unsigned kSeeds = 200;
  unsigned with = 0;
  for (unsigned seed = 0; seed < kSeeds; ++seed) {
    std::vector<uint8_t> buf(4096, 0x5a);
    size_t n = custom_mutate(Abi::kFfa, buf.data(), 3, buf.size(), seed, limits_for(Abi::kFfa), {});
    ASSERT_GT(n, 0u);
    Scenario s;
    std::string err;
    ASSERT_TRUE(decode_binary({buf.data(), n}, &s, &err)) << err;
    if (has_reclaim2_with_constituents(s)) ++with;
  }
  EXPECT_GE(with, kSeeds / 10) << with << " of " << kSeeds << " seeds";
}

TEST(MutatorFfa, SplicingAStarterKeepsTheOtherOpsOnTheirHandles) {
  const AbiSpec& abi = abi_spec(Abi::kFfa);
  const uint8_t reclaim = *op_code_by_name(abi, "mem_reclaim"), r2 = *op_code_by_name(abi, "mem_reclaim2");
  std::span<const Scenario> all = starters(Abi::kFfa);
  ASSERT_GE(all.size(), 2u);
  const Scenario& share_reclaim = all[0];  // share -> handle 0, mem_reclaim handle=0
  const Scenario& share_reclaim2 = all[1];  // share -> handle 0, mem_reclaim2 handle=0
  ASSERT_EQ(share_reclaim.ops.back().code, reclaim);
  ASSERT_EQ(share_reclaim2.ops.back().code, r2);
  const Limits lim = limits_for(Abi::kFfa);
  // Before: the block's share makes handle 0, the old share handle 1.
  Scenario s = share_reclaim;
  splice(s, share_reclaim2, 0, lim);
  ASSERT_EQ(s.ops.size(), share_reclaim.ops.size() + share_reclaim2.ops.size());
  EXPECT_EQ(s.ops[share_reclaim2.ops.size() - 1].code, r2);
  EXPECT_EQ(s.ops[share_reclaim2.ops.size() - 1].args[0], 0u) << "the block's reclaim2: its own share";
  EXPECT_EQ(s.ops.back().code, reclaim);
  EXPECT_EQ(s.ops.back().args[0], 1u) << "the old reclaim: still the old share";
  std::string err;
  EXPECT_TRUE(validate(s, &err)) << err;
  // After: the block's share makes handle 1, and its reclaim2 names it.
  s = share_reclaim;
  splice(s, share_reclaim2, s.ops.size(), lim);
  EXPECT_EQ(s.ops.back().code, r2);
  EXPECT_EQ(s.ops.back().args[0], 1u);
  EXPECT_EQ(s.ops[share_reclaim.ops.size() - 1].args[0], 0u);
  EXPECT_TRUE(has_reclaim2_with_constituents(s));
  // The byte strings travel with their ops.
  EXPECT_EQ(s.blobs.size(), share_reclaim.blobs.size() + share_reclaim2.blobs.size());
  EXPECT_EQ(s.blobs.back(), share_reclaim2.blobs.back());
  // Past max_ops: the tail of s goes, never the block.
  Limits small = lim;
  small.max_ops = share_reclaim2.ops.size() + 1;
  s = share_reclaim;
  splice(s, share_reclaim2, 1, small);
  EXPECT_EQ(s.ops.size(), small.max_ops);
  EXPECT_EQ(s.ops.back().code, r2);
}


}  // namespace
}  // namespace kconform::fuzz
