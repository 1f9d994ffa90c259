// One input, one judgement: `run` (run_scenarios) and the fuzz runner
// (FuzzRunner::run_scenario) go through the same step and blame the same
// rules for every op of every scenario of corpora/ (gmem on the host target,
// FF-A on the EL2 handler), plainly and with the target lying (the faulty
// wrapper of `run --fault`). A broken invariant alone stops the judging in
// neither. And the fuzz runner bounds its inputs from the ABI tables alone.
#include "harness/fuzz/fuzz_runner.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <ostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "harness/runner/runner.h"
#include "harness/runner/runner_main.h"
#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "harness/scenario/gmem_abi.h"
#include "targets/invariants.h"
#include "targets/skip_reasons.h"
#ifdef KC_FUZZ_TEST_EL2
#include "harness/runner/target_el2.h"
#endif

#ifndef KC_CORPUS_DIR
#error "KC_CORPUS_DIR must name the corpora directory"
#endif

namespace kconform::fuzz {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Rule IDs blamed per op (ops with none left out).
using Blame = std::map<size_t, std::vector<std::string>>;

std::vector<std::string> ids(const std::vector<RuleId>& rules) {
  std::vector<std::string> out;
  for (RuleId r : rules) out.push_back(rule_info(r).id);
  return out;
}

std::string show(const Blame& b) {
  std::string out;
  for (const auto& [op, rules] : b) {
    out += " op " + std::to_string(op) + ":";
    for (const std::string& r : rules) out += " " + r;
  }
  return out.empty() ? " (none)" : out;
}

// Every .kcs file under corpora/<abi> and corpora/z3/<abi>.
std::vector<std::string> corpus(const std::string& abi) {
  std::vector<std::string> files;
  for (const std::string& d : {std::string(KC_CORPUS_DIR) + "/" + abi, std::string(KC_CORPUS_DIR) + "/z3/" + abi})
    for (const auto& e : fs::recursive_directory_iterator(d))
      if (e.path().extension() == ".kcs") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Scenarios that end the process of the code under test by design: a crash
// or hang of the stock handler that `run` reports as CRASH.* in a fresh
// process and resumes after (the CRASH.* entries of ci/known-findings.json).
// In one process they would end this test, so both paths leave them out.
std::vector<std::string> crashing_scenarios() {
  std::ifstream in(std::string(KC_CORPUS_DIR) + "/../ci/known-findings.json");
  std::vector<std::string> globs;
  if (!in) return globs;
  const json doc = json::parse(in);
  for (const json& e : doc["findings"])
    if (e["rule"].get<std::string>().rfind("CRASH.", 0) == 0) globs.push_back(e["scenario"].get<std::string>());
  return globs;
}

bool crashes(const std::vector<std::string>& globs, const std::string& name) {
  for (const std::string& g : globs)
    if (fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

const TargetFamily* family_for(Abi abi) {
  if (abi == Abi::kGmem) return &host_target_family();
#ifdef KC_FUZZ_TEST_EL2
  return &el2::el2_target_family();
#else
  return nullptr;
#endif
}

struct Case {
  Abi abi;
  const char* fault;  // a --fault spec, or ""
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << abi_spec(c.abi).name << " " << (*c.fault ? c.fault : "plain");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = std::string(abi_spec(info.param.abi).name) + "_" + (*info.param.fault ? info.param.fault : "plain");
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class SameBlame : public ::testing::TestWithParam<Case> {
 protected:
  // Opens the case's target the way `run --target NAME --fault SPEC` does;
  // false and error_ if it cannot, and no_kvm_ when that is because the
  // machine has no /dev/kvm this process may open (the host target only).
  bool open(OpenTarget* t) {
    const TargetFamily* family = family_for(GetParam().abi);
    if (!family) {  // same_blame_cases() has FF-A cases only with an EL2 library
      error_ = "no EL2 library in this build";
      return false;
    }
    const TargetFamily* families[] = {family};
    if (!open_target(families, family->name, GetParam().fault, t, &error_)) {
      no_kvm_ = GetParam().abi == Abi::kGmem && machine_has_no_kvm();
      return false;
    }
    return true;
  }
  // The machine has no /dev/kvm this process may open: the errnos of
  // gmem::HostOpen::no_device (targets/host_gmem/host_target.cc), asked here
  // because harness/fuzz may not use targets/host_gmem (ci/layers.toml).
  static bool machine_has_no_kvm() {
    const int fd = ::open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      return false;
    }
    return errno == ENOENT || errno == ENODEV || errno == ENXIO || errno == EACCES || errno == EPERM;
  }
  std::string error_;
  bool no_kvm_ = false;
};

// In the ASan+UBSan build, a sanitizer report in the kernel code under test
// ends the process (-fno-sanitize-recover): that is a finding of `run --asan`
// (CRASH.SANITIZER), not a question of blame. (With all of UBSan, Debian 7.3's
// ffa.c:518 and :535 reported misaligned descriptor reads; kernel code now gets
// the kernel's own arm64 UBSan set, without alignment: targets/el2/README.md.)
// The FF-A cases are instantiated in the plain build only, which ctest runs too.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Every op of every corpus scenario the target can run: the rules blamed on
// the runner's path (seen through run_scenarios' observer, checked against
// the verdict stream it wrote) equal those of the fuzz runner's findings.
TEST_P(SameBlame, RunAndFuzzBlameTheSameRulesForEveryOp) {
  const Abi abi = GetParam().abi;
  // One target at a time: the EL2 handler is one per process.
  auto for_run = std::make_unique<OpenTarget>();
  if (!open(for_run.get())) {
    if (no_kvm_) GTEST_SKIP() << KC_SKIP_NO_KVM << error_;
    FAIL() << error_;
  }
  const uint32_t caps = for_run->target->identity().cap_bits;
  // Every guest_memfd corpus scenario needs guest_memfd: without it none runs.
  if (abi == Abi::kGmem && !(caps & gmem::kCapGmem))
    GTEST_SKIP() << KC_SKIP_KERNEL << "no KVM_CAP_GUEST_MEMFD (no guest_memfd scenario runs)";
  std::vector<LoadedScenario> all;
  std::string error;
  ASSERT_TRUE(load_all(corpus(abi_spec(abi).name), &all, &error)) << error;
  const std::vector<std::string> globs = crashing_scenarios();
  const size_t loaded = all.size();
  std::erase_if(all, [&](const LoadedScenario& ls) { return crashes(globs, ls.scenario.name); });
  if (abi == Abi::kFfa) EXPECT_LT(all.size(), loaded) << "the crash list no longer matches any scenario";
  ASSERT_GT(all.size(), 50u);

  // The runner's path.
  std::map<std::pair<std::string, size_t>, Blame> by_run;
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    VerdictWriter w(f);
    run_scenarios(all, *for_run->model, *for_run->target, w, for_run->invariants,
                  [&](const LoadedScenario& ls, size_t op, const StepResult& r) {
                    Blame& b = by_run[{ls.file, ls.index}];
                    if (!r.blamed.empty()) b[op] = ids(r.blamed);
                  });
  }
  std::fclose(f);
  std::istringstream stream(std::string(buf, len));
  std::free(buf);
  // What the runner wrote agrees: an op is a violation exactly when it blames
  // rules, and it blames rules it lists as violated.
  size_t violations = 0;
  for (std::string line; std::getline(stream, line);) {
    json rec = json::parse(line);
    if (rec["type"] != "op" || rec["verdict"] == "unsupported") continue;
    const Blame& b = by_run[{rec["file"].get<std::string>(), rec["index"].get<size_t>()}];
    auto it = b.find(rec["op"].get<size_t>());
    ASSERT_EQ(rec["verdict"] == "violation", it != b.end()) << line;
    if (it == b.end()) continue;
    ++violations;
    std::vector<std::string> violated = rec["violated"];
    for (const std::string& r : it->second)
      EXPECT_NE(std::find(violated.begin(), violated.end(), r), violated.end()) << r << " not violated in " << line;
  }

  for_run.reset();

  // The fuzz runner's path, one scenario at a time, as it runs a decoded input.
  OpenTarget for_fuzz;
  ASSERT_TRUE(open(&for_fuzz)) << error_;
  FuzzRunner fuzz(std::move(for_fuzz), fuzz_config_for(abi), FuzzRunner::Mode::kCollect);
  size_t compared = 0;
  for (const LoadedScenario& ls : all) {
    if (ls.scenario.requires_caps & ~caps) continue;  // `run`: unsupported
    Blame by_fuzz;
    for (const Finding& fd : fuzz.run_scenario(ls.scenario)) {
      EXPECT_EQ(by_fuzz.count(fd.op), 0u);
      by_fuzz[fd.op] = ids(fd.blamed);
      std::string joined;
      for (const std::string& r : by_fuzz[fd.op]) joined += (joined.empty() ? "" : ",") + r;
      EXPECT_EQ(fd.rules, joined);
    }
    const Blame& run = by_run[{ls.file, ls.index}];
    EXPECT_EQ(run, by_fuzz) << ls.scenario.name << " (" << ls.file << " #" << ls.index << ")\n  run: " << show(run)
                            << "\n  fuzz:" << show(by_fuzz);
    ++compared;
  }
  EXPECT_GT(compared, 20u);
  std::printf("[ blame     ] %zu scenarios compared, %zu ops with blamed rules\n", compared, violations);
  if (*GetParam().fault) EXPECT_GT(violations, 0u) << "the fault must make the target lie somewhere";
}

// The cases: guest_memfd on the host, FF-A on el2 in a build with an EL2
// library (a build without a kernel tree has no FF-A case at all, rather
// than cases that could only skip), and not in the ASan build (above).
std::vector<Case> same_blame_cases() {
  std::vector<Case> cases = {{Abi::kGmem, ""}, {Abi::kGmem, "wrong-errno:write:all"}, {Abi::kGmem, "succeed:pwrite"},
                             {Abi::kGmem, "wrong-content:load"}, {Abi::kGmem, "fail:create_gmem:2"}};
#ifdef KC_FUZZ_TEST_EL2
  if (!kSanitized)
    cases.insert(cases.end(), {{Abi::kFfa, ""}, {Abi::kFfa, "wrong-reg:mem_reclaim2:all"},
                               {Abi::kFfa, "wrong-state:mem_share"}, {Abi::kFfa, "fail:mem_reclaim"},
                               {Abi::kFfa, "succeed:mem_reclaim2"}});
#endif
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Corpora, SameBlame, ::testing::ValuesIn(same_blame_cases()), case_name);

#ifdef KC_FUZZ_TEST_EL2

// Wraps a target and breaks an invariant of its own at one op (and passes
// the wrapped target's on).
class BreakAt : public Target, public InvariantSource {
 public:
  BreakAt(std::unique_ptr<Target> inner, const InvariantSource* inner_inv, size_t op, RuleId rule)
      : inner_(std::move(inner)), inner_inv_(inner_inv), op_(op), rule_(rule) {}
  const TargetIdentity& identity() const override { return inner_->identity(); }
  void begin(const Scenario& s) override {
    breaks_.clear();
    inner_->begin(s);
  }
  Outcome exec(const Scenario& s, size_t i) override {
    Outcome o = inner_->exec(s, i);
    breaks_.clear();
    if (inner_inv_)
      for (const InvariantBreak& b : inner_inv_->invariant_breaks()) breaks_.push_back(b);
    if (i == op_) breaks_.push_back({rule_, "injected at op " + std::to_string(i)});
    return o;
  }
  void end() override { inner_->end(); }
  std::span<const InvariantBreak> invariant_breaks() const override { return breaks_; }

 private:
  std::unique_ptr<Target> inner_;
  const InvariantSource* inner_inv_;
  size_t op_;
  RuleId rule_;
  std::vector<InvariantBreak> breaks_;
};

// The EL2 target (with the fault, if any), an invariant broken at op `at`.
OpenTarget el2_breaking_at(const std::string& fault, size_t at, RuleId rule) {
  const TargetFamily* families[] = {&el2::el2_target_family()};
  OpenTarget inner, t;
  std::string error;
  EXPECT_TRUE(open_target(families, "el2", fault, &inner, &error)) << error;
  if (!inner.target) return t;
  t.model = std::move(inner.model);
  auto w = std::make_unique<BreakAt>(std::move(inner.target), inner.invariants, at, rule);
  t.invariants = w.get();
  t.target = std::move(w);
  return t;
}

// A broken invariant alone is a violation of its rule, and the model goes on
// judging: the later ops pass, or, when the target then lies, are violations
// of the model's rules (not "unchecked"), in `run` and in the fuzz runner.
class InvariantOnly : public ::testing::TestWithParam<const char*> {};

TEST_P(InvariantOnly, ABrokenInvariantAloneDoesNotStopJudging) {
  const std::string fault = GetParam();
  const RuleId injected = *rule_by_id("FFA.R2.UNSHARE");
  std::vector<LoadedScenario> smoke;
  std::string error;
  ASSERT_TRUE(load_all({std::string(KC_CORPUS_DIR) + "/ffa/smoke.kcs"}, &smoke, &error)) << error;
  const std::string name = std::string("ffa/smoke/share-reclaim-") + KC_FUZZ_TEST_EL2;
  auto it = std::find_if(smoke.begin(), smoke.end(), [&](const LoadedScenario& ls) { return ls.scenario.name == name; });
  ASSERT_NE(it, smoke.end()) << name;
  const Scenario& s = it->scenario;
  ASSERT_EQ(s.ops.size(), 5u);
  ASSERT_EQ(format_op(s, 4).rfind("mem_reclaim", 0), 0u) << format_op(s, 4);

  // `run`.
  std::vector<std::string> verdicts;
  std::vector<std::vector<std::string>> run_blamed;
  {
    OpenTarget t = el2_breaking_at(fault, 1, injected);
    ASSERT_TRUE(t.target);
    std::FILE* sink = std::fopen("/dev/null", "w");
    VerdictWriter w(sink);
    run_scenarios({*it}, *t.model, *t.target, w, t.invariants,
                  [&](const LoadedScenario&, size_t, const StepResult& r) {
                    verdicts.push_back(to_string(r.verdict.kind));
                    run_blamed.push_back(ids(r.blamed));
                  });
    std::fclose(sink);
  }
  ASSERT_EQ(verdicts.size(), 5u);
  EXPECT_EQ(verdicts[1], "violation");
  EXPECT_EQ(run_blamed[1], std::vector<std::string>{"FFA.R2.UNSHARE"});
  EXPECT_EQ(verdicts[2], "pass") << "judged after the broken invariant";
  EXPECT_EQ(verdicts[3], "pass") << "judged after the broken invariant";
  if (fault.empty()) {
    EXPECT_EQ(verdicts[4], "pass");
  } else {
    EXPECT_EQ(verdicts[4], "violation") << "the lie at op 4 is judged, not unchecked";
    EXPECT_FALSE(run_blamed[4].empty());
  }

  // The fuzz runner.
  OpenTarget t = el2_breaking_at(fault, 1, injected);
  ASSERT_TRUE(t.target);
  FuzzRunner fuzz(std::move(t), fuzz_config_for(Abi::kFfa), FuzzRunner::Mode::kCollect);
  std::vector<Finding> found = fuzz.run_scenario(s);
  std::vector<std::pair<size_t, std::vector<std::string>>> got, want;
  for (const Finding& fd : found) got.emplace_back(fd.op, ids(fd.blamed));
  for (size_t i = 0; i < run_blamed.size(); ++i)
    if (!run_blamed[i].empty()) want.emplace_back(i, run_blamed[i]);
  EXPECT_EQ(got, want);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].op, 1u);
  EXPECT_FALSE(found[0].known);
  EXPECT_NE(found[0].detail.find("invariant: injected at op 1"), std::string::npos) << found[0].detail;
  EXPECT_EQ(found.size(), fault.empty() ? 1u : 2u) << "the fuzz runner went on after the broken invariant";
}

INSTANTIATE_TEST_SUITE_P(El2, InvariantOnly, ::testing::Values("", "wrong-state:mem_reclaim"),
                         [](const auto& info) { return std::string(*info.param ? "lie_at_reclaim" : "plain"); });

// Findings never stop the fuzz runner (Mode::kRecord, what `kconform fuzz` runs):
// each is recorded under its signature, stored once in the folder (also when a
// second process records it there), counted every time; a baselined one is
// counted and not stored. The EL2 target lies at mem_reclaim (`--fault
// wrong-state:mem_reclaim`), so share-reclaim has one finding, at op 4.
class RecordFindings : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kc-findings-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    std::vector<LoadedScenario> smoke;
    std::string error;
    ASSERT_TRUE(load_all({std::string(KC_CORPUS_DIR) + "/ffa/smoke.kcs"}, &smoke, &error)) << error;
    const std::string name = std::string("ffa/smoke/share-reclaim-") + KC_FUZZ_TEST_EL2;
    for (const LoadedScenario& ls : smoke)
      if (ls.scenario.name == name) s_ = ls.scenario;
    ASSERT_EQ(s_.name, name);
    bytes_ = encode_binary(s_);
  }
  void TearDown() override {
    ::unsetenv(kEnvBaseline);
    fs::remove_all(dir_);
  }
  std::unique_ptr<FuzzRunner> lying_runner(FuzzRunner::Mode mode = FuzzRunner::Mode::kCollect) {
    const TargetFamily* families[] = {&el2::el2_target_family()};
    OpenTarget t;
    std::string error;
    EXPECT_TRUE(open_target(families, "el2", "wrong-state:mem_reclaim", &t, &error)) << error;
    return std::make_unique<FuzzRunner>(std::move(t), fuzz_config_for(Abi::kFfa), mode);
  }
  std::vector<fs::path> stored(const std::string& ext) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ext) out.push_back(e.path());
    return out;
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir_;
  Scenario s_;
  std::vector<uint8_t> bytes_;
};

