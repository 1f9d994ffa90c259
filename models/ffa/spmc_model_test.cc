// The SPMC-side model (spmc_model.h) on its own: every rule only it judges has
// a case, is evaluated there, and a wrong answer is a violation of it; the
// choices the specification leaves to an SPMC are all admitted and each leaves
// the table it says. (A real SPMC behind it: harness/runner/spmc_runner_test.cc
// and the TF-A mutants, ctest -R spmc.mutant.)
#include "models/ffa/spmc_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "harness/scenario/codec.h"
#include "models/common/rules.h"
#include "oracles/oracle.h"

namespace kconform::ffa {
namespace {

// One SP (0x8001), FFA_VERSION 1.2, no DONATE or RECLAIM2: as the spmc target
// configures it for TF-A 2.12.1.
ProxyProfile layout() {
  ProxyProfile p;
  p.hyp_pages = 4;
  p.spmc.n_sps = 1;
  p.spmc.sp_ids[1] = 0;
  p.spmc.reclaim2 = false;
  p.spmc.donate = false;
  p.spmc.one_send_in_flight = false;
  return p;
}

Scenario parse(const std::string& body) {
  const std::string text = "kconform-scenario 1\nabi ffa\nname t\nversion version=V1_1\n"
                           "rxtx_map tx=0x80000000 rx=0x80001000 pages=1\n" + body;
  std::vector<Scenario> out;
  std::string err;
  EXPECT_TRUE(parse_text(text, "test", &out, &err)) << err;
  return out.empty() ? Scenario{} : out[0];
}

Outcome pick(const Allowed& a) {
  Outcome o = Outcome::ok(a.lo);
  o.kind = a.kind;
  for (int i = 0; i < 8; ++i)
    if (a.regs_mask >> i & 1) o.regs[i] = a.regs[i];
  o.state = a.state;
  return o;
}

// Runs every op but the last with its first allowed outcome; the expectation of the last.
Expectation last(Model& m, const Scenario& s) {
  m.begin(s);
  Expectation e;
  for (size_t i = 0; i + 1 < s.ops.size(); ++i) {
    m.expect(s, i, e);
    EXPECT_FALSE(e.allowed.empty()) << "op " << i << ": " << e.note;
    m.commit(s, i, pick(e.allowed[0]));
  }
  m.expect(s, s.ops.size() - 1, e);
  return e;
}

bool hit(const Expectation& e, const char* id) {
  for (const RuleHit& h : e.hits)
    if (rule_info(h.rule).id == std::string(id)) return true;
  for (const Allowed& a : e.allowed)
    if (rule_info(a.rule).id == std::string(id)) return true;
  return false;
}

bool admitted(const Expectation& e, const Outcome& o) {
  for (const Allowed& a : e.allowed)
    if (a.admits(o)) return true;
  return false;
}

constexpr const char* kDesc = "tx_mem_desc layout=V1_1 ranges=hex:000002800000000001000000\n";
constexpr const char* kDescOther = "tx_mem_desc layout=V1_1 sender=1 ranges=hex:000002800000000001000000\n";

// FFA.SPMC.ANSWER: the reply of a call no more specific rule decides (a
// send's success): a wrong function ID or a wrong table is a violation.
TEST(SpmcModel, AnswerIsJudgedOnTheReplyAndTheTable) {
  auto m = make_spmc_model(layout());
  const Expectation e = last(*m, parse(std::string(kDesc) + "mem_share\n"));
  ASSERT_TRUE(hit(e, "FFA.SPMC.ANSWER"));
  Outcome right = pick(e.allowed[0]);
  EXPECT_TRUE(admitted(e, right));
  Outcome wrong = right;
  wrong.regs[0] = 0x12345;
  EXPECT_FALSE(admitted(e, wrong));
  EXPECT_EQ(judge(e, wrong).kind, VerdictKind::kViolation);
  Outcome stale = right;
  stale.state ^= 1;  // the SPMC's table not what the reply says (SPMC:TABLE)
  EXPECT_FALSE(admitted(e, stale));
}

// FFA.SPMC.HANDLE: a new transaction's handle is the SPMC's choice (not
// judged in the registers; the target checks bit 63 and uniqueness, and
// mutant 02 shows that check fails), and the model takes it.
TEST(SpmcModel, TheSpmcsHandleIsTakenAndUsed) {
  auto m = make_spmc_model(layout());
  const Scenario s = parse(std::string(kDesc) + "mem_share\nmem_reclaim handle=0\n");
  m->begin(s);
  Expectation e;
  for (size_t i = 0; i < 3; ++i) {
    m->expect(s, i, e);
    m->commit(s, i, pick(e.allowed[0]));
  }
  m->expect(s, 3, e);
  ASSERT_TRUE(hit(e, "FFA.SPMC.HANDLE"));
  Outcome theirs = pick(e.allowed[0]);
  theirs.regs[2] = 0xffffffc0, theirs.regs[3] = 0;  // TF-A's first handle
  ASSERT_TRUE(admitted(e, theirs));
  m->commit(s, 3, theirs);
  // The reclaim names TF-A's handle (HARNESS:SLOTS): the model knows it.
  m->expect(s, 4, e);
  ASSERT_FALSE(e.allowed.empty());
  EXPECT_EQ(e.allowed[0].regs[0], kFnSuccess32) << to_string(e.allowed[0]) << " " << e.note;
  Outcome refused = Outcome::ok(0);
  refused.regs[0] = kFnError;
  refused.regs[2] = static_cast<uint32_t>(kInvalidParameters);
  refused.state = e.allowed[0].state;
  EXPECT_FALSE(admitted(e, refused));
}

// FFA.SPMC.NS_TRUST: a send from another Normal-world endpoint is admitted
// refused (the model's own SPMC, DESC:SENDER) or accepted (left to the
// hypervisor), each with its own table; anything else is a violation.
TEST(SpmcModel, NsTrustAdmitsBothAndNothingElse) {
  auto m = make_spmc_model(layout());
  const Expectation e = last(*m, parse(std::string(kDescOther) + "mem_share\n"));
  ASSERT_TRUE(hit(e, "FFA.SPMC.NS_TRUST"));
  bool refuse = false, accept = false;
  for (const Allowed& a : e.allowed) {
    refuse |= a.regs[0] == kFnError;
    accept |= a.regs[0] == kFnSuccess32 && rule_info(a.rule).id == std::string("FFA.SPMC.NS_TRUST");
  }
  EXPECT_TRUE(refuse && accept);
  Outcome wrong = Outcome::ok(0);
  wrong.regs[0] = kFnSuccess32;
  wrong.state = 0x1234;  // accepted, but a table neither reply leaves
  EXPECT_FALSE(admitted(e, wrong));
  EXPECT_EQ(judge(e, wrong).kind, VerdictKind::kViolation);
}

// A secure sender ID from the Normal world is refused either way.
TEST(SpmcModel, NsTrustNeverCoversASecureSender) {
  auto m = make_spmc_model(layout());
  const Expectation e =
      last(*m, parse("tx_mem_desc layout=V1_1 sender=0x8001 ranges=hex:000002800000000001000000\nmem_share\n"));
  for (const Allowed& a : e.allowed) EXPECT_EQ(a.regs[0], kFnError) << to_string(a);
}

// What the references leave an SPMC to choose (DescLeeway, issue 38): the
// time-slicing flag of a share or a lend may be refused with
// INVALID_PARAMETERS, the table as it was; Normal non-cacheable memory may
// be refused with INVALID_PARAMETERS or DENIED; device memory is refused
// with either code, never taken; a later version's endpoint descriptor size
// may be refused; v1.1's 16-byte entries from a v1.2 caller must be taken.
TEST(SpmcModel, TheChoicesTheReferencesDifferOnAreAdmitted) {
  auto codes = [](const Expectation& e, bool* success) {
    std::vector<int32_t> v;
    *success = false;
    for (const Allowed& a : e.allowed) {
      if (a.regs[0] == kFnError) v.push_back(static_cast<int32_t>(a.regs[2]));
      *success |= a.regs[0] == kFnSuccess32;
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  struct Case {
    const char* body;
    bool success;
    std::vector<int32_t> refused;
  } cases[] = {
      {"tx_mem_desc layout=V1_1 flags=TIME_SLICE ranges=hex:000002800000000001000000\nmem_share\n", true,
       {kInvalidParameters}},
      {"tx_mem_desc layout=V1_1 attrs=UNSPECIFIED flags=TIME_SLICE ranges=hex:000002800000000001000000\nmem_lend\n",
       true, {kInvalidParameters}},
      {"tx_mem_desc layout=V1_1 attrs=NORMAL_NC_INNER ranges=hex:000002800000000001000000\nmem_share\n", true,
       {kDenied, kInvalidParameters}},
      {"tx_mem_desc layout=V1_1 attrs=DEVICE ranges=hex:000002800000000001000000\nmem_share\n", false,
       {kDenied, kInvalidParameters}},
      {"tx_mem_desc layout=V1_1 ep_mem_size=32 ranges=hex:000002800000000001000000\nmem_share\n", true,
       {kInvalidParameters}},
      {"tx_mem_desc layout=V1_1 ranges=hex:000002800000000001000000\nmem_share\n", true, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    auto m = make_spmc_model(layout());
    bool success = false;
    const Expectation e = last(*m, parse(c.body));
    EXPECT_EQ(codes(e, &success), c.refused);
    EXPECT_EQ(success, c.success);
    // A refusal the model allows where it would succeed leaves the table as
    // it was, not as the success leaves it.
    for (const Allowed& ok : e.allowed)
      if (ok.regs[0] == kFnSuccess32)
        for (const Allowed& a : e.allowed)
          if (a.regs[0] == kFnError) EXPECT_NE(a.state, ok.state) << to_string(a);
  }
  // v1.2: a 16-byte (v1.1) endpoint descriptor is taken, not refused.
  auto m = make_spmc_model(layout());
  std::vector<Scenario> out;
  std::string err;
  ASSERT_TRUE(parse_text("kconform-scenario 1\nabi ffa\nname t\nversion version=V1_2\n"
                         "rxtx_map tx=0x80000000 rx=0x80001000 pages=1\n"
                         "tx_mem_desc layout=V1_2 ep_mem_size=16 ranges=hex:000002800000000001000000\nmem_share\n",
                         "test", &out, &err))
      << err;
  bool success = false;
  const Expectation e = last(*m, out[0]);
  EXPECT_TRUE(codes(e, &success).empty());
  EXPECT_TRUE(success);
}

// SMC_UNK for a function ID that is not FF-A's (BL31 answers it).
TEST(SpmcModel, NonFfaIsSmcUnknown) {
  auto m = make_spmc_model(layout());
  const Expectation e = last(*m, parse("raw fid=0x84000000\n"));
  ASSERT_EQ(e.allowed.size(), 1u);
  EXPECT_EQ(e.allowed[0].regs[0], 0xffffffffu);
  EXPECT_EQ(e.allowed[0].regs_mask, 1u);
}

}  // namespace
}  // namespace kconform::ffa
