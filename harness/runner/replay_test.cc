// Replay (replay.h): recorded outcomes judged through the one step, under
// both names of the subcommand; and a record of the host target's outcomes,
// replayed, gives the very verdicts `run` gave (skipped without /dev/kvm).
#include "harness/runner/replay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "harness/runner/runner.h"
#include "harness/scenario/gmem_abi.h"
#include "models/gmem/model.h"
#include "targets/host_gmem/host_target.h"
#include "targets/skip_reasons.h"

#ifndef KC_CORPUS_DIR
#error "KC_CORPUS_DIR must name the corpora directory"
#endif

namespace kconform {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kScenario =
    "kconform-scenario 1\n"
    "abi gmem\n"
    "name test/replay/create\n"
    "create_vm\n"
    "create_gmem vm=0 size=0x200000 flags=0\n";

json identity() {
  return json::parse(R"({"type": "identity", "target": "qemu", "release": "7.3.4+deb13-amd64", "seconds": 1.5,
    "profile": {"write_abi": false, "page_size": 4096, "supported_flags": [3, 0],
                "vm_types": 1, "user_memory2": true, "gmem_on_vm_type": [true, false]},
    "caps": [["KVM_CAP_GUEST_MEMFD_FLAGS", 3]], "cap_bits": 23})");
}

class Replay : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kc-replay-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // Runs `kconform-runner <args...>`; returns the exit status, the verdict
  // records in *recs (when --out was given).
  int call(std::vector<std::string> args, std::vector<json>* recs = nullptr) {
    std::string out;
    if (recs) {
      out = (dir_ / ("out" + std::to_string(++n_) + ".jsonl")).string();
      args.insert(args.begin() + 1, {"--out", out});
    }
    args.insert(args.begin(), "kconform-runner");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    int rc = replay_main(static_cast<int>(argv.size()), argv.data());
    if (recs) {
      recs->clear();
      std::ifstream f(out);
      for (std::string line; std::getline(f, line);) recs->push_back(json::parse(line));
    }
    return rc;
  }

  std::string observations(const json& ops) {
    return write("obs" + std::to_string(++n_) + ".jsonl",
                 identity().dump() + "\n" + json{{"type", "scenario"}, {"s", 0}, {"ops", ops}}.dump() + "\n");
  }

  static std::vector<std::string> verdicts(const std::vector<json>& recs) {
    std::vector<std::string> out;
    for (const json& r : recs)
      if (r["type"] == "op") out.push_back(r["verdict"]);
    return out;
  }

  fs::path dir_;
  int n_ = 0;
};

TEST_F(Replay, RecordedOutcomesAreJudgedByTheModel) {
  std::string scen = write("s.kcs", kScenario);
  std::vector<json> recs;
  ASSERT_EQ(call({"replay", "--observations", observations(json::parse("[[0,0,0],[0,0,0]]")), scen}, &recs), 0);
  ASSERT_GE(recs.size(), 4u);
  EXPECT_EQ(recs[1]["type"], "target");
  EXPECT_EQ(recs[1]["target"], "qemu");
  EXPECT_EQ(recs[1]["profile"], "gmem-base");
  EXPECT_EQ(verdicts(recs), (std::vector<std::string>{"pass", "pass"}));
  EXPECT_EQ(recs.back()["seconds"], 1.5);
}

TEST_F(Replay, JudgeIsTheOldNameOfReplay) {
  std::string scen = write("s.kcs", kScenario);
  std::string obs = observations(json::parse("[[0,0,0],[1,22,0]]"));  // create_gmem: EINVAL, a lie
  std::vector<json> replayed, judged;
  EXPECT_EQ(call({"replay", "--observations", obs, scen}, &replayed), 1);
  EXPECT_EQ(call({"judge", "--observations", obs, scen}, &judged), 1);
  EXPECT_EQ(verdicts(replayed), (std::vector<std::string>{"pass", "violation"}));
  EXPECT_EQ(replayed, judged);
}