TEST_F(RecordFindings, AViolationIsStoredOnceCountedAndTheRunnerGoesOn) {
  auto fuzz = lying_runner();
  fuzz->record_to(dir_.string());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0) << "run " << i;
  const FindingStore& store = *fuzz->store();
  EXPECT_EQ(store.executions(), 3u);
  ASSERT_EQ(store.counts().size(), 1u);
  const std::string sig = store.counts().begin()->first.first;
  const FindingStore::Count count = store.counts().begin()->second;
  EXPECT_EQ(count.count, 3u) << "every occurrence counted";
  EXPECT_FALSE(count.known);
  EXPECT_NE(sig.find(" mem_reclaim el2"), std::string::npos) << sig;
  EXPECT_EQ(sig.rfind("FFA.", 0), 0u) << sig;
  // Stored once: the input as given, its text form, its verdict records and log line.
  ASSERT_EQ(stored(".kcsb").size(), 1u);
  const fs::path base = dir_ / count.stem;
  EXPECT_EQ(stored(".kcsb")[0], fs::path(base.string() + ".kcsb"));
  EXPECT_EQ(read(base.string() + ".kcsb"), std::string(bytes_.begin(), bytes_.end()));
  std::vector<Scenario> again;
  std::string error;
  ASSERT_TRUE(load_scenario_file(base.string() + ".kcs", &again, &error)) << error;
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(format_text(again[0]), format_text(s_));
  EXPECT_NE(read(base.string() + ".kcs").find("# violation found by kconform fuzz: " + sig), std::string::npos);
  std::istringstream jsonl(read(base.string() + ".jsonl"));
  std::string line;
  std::vector<json> records;
  while (std::getline(jsonl, line)) records.push_back(json::parse(line));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["type"], "target");
  EXPECT_EQ(records[1]["verdict"], "violation");
  EXPECT_EQ(records[1]["op"], 4);
  EXPECT_NE(read(base.string() + ".log").find("violated by op 4 (mem_reclaim"), std::string::npos);
  // The counts the driver sums (findings/.counts/<pid>.tsv).
  fuzz.reset();
  const std::string counts = read(dir_ / ".counts" / (std::to_string(::getpid()) + ".tsv"));
  EXPECT_NE(counts.find("execs\t3\n"), std::string::npos) << counts;
  EXPECT_NE(counts.find("3\tnew\t" + count.stem + "\t" + sig + "\n"), std::string::npos) << counts;
}

