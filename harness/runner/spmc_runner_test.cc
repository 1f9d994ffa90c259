// Tests of the spmc target (TF-A's EL3 SPMC, called straight from the Normal
// world) judged by the SPMC-side model, through the runner: a share's whole
// lifetime passes, wrong answers are caught under the rule that licensed the
// right one, the choices the specification leaves open are admitted, an SPMC
// that touches memory that is not there is a crash of that op and the run goes
// on, and every scenario starts from the same bytes.
//
// Scenarios are written here (the corpora are written for pKVM; several of
// their sends meet this SPMC's baselined deviations, ci/known-findings.json).
#include "targets/spmc/spmc_ffa_target.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "harness/runner/runner.h"
#include "harness/runner/verdict_capture_test.h"
#include "harness/scenario/ffa_spec.h"
#include "models/ffa/spmc_model.h"
#include "targets/faulty/faulty_target.h"
#include "targets/spmc/kc_spmc_hooks.h"

namespace kconform::spmc {
namespace {

using nlohmann::json;

// v1.1 (the newest version this SPMC takes memory sends from), one page each
// for TX and RX, a descriptor of four 4K pages at 0x80020000 for SP 0x8001.
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
  char path[] = "/tmp/kc-spmc-test-XXXXXX";
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
RunResult run(Target& target, Model& model, const InvariantSource* inv, const std::vector<LoadedScenario>& ss) {
  return test::run_captured(target, model, inv, ss);
}

std::string dump(const RunResult& r) {
  std::string s;
  for (const json& rec : r.ops) s += rec.dump() + "\n";
  return s;
}

// One target per process: TF-A's SPMC is global.
SpmcFfaTarget& target() {
  static std::unique_ptr<SpmcFfaTarget> t = [] {
    std::string err;
    auto p = open_spmc_ffa_target(4096, &err);
    EXPECT_TRUE(p) << err;
    return p;
  }();
  return *t;
}

class SpmcTarget : public ::testing::Test {
 protected:
  void SetUp() override { model_ = ::kconform::ffa::make_spmc_model(target().layout()); }
  RunResult go(const std::string& text) { return run(target(), *model_, &target(), load_text(text)); }
  std::unique_ptr<Model> model_;
};

TEST_F(SpmcTarget, Identity) {
  const TargetIdentity& id = target().identity();
  EXPECT_EQ(id.target, "spmc");
  EXPECT_EQ(id.release.rfind("tf-a-", 0), 0u) << id.release;
  EXPECT_EQ(id.release.substr(id.release.size() - 3), "-4k");
  EXPECT_EQ(id.profile, ::kconform::ffa::spmc_profile_name(target().layout()));
  EXPECT_EQ(id.cap_bits & ::kconform::ffa::kCapReclaim2, 0u) << "TF-A 2.12 has no FFA_MEM_RECLAIM2";
}

// Share, the borrower retrieves, reclaim is DENIED while it holds the memory,
// it relinquishes, reclaim succeeds, and the handle is gone afterwards.
TEST_F(SpmcTarget, LifetimePasses) {
  RunResult r = go(scenario("spmc/test/lifetime", std::string(kShare4) +
                                                      "mem_share\nsp_retrieve handle=0 sp=0x8001\n"
                                                      "mem_reclaim handle=0\nsp_relinquish handle=0 sp=0x8001\n"
                                                      "mem_reclaim handle=0\nmem_reclaim handle=0\n"));
  EXPECT_EQ(r.stats.violations, 0u) << dump(r);
  EXPECT_EQ(r.stats.unchecked, 0u) << dump(r);
  ASSERT_EQ(r.ops.size(), 9u);
  EXPECT_EQ(r.ops[5]["observed"].get<std::string>().find("x2=0xfffffffa(-6)") != std::string::npos, true)
      << "reclaim while retrieved: DENIED";
}

// A wrong status register, a wrong error code, a success for a refusal and a
// failed FFA_VERSION are each a violation of the rule that licensed the right
// answer. (A reserved register of a success is not judged: SPMC:ANSWER.)
TEST_F(SpmcTarget, WrongAnswersAreCaught) {
  struct Case {
    const char* fault;
    size_t op;
    const char* rule;
  } cases[] = {
      {"wrong-reg:mem_reclaim:2", 5, "FFA.SPMC.RECLAIM_HANDLE"},  // INVALID_PARAMETERS becomes NOT_SUPPORTED
      {"wrong-errno:mem_reclaim", 5, "FFA.SPMC.RECLAIM_HANDLE"},  // another error code
      {"succeed:mem_reclaim", 5, "FFA.SPMC.RECLAIM_HANDLE"},      // a reclaim of nothing succeeds
      {"fail:mem_reclaim", 4, "FFA.SPMC.RECLAIM_HANDLE"},         // the owner's reclaim refused
      {"fail:version", 0, "FFA.VERSION.NEGOTIATE"},
      {"wrong-state:mem_share", 3, "FFA.SPMC.ANSWER"},         // the table after the send (SPMC:TABLE)
      {"wrong-state:mem_reclaim", 4, "FFA.SPMC.RECLAIM_HANDLE"},  // the table after the reclaim
  };
  // The second reclaim names a transaction that is gone: INVALID_PARAMETERS.
  const std::string text = scenario("spmc/test/wrong", std::string(kShare4) + "mem_share\nmem_reclaim handle=0\n"
                                                                               "mem_reclaim handle=0\n");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fault);
    std::string why;
    auto spec = parse_fault_spec(c.fault, &why);
    ASSERT_TRUE(spec) << why;
    std::unique_ptr<Target> faulty = wrap_faulty(std::make_unique<test::BorrowedTarget>(&target()), *spec);
    RunResult r = run(*faulty, *model_, &target(), load_text(text));
    ASSERT_GT(r.ops.size(), c.op);
    for (size_t i = 0; i < c.op; ++i) EXPECT_EQ(r.ops[i]["verdict"], "pass") << r.ops[i].dump();
    EXPECT_EQ(r.ops[c.op]["verdict"], "violation") << r.ops[c.op].dump();
    EXPECT_TRUE(violated(r.ops[c.op]).count(c.rule)) << r.ops[c.op].dump();
  }
}