TEST_F(Replay, AScenarioIsJudgedUpToItsLastRecordedOp) {
  std::string scen = write("s.kcs", kScenario);
  std::vector<json> recs;
  ASSERT_EQ(call({"replay", "--observations", observations(json::parse("[[0,0,0]]")), scen}, &recs), 0);
  EXPECT_EQ(verdicts(recs), std::vector<std::string>{"pass"});
}

// Judge every op: the model adopts the failed create (no file) and goes on,
// so the close after it is judged (EBADF is right for a file never made).
TEST_F(Replay, AViolationIsAdoptedAndTheRestIsJudged) {
  std::string scen = write("s.kcs", std::string(kScenario) + "close gmem=0\n");
  std::vector<json> recs;
  EXPECT_EQ(call({"replay", "--observations", observations(json::parse("[[0,0,0],[1,22,0],[1,9,0]]")), scen}, &recs),
            1);
  EXPECT_EQ(verdicts(recs), (std::vector<std::string>{"pass", "violation", "pass"}));
  std::vector<json> ops;
  for (const json& r : recs)
    if (r["type"] == "op") ops.push_back(r);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[1]["adopted"], true);
  EXPECT_NE(ops[1]["note"].get<std::string>().find("adopted:"), std::string::npos);
}

// Pages re-read in the guest travel in the observations and are judged here:
// a new file whose first page holds bytes no op wrote breaks CONTENT.FOREIGN.
TEST_F(Replay, RecordedContentsAreJudged) {
  std::string scen = write("s.kcs",
                           "kconform-scenario 1\nabi gmem\nname test/replay/contents\ncreate_vm\n"
                           "create_gmem vm=0 size=0x4000 flags=MMAP|INIT_SHARED\n");
  std::vector<json> recs;
  json ops = json::parse(R"([[0,0,0],[0,0,0,"f 0 4000 0 4|p 0 0 h5a,zfff"]])");
  EXPECT_EQ(call({"replay", "--observations", observations(ops), scen}, &recs), 1);
  std::vector<json> got;
  for (const json& r : recs)
    if (r["type"] == "op") got.push_back(r);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1]["verdict"], "violation");
  EXPECT_EQ(got[1]["violated"], json::array({"GMEM.CONTENT.FOREIGN"}));
  EXPECT_EQ(got[1]["contents"]["differ"][0]["first_diff"], "0");
  // The same page all zero passes.
  ops = json::parse(R"([[0,0,0],[0,0,0,"f 0 4000 0 4|p 0 0 z1000"]])");
  EXPECT_EQ(call({"replay", "--observations", observations(ops), scen}, &recs), 0);
  // Malformed contents: exit 2, the field named.
  ops = json::parse(R"([[0,0,0],[0,0,0,"p 0 0 q12"]])");
  EXPECT_EQ(call({"replay", "--observations", observations(ops), scen}, &recs), 2);
}

TEST_F(Replay, BadObservationsAndHelp) {
  std::string scen = write("s.kcs", kScenario);
  std::string bad = write("bad.jsonl", json{{"type", "scenario"}, {"s", 5}, {"ops", json::array()}}.dump() + "\n");
  EXPECT_EQ(call({"replay", "--observations", bad, scen}), 2);
  EXPECT_EQ(call({"replay", scen}), 2);  // no --observations
  EXPECT_EQ(call({"replay", "--help"}), 0);
  EXPECT_EQ(call({"judge", "--help"}), 0);
  EXPECT_EQ(call({"pack", "--help"}), 0);
  EXPECT_EQ(call({"run", scen}), -1) << "not a replay subcommand";
}

// FF-A observations from a real machine (targets/qemu_arm64): judged by the
// FF-A model with a real EL3 and the target's state hidden (registers only).
constexpr const char* kFfaScenario =
    "kconform-scenario 1\nabi ffa\nname test/replay/ffa\nrequires page_4k\n"
    "version\nrxtx_map tx=0x80000000 rx=0x80010000 pages=1\n";