TEST_F(RecordFindings, ADuplicateFromAnotherProcessIsCountedNotStoredAgain) {
  auto first = lying_runner();
  first->record_to(dir_.string());
  ASSERT_EQ(first->run(bytes_.data(), bytes_.size()), 0);
  ASSERT_EQ(stored(".kcsb").size(), 1u);
  const fs::path kcsb = stored(".kcsb")[0];
  const auto mtime = fs::last_write_time(kcsb);
  // A second store on the same folder (another fork job, a restart, the next run).
  auto second = lying_runner();
  second->record_to(dir_.string());
  ASSERT_EQ(second->run(bytes_.data(), bytes_.size()), 0);
  ASSERT_EQ(second->run(bytes_.data(), bytes_.size()), 0);
  EXPECT_EQ(stored(".kcsb").size(), 1u);
  EXPECT_EQ(stored(".kcs").size(), 1u);
  EXPECT_EQ(fs::last_write_time(kcsb), mtime) << "never overwritten";
  ASSERT_EQ(second->store()->counts().size(), 1u);
  const FindingStore::Count& c = second->store()->counts().begin()->second;
  EXPECT_EQ(c.count, 2u);
  EXPECT_EQ(fs::path(dir_ / (c.stem + ".kcsb")), kcsb) << "the duplicate names where it is stored";
}

