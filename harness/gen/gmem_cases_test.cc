// Every guest_memfd edge case of the Z3 generator through the model
// (models/gmem, write-ABI profile at the case's PAGE_SIZE): on the op the case
// aims at, the forbidden side holds exactly the rules of the conditions its
// name says it breaks (the target, and any "+<cond>" it cannot avoid; of
// those, the ones of the earliest stage, since a broken condition ends the
// call there), each of those rules is evaluated, and a case that breaks
// nothing has no forbidden rule at all. Every op before it (the VM,
// the file, the lseek before write()) is on no rule's forbidden side, and a
// write case's file has WRITE and INIT_SHARED unless the case breaks those.
//
// Checks the committed corpora/z3/gmem (KC_Z3_GMEM_DIR names another copy,
// e.g. an old one, to show what it breaks) and fresh cases at 4K and 16K.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/gen/case_kind.h"
#include "harness/gen/constraints.h"
#include "harness/gen/generate.h"
#include "harness/scenario/codec.h"
#include "harness/scenario/gmem_abi.h"
#include "models/common/rules.h"
#include "models/gmem/model.h"

namespace kconform::gen {
namespace {

namespace fs = std::filesystem;

gmem::Profile write_profile(uint64_t page) {
  gmem::Profile p;
  p.write_abi = true;
  p.page_size = page;
  p.supported_flags[0] = p.supported_flags[1] = gmem::kFlagMmap | gmem::kFlagInitShared | gmem::kFlagWrite;
  p.vm_types = 0b11;
  p.user_memory2 = true;
  p.gmem_on_vm_type[0] = p.gmem_on_vm_type[1] = true;
  return p;
}

// The op a function's cases aim at.
int aimed_op(const std::string& function) {
  if (function == "create") return gmem::kCreateGmem;
  if (function == "pwrite") return gmem::kPwrite;
  if (function == "write") return gmem::kWrite;
  if (function.rfind("fallocate-", 0) == 0) return gmem::kFallocate;
  return -1;
}

// The outcome an op is given so the scenario can go on: a success if the
// model allows one, else the first outcome it allows.
Outcome pick(const Expectation& e) {
  const Allowed* a = &e.allowed.front();
  for (const Allowed& x : e.allowed)
    if (x.kind == Outcome::Kind::kOk) {
      a = &x;
      break;
    }
  Outcome o;
  o.kind = a->kind;
  o.value = a->lo;
  o.aux = a->check_aux ? a->aux : 0;
  return o;
}

std::string names(const std::set<RuleId>& rules) {
  std::string out;
  for (RuleId r : rules) out += (out.empty() ? "" : ", ") + std::string(rule_info(r).id);
  return out.empty() ? "none" : out;
}

// What is wrong with one case of function f (empty: nothing).
std::vector<std::string> check_case(const Function& f, uint64_t page, const Scenario& s) {
  std::vector<std::string> bad;
  auto fail = [&](const std::string& why) { bad.push_back(s.name + ": " + why); };
  const std::string prefix = "z3/gmem/" + f.name + "/";
  if (s.name.rfind(prefix, 0) != 0) return fail("name does not start with " + prefix), bad;
  Aim aim;
  std::string why;
  if (!parse_kind(f, s.name.substr(prefix.size()), &aim, &why)) return fail(why), bad;
  auto breaks = [&](const std::string& id) {
    return std::any_of(aim.broken.begin(), aim.broken.end(), [&](const Cond* c) { return c->id == id; });
  };

  // The file of a write case makes every condition on the file hold.
  const int aimed = aimed_op(f.name);
  if (aimed == gmem::kPwrite || aimed == gmem::kWrite) {
    for (const Op& op : s.ops) {
      if (op.code != gmem::kCreateGmem) continue;
      if (!(op.args[2] & gmem::kFlagWrite) && !breaks("flag-write")) fail("file created without WRITE");
      if (!(op.args[2] & gmem::kFlagInitShared) && !breaks("shared")) fail("file created without INIT_SHARED");
    }
  }

  size_t at = s.ops.size();
  for (size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].code == aimed) at = i;
  if (at == s.ops.size()) return fail("no op " + std::to_string(aimed)), bad;

