// Tests of the spmc target with OP-TEE's S-EL1 SPMC (targets/optee, behind the
// SPMD stand-in) judged by the SPMC-side model configured as OP-TEE, through the
// runner: a share's whole lifetime with OP-TEE as the borrower passes, wrong
// answers are caught under the rule that licensed the right one, OP-TEE's
// refusal of fragmented sends is reported, and every scenario starts from the
// same bytes.
#include "targets/optee/optee_ffa_target.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/runner/runner.h"
#include "harness/runner/verdict_capture_test.h"
#include "models/ffa/spmc_model.h"
#include "targets/faulty/faulty_target.h"
#include "targets/optee/kc_optee_hooks.h"

namespace kconform::optee {
namespace {

using nlohmann::json;

// v1.1, one page each for TX and RX, a descriptor of four 4K pages at
// 0x80020000 for OP-TEE (0x8001), normal write-back memory (OP-TEE takes no
// other attributes for a share).
constexpr const char* kHead =
    "kconform-scenario 1\nabi ffa\nname %s\nrequires page_4k\n"
    "version version=V1_1\nrxtx_map tx=0x80000000 rx=0x80001000 pages=1\n";
constexpr const char* kShare4 = "tx_mem_desc layout=V1_1 ranges=hex:000002800000000004000000\n";

std::string scenario(const std::string& name, const std::string& body) {
  char head[512];
  std::snprintf(head, sizeof head, kHead, name.c_str());
  return head + body;
}

std::vector<LoadedScenario> load_text(const std::string& text) {
  char path[] = "/tmp/kc-optee-test-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  std::vector<LoadedScenario> out;
  std::string error;
  EXPECT_TRUE(load_all({path}, &out, &error)) << error;
  unlink(path);
  return out;
}

using test::RunResult;
using test::violated;

std::string dump(const RunResult& r) {
  std::string s;
  for (const json& rec : r.ops) s += rec.dump() + "\n";
  return s;
}

// One target per process: OP-TEE's state is global.
OpteeFfaTarget& target() {
  static std::unique_ptr<OpteeFfaTarget> t = [] {
    std::string err;
    auto p = open_optee_ffa_target(4096, &err);
    EXPECT_TRUE(p) << err;
    return p;
  }();
  return *t;
}

class OpteeTarget : public ::testing::Test {
 protected:
  void SetUp() override { model_ = ::kconform::ffa::make_spmc_model(target().layout()); }
  RunResult go(const std::string& text) { return test::run_captured(target(), *model_, &target(), load_text(text)); }
  std::unique_ptr<Model> model_;
};

TEST_F(OpteeTarget, Identity) {
  const TargetIdentity& id = target().identity();
  EXPECT_EQ(id.target, "spmc");
  EXPECT_EQ(id.release.rfind("op-tee-", 0), 0u) << id.release;
  EXPECT_EQ(id.release.substr(id.release.size() - 3), "-4k");
  EXPECT_EQ(id.profile, ::kconform::ffa::spmc_profile_name(target().layout()));
  EXPECT_EQ(id.cap_bits & ::kconform::ffa::kCapReclaim2, 0u);
}

// Share to OP-TEE, OP-TEE uses it (sp_retrieve), reclaim is DENIED while it
// does, it lets go (sp_relinquish: put + OPTEE_FFA_UNREGISTER_SHM), reclaim
// succeeds, and the handle is gone afterwards.
TEST_F(OpteeTarget, LifetimePasses) {
  RunResult r = go(scenario("optee/test/lifetime", std::string(kShare4) +
                                                       "mem_share\nsp_retrieve handle=0 sp=0x8001\n"
                                                       "mem_reclaim handle=0\nsp_relinquish handle=0 sp=0x8001\n"
                                                       "mem_reclaim handle=0\nmem_reclaim handle=0\n"));
  EXPECT_EQ(r.stats.violations, 0u) << dump(r);
  EXPECT_EQ(r.stats.unchecked, 0u) << dump(r);
  ASSERT_EQ(r.ops.size(), 9u);
  EXPECT_NE(r.ops[5]["observed"].get<std::string>().find("x2=0xfffffffa(-6)"), std::string::npos)
      << "reclaim while OP-TEE uses it: DENIED";
}

// A wrong status register, a wrong error code, a success for a refusal, a
// failed FFA_VERSION and a wrong table are each a violation of the rule that
// licensed the right answer.
TEST_F(OpteeTarget, WrongAnswersAreCaught) {
  struct Case {
    const char* fault;
    size_t op;
    const char* rule;
  } cases[] = {
      {"wrong-reg:mem_reclaim:2", 5, "FFA.SPMC.RECLAIM_HANDLE"},
      {"wrong-errno:mem_reclaim", 5, "FFA.SPMC.RECLAIM_HANDLE"},
      {"succeed:mem_reclaim", 5, "FFA.SPMC.RECLAIM_HANDLE"},
      {"fail:mem_reclaim", 4, "FFA.SPMC.RECLAIM_HANDLE"},
      {"fail:version", 0, "FFA.VERSION.NEGOTIATE"},
      {"wrong-state:mem_share", 3, "FFA.SPMC.ANSWER"},           // OP-TEE's table after the send (SPMC:TABLE-PAGES)
      {"wrong-state:mem_reclaim", 4, "FFA.SPMC.RECLAIM_HANDLE"},  // and after the reclaim
  };
  const std::string text = scenario("optee/test/wrong", std::string(kShare4) + "mem_share\nmem_reclaim handle=0\n"
                                                                                "mem_reclaim handle=0\n");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fault);
    std::string why;
    auto spec = parse_fault_spec(c.fault, &why);
    ASSERT_TRUE(spec) << why;
    std::unique_ptr<Target> faulty = wrap_faulty(std::make_unique<test::BorrowedTarget>(&target()), *spec);
    RunResult r = test::run_captured(*faulty, *model_, &target(), load_text(text));
    ASSERT_GT(r.ops.size(), c.op);
    for (size_t i = 0; i < c.op; ++i) EXPECT_EQ(r.ops[i]["verdict"], "pass") << r.ops[i].dump();
    EXPECT_EQ(r.ops[c.op]["verdict"], "violation") << r.ops[c.op].dump();
    EXPECT_TRUE(violated(r.ops[c.op]).count(c.rule)) << r.ops[c.op].dump();
  }
}