TEST_F(RecordFindings, ARemovedFindingIsStoredAgainOnlyWithRearm) {
  for (const bool rearm : {false, true}) {
    SCOPED_TRACE(rearm ? "KCONFORM_FUZZ_REARM=1" : "no rearm");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (rearm) ::setenv(kEnvRearm, "1", 1);
    auto fuzz = lying_runner();
    fuzz->record_to(dir_.string());
    ::unsetenv(kEnvRearm);
    ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
    ASSERT_EQ(stored(".kcsb").size(), 1u);
    const fs::path kcsb = stored(".kcsb")[0];
    // The mutant bench moves a finding it does not count out of the folder.
    fs::rename(kcsb, dir_ / "excluded.kcsb.away");
    ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
    EXPECT_FALSE(fs::exists(kcsb)) << "not before the store looks";
    fuzz->store()->rearm_removed();  // what executed() does at most once a second
    ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
    ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
    EXPECT_EQ(fs::exists(kcsb), rearm) << "stored again at the next occurrence only with rearm";
    EXPECT_EQ(fuzz->store()->counts().begin()->second.count, 4u) << "every occurrence counted";
    if (rearm) {
      EXPECT_EQ(fuzz->store()->counts().begin()->second.stem, kcsb.stem().string());
      ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
      EXPECT_EQ(stored(".kcsb").size(), 1u) << "then a duplicate again";
    }
  }
}

