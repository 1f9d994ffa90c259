// Every FF-A edge case of the Z3 generator through the model (models/ffa, the
// profile of the case's host PAGE_SIZE, RECLAIM2 where the case requires it):
// the op a case breaking one condition aims at is on the forbidden side of
// exactly that condition's rule, evaluated there; one that also names
// "+<cond>"s (the others its wrap-around breaks exactly, kept in W-bit
// arithmetic) is on the forbidden side of some of the named rules (the model
// stops at the first broken check) and of nothing else; a case that breaks
// nothing has no forbidden rule on any op. Every op before the one aimed at (version,
// rxtx_map, the descriptor writes, the share a RECLAIM2 case reclaims from) is
// on no rule's forbidden side.
//
// The op aimed at: mem_reclaim2 for the reclaim2 functions; for share-desc and
// lend-desc the first op from the send on that is on some rule's forbidden
// side (the send itself, or the FFA_MEM_FRAG_TX that completes a fragmented
// descriptor, where its whole is checked).
//
// Checks the committed corpora/z3/ffa (KC_Z3_FFA_DIR names another copy, e.g.
// an old one, to show what it breaks) and fresh cases at 4K and 16K.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/gen/case_kind.h"
#include "harness/gen/constraints.h"
#include "harness/gen/generate.h"
#include "harness/scenario/codec.h"
#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/ffa_spec.h"
#include "models/common/rules.h"
#include "models/ffa/model.h"

namespace kconform::gen {
namespace {

namespace fs = std::filesystem;
using namespace kconform::ffa;

// The outcome an op is given so the scenario goes on: one the model allows
// that is not FFA_ERROR if there is one, else the first.
Outcome pick(const Expectation& e) {
  const Allowed* a = &e.allowed.front();
  for (const Allowed& x : e.allowed)
    if (x.kind == Outcome::Kind::kOk && !((x.regs_mask & 1) && (x.regs[0] & 0xffffffffu) == kFnError)) {
      a = &x;
      break;
    }
  Outcome o = Outcome::ok(a->lo);
  o.kind = a->kind;
  for (int i = 0; i < 8; ++i)
    if (a->regs_mask >> i & 1) o.regs[i] = a->regs[i];
  o.state = a->state;
  if (a->check_aux) o.aux = a->aux;
  return o;
}

std::string names(const std::set<RuleId>& rules) {
  std::string out;
  for (RuleId r : rules) out += (out.empty() ? "" : ", ") + std::string(rule_info(r).id);
  return out.empty() ? "none" : out;
}

ProxyProfile profile_for(const Scenario& s) {
  ProxyProfile p;
  p.page_size = (s.requires_caps & kCapPage16k) ? 16384 : (s.requires_caps & kCapPage64k) ? 65536 : 4096;
  p.reclaim2 = (s.requires_caps & kCapReclaim2) != 0;
  return p;
}

bool is_send(uint8_t code) { return code == kOpMemShare || code == kOpMemLend || code == kOpMemDonate; }

// What is wrong with one case of function f (empty: nothing).
std::vector<std::string> check_case(const Function& f, const Scenario& s) {
  std::vector<std::string> bad;
  auto fail = [&](const std::string& why) { bad.push_back(s.name + ": " + why); };
  const std::string prefix = "z3/ffa/" + f.name + "/";
  if (s.name.rfind(prefix, 0) != 0) return fail("name does not start with " + prefix), bad;
  Aim aim;
  std::string why;
  if (!parse_kind(f, s.name.substr(prefix.size()), &aim, &why)) return fail(why), bad;

  const bool r2 = f.name.rfind("reclaim2-", 0) == 0;
  size_t first = s.ops.size();  // the first op that may be the one aimed at
  for (size_t i = 0; i < s.ops.size() && first == s.ops.size(); ++i)
    if (r2 ? s.ops[i].code == kOpMemReclaim2 : is_send(s.ops[i].code)) first = i;
  if (first == s.ops.size()) return fail(r2 ? "no mem_reclaim2" : "no send"), bad;

  std::unique_ptr<Model> model = make_model(profile_for(s));
  model->begin(s);
  std::set<RuleId> forbidden, hit, first_hit;
  size_t at = s.ops.size();
  std::string note;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    Expectation e;
    model->expect(s, i, e);
    std::set<RuleId> f_i;
    for (const RuleHit& h : e.hits)
      if (h.forbidden) f_i.insert(h.rule);
    if (i == first)
      for (const RuleHit& h : e.hits) first_hit.insert(h.rule);
    if (i < first && !f_i.empty()) {
      fail("op " + std::to_string(i) + " (before the one aimed at) is on the forbidden side of " + names(f_i) +
           (e.note.empty() ? "" : " (" + e.note + ")"));
    } else if (i >= first && at == s.ops.size() && (!f_i.empty() || (r2 && i == first))) {
      at = i;
      forbidden = f_i;
      note = e.note;
      for (const RuleHit& h : e.hits) hit.insert(h.rule);
      if (!aim.broken.empty() || r2) break;  // a valid send case goes on to its reclaim
    }
    if (e.allowed.empty()) return fail("op " + std::to_string(i) + " allows nothing"), bad;
    model->commit(s, i, pick(e));
  }