// OP-TEE 4.10.0 refuses every fragmented send (its swapped arguments,
// thread_spmc.c:1326-1327 against :954-955; ci/known-findings.json): the model
// wants FFA_MEM_FRAG_RX, the run reports FFA.SPMC.ANSWER, and OP-TEE's table
// stays empty (the state matches).
TEST_F(OpteeTarget, FragmentedSendIsRefusedAndReported) {
  RunResult r = go(scenario("optee/test/frag",
                            "tx_mem_desc layout=V1_1 ranges=hex:000001800000000001000000000002800000000001000000\n"
                            "mem_share frag_len=96\n"));
  ASSERT_EQ(r.ops.size(), 4u) << dump(r);
  EXPECT_EQ(r.ops[3]["verdict"], "violation") << r.ops[3].dump();
  EXPECT_TRUE(violated(r.ops[3]).count("FFA.SPMC.ANSWER")) << r.ops[3].dump();
  EXPECT_NE(r.ops[3]["observed"].get<std::string>().find("x2=0xfffffffe(-2)"), std::string::npos) << r.ops[3].dump();
}

// Every scenario starts from the same OP-TEE state, whatever the last one did.
TEST_F(OpteeTarget, EveryScenarioStartsFromTheSameBytes) {
  const std::vector<LoadedScenario> ss = load_text(scenario(
      "optee/test/dirty", std::string(kShare4) + "mem_share\nsp_retrieve handle=0 sp=0x8001\n"));
  auto state = [] {
    std::vector<uint8_t> b(kc_optee_state_bytes(nullptr));
    kc_optee_state_bytes(b.data());
    return b;
  };
  target().begin(ss[0].scenario);
  const std::vector<uint8_t> clean = state();
  for (size_t i = 0; i < ss[0].scenario.ops.size(); ++i) target().exec(ss[0].scenario, i);
  EXPECT_NE(state(), clean) << "the scenario changed nothing: the test shows nothing";
  target().begin(ss[0].scenario);
  EXPECT_EQ(state(), clean);
}

}  // namespace
}  // namespace kconform::optee