TEST_F(RecordFindings, ABaselinedFindingIsCountedNotStored) {
  std::vector<Finding> found = lying_runner()->run_scenario(s_);
  ASSERT_EQ(found.size(), 1u);
  std::string entries;  // baselined for this scenario only, as the corpus entries are
  for (RuleId r : found[0].blamed) entries += rule_info(r).id + std::string("\t") + s_.name + "\n";
  ::setenv(kEnvBaseline, entries.c_str(), 1);
  auto fuzz = lying_runner();
  fuzz->record_to(dir_.string());
  ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
  ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
  EXPECT_TRUE(stored(".kcsb").empty());
  ASSERT_EQ(fuzz->store()->counts().size(), 1u);
  const FindingStore::Count c = fuzz->store()->counts().begin()->second;
  EXPECT_TRUE(c.known);
  EXPECT_EQ(c.count, 2u);
  EXPECT_TRUE(c.stem.empty());
  // The same signature in a mutated input (named "fuzz": no entry covers it) is new: stored.
  Scenario mutated = s_;
  mutated.name = "fuzz";
  const std::vector<uint8_t> m = encode_binary(mutated);
  ASSERT_EQ(fuzz->run(m.data(), m.size()), 0);
  EXPECT_EQ(stored(".kcsb").size(), 1u);
  ASSERT_EQ(fuzz->store()->counts().size(), 2u);
  for (const auto& [key, count] : fuzz->store()->counts()) {
    EXPECT_EQ(count.count, key.second ? 2u : 1u);
    EXPECT_EQ(count.stem.empty(), key.second);
  }
}