  // A condition whose breaking the model permits (Cond::may_succeed) puts no
  // op on its rule's forbidden side: it is evaluated at the send, on the
  // allowed side.
  std::set<RuleId> want;
  for (const Cond* c : aim.broken) {
    std::optional<RuleId> r = rule_by_id(c->rule);
    if (!r) return fail("condition " + c->id + " names no rule " + c->rule), bad;
    if (!c->may_succeed)
      want.insert(*r);
    else if (!first_hit.count(*r))
      fail("breaks " + c->id + " but the model does not evaluate " + c->rule + " at the send");
  }
  const std::string where = at < s.ops.size() ? "op " + std::to_string(at) : std::string("no op");
  const std::string said = where + " is on the forbidden side of " + names(forbidden) + "; its name says " +
                           names(want) + (note.empty() ? "" : " (" + note + ")");
  if (aim.broken.size() <= 1) {
    // Isolated (or valid): exactly the target's rule, evaluated.
    for (RuleId r : want)
      if (!hit.count(r)) fail("breaks its target but the model does not evaluate " + std::string(rule_info(r).id));
    if (forbidden != want) fail(said);
  } else {
    // It names the others it breaks (a wrap-around the implementation's
    // arithmetic hides from them too): the model stops at the first broken
    // check, so one or more of the named rules, and nothing else.
    const bool subset = std::includes(want.begin(), want.end(), forbidden.begin(), forbidden.end());
    if (forbidden.empty() || !subset) fail(said);
  }
  return bad;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

struct Gen {
  explicit Gen(std::vector<uint64_t> pages) : vocab(ctx) {
    GenConfig cfg;
    cfg.ffa_pages = std::move(pages);
    fns = ffa_functions(vocab, cfg);
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

TEST(GenFfaCases, CommittedCasesBreakExactlyWhatTheirNamesSay) {
  const char* env = std::getenv("KC_Z3_FFA_DIR");
  const fs::path dir = env ? fs::path(env) : fs::path(KC_CORPUS_DIR) / "z3" / "ffa";
  Gen gen({4096, 16384});
  std::vector<std::string> bad;
  size_t files = 0, cases = 0, failing = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".kcs") continue;
    ++files;
    const Function* f = gen.by_name(e.path().stem().string());
    ASSERT_NE(f, nullptr) << e.path() << ": no generator function of that name";
    std::vector<Scenario> scenarios;
    std::string error;
    ASSERT_TRUE(load_scenario_file(e.path().string(), &scenarios, &error)) << error;
    for (const Scenario& s : scenarios) {
      ++cases;
      std::vector<std::string> b = check_case(*f, s);
      failing += !b.empty();
      for (std::string& line : b) bad.push_back(e.path().filename().string() + ": " + line);
    }
  }
  EXPECT_EQ(files, 6u) << dir;
  EXPECT_GT(cases, 100u);
  EXPECT_TRUE(bad.empty()) << failing << " of " << cases << " cases do not break exactly what they name:\n"
                           << join(bad);
}

// The check itself: wrong cases it must reject (fresh 4K cases by name).
class FfaCheckCatches : public testing::Test {
 protected:
  using Named = std::pair<const Function*, Scenario>;
  static void SetUpTestSuite() {
    gen_ = new Gen({4096});
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
  static bool rejected(const Named& c) { return c.first && !check_case(*c.first, c.second).empty(); }
  static Gen* gen_;
  static std::map<std::string, Named>* cases_;
};
Gen* FfaCheckCatches::gen_ = nullptr;
std::map<std::string, FfaCheckCatches::Named>* FfaCheckCatches::cases_ = nullptr;

TEST_F(FfaCheckCatches, FreshCasesPass) {
  std::vector<std::string> bad;
  for (const auto& [name, c] : *cases_) {
    std::vector<std::string> b = check_case(*c.first, c.second);
    bad.insert(bad.end(), b.begin(), b.end());
  }
  EXPECT_GT(cases_->size(), 50u);
  EXPECT_TRUE(bad.empty()) << bad.size() << " fresh cases do not break exactly what they name:\n" << join(bad);
}

TEST_F(FfaCheckCatches, ANameThatClaimsWhatTheCaseDoesNotBreak) {
  auto c = get("z3/ffa/share-desc-4k/valid");
  c.second.name = "z3/ffa/share-desc-4k/break-comp-align";
  EXPECT_TRUE(rejected(c));
  c = get("z3/ffa/reclaim2-4k/valid");
  c.second.name = "z3/ffa/reclaim2-4k/break-offset-align";
  EXPECT_TRUE(rejected(c));
}

TEST_F(FfaCheckCatches, ACaseThatBreaksMoreThanItsName) {
  // A valid share whose descriptor then also names a sender that is not the host.
  auto c = get("z3/ffa/share-desc-4k/break-comp-align");
  auto v = get("z3/ffa/share-desc-4k/break-ep-size-align");
  v.second.name = c.second.name;  // ep-size broken, named comp-align
  EXPECT_TRUE(rejected(v));
}

TEST_F(FfaCheckCatches, AnOpBeforeTheAimedOneThatFails) {
  // The share a RECLAIM2 case reclaims from, made to fail (no mailbox).
  auto c = get("z3/ffa/reclaim2-4k/break-offset-align");
  for (Op& op : c.second.ops)
    if (op.code == kOpRxtxMap) op.args[0] = 0x80000001;  // TX not page-aligned
  EXPECT_TRUE(rejected(c));
}

}  // namespace
}  // namespace kconform::gen