// SPMC:NS-TRUST and SPMC:HANDLE-SPEC: a send from another Normal-world
// endpoint (sender 1) is admitted either way and reclaimed by the Normal
// world; the handle TF-A picks (bit 63 clear, not the model's) is taken.
TEST_F(SpmcTarget, SpecOpenChoicesAreAdmitted) {
  RunResult r = go(scenario("spmc/test/open", "tx_mem_desc layout=V1_1 sender=1 ranges=hex:000002800000000001000000\n"
                                              "mem_share\nmem_reclaim handle=0\n"));
  EXPECT_EQ(r.stats.violations, 0u) << dump(r);
  ASSERT_EQ(r.ops.size(), 5u);
  std::set<std::string> rules;
  for (const auto& h : r.ops[3]["rules"]) rules.insert(h[0].get<std::string>());
  EXPECT_TRUE(rules.count("FFA.SPMC.NS_TRUST")) << r.ops[3].dump();
  EXPECT_TRUE(rules.count("FFA.SPMC.HANDLE")) << r.ops[3].dump();
}

// An SPMC that reads a mailbox with no memory behind it ends that call as
// BL31 would (an external abort: a crash of the op, SIGABRT); the run goes
// on, and the next scenario starts from the clean snapshot and passes.
TEST_F(SpmcTarget, ExternalAbortEndsTheOpNotTheRun) {
  const std::string bad = scenario("spmc/test/abort", "rxtx_unmap\nrxtx_map tx=0x10000000 rx=0x80001000 pages=1\n"
                                                      "tx_mem_desc layout=V1_1 ranges=hex:000002800000000001000000\n"
                                                      "mem_share\n");
  const std::string good = scenario("spmc/test/after", std::string(kShare4) + "mem_share\nmem_reclaim handle=0\n");
  RunResult r = go(bad + "\n" + good);
  ASSERT_EQ(r.ops.size(), 11u) << dump(r);
  EXPECT_NE(r.ops[5]["observed"].get<std::string>().find("SIGABRT"), std::string::npos) << r.ops[5].dump();
  for (size_t i = 6; i < 11; ++i) EXPECT_EQ(r.ops[i]["verdict"], "pass") << r.ops[i].dump();
  EXPECT_EQ(kc_spmc_counters.locks_held, 0);
}