  std::unique_ptr<Model> model = gmem::make_model(write_profile(page));
  model->begin(s);
  std::set<RuleId> forbidden, hit;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    Expectation e;
    model->expect(s, i, e);
    std::set<RuleId> f_i;
    for (const RuleHit& h : e.hits)
      if (h.forbidden) f_i.insert(h.rule);
    if (i == at) {
      forbidden = f_i;
      for (const RuleHit& h : e.hits) hit.insert(h.rule);
    } else if (i < at && !f_i.empty()) {
      fail("op " + std::to_string(i) + " (before the one aimed at) is on the forbidden side of " + names(f_i) +
           (e.note.empty() ? "" : " (" + e.note + ")"));
    }
    if (e.allowed.empty()) return fail("op " + std::to_string(i) + " allows nothing"), bad;
    model->commit(s, i, pick(e));
  }

  std::set<RuleId> want;
  if (!aim.broken.empty()) {
    unsigned first = aim.broken.front()->stage;
    for (const Cond* c : aim.broken) first = std::min(first, c->stage);
    for (const Cond* c : aim.broken) {
      if (c->stage != first) continue;
      std::optional<RuleId> r = rule_by_id(c->rule);
      if (!r) return fail("condition " + c->id + " names no rule " + c->rule), bad;
      if (!hit.count(*r)) fail("breaks " + c->id + " but the model does not evaluate " + c->rule);
      if (!c->may_succeed) want.insert(*r);
    }
  }
  if (forbidden != want)
    fail("op " + std::to_string(at) + " is on the forbidden side of " + names(forbidden) + "; its name says " +
         names(want));
  return bad;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// The guest_memfd functions of the generator at one PAGE_SIZE.
struct Gen {
  explicit Gen(uint64_t page) : vocab(ctx) {
    GenConfig cfg;
    cfg.gmem_page = page;
    fns = gmem_functions(vocab, cfg);
  }
  const Function* by_name(const std::string& n) const {
    for (const Function& f : fns)
      if (f.name == n) return &f;
    return nullptr;
  }
  z3::context ctx;
  Vocab vocab;
  std::vector<Function> fns;
};

TEST(GenGmemCases, CommittedCasesBreakExactlyWhatTheirNamesSay) {
  const char* env = std::getenv("KC_Z3_GMEM_DIR");
  const fs::path dir = env ? fs::path(env) : fs::path(KC_CORPUS_DIR) / "z3" / "gmem";
  std::map<uint64_t, std::unique_ptr<Gen>> gens;
  std::vector<std::string> bad;
  size_t files = 0, cases = 0, failing = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".kcs") continue;
    ++files;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string t = text.str();
    // The header's first line names the PAGE_SIZE the cases were generated for.
    const size_t p = t.substr(0, t.find("\n# Conditions")).rfind("PAGE_SIZE ");
    ASSERT_NE(p, std::string::npos) << e.path() << ": no PAGE_SIZE in the header";
    const uint64_t page = std::stoull(t.substr(p + 10));
    auto& gen = gens[page];
    if (!gen) gen = std::make_unique<Gen>(page);
    const Function* f = gen->by_name(e.path().stem().string());
    ASSERT_NE(f, nullptr) << e.path() << ": no generator function of that name";
    std::vector<Scenario> scenarios;
    std::string error;
    ASSERT_TRUE(load_scenario_file(e.path().string(), &scenarios, &error)) << error;
    for (const Scenario& s : scenarios) {
      ++cases;
      std::vector<std::string> b = check_case(*f, page, s);
      failing += !b.empty();
      for (std::string& line : b) bad.push_back(e.path().filename().string() + ": " + line);
    }
  }
  EXPECT_EQ(files, 5u) << dir;
  EXPECT_GT(cases, 100u);
  EXPECT_TRUE(bad.empty()) << failing << " of " << cases << " cases do not break exactly what they name:\n"
                           << join(bad);
}

class FreshCases : public testing::TestWithParam<uint64_t> {};

TEST_P(FreshCases, BreakExactlyWhatTheirNamesSay) {
  Gen gen(GetParam());
  std::vector<std::string> bad;
  size_t cases = 0, failing = 0;
  for (const Function& f : gen.fns) {
    GenStats st;
    for (const Case& c : generate(f, &st)) {
      ++cases;
      std::vector<std::string> b = check_case(f, GetParam(), c.scenario);
      failing += !b.empty();
      bad.insert(bad.end(), b.begin(), b.end());
    }
  }
  EXPECT_GT(cases, 100u);
  EXPECT_TRUE(bad.empty()) << failing << " of " << cases << " cases do not break exactly what they name:\n"
                           << join(bad);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, FreshCases, testing::Values(4096, 16384),
                         [](const auto& info) { return std::to_string(info.param / 1024) + "k"; });