// A signature names the rules, the op kind and the target build: findings that
// differ in any of them are different findings.
// Every rule side the model evaluated in this process (RuleHit: findings or
// not) is one "side\t<rule ID>\t<allowed|forbidden>" line of the counts file,
// once however often it is reached: the same sides as stepping the scenario
// directly, op by op.
TEST_F(RecordFindings, RuleSidesReachedAreCountedOncePerSide) {
  // share-reclaim with its rxtx_map twice: the second is refused (forbidden side).
  s_.ops.insert(s_.ops.begin() + 2, s_.ops[1]);
  bytes_ = encode_binary(s_);
  std::set<std::string> want;
  {
    OpenTarget t;
    const TargetFamily* families[] = {&el2::el2_target_family()};
    std::string error;
    ASSERT_TRUE(open_target(families, "el2", "wrong-state:mem_reclaim", &t, &error)) << error;
    t.model->begin(s_);
    t.target->begin(s_);
    StepResult r;
    bool knows = true;
    for (size_t i = 0; i < s_.ops.size(); ++i) {
      step(*t.model, *t.target, t.invariants, s_, i, knows, &r);
      knows = r.model_knows;
      for (const RuleHit& h : r.expected.hits)
        want.insert(std::string("side\t") + rule_info(h.rule).id + (h.forbidden ? "\tforbidden" : "\tallowed"));
    }
    t.target->end();
  }
  // The allowed side of the rules the scenario passes, the forbidden side of
  // the mailbox rule the second rxtx_map meets.
  ASSERT_FALSE(want.empty());
  bool forbidden = false;
  for (const std::string& w : want) forbidden = forbidden || w.ends_with("\tforbidden");
  EXPECT_TRUE(forbidden);
  auto fuzz = lying_runner();
  fuzz->record_to(dir_.string());
  ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
  ASSERT_EQ(fuzz->run(bytes_.data(), bytes_.size()), 0);
  EXPECT_EQ(fuzz->store()->sides().size(), want.size());
  fuzz.reset();
  std::istringstream counts(read(dir_ / ".counts" / (std::to_string(::getpid()) + ".tsv")));
  std::vector<std::string> got;
  std::string line;
  while (std::getline(counts, line))
    if (line.rfind("side", 0) == 0) got.push_back(line);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
  EXPECT_EQ(got.size(), want.size()) << "one line per side";
  for (const std::string& g : got) {
    const size_t t1 = g.find('\t'), t2 = g.find('\t', t1 + 1);
    ASSERT_NE(t2, std::string::npos) << g;
    EXPECT_TRUE(rule_by_id(g.substr(t1 + 1, t2 - t1 - 1)).has_value()) << g;
  }
}