json ffa_identity() {
  return json::parse(R"({"type": "identity", "abi": "ffa", "target": "qemu-arm64",
    "release": "7.3.4+deb13-arm64+tf-a-2.12.1", "seconds": 0.5,
    "ffa": {"page_size": 4096, "phys_base": 2137784320, "host_pages": 2432, "mbox_pages": 1,
            "desc_buf_bytes": 36864, "version": 65538, "real_el3": 1, "reclaim2": 0,
            "spmc": {"version": 65538, "sp_ids": [32769], "reclaim2": false, "donate": false,
                     "one_send_in_flight": false}},
    "caps": [["page_size", 4096]], "cap_bits": 2})");
}

std::string ffa_obs(const json& id, const json& ops) {
  return id.dump() + "\n" + json{{"type", "scenario"}, {"s", 0}, {"ops", ops}}.dump() + "\n";
}

TEST_F(Replay, FfaRegistersAreJudgedWithTheStateHidden) {
  std::string scen = write("f.kcs", kFfaScenario);
  // FFA_VERSION -> 1.2 in x0; FFA_RXTX_MAP -> FFA_SUCCESS; no state digest recorded.
  json ok = json::parse(R"([[0,0,0,[65538,0,0,0,0,0,0,0]],[0,0,0,[2214592609,0,0,0,0,0,0,0]]])");
  std::vector<json> recs;
  ASSERT_EQ(call({"replay", "--observations", write("o1.jsonl", ffa_obs(ffa_identity(), ok)), scen}, &recs), 0);
  EXPECT_EQ(recs[1]["target"], "qemu-arm64");
  EXPECT_EQ(recs[1]["profile"], "ffa-4k-real-el3-regs-only");
  EXPECT_EQ(verdicts(recs), (std::vector<std::string>{"pass", "pass"}));
  // A refusal where the model expects success: a violation, adopted (a refused
  // call changes nothing), so the run goes on.
  json refused = json::parse(R"([[0,0,0,[65538,0,0,0,0,0,0,0]],[0,0,0,[2214592608,0,4294967294,0,0,0,0,0]]])");
  ASSERT_EQ(call({"replay", "--observations", write("o2.jsonl", ffa_obs(ffa_identity(), refused)), scen}, &recs),
            1);
  EXPECT_EQ(verdicts(recs), (std::vector<std::string>{"pass", "violation"}));
}

TEST_F(Replay, FfaIdentityFieldsAreChecked) {
  std::string scen = write("f.kcs", kFfaScenario);
  json ops = json::parse(R"([[0,0,0,[65538,0,0,0,0,0,0,0]]])");
  json no_base = ffa_identity();
  no_base["ffa"].erase("phys_base");
  EXPECT_EQ(call({"replay", "--observations", write("b1.jsonl", ffa_obs(no_base, ops)), scen}), 2);
  json bad_ps = ffa_identity();
  bad_ps["ffa"]["page_size"] = 8192;
  EXPECT_EQ(call({"replay", "--observations", write("b2.jsonl", ffa_obs(bad_ps, ops)), scen}), 2);
  json no_sps = ffa_identity();
  no_sps["ffa"]["spmc"]["sp_ids"] = json::array();
  EXPECT_EQ(call({"replay", "--observations", write("b4.jsonl", ffa_obs(no_sps, ops)), scen}), 2);
  json short_regs = json::parse(R"([[0,0,0,[65538,0]]])");
  EXPECT_EQ(call({"replay", "--observations", write("b3.jsonl", ffa_obs(ffa_identity(), short_regs)), scen}), 2);
}

