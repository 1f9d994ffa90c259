// The interleaving search (linearize.h) on hand-made histories of the gmem
// model: histories some interleaving explains pass; histories none explains
// are violations of GMEM.CONCURRENT.LINEARIZABLE naming the ops.
#include "harness/runner/linearize.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "harness/runner/runner.h"

#include <algorithm>
#include <vector>

#include "harness/scenario/codec.h"
#include "harness/scenario/pattern.h"
#include "models/gmem/model.h"
#include "models/gmem/state.h"

namespace kconform {
namespace {

constexpr uint64_t P = 4096;

gmem::Profile write_profile() {
  gmem::Profile p;
  p.write_abi = true;
  p.page_size = P;
  p.supported_flags[0] = p.supported_flags[1] =
      gmem::kFlagMmap | gmem::kFlagInitShared | gmem::kFlagWrite;
  p.vm_types = 0b11;
  p.user_memory2 = true;
  p.gmem_on_vm_type[0] = p.gmem_on_vm_type[1] = true;
  return p;
}

Scenario parse(const std::string& ops) {
  std::string text =
      "kconform-scenario 2\nabi gmem\nname t/concurrent\n"
      "create_vm\ncreate_gmem vm=0 size=0x4000 flags=MMAP|INIT_SHARED|WRITE\nmmap gmem=0 offset=0 len=0x4000\n" +
      ops;
  std::vector<Scenario> out;
  std::string error;
  EXPECT_TRUE(parse_text(text, "t.kcs", &out, &error)) << error;
  return out.at(0);
}

// Digest of one page made of the given bytes.
uint64_t digest(const std::vector<uint8_t>& bytes) { return fnv1a(bytes); }
std::vector<uint8_t> pattern(uint64_t seed, uint64_t start, uint64_t n = P) {
  std::vector<uint8_t> v(n);
  fill_pattern(seed, start, v);
  return v;
}
std::vector<uint8_t> zeros(uint64_t n = P) { return std::vector<uint8_t>(n, 0); }

struct History {
  std::unique_ptr<Model> model;
  ConcurrentModel* cm = nullptr;
  std::vector<StepResult> results;
  LinearizeStats stats;
  bool ok = false;
};

// Commits the setup ops 0..2 (all succeed), then judges the group at op 3
// and every op after it with the observed outcomes.
History judge_from_3(const Scenario& s, const std::vector<Outcome>& observed, uint64_t budget = kLinearizeBudget) {
  History r;
  r.model = gmem::make_model(write_profile());
  r.cm = dynamic_cast<ConcurrentModel*>(r.model.get());
  EXPECT_NE(r.cm, nullptr);
  r.model->begin(s);
  for (size_t i = 0; i < 3; ++i) r.model->commit(s, i, Outcome::ok(0));
  r.ok = linearize(*r.cm, s, 3, s.ops.size(), observed, &r.results, &r.stats, budget);
  return r;
}

bool blames_linearizable(const StepResult& r) {
  const RuleId rule = kGmemConcurrentLinearizable;
  return r.verdict.kind == VerdictKind::kViolation &&
         std::find(r.verdict.violated.begin(), r.verdict.violated.end(), rule) != r.verdict.violated.end() &&
         std::find(r.blamed.begin(), r.blamed.end(), rule) != r.blamed.end();
}

// Two writes of pages 0-1 racing; each page ends with the data of one of
// them, chosen independently: only a per-page interleaving explains page 0
// of the first and page 1 of the second.
const char* kTwoWrites =
    "@1 pwrite gmem=0 offset=0 len=0x2000 pattern=3\n"
    "@2 pwrite gmem=0 offset=0 len=0x2000 pattern=4\n"
    "load map=0 offset=0 len=0x1000\n"
    "load map=0 offset=0x1000 len=0x1000\n"
    "fstat gmem=0\n";

TEST(Linearize, WritesInterleavedPerPagePass) {
  Scenario s = parse(kTwoWrites);
  History r = judge_from_3(s, {Outcome::ok(0x2000), Outcome::ok(0x2000), Outcome::ok(0, digest(pattern(3, 0))),
                           Outcome::ok(0, digest(pattern(4, P))), Outcome::ok(0, 0x4000)});
  EXPECT_TRUE(r.ok);
  ASSERT_EQ(r.results.size(), 5u);
  for (const StepResult& x : r.results) {
    EXPECT_EQ(x.verdict.kind, VerdictKind::kPass) << x.expected.note;
    bool hit = false;  // each op was judged on the rule's allowed side
    for (const RuleHit& h : x.expected.hits) hit = hit || (h.rule == kGmemConcurrentLinearizable && !h.forbidden);
    EXPECT_TRUE(hit);
  }
  EXPECT_TRUE(r.results.back().model_knows);
  EXPECT_GT(r.stats.interleavings, 0u);
}

TEST(Linearize, TornContentInsideOnePageIsAViolation) {
  Scenario s = parse(kTwoWrites);
  std::vector<uint8_t> torn = pattern(3, 0);
  std::vector<uint8_t> other = pattern(4, 0);
  std::copy(other.begin() + P / 2, other.end(), torn.begin() + P / 2);  // half of each write
  History r = judge_from_3(s, {Outcome::ok(0x2000), Outcome::ok(0x2000), Outcome::ok(0, digest(torn)),
                           Outcome::ok(0, digest(pattern(4, P))), Outcome::ok(0, 0x4000)});
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.results.size(), 5u);
  EXPECT_EQ(r.results[0].verdict.kind, VerdictKind::kPass);
  EXPECT_EQ(r.results[1].verdict.kind, VerdictKind::kPass);
  EXPECT_TRUE(blames_linearizable(r.results[2])) << r.results[2].expected.note;
  const std::string& note = r.results[2].expected.note;
  EXPECT_NE(note.find("could not place: op 5 (load map=0 offset=0 len=0x1000 -> ok 0 aux="), std::string::npos) << note;
  EXPECT_NE(note.find("not reached: op 6, 7"), std::string::npos) << note;
  EXPECT_NE(note.find("closest interleaving: 3[1] 3[2] 4[1] 4[2]"), std::string::npos) << note;
  EXPECT_EQ(r.results[3].verdict.kind, VerdictKind::kUnchecked);
  EXPECT_FALSE(r.results.back().model_knows);
}

// A punch ordered before a write in one thread: the write's page must hold
// its data afterwards, whatever the other thread did.
const char* kPunchThenWrite =
    "@1 fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x1000\n"
    "@1 pwrite gmem=0 offset=0 len=0x1000 pattern=5\n"
    "@2 fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0x1000 len=0x1000\n"
    "load map=0 offset=0 len=0x1000\n";

TEST(Linearize, WriteOrderedAfterPunchReadingZeroIsAViolation) {
  Scenario s = parse(kPunchThenWrite);
  History good = judge_from_3(s, {Outcome::ok(0), Outcome::ok(0x1000), Outcome::ok(0), Outcome::ok(0, digest(pattern(5, 0)))});
  EXPECT_TRUE(good.ok);
  History bad = judge_from_3(s, {Outcome::ok(0), Outcome::ok(0x1000), Outcome::ok(0), Outcome::ok(0, digest(zeros()))});
  EXPECT_FALSE(bad.ok);
  EXPECT_TRUE(blames_linearizable(bad.results[3])) << bad.results[3].expected.note;
  EXPECT_NE(bad.results[3].expected.note.find("could not place: op 6"), std::string::npos)
      << bad.results[3].expected.note;
}

// A write and a punch of the same pages exclude each other (SPEC.md
// CONCURRENT:STEPS): afterwards both pages hold the write's bytes (punch
// first) or neither does (write first); one of each is a write split by the
// punch, which only a kernel that does not serialise them produces.
const char* kWriteVsPunch =
    "@1 pwrite gmem=0 offset=0 len=0x2000 pattern=6\n"
    "@2 fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x2000\n"
    "load map=0 offset=0 len=0x1000\n"
    "load map=0 offset=0x1000 len=0x1000\n";

TEST(Linearize, AWriteAndAPunchOfTheSameFileDoNotInterleave) {
  Scenario s = parse(kWriteVsPunch);
  auto run = [&](const std::vector<uint8_t>& page0, const std::vector<uint8_t>& page1) {
    return judge_from_3(s, {Outcome::ok(0x2000), Outcome::ok(0), Outcome::ok(0, digest(page0)),
                            Outcome::ok(0, digest(page1))});
  };
  EXPECT_TRUE(run(pattern(6, 0), pattern(6, P)).ok);  // punch, then write
  EXPECT_TRUE(run(zeros(), zeros()).ok);              // write, then punch
  History split = run(zeros(), pattern(6, P));        // page 0 written and punched, page 1 after
  EXPECT_FALSE(split.ok);
  EXPECT_TRUE(blames_linearizable(split.results[2]) || blames_linearizable(split.results[3]))
      << split.results[2].expected.note;
  // Writes among themselves stay per page (WritesInterleavedPerPagePass).
}

// An op's own outcome must be one the model allows at some point: a write
// cannot return EBADF while its file stays open throughout.
TEST(Linearize, AnOutcomeNoInterleavingAllowsIsAViolationOfThatOp) {
  Scenario s = parse(
      "@1 pwrite gmem=0 offset=0 len=0x1000 pattern=5\n"
      "@2 fstat gmem=0\n");
  History ok = judge_from_3(s, {Outcome::ok(0x1000), Outcome::ok(0, 0x4000)});
  EXPECT_TRUE(ok.ok);
  History bad = judge_from_3(s, {Outcome::err(EBADF), Outcome::ok(0, 0x4000)});
  EXPECT_FALSE(bad.ok);
  EXPECT_TRUE(blames_linearizable(bad.results[0]));
  EXPECT_EQ(bad.results[1].verdict.kind, VerdictKind::kPass);
}

// write vs close: the write either precedes the close (success) or follows
// it (EBADF); both pass, and the file is closed afterwards either way.
TEST(Linearize, WriteRacingCloseEitherOrderPasses) {
  Scenario s = parse(
      "@1 pwrite gmem=0 offset=0 len=0x1000 pattern=5\n"
      "@2 close gmem=0\n"
      "load map=0 offset=0 len=0x1000\n"
      "fstat gmem=0\n");
  History before = judge_from_3(s, {Outcome::ok(0x1000), Outcome::ok(0), Outcome::ok(0, digest(pattern(5, 0))),
                                Outcome::err(EBADF)});
  EXPECT_TRUE(before.ok) << before.results[2].expected.note;
  History after = judge_from_3(s, {Outcome::err(EBADF), Outcome::ok(0), Outcome::ok(0, digest(zeros())),
                               Outcome::err(EBADF)});
  EXPECT_TRUE(after.ok);
  // Success, yet the page reads zero: no order explains it.
  History lost = judge_from_3(s, {Outcome::ok(0x1000), Outcome::ok(0), Outcome::ok(0, digest(zeros())),
                              Outcome::err(EBADF)});
  EXPECT_FALSE(lost.ok);
  EXPECT_TRUE(blames_linearizable(lost.results[2]));
}

TEST(Linearize, GivingUpIsSaidInTheNote) {
  Scenario s = parse(kTwoWrites);
  std::vector<uint8_t> torn = pattern(3, 0);
  torn[0] ^= 1;
  History r = judge_from_3(s, {Outcome::ok(0x2000), Outcome::ok(0x2000), Outcome::ok(0, digest(torn)),
                           Outcome::ok(0, digest(pattern(4, P))), Outcome::ok(0, 0x4000)},
                       /*budget=*/3);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.stats.budget_exhausted);
  bool said = false;
  for (const StepResult& x : r.results) said = said || x.expected.note.find("search budget exhausted") != std::string::npos;
  EXPECT_TRUE(said);
}