TEST_F(RecordFindings, AnEmptyInputRunsTheMutatorsStarterSoACampaignCanStartFromNothing) {
  // libFuzzer's first input from an empty corpus is "\n": it must reach code
  // (here: rule sides of the starter's op) or libFuzzer stops at once.
  auto fuzz = lying_runner();
  fuzz->record_to(dir_.string());
  const uint8_t newline[] = {'\n'};
  ASSERT_EQ(fuzz->run(newline, sizeof newline), 0);
  EXPECT_EQ(fuzz->store()->executions(), 1u);
  EXPECT_FALSE(fuzz->store()->sides().empty()) << "the starter's op was judged";
  // Bytes that do not decode are still refused (not added to the corpus).
  const uint8_t junk[] = {'K', 'C', 'S', 'N', 99};
  EXPECT_EQ(fuzz->run(junk, sizeof junk), -1);
  EXPECT_EQ(fuzz->store()->executions(), 1u);
  ASSERT_EQ(fuzz->run(nullptr, 0), 0);  // the empty input too
}

TEST_F(RecordFindings, SignaturesDifferByOpKindAndTarget) {
  Finding f;
  f.op = 4;
  f.rules = "FFA.X";
  TargetIdentity a{"el2", "debian-7.3.4-4k", "", {}, 0}, b{"el2", "debian-7.3.4-16k", "", {}, 0};
  const std::string sa = signature(s_, f, a);
  EXPECT_EQ(sa, "FFA.X mem_reclaim el2 debian-7.3.4-4k");
  EXPECT_NE(sa, signature(s_, f, b));
  f.op = 0;
  EXPECT_NE(sa, signature(s_, f, a));
}