// A TF-A 2.12.1 bug the fuzzer found (kconform fuzz --target spmc, in its
// first minute): the Normal world starts a fragmented send at v1.1, calls
// FFA_VERSION(1.2), and sends the last fragment. spmc_ffa_fill_desc() then
// checks the whole descriptor with the caller's current version, finds it
// corrupt and panics (spmc_shmem_check_obj: "BUG: ... corrupt memory region
// descriptor", spmc_shared_mem.c:800-803): a Normal-world caller stops EL3.
// (pKVM fixes the version after the first negotiation, so its host cannot.)
// The model wants INVALID_PARAMETERS; the op is a crash of the code under
// test (SIGABRT), reported, and the next scenario runs clean.
TEST_F(SpmcTarget, TfaPanicsOnAVersionChangeInTheMiddleOfASend) {
  const std::string text = scenario(
      "spmc/test/version-mid-send",
      "tx_mem_desc layout=V1_1 ranges=hex:000001800000000001000000000002800000000001000000\n"
      "mem_share frag_len=96\nversion\ntx_constituents offset=0 ranges=hex:000002800000000001000000\n"
      "mem_frag_tx handle=0 frag_len=16\n");
  const std::string after = scenario("spmc/test/after-panic", std::string(kShare4) + "mem_share\nmem_reclaim handle=0\n");
  RunResult r = go(text + "\n" + after);
  ASSERT_EQ(r.ops.size(), 12u) << dump(r);
  EXPECT_EQ(r.ops[6]["verdict"], "violation") << r.ops[6].dump();
  EXPECT_NE(r.ops[6]["observed"].get<std::string>().find("SIGABRT"), std::string::npos) << r.ops[6].dump();
  for (size_t i = 7; i < 12; ++i) EXPECT_EQ(r.ops[i]["verdict"], "pass") << r.ops[i].dump();
  EXPECT_EQ(kc_spmc_counters.locks_held, 0);
}

// Every scenario starts from the same SPMC and glue state, whatever the last
// one did (snapshot restore covers what TF-A and the target change).
TEST_F(SpmcTarget, EveryScenarioStartsFromTheSameBytes) {
  const std::vector<LoadedScenario> ss = load_text(scenario(
      "spmc/test/dirty", std::string(kShare4) + "mem_share\nsp_retrieve handle=0 sp=0x8001\n"
                                                "partition_info_get\n"));
  auto pieces = [] {
    std::vector<uint8_t> all;
    for (int p : {KC_SPMC_PIECE_TREE, KC_SPMC_PIECE_GLUE, KC_SPMC_PIECE_DATASTORE}) {
      std::vector<uint8_t> b(kc_spmc_piece_bytes(p, nullptr));
      kc_spmc_piece_bytes(p, b.data());
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  };
  target().begin(ss[0].scenario);
  const std::vector<uint8_t> clean = pieces();
  for (size_t i = 0; i < ss[0].scenario.ops.size(); ++i) target().exec(ss[0].scenario, i);
  EXPECT_NE(pieces(), clean) << "the scenario changed nothing: the test shows nothing";
  target().begin(ss[0].scenario);
  EXPECT_EQ(pieces(), clean);
}

}  // namespace
}  // namespace kconform::spmc
