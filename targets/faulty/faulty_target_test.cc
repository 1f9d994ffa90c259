// Tests of the faulty-target wrapper against a scripted inner target.
#include "targets/faulty/faulty_target.h"

#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/gmem_abi.h"

namespace kconform {
namespace {

using namespace kconform::gmem;

// Answers op i with script[i]; records the calls it saw.
class ScriptedTarget : public Target {
 public:
  explicit ScriptedTarget(std::vector<Outcome> script) : script_(std::move(script)) {
    id_.target = "scripted";
    id_.release = "1.0";
    id_.profile = "gmem-base";
    id_.caps = {{"page_size", 4096}};
    id_.cap_bits = 0x17;
  }
  const TargetIdentity& identity() const override { return id_; }
  void begin(const Scenario&) override { ++begins_; }
  Outcome exec(const Scenario&, size_t i) override { return script_.at(i); }
  void end() override { ++ends_; }

  std::vector<Outcome> script_;
  TargetIdentity id_;
  int begins_ = 0, ends_ = 0;
};

Scenario scenario(std::vector<OpCode> codes) {
  Scenario s;
  for (OpCode c : codes) s.ops.push_back(Op{c, {}});
  return s;
}

std::vector<Outcome> run(Target& t, const Scenario& s) {
  std::vector<Outcome> out;
  t.begin(s);
  for (size_t i = 0; i < s.ops.size(); ++i) out.push_back(t.exec(s, i));
  t.end();
  return out;
}

FaultSpec spec(std::string_view text) {
  std::string error;
  std::optional<FaultSpec> f = parse_fault_spec(text, &error);
  EXPECT_TRUE(f.has_value()) << error;
  return f.value_or(FaultSpec{});
}

struct Wrapped {
  ScriptedTarget* inner;
  std::unique_ptr<Target> target;
};
Wrapped wrap(std::string_view text, std::vector<Outcome> script) {
  auto inner = std::make_unique<ScriptedTarget>(std::move(script));
  ScriptedTarget* raw = inner.get();
  return {raw, wrap_faulty(std::move(inner), spec(text))};
}

TEST(FaultSpecParse, AcceptsEveryKind) {
  for (std::string_view text : {"wrong-errno:write", "wrong-content:load", "succeed:create_gmem",
                                "fail:fallocate", "wrong-count:pwrite", "wrong-reg:mem_share",
                                "wrong-state:mem_reclaim"}) {
    std::string error;
    std::optional<FaultSpec> f = parse_fault_spec(text, &error);
    ASSERT_TRUE(f.has_value()) << text << ": " << error;
    EXPECT_EQ(f->text, text);
    EXPECT_EQ(f->nth, 1u);
  }
  EXPECT_EQ(spec("fail:load:3").nth, 3u);
  EXPECT_EQ(spec("fail:load:3").text, "fail:load:3");
  EXPECT_EQ(spec("fail:load:1").text, "fail:load");
  EXPECT_EQ(spec("fail:load:all").nth, 0u);
  EXPECT_EQ(spec("fail:load:all").text, "fail:load:all");
  EXPECT_EQ(spec("wrong-errno:write").kind, FaultSpec::Kind::kWrongErrno);
  EXPECT_EQ(spec("wrong-content:load").kind, FaultSpec::Kind::kWrongContent);
  EXPECT_EQ(spec("succeed:close").kind, FaultSpec::Kind::kSucceed);
  EXPECT_EQ(spec("fail:close").kind, FaultSpec::Kind::kFail);
  EXPECT_EQ(spec("wrong-count:close").kind, FaultSpec::Kind::kWrongCount);
}

TEST(FaultSpecParse, ErrorsNameTheBadField) {
  struct Case {
    const char* spec;
    const char* needle;
  };
  const Case cases[] = {
      {"", "KIND:OP"},
      {"wrong-errno", "KIND:OP"},
      {"bogus:write", "unknown KIND 'bogus'"},
      {":write", "unknown KIND ''"},
      {"fail:", "OP is empty"},
      {"fail:frobnicate", "unknown OP 'frobnicate'"},
      {"fail:write:0", "bad NTH '0'"},
      {"fail:write:", "bad NTH ''"},
      {"fail:write:x", "bad NTH 'x'"},
      {"fail:write:2x", "bad NTH '2x'"},
      {"fail:write:1:2", "bad NTH '1:2'"},
  };
  for (const Case& c : cases) {
    std::string error;
    EXPECT_FALSE(parse_fault_spec(c.spec, &error).has_value()) << c.spec;
    EXPECT_NE(error.find(c.needle), std::string::npos)
        << "spec '" << c.spec << "': error '" << error << "' lacks '" << c.needle << "'";
    EXPECT_NE(error.find(std::string("'") + c.spec + "'"), std::string::npos) << error;
  }
  std::string error;
  parse_fault_spec("bogus:write", &error);
  EXPECT_NE(error.find("wrong-errno, wrong-content, succeed, fail, wrong-count"),
            std::string::npos)
      << error;
  parse_fault_spec("fail:frobnicate", &error);
  EXPECT_NE(error.find("create_gmem"), std::string::npos) << error;
  EXPECT_FALSE(parse_fault_spec("bogus", nullptr).has_value());  // error may be null
}

TEST(FaultyTarget, IdentityNamesTheFault) {
  Wrapped w = wrap("wrong-errno:write", {});
  const TargetIdentity& id = w.target->identity();
  EXPECT_EQ(id.target, "scripted+fault(wrong-errno:write)");
  EXPECT_EQ(id.release, "1.0");
  EXPECT_EQ(id.profile, "gmem-base");
  EXPECT_EQ(id.cap_bits, 0x17u);
  EXPECT_EQ(id.caps, w.inner->id_.caps);
}

TEST(FaultyTarget, ForwardsBeginAndEnd) {
  Wrapped w = wrap("fail:write", {Outcome::ok(0)});
  run(*w.target, scenario({kCreateVm}));
  EXPECT_EQ(w.inner->begins_, 1);
  EXPECT_EQ(w.inner->ends_, 1);
}

TEST(FaultyTarget, WrongErrnoChangesOnlyTheFirstErrnoOfThatOp) {
  Wrapped w = wrap("wrong-errno:write", {Outcome::ok(0), Outcome::err(EINVAL),
                                         Outcome::ok(4096), Outcome::err(EINVAL),
                                         Outcome::err(EINVAL), Outcome::err(EINVAL)});
  Scenario s = scenario({kCreateVm, kPwrite, kWrite, kWrite, kWrite, kPwrite});
  std::vector<Outcome> r = run(*w.target, s);
  EXPECT_EQ(r[0], Outcome::ok(0));
  EXPECT_EQ(r[1], Outcome::err(EINVAL));  // pwrite: another op
  EXPECT_EQ(r[2], Outcome::ok(4096));     // ok results are not eligible
  EXPECT_EQ(r[3], Outcome::err(ENOTRECOVERABLE));
  EXPECT_EQ(r[4], Outcome::err(EINVAL));
  EXPECT_EQ(r[5], Outcome::err(EINVAL));
  // Counting restarts with every scenario.
  r = run(*w.target, s);
  EXPECT_EQ(r[3], Outcome::err(ENOTRECOVERABLE));
}

TEST(FaultyTarget, WrongErrnoAlwaysDiffers) {
  Wrapped w = wrap("wrong-errno:write", {Outcome::err(ENOTRECOVERABLE)});
  EXPECT_EQ(run(*w.target, scenario({kWrite}))[0], Outcome::err(EOWNERDEAD));
}

TEST(FaultyTarget, WrongContentFlipsTheDigest) {
  Wrapped w = wrap("wrong-content:load",
                   {Outcome::sig(7), Outcome::ok(0, 0x1234), Outcome::ok(0, 0x1234)});
  std::vector<Outcome> r = run(*w.target, scenario({kLoad, kLoad, kLoad}));
  EXPECT_EQ(r[0], Outcome::sig(7));
  EXPECT_EQ(r[1], Outcome::ok(0, ~0x1234ull));
  EXPECT_EQ(r[2], Outcome::ok(0, 0x1234));
}

TEST(FaultyTarget, SucceedReportsAnErrnoAsOk) {
  Wrapped w = wrap("succeed:create_gmem", {Outcome::ok(0), Outcome::err(EINVAL)});
  std::vector<Outcome> r = run(*w.target, scenario({kCreateGmem, kCreateGmem}));
  EXPECT_EQ(r[0], Outcome::ok(0));
  EXPECT_EQ(r[1], Outcome::ok(0));
}

TEST(FaultyTarget, FailReportsAnOkAsEio) {
  Wrapped w = wrap("fail:fallocate", {Outcome::err(EINVAL), Outcome::ok(0)});
  std::vector<Outcome> r = run(*w.target, scenario({kFallocate, kFallocate}));
  EXPECT_EQ(r[0], Outcome::err(EINVAL));
  EXPECT_EQ(r[1], Outcome::err(EIO));
}

TEST(FaultyTarget, WrongCountIsOffByOnePage) {
  Wrapped w = wrap("wrong-count:pwrite:all", {Outcome::ok(8192), Outcome::ok(100)});
  std::vector<Outcome> r = run(*w.target, scenario({kPwrite, kPwrite}));
  EXPECT_EQ(r[0], Outcome::ok(8192 - 4096));
  EXPECT_EQ(r[1], Outcome::ok(100 + 4096));
}

TEST(FaultyTarget, NthPicksOneEligibleResult) {
  Wrapped w = wrap("fail:store:2", {Outcome::ok(0), Outcome::sig(7), Outcome::ok(0),
                                    Outcome::ok(0)});
  std::vector<Outcome> r = run(*w.target, scenario({kStore, kStore, kStore, kStore}));
  EXPECT_EQ(r[0], Outcome::ok(0));
  EXPECT_EQ(r[1], Outcome::sig(7));
  EXPECT_EQ(r[2], Outcome::err(EIO));
  EXPECT_EQ(r[3], Outcome::ok(0));
}

TEST(FaultyTarget, OtherAbiIsUntouched) {
  Wrapped w = wrap("fail:create_vm", {Outcome::ok(0)});
  Scenario s = scenario({kCreateVm});
  s.abi = Abi::kFfa;
  EXPECT_EQ(run(*w.target, s)[0], Outcome::ok(0));
}

TEST(FaultyTarget, WrongRegAndWrongStatePerturbFfaOutcomes) {
  Outcome ok = Outcome::ok(0);
  ok.regs = {0x84000061, 0, 0x1, 0x80000000, 0, 0, 0, 0};
  ok.state = 0x1234;
  Scenario s;
  s.abi = Abi::kFfa;
  s.ops = {Op{ffa::kOpMemShare, {}}, Op{ffa::kOpMemReclaim, {}}};
  Wrapped reg = wrap("wrong-reg:mem_share", {ok, ok});
  std::vector<Outcome> r = run(*reg.target, s);
  EXPECT_EQ(r[0].regs[2], 0u);
  EXPECT_EQ(r[0].state, 0x1234u);
  EXPECT_EQ(r[1], ok);
  Wrapped st = wrap("wrong-state:mem_reclaim", {ok, ok});
  r = run(*st.target, s);
  EXPECT_EQ(r[0], ok);
  EXPECT_EQ(r[1].state, ~0x1234ull);
  EXPECT_EQ(r[1].regs, ok.regs);
}

}  // namespace
}  // namespace kconform