// Memoisation: three threads of two-page writes to the same pages reach far
// fewer states than the interleavings of their steps.
TEST(Linearize, MemoisationBoundsTheSearch) {
  Scenario s = parse(
      "@1 pwrite gmem=0 offset=0 len=0x2000 pattern=3\n"
      "@2 pwrite gmem=0 offset=0 len=0x2000 pattern=4\n"
      "@3 pwrite gmem=0 offset=0 len=0x2000 pattern=5\n"
      "load map=0 offset=0 len=0x1000\n");
  std::vector<uint8_t> nobody = zeros();
  nobody[7] = 1;  // no interleaving: the whole space is searched
  History r = judge_from_3(s, {Outcome::ok(0x2000), Outcome::ok(0x2000), Outcome::ok(0x2000), Outcome::ok(0, digest(nobody))});
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.stats.budget_exhausted);
  // 6 steps of 3 threads: 90 interleavings; states are far fewer.
  EXPECT_LT(r.stats.nodes, 90u * 6u);
  EXPECT_GT(r.stats.nodes, 10u);
}

// --- The run loop: groups through exec_group, repetitions ---

// Replays scripted outcomes, one script per run of the scenario.
class ScriptTarget : public Target {
 public:
  explicit ScriptTarget(std::vector<std::vector<Outcome>> runs) : runs_(std::move(runs)) {
    id_.target = "script";
    id_.cap_bits = ~0u;
  }
  const TargetIdentity& identity() const override { return id_; }
  void begin(const Scenario&) override { ++run_; }
  Outcome exec(const Scenario&, size_t i) override { return runs_.at(run_).at(i); }
  void end() override {}
  int run_ = -1;