// The FF-A starters (EngineHints::starters) are valid uses of the ABI on the
// real handler: stepped on the EL2 target (no fault), no op is blamed, every
// memory call's handle slot is filled (FFA.HARNESS.SLOTS allowed, never
// forbidden: the share or lend succeeded) and every TX write found TX mapped
// (FFA.MBOX.TX_REQUIRED never forbidden). The only refusal is the rxtx_map for
// the other page size. A handler without RECLAIM2 (stock 7.3) is blamed
// FFA.R2.NOT_IMPLEMENTED at each mem_reclaim2, its known finding; nothing else.
TEST(FuzzStarters, EveryFfaStarterSetsUpItsMemoryCallsOnTheEl2Target) {
  std::span<const Scenario> all = starters(Abi::kFfa);
  ASSERT_FALSE(all.empty());
  for (size_t k = 0; k < all.size(); ++k) {
    const Scenario& s = all[k];
    OpenTarget t;
    const TargetFamily* families[] = {&el2::el2_target_family()};
    std::string error;
    ASSERT_TRUE(open_target(families, "el2", "", &t, &error)) << error;
    const bool reclaim2 = t.target->identity().cap_bits & 1u;  // the ABI's capability 0
    t.model->begin(s);
    t.target->begin(s);
    StepResult r;
    bool knows = true;
    std::set<std::string> sides;
    for (size_t i = 0; i < s.ops.size(); ++i) {
      step(*t.model, *t.target, t.invariants, s, i, knows, &r);
      knows = r.model_knows;
      std::string blamed;
      for (RuleId b : r.blamed)
        if (!(b == kFfaR2NotImplemented && !reclaim2))  // stock: relayed, not refused (ci/known-findings.json)
          blamed += std::string(" ") + rule_info(b).id;
      EXPECT_EQ(blamed, "") << "starter " << k << " op " << i << ": " << format_op(s, i);
      for (const RuleHit& h : r.expected.hits)
        sides.insert(std::string(rule_info(h.rule).id) + (h.forbidden ? " forbidden" : " allowed"));
    }
    t.target->end();
    EXPECT_TRUE(sides.count("FFA.HARNESS.SLOTS allowed")) << "starter " << k;
    EXPECT_FALSE(sides.count("FFA.HARNESS.SLOTS forbidden")) << "starter " << k << ": a memory call failed";
    EXPECT_FALSE(sides.count("FFA.MBOX.TX_REQUIRED forbidden")) << "starter " << k << ": TX was not mapped";
  }
}

#endif  // KC_FUZZ_TEST_EL2

// bounded(): the ABI's costly resource, byte counts and refusal limit come
// from its table (gmem: VMs; write/pwrite/.../fallocate unless PUNCH_HOLE;
// E2BIG above 64 MiB), nothing from the fuzz runner itself.
Scenario text(const std::string& ops) {
  std::vector<Scenario> out;
  std::string err;
  EXPECT_TRUE(parse_text("kconform-scenario 1\nabi gmem\nname t\n" + ops, "<test>", &out, &err)) << err;
  return out.empty() ? Scenario{} : out.front();
}

TEST(FuzzRunnerBounds, ComeFromTheAbiTable) {
  OpenTarget none;  // bounded() needs no target
  none.target = nullptr;
  FuzzConfig cfg = fuzz_config_for(Abi::kGmem);
  EXPECT_EQ(cfg.limits.max_ops, 24u);
  FuzzRunner r(std::move(none), cfg, FuzzRunner::Mode::kCollect);
  const std::string gmem = "create_vm\ncreate_gmem vm=0 size=0x4000 flags=0\n";
  EXPECT_TRUE(r.bounded(text(gmem + "write gmem=0 len=0x1000\n")));
  EXPECT_FALSE(r.bounded(text(gmem + "write gmem=0 len=0x200000\n"))) << "2 MiB: more than max_op_bytes";
  EXPECT_TRUE(r.bounded(text(gmem + "write gmem=0 len=0x8000000\n"))) << "128 MiB: refused (E2BIG) anyway";
  EXPECT_FALSE(r.bounded(text(gmem + "pwrite gmem=0 offset=0 len=0x200000\n")));
  EXPECT_FALSE(r.bounded(text(gmem + "pread gmem=0 offset=0 len=0x4000000\n"))) << "64 MiB: not refused";
  EXPECT_TRUE(r.bounded(text(gmem + "pread gmem=0 offset=0 len=0x4000001\n")));
  EXPECT_FALSE(r.bounded(text(gmem + "fallocate gmem=0 mode=0 offset=0 len=0x200000\n")));
  EXPECT_TRUE(r.bounded(text(gmem + "fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x200000\n")))
      << "a hole punched allocates nothing";
  EXPECT_TRUE(r.bounded(text(gmem + "mmap gmem=0 offset=0 len=0x200000\n"))) << "mmap materialises nothing";
  EXPECT_TRUE(r.bounded(text("create_vm\ncreate_vm\n")));
  EXPECT_FALSE(r.bounded(text("create_vm\ncreate_vm\ncreate_vm\n"))) << "three VMs";
  std::string many;
  for (int i = 0; i < 25; ++i) many += "close_vm vm=0\n";
  EXPECT_FALSE(r.bounded(text("create_vm\n" + many))) << "more than max_ops";
  Scenario ffa;
  ffa.abi = Abi::kFfa;
  EXPECT_FALSE(r.bounded(ffa)) << "another ABI";
}

}  // namespace
}  // namespace kconform::fuzz
