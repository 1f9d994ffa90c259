// The structure-aware mutator keeps every scenario valid, round-trips through
// the binary codec, and reaches each kind of mutation.
#include "harness/fuzz/mutator.h"

#include <gtest/gtest.h>

#include <set>

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

INSTANTIATE_TEST_SUITE_P(Abis, MutatorTest, ::testing::Values(Abi::kGmem, Abi::kFfa));

}  // namespace
}  // namespace kconform::fuzz
