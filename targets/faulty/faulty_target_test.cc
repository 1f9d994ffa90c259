// Tests of the faulty-target wrapper against a scripted inner target.
#include "targets/faulty/faulty_target.h"

#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/ffa_spec.h"
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
  // Every re-read finds one all-zero page of gmem 0 in memory.
  bool observe(const Scenario&, size_t, Contents* out) override {
    out->clear();
    out->files.push_back({0, true, "", true, 4 * 4096, 0, 4});
    out->pages.push_back({0, 0, std::vector<uint8_t>(4096, 0)});
    return true;
  }
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
  std::unique_ptr<FaultyTarget> target;
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
  EXPECT_NE(error.find("wrong-errno, wrong-content, wrong-page, succeed, fail, wrong-count"),
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

TEST(FaultyTarget, WrongPageFlipsTheFirstByteOfTheReread) {
  Wrapped w = wrap("wrong-page:pwrite:2", {Outcome::ok(4096), Outcome::ok(4096), Outcome::ok(4096)});
  Scenario s = scenario({kPwrite, kStore, kPwrite});
  w.target->begin(s);
  Contents seen;
  std::vector<uint8_t> first;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    EXPECT_EQ(w.target->exec(s, i), Outcome::ok(4096)) << "the outcome itself never lies";
    ASSERT_TRUE(w.target->observe(s, i, &seen));
    first.push_back(seen.pages[0].bytes[0]);
  }
  w.target->end();
  EXPECT_EQ(first, (std::vector<uint8_t>{0, 0, 1}));  // the second pwrite's re-read only
  EXPECT_EQ(w.target->fired(), 1u);
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


Outcome ffa_result(uint64_t x0, uint64_t x2) {
  Outcome o = Outcome::ok(0);
  o.regs = {x0, 0, x2, 0, 0, 0, 0, 0};
  o.state = 0x1234;
  return o;
}

Scenario ffa_scenario(std::vector<uint8_t> codes) {
  Scenario s;
  s.abi = Abi::kFfa;
  for (uint8_t c : codes) s.ops.push_back(Op{c, {}});
  return s;
}

TEST(FaultyTarget, FfaErrorsAreFfaErrorInX0) {
  const Outcome error = ffa_result(ffa::kFnError, 0xfffffffffffffffeull);  // INVALID_PARAMETERS
  const Outcome success = ffa_result(ffa::kFnSuccess32, 0x5);
  Scenario s = ffa_scenario({ffa::kOpMemReclaim, ffa::kOpMemReclaim});

  Wrapped e = wrap("wrong-errno:mem_reclaim:all", {success, error});
  std::vector<Outcome> r = run(*e.target, s);
  EXPECT_EQ(r[0], success);  // not an error: not eligible
  EXPECT_EQ(r[1].regs[0], ffa::kFnError);
  EXPECT_EQ(r[1].regs[2], 0xfffffffffffffff8ull);  // ABORTED, the upper half kept
  EXPECT_EQ(r[1].state, error.state);
  Wrapped again = wrap("wrong-errno:mem_reclaim", {ffa_result(ffa::kFnError, 0xfffffff8)});
  EXPECT_EQ(run(*again.target, ffa_scenario({ffa::kOpMemReclaim}))[0].regs[2], 0xfffffff7u);  // NO_DATA

  Wrapped ok = wrap("succeed:mem_reclaim:all", {success, error});
  r = run(*ok.target, s);
  EXPECT_EQ(r[0], success);
  EXPECT_EQ(r[1].regs, (std::array<uint64_t, 8>{ffa::kFnSuccess32, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(r[1].state, error.state);

  Wrapped f = wrap("fail:mem_reclaim:all", {success, error});
  r = run(*f.target, s);
  EXPECT_EQ(r[0].regs[0], ffa::kFnError);
  EXPECT_EQ(static_cast<int32_t>(r[0].regs[2]), ffa::kAborted);
  EXPECT_EQ(r[1], error);  // already an error: not eligible
  EXPECT_EQ(f.target->fired(), 1u);
}

TEST(FaultyTarget, FfaVersionAnswersInW0) {
  const Outcome v12 = ffa_result(0x10002, 0);
  const Outcome refused = ffa_result(0xffffffffffffffffull, 0);  // NOT_SUPPORTED, sign-extended
  Scenario s = ffa_scenario({ffa::kOpVersion, ffa::kOpVersion});
  std::vector<Outcome> r = run(*wrap("wrong-errno:version:all", {v12, refused}).target, s);
  EXPECT_EQ(r[0], v12);
  EXPECT_EQ(r[1].regs[0], 0xfffffffffffffff8ull);  // ABORTED
  r = run(*wrap("succeed:version:all", {v12, refused}).target, s);
  EXPECT_EQ(r[0], v12);
  EXPECT_EQ(r[1].regs[0], ffa::kVersion10);
  r = run(*wrap("fail:version:all", {v12, refused}).target, s);
  EXPECT_EQ(r[0].regs[0], 0xffffffffffffffffull);
  EXPECT_EQ(r[1], refused);
  r = run(*wrap("wrong-reg:version:all", {v12, refused}).target, s);
  EXPECT_EQ(r[0].regs[0], 0x10003u);
  EXPECT_EQ(r[0].regs[2], 0u);
  EXPECT_EQ(r[1].regs[0], 0xfffffffffffffffeull);
}

TEST(FaultyTarget, CountsTheOutcomesItChanged) {
  Wrapped w = wrap("fail:fallocate:all", {Outcome::err(EINVAL), Outcome::ok(0), Outcome::ok(0)});
  Scenario s = scenario({kFallocate, kFallocate, kFallocate});
  EXPECT_EQ(w.target->fired(), 0u);
  run(*w.target, s);
  run(*w.target, s);
  EXPECT_EQ(w.target->fired(), 4u);
  EXPECT_EQ(w.target->scenarios_fired(), 2u);
  // An NTH beyond the eligible results never fires.
  Wrapped never = wrap("fail:fallocate:9", {Outcome::ok(0), Outcome::ok(0), Outcome::ok(0)});
  run(*never.target, s);
  EXPECT_EQ(never.target->fired(), 0u);
  EXPECT_EQ(never.target->scenarios_fired(), 0u);
}

TEST(FaultApplies, KindsMatchTheAbi) {
  const AbiSpec& gmem = *abi_spec_by_name("gmem");
  const AbiSpec& ffa = *abi_spec_by_name("ffa");
  struct Case {
    const char* spec;
    const AbiSpec* abi;
    const char* needle;  // nullptr: applies
  };
  const Case cases[] = {
      {"wrong-errno:write", &gmem, nullptr},
      {"succeed:create_vm", &gmem, nullptr},
      {"fail:close_vm", &gmem, nullptr},
      {"wrong-content:load", &gmem, nullptr},
      {"wrong-content:fstat", &gmem, nullptr},
      {"wrong-count:lseek", &gmem, nullptr},
      {"wrong-count:pwritev", &gmem, nullptr},
      {"wrong-content:write", &gmem, "load, fstat"},
      {"wrong-page:pwrite", &gmem, nullptr},
      {"wrong-page:create_gmem", &gmem, nullptr},
      {"wrong-page:load", &gmem, "pages are re-read"},
      {"wrong-page:mem_share", &ffa, "registers and a state digest"},
      {"wrong-count:fallocate", &gmem, "count or an offset"},
      {"wrong-reg:write", &gmem, "FF-A results"},
      {"wrong-state:fallocate", &gmem, "FF-A results"},
      {"wrong-errno:mem_share", &gmem, "'mem_share' is not an op of the gmem ABI"},
      {"wrong-errno:mem_share", &ffa, nullptr},
      {"succeed:mem_reclaim", &ffa, nullptr},
      {"fail:version", &ffa, nullptr},
      {"wrong-reg:version", &ffa, nullptr},
      {"wrong-state:tx_mem_desc", &ffa, nullptr},
      {"wrong-content:mem_share", &ffa, "registers and a state digest"},
      {"wrong-count:mem_reclaim2", &ffa, "registers and a state digest"},
      {"fail:tx_write", &ffa, "harness op"},
      {"wrong-reg:sp_retrieve", &ffa, "harness op"},
      {"fail:write", &ffa, "'write' is not an op of the ffa ABI"},
  };
  for (const Case& c : cases) {
    std::string error;
    const bool ok = fault_applies(spec(c.spec), *c.abi, &error);
    EXPECT_EQ(ok, c.needle == nullptr) << c.spec << " on " << c.abi->name << ": " << error;
    if (c.needle) {
      EXPECT_NE(error.find(c.needle), std::string::npos) << error;
      EXPECT_NE(error.find(std::string("'") + c.spec + "'"), std::string::npos) << error;
      EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
    }
  }
}

TEST(FaultApplies, TheMatrixIsEveryApplicableCell) {
  for (const AbiSpec* abi : all_abis()) {
    const std::vector<std::string> cells = applicable_faults(*abi);
    EXPECT_FALSE(cells.empty()) << abi->name;
    for (const std::string& c : cells) {
      std::string error;
      EXPECT_TRUE(fault_applies(spec(c), *abi, &error)) << c << ": " << error;
    }
  }
  const std::vector<std::string> gmem = applicable_faults(*abi_spec_by_name("gmem"));
  EXPECT_EQ(gmem.size(), 19u * 3 + 2 + 6 + 6);  // 19 ops; wrong-content on 2, wrong-count on 6, wrong-page on 6
  EXPECT_EQ(gmem.front(), "wrong-errno:create_vm");
}

TEST(FaultApplies, TheTargetsAbiComesFromItsProfile) {
  TargetIdentity id;
  id.profile = "gmem-base";
  EXPECT_EQ(target_abi(id), abi_spec_by_name("gmem"));
  id.profile = "ffa-16k-reclaim2";
  EXPECT_EQ(target_abi(id), abi_spec_by_name("ffa"));
  id.profile = "";
  EXPECT_EQ(target_abi(id), nullptr);
}

}  // namespace
}  // namespace kconform