// Records every outcome of the target it wraps.
class Recorder : public Target {
 public:
  explicit Recorder(Target& inner) : inner_(inner) {}
  const TargetIdentity& identity() const override { return inner_.identity(); }
  void begin(const Scenario& s) override {
    inner_.begin(s);
    ops_ = &recorded[&s];
    *ops_ = json::array();
  }
  Outcome exec(const Scenario& s, size_t i) override {
    Outcome o = inner_.exec(s, i);
    ops_->push_back({static_cast<int>(o.kind), o.value, o.aux});
    return o;
  }
  // The re-read travels in its text form, as from the QEMU agent.
  bool observe(const Scenario& s, size_t i, Contents* out) override {
    if (!inner_.observe(s, i, out)) return false;
    ops_->back().push_back(encode_contents(*out, host_gmem::pattern_hints(s), page_size));
    return true;
  }
  void end() override { inner_.end(); }
  std::map<const Scenario*, json> recorded;
  uint64_t page_size = 4096;

 private:
  Target& inner_;
  json* ops_ = nullptr;
};

std::vector<json> op_records(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    json r = json::parse(line);
    if (r["type"] == "op") out.push_back(r);
  }
  return out;
}

// The host's outcomes of the whole guest_memfd corpus, recorded while `run`
// judged them, then replayed: the same op records, verdict for verdict.
TEST_F(Replay, ARecordOfTheHostReplaysToTheSameVerdicts) {
  gmem::HostOpen host = gmem::open_host_target();
  if (!host.target && host.no_device) GTEST_SKIP() << KC_SKIP_NO_KVM << host.error;
  ASSERT_TRUE(host.target) << "/dev/kvm opens but the host target cannot run: " << host.error;
  // Every corpus scenario needs guest_memfd: without it none runs, nothing is recorded.
  if (!(host.target->identity().cap_bits & gmem::kCapGmem))
    GTEST_SKIP() << KC_SKIP_KERNEL << "no KVM_CAP_GUEST_MEMFD (no guest_memfd scenario runs)";
  std::vector<std::string> files;
  for (const char* sub : {"/gmem", "/z3/gmem"})
    for (const auto& e : fs::directory_iterator(std::string(KC_CORPUS_DIR) + sub))
      if (e.path().extension() == ".kcs") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<LoadedScenario> all;
  std::string error;
  ASSERT_TRUE(load_all(files, &all, &error)) << error;

  Recorder rec(*host.target);
  rec.page_size = host.profile.page_size;
  std::unique_ptr<Model> model = gmem::make_model(host.profile);
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    VerdictWriter w(f);
    run_scenarios(all, *model, rec, w);
  }
  std::fclose(f);
  std::string ran(buf, len);
  std::free(buf);

  const TargetIdentity& id = host.target->identity();
  const gmem::Profile& p = host.profile;
  json ident = {{"type", "identity"}, {"target", id.target}, {"release", id.release}, {"cap_bits", id.cap_bits},
                {"profile", {{"write_abi", p.write_abi}, {"page_size", p.page_size},
                             {"supported_flags", {p.supported_flags[0], p.supported_flags[1]}},
                             {"vm_types", p.vm_types}, {"user_memory2", p.user_memory2},
                             {"gmem_on_vm_type", {p.gmem_on_vm_type[0], p.gmem_on_vm_type[1]}}}},
                {"caps", json::array()}};
  for (const auto& [name, value] : id.caps) ident["caps"].push_back({name, value});
  std::string obs = ident.dump() + "\n";
  size_t recorded = 0;
  for (size_t n = 0; n < all.size(); ++n) {
    auto it = rec.recorded.find(&all[n].scenario);
    if (it == rec.recorded.end()) continue;  // unsupported here
    obs += json{{"type", "scenario"}, {"s", n}, {"ops", it->second}}.dump() + "\n";
    ++recorded;
  }
  ASSERT_GT(recorded, 100u);
  std::vector<std::string> args = {"replay", "--observations", write("host.jsonl", obs)};
  args.insert(args.end(), files.begin(), files.end());
  std::vector<json> replayed;
  EXPECT_LE(call(args, &replayed), 1);
  std::vector<json> expected = op_records(ran), got;
  for (const json& r : replayed)
    if (r["type"] == "op") got.push_back(r);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], expected[k]) << "op record " << k;
}

}  // namespace
}  // namespace kconform