 private:
  TargetIdentity id_;
  std::vector<std::vector<Outcome>> runs_;
};

std::vector<Outcome> two_writes_run(const std::vector<uint8_t>& page0) {
  return {Outcome::ok(0), Outcome::ok(0), Outcome::ok(0), Outcome::ok(0x2000), Outcome::ok(0x2000),
          Outcome::ok(0, digest(page0)), Outcome::ok(0, digest(pattern(4, P))), Outcome::ok(0, 0x4000)};
}

TEST(RunLoop, RepeatsAndReportsTheFirstRunWithAViolation) {
  LoadedScenario ls{parse(kTwoWrites), "t.kcs", 0};
  ls.scenario.repeat = 4;
  std::vector<uint8_t> torn = pattern(3, 0);
  torn[100] = 0;
  ScriptTarget target({two_writes_run(pattern(3, 0)), two_writes_run(pattern(4, 0)), two_writes_run(torn),
                       two_writes_run(pattern(3, 0))});
  std::unique_ptr<Model> model = gmem::make_model(write_profile());
  std::FILE* sink = std::tmpfile();
  VerdictWriter writer(sink);
  std::vector<std::pair<size_t, StepResult>> seen;
  RunStats st = run_scenarios({ls}, *model, target, writer, nullptr,
                              [&](const LoadedScenario&, size_t op, const StepResult& r) { seen.push_back({op, r}); });
  std::fclose(sink);
  EXPECT_EQ(target.run_, 2) << "stops after the run with a violation";
  EXPECT_EQ(st.violations, 1u);
  ASSERT_EQ(seen.size(), 8u) << "one verdict per op";
  EXPECT_EQ(seen[5].second.verdict.kind, VerdictKind::kViolation);
  EXPECT_EQ(seen[5].second.expected.note.rfind("repetition 3 of 4 (a forced window, HARNESS:WINDOW); no interleaving", 0), 0u)
      << seen[5].second.expected.note;
}

TEST(RunLoop, RepeatedCleanRunsPassOnceEach) {
  LoadedScenario ls{parse(kTwoWrites), "t.kcs", 0};
  ls.scenario.repeat = 3;
  ScriptTarget target({two_writes_run(pattern(3, 0)), two_writes_run(pattern(4, 0)), two_writes_run(pattern(3, 0))});
  std::unique_ptr<Model> model = gmem::make_model(write_profile());
  std::FILE* sink = std::tmpfile();
  VerdictWriter writer(sink);
  RunStats st = run_scenarios({ls}, *model, target, writer);
  std::fclose(sink);
  EXPECT_EQ(target.run_, 2);
  EXPECT_EQ(st.violations, 0u);
  EXPECT_EQ(st.pass, 8u);
}

}  // namespace
}  // namespace kconform