// The check itself: wrong cases it must reject.
class CheckCatches : public testing::Test {
 protected:
  using Named = std::pair<const Function*, Scenario>;
  // Fresh 4K cases by name, generated once for every test of the suite.
  static void SetUpTestSuite() {
    gen_ = new Gen(4096);
    cases_ = new std::map<std::string, Named>;
    for (const Function& f : gen_->fns) {
      GenStats st;
      for (Case& c : generate(f, &st)) {
        const std::string name = c.scenario.name;
        (*cases_)[name] = {&f, std::move(c.scenario)};
      }
    }
  }
  static void TearDownTestSuite() {
    delete cases_;
    delete gen_;
  }
  static Named get(const std::string& name) {
    auto it = cases_->find(name);
    EXPECT_NE(it, cases_->end()) << name;
    return it == cases_->end() ? Named{} : it->second;
  }
  static bool rejected(const Named& c) { return c.first && !check_case(*c.first, 4096, c.second).empty(); }
  static Op& create_op(Scenario& s) {
    for (Op& op : s.ops)
      if (op.code == gmem::kCreateGmem) return op;
    return s.ops.front();
  }
  static Gen* gen_;
  static std::map<std::string, Named>* cases_;
};
Gen* CheckCatches::gen_ = nullptr;
std::map<std::string, CheckCatches::Named>* CheckCatches::cases_ = nullptr;

TEST_F(CheckCatches, TheUnchangedCasesPass) {
  for (const char* n : {"z3/gmem/pwrite/valid", "z3/gmem/pwrite/break-offset-align", "z3/gmem/write/break-offset-eof",
                        "z3/gmem/pwrite/break-offset-loff+offset-eof", "z3/gmem/fallocate-alloc/break-end-eof"})
    EXPECT_FALSE(rejected(get(n))) << n;
}

TEST_F(CheckCatches, AFileWithoutWriteOrInitShared) {
  for (uint64_t flag : {gmem::kFlagWrite, gmem::kFlagInitShared}) {
    auto c = get("z3/gmem/pwrite/break-offset-align");
    create_op(c.second).args[2] &= ~flag;
    EXPECT_TRUE(rejected(c)) << flag;
    // Past EOF the model does not look at sharedness: the file check does.
    c = get("z3/gmem/write/break-offset-eof");
    create_op(c.second).args[2] &= ~flag;
    EXPECT_TRUE(rejected(c)) << flag;
  }
}

TEST_F(CheckCatches, ANameThatLeavesOutABrokenCondition) {
  auto c = get("z3/gmem/pwrite/break-offset-loff+offset-eof");
  c.second.name = "z3/gmem/pwrite/break-offset-loff";
  EXPECT_TRUE(rejected(c));
}

// Documents a limit, not a requirement: a condition of a later stage than the
// first broken one is never evaluated, so leaving it out of the name goes unseen.
TEST_F(CheckCatches, AConditionBehindAnEarlierStageIsNotSeen) {
  auto c = get("z3/gmem/pwrite/edge-len-max-outside+len-align");
  c.second.name = "z3/gmem/pwrite/edge-len-max-outside";
  EXPECT_FALSE(rejected(c));
}

TEST_F(CheckCatches, ANameThatClaimsWhatTheCaseDoesNotBreak) {
  auto c = get("z3/gmem/pwrite/valid");
  c.second.name = "z3/gmem/pwrite/break-len-align";
  EXPECT_TRUE(rejected(c));
  // A break the model permits (a punch across EOF succeeds) must still be evaluated.
  c = get("z3/gmem/fallocate-punch/valid");
  c.second.name = "z3/gmem/fallocate-punch/break-end-eof";
  EXPECT_TRUE(rejected(c));
  c = get("z3/gmem/create/break-size-align");
  c.second.name = "z3/gmem/create/break-flags-known";
  EXPECT_TRUE(rejected(c));
}

TEST_F(CheckCatches, AnOpBeforeTheAimedOneThatFails) {
  // write() after an lseek the model forbids (a negative offset).
  auto c = get("z3/gmem/write/break-len-align");
  for (Op& op : c.second.ops)
    if (op.code == gmem::kLseek) op.args[1] = ~0ull;
  EXPECT_TRUE(rejected(c));
  // A file the model refuses to create.
  c = get("z3/gmem/fallocate-punch/break-offset-align");
  create_op(c.second).args[1] = 1;
  EXPECT_TRUE(rejected(c));
}

}  // namespace
}  // namespace kconform::gen
