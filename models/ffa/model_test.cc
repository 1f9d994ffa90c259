// Unit tests of the FF-A model (proxy + SPMC behind models/model.h): every
// rule cites a SPEC.md clause; for every rule a scenario whose last op must be
// judged, and a wrong answer the oracle must reject (tests as data); then
// behaviour tests: shares and reclaims, fragments, RECLAIM2 sequences against
// one FFA_MEM_RECLAIM, host PAGE_SIZE 16K, that expect() leaves the model
// state alone and that commit() reaches the state expect() predicted.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "models/common/rules.h"
#include "models/ffa/hits.h"
#include "models/ffa/model.h"
#include "models/ffa/model_test_util.h"
#include "models/ffa/scenario_ops.h"
#include "oracles/oracle.h"

namespace kconform::ffa {
namespace {

using namespace test;

bool hit(const Expectation& e, RuleId r) {
  for (const RuleHit& h : e.hits)
    if (h.rule == r) return true;
  for (const Allowed& a : e.allowed)
    if (a.rule == r) return true;
  return false;
}

// --- rules.def -----------------------------------------------------------------------

std::string source_dir() { return std::string(__FILE__).substr(0, std::string(__FILE__).rfind('/')); }

// The .kcs files of corpora/ffa and corpora/z3/ffa, sorted.
std::vector<std::filesystem::path> ffa_corpus_files() {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(source_dir()) / "../../corpora";
  std::vector<fs::path> files;
  for (const char* dir : {"ffa", "z3/ffa"})
    for (const auto& f : fs::directory_iterator(root / dir))
      if (f.path().extension() == ".kcs") files.push_back(f.path());
  std::sort(files.begin(), files.end());
  return files;
}

// IDs and citations: models/common/rules_test.cc, for every rule of both models.

// --- Every rule: a scenario and a wrong answer the oracle rejects ------------------

enum Wrong {
  kSucceed,    // FFA_SUCCESS and no state change
  kFail,       // FFA_ERROR(INVALID_PARAMETERS) and no state change
  kState,      // the first allowed outcome with another state
  kW2Plus,     // the first allowed outcome with w2 + 1
  kX0,         // the first allowed outcome with x0 = 0x12345
  kValuePlus,  // the first allowed outcome with value + 1
};

struct RuleCase {
  const char* rule;
  int prof;  // 0: 4K, 1: 16K, 2: 4K + RECLAIM2, 3: 16K + RECLAIM2, 4: 4K with a 100-byte descriptor buffer
  Pre pre;
  std::string body;
  Wrong wrong;
};

ProxyProfile prof_of(int k) {
  ProxyProfile p = profile(k & 1 ? 16384 : 4096, k == 2 || k == 3);
  if (k == 4) p.desc_buf_bytes = 100;  // below a one-constituent retrieve response (112 bytes at v1.2)
  return p;
}

const std::string kD = "0x80010000";
std::string share(uint64_t a = 0x80010000, uint32_t pages = 1, const std::string& extra = "") {
  return "tx_mem_desc " + extra + (extra.empty() ? "" : " ") + "ranges=" + R1(a, pages) + "\nmem_share\n";
}
std::string desc(const std::string& extra, uint64_t a = 0x80010000, uint32_t pages = 1) {
  return "tx_mem_desc " + extra + (extra.empty() ? "" : " ") + "ranges=" + R1(a, pages) + "\n";
}
const std::string kR2Pre = share(0x80010000, 4) + "tx_constituents offset=0 ranges=" + R1(0x80010000, 4) + "\n";
std::string r2(const std::string& args) { return kR2Pre + "mem_reclaim2 handle=0 " + args + "\n"; }

std::string handle_table_full() {
  std::string b;
  for (int i = 0; i <= 16; ++i) b += share(0x80010000 + i * 0x1000ull);
  return b;
}

std::vector<RuleCase> rule_cases() {
  return {
      {"FFA.HARNESS.SLOTS", 0, kFull, share(0x80010000, 1, "sender=1") + "mem_reclaim handle=0", kSucceed},
      {"FFA.HARNESS.TX_WRITE", 0, kFull, "tx_write offset=0 data=hex:0102", kValuePlus},
      {"FFA.HARNESS.EL3_KNOB", 0, kFull, "el3_misbehave kind=ERROR value=1", kState},
      {"FFA.HARNESS.SP_OP", 0, kFull, share() + "sp_retrieve handle=0", kValuePlus},
      {"FFA.DESC.HEADER", 0, kFull, desc("") + "mem_share total_len=16 frag_len=16", kSucceed},
      {"FFA.DESC.EP_COUNT", 0, kFull, desc("ep_count=0") + "mem_share", kSucceed},
      {"FFA.DESC.EP_MEM_SIZE", 0, kFull, desc("ep_mem_size=24") + "mem_share", kSucceed},
      {"FFA.DESC.EP_MEM_OFFSET", 0, kFull, desc("") + "tx_write offset=32 data=hex:10000000\nmem_share", kSucceed},
      {"FFA.DESC.RESERVED_MBZ", 0, kFull, desc("") + "tx_write offset=40 data=hex:01\nmem_share", kSucceed},
      {"FFA.DESC.HANDLE_MBZ", 0, kFull, desc("") + "tx_write offset=8 data=hex:01\nmem_share", kSucceed},
      {"FFA.DESC.COMPOSITE_OFFSET", 0, kFull, desc("") + "tx_write offset=52 data=hex:44000000\nmem_share", kSucceed},
      {"FFA.DESC.RANGE_COUNT", 0, kFull, desc("range_count=0") + "mem_share", kSucceed},
      {"FFA.DESC.LENGTH", 0, kFull, desc("") + "mem_share total_len=128 frag_len=128", kSucceed},
      {"FFA.DESC.TOTAL_PAGES", 0, kFull, desc("total_pages=5") + "mem_share", kSucceed},
      {"FFA.DESC.PAGE_COUNT", 0, kFull, desc("", 0x80010000, 0) + "mem_share", kSucceed},
      {"FFA.DESC.ADDR_ALIGN", 0, kFull, desc("", 0x80010800, 1) + "mem_share", kSucceed},
      {"FFA.DESC.ADDR_OVERFLOW", 0, kFull, desc("", 0xfffffffffffff000ull, 2) + "mem_share", kSucceed},
      {"FFA.DESC.OVERLAP", 0, kFull, "tx_mem_desc ranges=" + R({{0x80010000, 1}, {0x80010000, 1}}) + "\nmem_share", kSucceed},
      {"FFA.DESC.CONSTITUENT_MBZ", 0, kFull, desc("") + "tx_write offset=108 data=hex:01\nmem_share", kSucceed},
      {"FFA.DESC.SENDER", 0, kFull, desc("sender=1") + "mem_share", kSucceed},
      {"FFA.DESC.RECEIVER", 0, kFull, desc("receiver=0x8003") + "mem_share", kSucceed},
      {"FFA.DESC.PERMS", 0, kFull, desc("perms=RW|X") + "mem_share", kSucceed},
      {"FFA.DESC.ATTRS", 0, kFull, desc("attrs=DEVICE") + "mem_share", kSucceed},
      {"FFA.DESC.FLAGS", 0, kFull, desc("flags=ZERO") + "mem_share", kSucceed},
      {"FFA.DESC.EMAD_FLAGS", 0, kFull, desc("") + "tx_write offset=51 data=hex:02\nmem_share", kSucceed},
      {"FFA.DESC.LAYOUT", 0, kFull, desc("layout=V1_0") + "mem_share", kSucceed},
      {"FFA.MBOX.MAP_ARGS", 0, kNoMap, "rxtx_map tx=0x80000000 rx=0x80001000 pages=0", kSucceed},
      {"FFA.MBOX.MAP_TWICE", 0, kFull, "rxtx_map tx=0x80002000 rx=0x80003000 pages=1", kSucceed},
      {"FFA.MBOX.MAP_SIZE", 0, kNoMap, "rxtx_map tx=0x80000000 rx=0x80002000 pages=2", kSucceed},
      {"FFA.MBOX.MAP_OWNED", 0, kNoMap, "rxtx_map tx=0x80040000 rx=0x80001000 pages=1", kSucceed},
      {"FFA.MBOX.MAP_OK", 0, kNoMap, "rxtx_map tx=0x80000000 rx=0x80001000 pages=1", kFail},
      {"FFA.MBOX.UNMAP", 0, kNoMap, "rxtx_unmap", kSucceed},
      {"FFA.MBOX.RX_RELEASE", 0, kFull, "rx_release", kSucceed},
      {"FFA.MBOX.TX_REQUIRED", 0, kNoMap, desc("") + "mem_share total_len=112 frag_len=112", kSucceed},
      {"FFA.MBOX.RX_BUSY", 0, kFull, "partition_info_get\npartition_info_get", kSucceed},
      {"FFA.VERSION.BIT31", 0, kNothing, "raw fid=VERSION x1=0x80000000", kX0},
      {"FFA.VERSION.NEGOTIATE", 0, kNothing, "version version=V1_1", kX0},
      {"FFA.VERSION.DOWNGRADE", 0, kFull, "version version=V1_1", kX0},
      {"FFA.FEATURES.CONSISTENT", 0, kFull, "features id=MEM_DONATE_64", kSucceed},
      {"FFA.ID_GET.HOST", 0, kFull, "id_get", kW2Plus},
      {"FFA.PARTITION_INFO.COUNT", 0, kFull, "partition_info_get flags=1", kW2Plus},
      {"FFA.SMC32.UPPER", 0, kNoMap, "raw fid=RXTX_MAP_32 x1=0x180000000 x2=0x80001000 x3=1", kFail},
      {"FFA.SMCCC.HINT", 0, kFull, "raw fid=0x84010069", kW2Plus},  // FFA_ID_GET with the SVE hint
      {"FFA.SMCCC.X0_UPPER", 0, kFull, "raw fid=0x184000069", kState},  // FFA_ID_GET, x0[32] set
      {"FFA.PROXY.UNSUPPORTED", 0, kFull, desc("attrs=UNSPECIFIED") + "mem_donate", kSucceed},
      {"FFA.PROXY.FORWARD_OTHER", 0, kFull, "raw fid=DIRECT_REQ_32 x1=0x8001", kState},
      {"FFA.PROXY.NON_FFA", 0, kFull, "raw fid=0x84000000", kState},
      {"FFA.PROXY.NO_CHANGE_ON_ERROR", 0, kFull, share(0x80010000, 1, "sender=1"), kState},
      {"FFA.PROXY.HOST_MEMORY", 0, kFull, share(0x80040000), kSucceed},
      {"FFA.PROXY.GRANULE", 1, kFull, share(0x80010000, 1), kSucceed},
      {"FFA.PROXY.SHARE_OK", 0, kFull, share(0x80010000, 2), kState},
      {"FFA.PROXY.LEND_AS_SHARE", 0, kFull, desc("attrs=UNSPECIFIED") + "mem_lend", kState},
      {"FFA.PROXY.ROLLBACK", 0, kFull, "el3_misbehave kind=ERROR value=0xfffffffd\n" + share(), kState},
      {"FFA.PROXY.MEM_ARGS", 0, kFull, desc("") + "mem_share addr=0x80000000", kSucceed},
      {"FFA.PROXY.FRAGMENT", 0, kFull, "tx_mem_desc ranges=" + R({{0x80010000, 1}, {0x80020000, 1}}) + "\nmem_share frag_len=112", kW2Plus},
      {"FFA.PROXY.FRAG_STATE", 0, kFull, "tx_mem_desc ranges=" + R({{0x80010000, 1}, {0x80020000, 1}}) + "\nmem_share frag_len=112", kState},
      {"FFA.PROXY.RECLAIM_OK", 0, kFull, share() + "mem_reclaim handle=0", kState},
      {"FFA.PROXY.RECLAIM_ERR", 0, kFull, share() + "sp_retrieve handle=0\nmem_reclaim handle=0", kSucceed},
      {"FFA.PROXY.RECLAIM_AFTER_PARTIAL", 2, kFull, kR2Pre + "tx_constituents offset=0 ranges=" + R1(0x80010000, 1) + "\nmem_reclaim2 handle=0 count=1 total_pages=1\nmem_reclaim handle=0", kState},
      {"FFA.PROXY.EL3_FAULT", 0, kFull, share() + "el3_misbehave kind=BOGUS_DESC value=0x80040000\nmem_reclaim handle=0", kSucceed},
      {"FFA.PROXY.ERROR_ENCODING", 0, kNoMap, "rxtx_unmap", kX0},
      {"FFA.SPMC.HANDLE_ALLOC", 0, kFull, handle_table_full(), kSucceed},
      {"FFA.SPMC.IN_USE", 0, kFull, share() + share(), kSucceed},
      {"FFA.PROFILE.PERMISSIVE_EL3", 0, kFull, "el3_profile permissive=1\n" + share(0x80010000, 1, "sender=1"), kSucceed},
      {"FFA.PROFILE.ONE_SEND", 0, kFull, "tx_mem_desc ranges=" + R({{0x80010000, 1}, {0x80020000, 1}}) + "\nmem_share frag_len=112\n" + share(0x80030000), kSucceed},
      {"FFA.SPMC.RETRIEVE_HYP", 0, kFull, share() + "mem_reclaim handle=0", kState},
      {"FFA.SPMC.HYP_RETRIEVE_REQ", 0, kFull, share() + "mem_reclaim handle=0", kState},
      {"FFA.SPMC.HYP_RETRIEVE_RETRIEVED", 0, kFull, share() + "sp_retrieve handle=0\nmem_reclaim handle=0", kSucceed},
      {"FFA.HARNESS.HOST_MEM", 1, kFull, "host_fill addr=0x80010000 pages=4 value=7", kValuePlus},
      {"FFA.SPMC.RECLAIM_ZERO", 0, kFull, "host_fill addr=0x80010000 pages=1 value=7\n" + desc("attrs=UNSPECIFIED") + "mem_lend\nmem_reclaim handle=0 flags=ZERO\nhost_count addr=0x80010000 pages=1 value=0", kValuePlus},
      {"FFA.SPMC.RECLAIM_RETRIEVED", 0, kFull, share() + "sp_retrieve handle=0\nmem_reclaim handle=0", kSucceed},
      {"FFA.SPMC.RECLAIM_HANDLE", 0, kFull, share() + "mem_reclaim handle=0 handle_xor=1", kSucceed},
      {"FFA.SPMC.RECLAIM_FLAGS", 0, kFull, share() + "mem_reclaim handle=0 flags=ZERO", kSucceed},
      {"FFA.SPMC.NS_MEMORY", 0, kFull, share(0x10000000), kSucceed},
      {"FFA.SPMC.DESC_TOO_BIG", 0, kFull, desc("") + "mem_share total_len=70000 frag_len=112", kSucceed},
      {"FFA.R2.NOT_IMPLEMENTED", 0, kFull, r2("count=1 total_pages=4"), kSucceed},
      {"FFA.R2.FLAGS", 2, kFull, r2("flags=0x4 count=1 total_pages=4"), kSucceed},
      {"FFA.R2.OFFSET_ALIGN", 2, kFull, r2("offset=8 count=1 total_pages=4"), kSucceed},
      {"FFA.R2.BOUNDS", 2, kFull, r2("offset=4080 count=2 total_pages=4"), kSucceed},
      {"FFA.R2.COUNT", 2, kFull, r2("count=0 total_pages=0"), kSucceed},
      {"FFA.R2.TOTAL", 2, kFull, r2("count=1 total_pages=3"), kSucceed},
      {"FFA.R2.PAGE_INDEX", 2, kFull, r2("count=1 page_index=4 total_pages=4"), kSucceed},
      {"FFA.R2.DESC_VALID", 2, kFull, kR2Pre + "tx_constituents offset=0 ranges=" + R1(0x80010000, 4) + " reserved=1\nmem_reclaim2 handle=0 count=1 total_pages=4", kSucceed},
      {"FFA.R2.NOT_IN_TX", 2, kFull, kR2Pre + "tx_constituents offset=0 ranges=" + R1(0x80020000, 4) + "\nmem_reclaim2 handle=0 count=1 total_pages=4", kSucceed},
      {"FFA.R2.OVERLAP", 2, kFull, kR2Pre + "tx_constituents offset=0 ranges=" + R({{0x80010000, 2}, {0x80010000, 2}}) + "\nmem_reclaim2 handle=0 count=2 total_pages=4", kSucceed},
      {"FFA.R2.RECLAIMED", 2, kFull, kR2Pre + "tx_constituents offset=0 ranges=" + R1(0x80010000, 2) + "\nmem_reclaim2 handle=0 count=1 total_pages=2\nmem_reclaim2 handle=0 count=1 total_pages=2", kSucceed},
      {"FFA.R2.HANDLE", 2, kFull, r2("count=1 total_pages=4 handle_xor=1"), kSucceed},
      {"FFA.R2.RETRIEVED", 2, kFull, kR2Pre + "sp_retrieve handle=0\nmem_reclaim2 handle=0 count=1 total_pages=4", kSucceed},
      {"FFA.R2.COUNT_BOUND", 2, kFull, r2("count=1 total_pages=4"), kW2Plus},
      {"FFA.R2.UNSHARE", 2, kFull, r2("count=1 total_pages=4"), kState},
      {"FFA.R2.HOST_GRANULE", 3, kFull, share(0x80010000, 4) + "tx_constituents offset=0 ranges=" + R1(0x80010000, 4) + "\nmem_reclaim2 handle=0 count=1 page_index=1 total_pages=4", kSucceed},
      {"FFA.R2.EQUIVALENCE", 2, kFull, r2("count=1 total_pages=4"), kState},
      {"FFA.PROFILE.DESC_BUF", 4, kFull, share(), kSucceed},
  };
}

TEST(FfaModelRules, EveryRuleHasACaseAndTheOracleCanFail) {
  std::set<std::string> covered;
  for (const RuleCase& c : rule_cases()) {
    SCOPED_TRACE(c.rule);
    const auto rule = rule_by_id(c.rule);
    ASSERT_TRUE(rule.has_value());
    const ProxyProfile p = prof_of(c.prof);
    Play run(p, scenario(p, c.pre, c.body));
    ASSERT_TRUE(run.ok()) << run.error;
    ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
    const Expectation e = run.expect_last();
    ASSERT_FALSE(e.allowed.empty()) << e.note;
    EXPECT_TRUE(hit(e, *rule)) << "rule not evaluated; note: " << e.note;
    Outcome wrong = pick(e.allowed[0]);
    switch (c.wrong) {
      case kSucceed:
        wrong = Outcome::ok(0);
        wrong.regs[0] = kFnSuccess32;
        wrong.state = run.last_state;
        break;
      case kFail:
        wrong = Outcome::ok(0);
        wrong.regs[0] = kFnError;
        wrong.regs[2] = static_cast<uint32_t>(kInvalidParameters);
        wrong.state = run.last_state;
        break;
      case kState: wrong.state ^= 1; break;
      case kW2Plus: wrong.regs[2] += 1; break;
      case kX0: wrong.regs[0] = 0x12345; break;
      case kValuePlus: wrong.value += 1; break;
    }
    for (const Allowed& a : e.allowed) EXPECT_FALSE(a.admits(wrong)) << to_string(a);
    EXPECT_EQ(judge(e, wrong).kind, VerdictKind::kViolation);
    covered.insert(c.rule);
  }
  // Rules only the SPMC-side model judges (a real SPMC called from the Normal
  // world, spmc_model.h): their cases are in spmc_model_test.cc.
  // FFA.PROXY.NO_HYP_PANIC is a target invariant (the el2 target's, on every
  // host call), not a model outcome: its case is in el2_tfa_runner_test.cc.
  const std::set<std::string> spmc_side = {"FFA.SPMC.ANSWER", "FFA.SPMC.HANDLE", "FFA.SPMC.NS_TRUST",
                                           "FFA.PROXY.NO_HYP_PANIC"};
  for (const RuleInfo& r : all_rules())
    if (std::string(r.abi) == "ffa" && std::string(r.summary).rfind("Retired", 0) != 0 && !spmc_side.count(r.id))
      EXPECT_TRUE(covered.count(r.id)) << "no case for " << r.id;
}

// --- Behaviour ---------------------------------------------------------------------

// SMCCC:HINT: a call with the SVE hint set is judged as the call without it
// (the same outcomes allowed); SMCCC:W0: with bits in x0[63:32] the callee may
// also refuse it as an unknown function, which the plain call may not.
TEST(FfaModel, SveHintedCallIsTheCallAndX0UpperMayBeRefused) {
  const ProxyProfile p = profile(4096, false);
  auto expect = [&](const std::string& body) {
    Play run(p, scenario(p, kFull, body));
    EXPECT_TRUE(run.ok()) << run.error;
    EXPECT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
    return run.expect_last();
  };
  auto allowed = [](const Expectation& e) {
    std::vector<std::string> out;
    for (const Allowed& a : e.allowed) out.push_back(to_string(a));
    return out;
  };
  for (const std::string args : {"fid=0x84000069", "fid=0x84000064 x1=0x84000073", "fid=0xC4000066 x1=0x80002000 x2=0x80003000 x3=1"}) {
    SCOPED_TRACE(args);
    const std::string hinted = "fid=0x" + std::string(args.substr(6, 3)) + "1" + std::string(args.substr(10));
    const Expectation plain = expect("raw " + args), hint = expect("raw " + hinted);
    EXPECT_EQ(allowed(hint), allowed(plain)) << hinted;
    EXPECT_TRUE(hit(hint, *rule_by_id("FFA.SMCCC.HINT")));
    EXPECT_FALSE(hit(plain, *rule_by_id("FFA.SMCCC.HINT")));
  }
  const Expectation plain = expect("raw fid=0x84000069"), upper = expect("raw fid=0x184000069");
  Outcome refused = Outcome::ok(0);
  refused.regs[0] = ~0ull;
  refused.state = pick(plain.allowed[0]).state;
  EXPECT_EQ(judge(upper, refused).kind, VerdictKind::kPass);
  EXPECT_EQ(judge(plain, refused).kind, VerdictKind::kViolation);
  Outcome as_w0 = pick(plain.allowed[0]);
  EXPECT_EQ(judge(upper, as_w0).kind, VerdictKind::kPass);
}

// SPMC:RECLAIM-ZERO: after a lend reclaimed with the zero flag every byte is
// zero, without it every byte keeps the pattern; a proxy that dropped the
// flag (the pattern still there) or set it (zeroes) is caught by host_count.
TEST(FfaModel, ZeroOnReclaimIsObservable) {
  for (uint64_t page : {4096u, 16384u})
    for (bool zero : {false, true}) {
      SCOPED_TRACE(std::to_string(page) + (zero ? " zero" : " keep"));
      const ProxyProfile p = profile(page, false);
      const uint64_t pages = page / 4096, bytes = page;
      const std::string range = "addr=0x80010000 pages=" + std::to_string(pages);
      Play run(p, scenario(p, kFull, "host_fill " + range + " value=0xa5\ntx_mem_desc attrs=UNSPECIFIED ranges=" +
                                           R1(0x80010000, static_cast<uint32_t>(pages)) + "\nmem_lend\nmem_reclaim handle=0" +
                                           (zero ? " flags=ZERO" : "") + "\nhost_count " + range + " value=0"));
      ASSERT_TRUE(run.ok()) << run.error;
      ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
      const Expectation e = run.expect_last();
      ASSERT_EQ(e.allowed.size(), 1u);
      Outcome right = pick(e.allowed[0]), wrong = right;
      EXPECT_EQ(right.value, zero ? static_cast<int64_t>(bytes) : 0);
      wrong.value = zero ? 0 : static_cast<int64_t>(bytes);
      EXPECT_EQ(judge(e, right).kind, VerdictKind::kPass);
      EXPECT_EQ(judge(e, wrong).kind, VerdictKind::kViolation);
    }
}

// DESC:PAGES: a zero-page constituent in the first fragment of several may be
// relayed (FFA_MEM_FRAG_RX) or refused; in a whole descriptor only refused.
TEST(FfaModel, ZeroPageConstituentInAFirstFragmentMayBeRelayed) {
  const ProxyProfile p = profile(4096, false);
  auto allows = [&](const std::string& body, uint32_t x0) {
    Play run(p, scenario(p, kFull, body));
    EXPECT_TRUE(run.ok()) << run.error;
    EXPECT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
    const Expectation e = run.expect_last();
    bool found = false;
    for (const Allowed& a : e.allowed) found |= (a.regs_mask & 1) && static_cast<uint32_t>(a.regs[0]) == x0;
    return found;
  };
  const std::string rs = R({{0x80010000, 1}, {0x80020000, 0}, {0x80030000, 1}});
  EXPECT_TRUE(allows("tx_mem_desc ranges=" + rs + "\nmem_share frag_len=128\n", kFnMemFragRx));
  EXPECT_TRUE(allows("tx_mem_desc ranges=" + rs + "\nmem_share frag_len=128\n", kFnError));
  EXPECT_FALSE(allows("tx_mem_desc ranges=" + rs + "\nmem_share\n", kFnSuccess32));
  EXPECT_TRUE(allows("tx_mem_desc ranges=" + rs + "\nmem_share\n", kFnError));
}

// PROFILE:PERMISSIVE-EL3: with the default SPMC a Relayer that relays a
// descriptor it must refuse passes EL3's refusal on, which the model allows
// (the Relayer's check is invisible); with a permissive SPMC it gets and
// passes on FFA_SUCCESS, which no allowed outcome admits, and the rules on
// the forbidden side are the Relayer's own.
TEST(FfaModel, PermissiveEl3MakesTheRelayersOwnChecksVisible) {
  struct Case {
    std::string body;
    const char* rule;
  };
  const std::vector<Case> cases = {
      {share(0x80010000, 1, "sender=1"), "FFA.DESC.SENDER"},
      {"tx_mem_desc ranges=" + R({{0x80010000, 4}, {0x80010000, 4}}) + "\nmem_share\n", "FFA.DESC.OVERLAP"},
      {share(0x80010000, 4) + share(0x80010000, 4), "FFA.PROXY.HOST_MEMORY"},
      // Stock mutant 13: no endpoint (the permissive SPMC reads the count as 1).
      {"tx_mem_desc layout=V1_2 ep_count=0 ranges=" + R1(0x80010000, 4) + "\nmem_share\n", "FFA.DESC.EP_COUNT"},
      // Stock mutant 10: v1.2, the endpoint array at 16 (inside the header), a
      // 64-byte first fragment (the permissive SPMC answers FRAG_RX).
      {"tx_mem_desc layout=V1_2 tag=0x0000003000028001 ranges=" + R1(0x80010000, 4) +
           "\ntx_write offset=32 data=hex:10000000000000000000000000000000040000000100000000000000000000000000018000"
           "0000000400000000000000\nmem_share total_len=80 frag_len=64\n",
       "FFA.DESC.EP_MEM_OFFSET"},
  };
  for (uint64_t page : {4096u, 16384u})
    for (const Case& c : cases)
      for (bool permissive : {false, true}) {
        SCOPED_TRACE(std::to_string(page) + " " + c.rule + (permissive ? " permissive" : " default"));
        const ProxyProfile p = profile(page, false);
        Play run(p, scenario(p, kFull, (permissive ? "el3_profile permissive=1\n" : "") + c.body));
        ASSERT_TRUE(run.ok()) << run.error;
        ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
        const Expectation e = run.expect_last();
        bool forbidden = false;
        for (const RuleHit& h : e.hits) forbidden |= h.forbidden && rule_info(h.rule).id == std::string(c.rule);
        EXPECT_TRUE(forbidden) << e.note;
        // What a Relayer that relays the call returns: EL3's answer.
        bool relayed_error_allowed = false, success_allowed = false;
        for (const Allowed& a : e.allowed) {
          const uint32_t x0 = static_cast<uint32_t>(a.regs[0]);
          if ((a.regs_mask & 1) && x0 == kFnError) relayed_error_allowed = true;
          if ((a.regs_mask & 1) && (x0 == kFnSuccess32 || a.regs[0] == kFnSuccess64 || x0 == kFnMemFragRx))
            success_allowed = true;
        }
        EXPECT_TRUE(relayed_error_allowed);
        EXPECT_FALSE(success_allowed);
      }
}

TEST(FfaModel, ExpectLeavesTheStateAlone) {
  const ProxyProfile p = profile(4096, true);
  Play run(p, scenario(p, kFull, r2("count=1 total_pages=4")));
  ASSERT_TRUE(run.ok()) << run.error;
  ASSERT_TRUE(run.play(run.s.ops.size() - 1));
  const Expectation a = run.expect_last(), b = run.expect_last();
  ASSERT_EQ(a.allowed.size(), b.allowed.size());
  for (size_t i = 0; i < a.allowed.size(); ++i) EXPECT_EQ(to_string(a.allowed[i]), to_string(b.allowed[i]));
}

TEST(FfaModel, ShareMarksPagesAndReclaimRestoresThem) {
  const ProxyProfile p = profile(4096, false);
  const uint64_t base = Play(p, scenario(p, kFull, "id_get")).final_state();
  const uint64_t shared = Play(p, scenario(p, kFull, share(0x80010000, 3))).final_state();
  const uint64_t back = Play(p, scenario(p, kFull, share(0x80010000, 3) + "mem_reclaim handle=0")).final_state();
  EXPECT_NE(base, shared);
  EXPECT_EQ(base, back);
}

TEST(FfaModel, FragmentedShareEndsLikeOneShare) {
  const ProxyProfile p = profile(4096, false);
  const std::string rs = R({{0x80010000, 1}, {0x80020000, 2}});
  const uint64_t whole = Play(p, scenario(p, kFull, "tx_mem_desc ranges=" + rs + "\nmem_share\n")).final_state();
  const uint64_t frag = Play(p, scenario(p, kFull, "tx_mem_desc ranges=" + rs + "\nmem_share frag_len=112\n" +
                                                      "tx_constituents offset=0 ranges=" + R1(0x80020000, 2) +
                                                      "\nmem_frag_tx handle=0 frag_len=16\n"))
                            .final_state();
  EXPECT_EQ(whole, frag);
}

TEST(FfaModel, Reclaim2SequencesEqualOneReclaim) {
  for (uint64_t page : {4096ull, 16384ull}) {
    SCOPED_TRACE(page);
    const ProxyProfile p = profile(page, true);
    const std::string sh = share(0x80010000, 8);
    const uint64_t one = Play(p, scenario(p, kFull, sh + "mem_reclaim handle=0")).final_state();
    // Two halves, each a host-page multiple for both page sizes.
    const std::string halves = sh + "tx_constituents offset=0 ranges=" + R({{0x80010000, 4}, {0x80014000, 4}}) +
                               "\nmem_reclaim2 handle=0 count=1 total_pages=4\n" +
                               "mem_reclaim2 handle=0 offset=16 count=1 total_pages=4\n";
    EXPECT_EQ(Play(p, scenario(p, kFull, halves)).final_state(), one);
    // One call for all.
    const std::string all = sh + "tx_constituents offset=0 ranges=" + R1(0x80010000, 8) +
                            "\nmem_reclaim2 handle=0 count=1 total_pages=8\n";
    EXPECT_EQ(Play(p, scenario(p, kFull, all)).final_state(), one);
    // RECLAIM after a partial RECLAIM2: the rest.
    const std::string mixed = sh + "tx_constituents offset=0 ranges=" + R1(0x80010000, 4) +
                              "\nmem_reclaim2 handle=0 count=1 total_pages=4\nmem_reclaim handle=0\n";
    EXPECT_EQ(Play(p, scenario(p, kFull, mixed)).final_state(), one);
  }
}

TEST(FfaModel, Reclaim2ShortCountInsideA16kPageKeepsItShared) {
  const ProxyProfile p = profile(16384, true);
  const std::string sh = share(0x80010000, 4) + "tx_constituents offset=0 ranges=" + R1(0x80010000, 4) + "\n";
  const uint64_t shared = Play(p, scenario(p, kFull, sh)).final_state();
  const uint64_t one = Play(p, scenario(p, kFull, sh + "mem_reclaim handle=0")).final_state();
  // EL3 stops after 2 of the 4 4K pages: the 16K page must stay shared.
  Play run(p, scenario(p, kFull, sh + "el3_misbehave kind=SHORT_COUNT value=2\nmem_reclaim2 handle=0 count=1 total_pages=4\n" +
                                    "mem_reclaim2 handle=0 count=1 page_index=2 total_pages=4\n"));
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  EXPECT_NE(run.last_state, shared);  // the SPMC's bitmap changed
  const Expectation mid = run.expect_last();
  // Resuming mid-page: refused (no change), or relayed; some relayed outcome
  // leaves the region fully reclaimed with the page host-owned.
  bool refused = false, complete = false;
  for (const Allowed& a : mid.allowed) {
    refused |= a.state == run.last_state && a.regs[0] == kFnError;
    complete |= a.state == one;
  }
  EXPECT_TRUE(refused);
  EXPECT_TRUE(complete);
}

TEST(FfaModel, StockHandlerRejectsReclaim2WithoutChange) {
  const ProxyProfile p = profile(4096, false);
  Play run(p, scenario(p, kFull, r2("count=1 total_pages=4")));
  ASSERT_TRUE(run.play(run.s.ops.size() - 1));
  const Expectation e = run.expect_last();
  for (const Allowed& a : e.allowed) {
    EXPECT_EQ(a.regs[0], kFnError);
    EXPECT_EQ(static_cast<int32_t>(a.regs[2]), kNotSupported);
    EXPECT_EQ(a.state, run.last_state);
  }
}

// R2:EL3-UNK: a proxy with RECLAIM2 in front of an EL3 that does not route
// it (SPMC:ROUTED, TF-A 2.12.1: SMC_UNK) relays the valid call and changes
// nothing; the host may get NOT_SUPPORTED or EL3's SMC_UNK, never a success,
// never another error, and a stage-2 change is caught.
TEST(FfaModel, Reclaim2ThatEl3DoesNotRouteChangesNothing) {
  ProxyProfile p = profile(4096, true);
  p.spmc.reclaim2 = false;
  p.spmc.max_fnum = 0x8e;
  Play run(p, scenario(p, kFull, r2("count=1 total_pages=4")));
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  const Expectation e = run.expect_last();
  ASSERT_FALSE(e.allowed.empty());
  for (const Allowed& a : e.allowed) EXPECT_EQ(a.state, run.last_state);
  auto out = [&](uint64_t x0, uint64_t x2, uint64_t state) {
    Outcome o = Outcome::ok(0);
    o.regs[0] = x0;
    o.regs[2] = x2;
    o.state = state;
    return o;
  };
  EXPECT_EQ(judge(e, out(kFnError, static_cast<uint32_t>(kNotSupported), run.last_state)).kind, VerdictKind::kPass);
  EXPECT_EQ(judge(e, out(~0ull, 0, run.last_state)).kind, VerdictKind::kPass) << "EL3's SMC_UNK, relayed";
  EXPECT_EQ(judge(e, out(kFnSuccess32, 4, run.last_state)).kind, VerdictKind::kViolation);
  EXPECT_EQ(judge(e, out(kFnError, static_cast<uint32_t>(kInvalidParameters), run.last_state)).kind,
            VerdictKind::kViolation);
  const Verdict changed = judge(e, out(~0ull, 0, run.last_state ^ 1));
  ASSERT_EQ(changed.kind, VerdictKind::kViolation) << "the share is still EL3's: stage-2 must not change";
  EXPECT_EQ(changed.violated.at(0), kFfaProxyNoChangeOnError);
  // An EL3 that routes it but does not implement it answers FFA_ERROR: relayed as it is.
  p.spmc.max_fnum = 0xff;
  Play fferr(p, scenario(p, kFull, r2("count=1 total_pages=4")));
  ASSERT_TRUE(fferr.play(fferr.s.ops.size() - 1));
  const Expectation e2 = fferr.expect_last();
  EXPECT_EQ(judge(e2, out(kFnError, static_cast<uint32_t>(kNotSupported), fferr.last_state)).kind,
            VerdictKind::kPass);
  EXPECT_EQ(judge(e2, out(~0ull, 0, fferr.last_state)).kind, VerdictKind::kViolation);
}

TEST(FfaModel, El3ErrorOnReclaimLeavesPagesShared) {
  const ProxyProfile p = profile(4096, false);
  const uint64_t shared = Play(p, scenario(p, kFull, share(0x80010000, 2))).final_state();
  Play run(p, scenario(p, kFull, share(0x80010000, 2) + "el3_misbehave kind=FRAG_LEN value=0x100000\nmem_reclaim handle=0"));
  ASSERT_TRUE(run.play(run.s.ops.size() - 1));
  for (const Allowed& a : run.expect_last().allowed) {
    EXPECT_EQ(a.regs[0], kFnError);
    EXPECT_EQ(a.state, shared);
  }
}

// PKVM:DISTRUST on the reclaim path (HARNESS:EL3): a four-constituent share
// whose retrieve response (v1.2: 160 bytes) comes in three chunks (MAX_FRAG 64); a lie in any
// field of any reply allows only errors with stage-2 as it was (a proxy that
// reclaims anyway is rejected), and without a lie the reclaim succeeds.
TEST(FfaModel, El3ReclaimReplyLiesAllowOnlyErrors) {
  const ProxyProfile p = profile(4096, false);
  const std::string sh = "tx_mem_desc ranges=" +
                         R({{0x80010000, 1}, {0x80012000, 1}, {0x80020000, 1}, {0x80030000, 1}}) +
                         "\nmem_share\nel3_misbehave kind=MAX_FRAG value=64\n";
  const uint64_t shared = Play(p, scenario(p, kFull, sh)).final_state();
  {
    Play run(p, scenario(p, kFull, sh + "mem_reclaim handle=0"));
    ASSERT_TRUE(run.play(run.s.ops.size() - 1));
    bool ok = false;
    for (const Allowed& a : run.expect_last().allowed) ok |= a.regs[0] != kFnError;
    EXPECT_TRUE(ok) << "three chunks, no lie: the reclaim may succeed";
  }
  const char* lies[] = {
      "RESP_TOTAL_LEN value=64",          "RESP_TOTAL_LEN value=112",
      "RESP_TOTAL_LEN value=176",         "RESP_TOTAL_LEN value=0",
      "CHUNK_FRAG_LEN value=0",           "CHUNK_FRAG_LEN value=0x1010",
      "CHUNK_FRAG_LEN value=0x100000000", "CHUNK_FRAG_LEN value=0x100001010",
      "CHUNK_FRAG_LEN value=0x100000070", "CHUNK_FRAG_LEN value=0x200000030",
      "FRAG_STALL value=1",               "FRAG_STALL value=2",
      "CHUNK_FID value=0x84000061",       "CHUNK_FID value=0x184000061",
      "CHUNK_FID value=0x284000075",      "RESP_COMPOSITE_OFF value=160",
      "RESP_COMPOSITE_OFF value=32",      "RESP_COMPOSITE_OFF value=0xfffffff0",
      "RESP_RANGE_COUNT value=5",         "RESP_RANGE_COUNT value=1",
      "RESP_RANGE_COUNT value=0x10000000", "RESP_EMAD_OFF value=0x1000",
      "RESP_EMAD_OFF value=0",            "RESP_CONSTITUENT value=0x3000080038000",
  };
  for (const char* lie : lies) {
    Play run(p, scenario(p, kFull, sh + "el3_misbehave kind=" + lie + "\nmem_reclaim handle=0"));
    ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << lie;
    const auto& allowed = run.expect_last().allowed;
    EXPECT_FALSE(allowed.empty()) << lie;
    for (const Allowed& a : allowed) {
      EXPECT_EQ(a.regs[0], kFnError) << lie;
      EXPECT_EQ(a.state, shared) << lie;
    }
  }
  // MBOX:RX-RELEASE: a FRAG_TX of a bad length still hands the proxy its RX,
  // which it gives back: the next reclaim may succeed (not only BUSY).
  Play again(p, scenario(p, kFull, sh + "el3_misbehave kind=CHUNK_FRAG_LEN value=0x100000000\nmem_reclaim handle=0\n"
                                         "mem_reclaim handle=0"));
  ASSERT_TRUE(again.play(again.s.ops.size() - 1));
  bool ok = false;
  for (const Allowed& a : again.expect_last().allowed) ok |= a.regs[0] != kFnError;
  EXPECT_TRUE(ok) << "RX given back after a zero-length FRAG_TX";
}

// HARNESS:EL3 reply faults on the send path and PARTITION_INFO_GET
// (PKVM:DISTRUST): what the proxy can tell is a lie must end in an error with
// nothing left shared; relaying it is rejected. What a stateless proxy cannot
// tell may be relayed. Every such op is labelled robustness.
TEST(FfaModel, El3SendReplyFaultsNeedAnErrorWhereTheProxyCanTell) {
  const ProxyProfile p = profile(4096, false);
  const std::string two = "tx_mem_desc ranges=" + R({{0x80010000, 1}, {0x80020000, 1}}) + "\n";
  struct Case {
    std::string body;
    uint64_t relayed_x0;
  } cases[] = {
      {"el3_misbehave kind=FRAG_RX_WHOLE value=0x60\n" + share(0x80010000, 1), kFnMemFragRx},
      {"el3_misbehave kind=FRAG_RX_OFFSET value=0x40\n" + two + "mem_share frag_len=112", kFnMemFragRx},
      {"el3_misbehave kind=FRAG_RX_RESERVED value=1\n" + two + "mem_share frag_len=112", kFnMemFragRx},
      {"el3_misbehave kind=EARLY_SUCCESS value=0\n" + two + "mem_share frag_len=112", kFnSuccess32},
  };
  for (const Case& c : cases) {
    // The faulted call, then a share of its first page: the proxy must relay
    // it (the page is the host's again), not refuse it as already shared.
    Play run(p, scenario(p, kFull, c.body + "\n" + share(0x80010000, 1)));
    const size_t faulted = run.s.ops.size() - 3;
    ASSERT_TRUE(run.play(faulted)) << run.error;
    Expectation e;
    run.m->expect(run.s, faulted, e);
    EXPECT_TRUE(e.robustness) << c.body;
    ASSERT_FALSE(e.allowed.empty()) << c.body;
    for (const Allowed& a : e.allowed) EXPECT_EQ(a.regs[0], kFnError) << c.body;
    Outcome relayed = pick(e.allowed[0]);
    relayed.regs[0] = c.relayed_x0;
    EXPECT_EQ(judge(e, relayed).kind, VerdictKind::kViolation) << c.body;
    ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
    const Expectation next = run.expect_last();
    for (const RuleHit& h : next.hits)
      EXPECT_FALSE(h.rule == kFfaProxyHostMemory && h.forbidden) << c.body << ": page left shared";
  }
}

TEST(FfaModel, El3SendReplyFaultsAStatelessProxyCannotTellMayBeRelayed) {
  const ProxyProfile p = profile(4096, false);
  const std::string three =
      "tx_mem_desc ranges=" + R({{0x80010000, 1}, {0x80020000, 1}, {0x80030000, 1}}) +
      "\nmem_share frag_len=112\ntx_constituents offset=0 ranges=" + R1(0x80020000, 1) + "\n";
  // A wrong offset on a middle fragment: EL3's FFA_MEM_FRAG_RX relayed as it is, or an error.
  Play run(p, scenario(p, kFull, three + "el3_misbehave kind=FRAG_RX_OFFSET value=0x10\nmem_frag_tx handle=0 frag_len=16"));
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  Expectation e = run.expect_last();
  EXPECT_TRUE(e.robustness);
  bool relay = false, error = false;
  for (const Allowed& a : e.allowed) {
    relay |= a.regs[0] == kFnMemFragRx && a.regs[3] == 0x10;
    error |= a.regs[0] == kFnError;
  }
  EXPECT_TRUE(relay && error);
  // The same FFA_MEM_FRAG_RX naming another handle than the host's: an error only.
  Play bad(p, scenario(p, kFull, three + "el3_misbehave kind=FRAG_RX_HANDLE value=0x10\nmem_frag_tx handle=0 frag_len=16"));
  ASSERT_TRUE(bad.play(bad.s.ops.size() - 1)) << bad.error;
  for (const Allowed& a : bad.expect_last().allowed) EXPECT_EQ(a.regs[0], kFnError);
  // Without a fault the same call is conformance.
  Play plain(p, scenario(p, kFull, three + "mem_frag_tx handle=0 frag_len=16"));
  ASSERT_TRUE(plain.play(plain.s.ops.size() - 1)) << plain.error;
  EXPECT_FALSE(plain.expect_last().robustness);
}

TEST(FfaModel, PartitionCountTimesSizePastTheMailboxIsAnError) {
  const ProxyProfile p = profile(4096, false);
  // 0x0aaaaaab x 24 = 2^32 + 8: past the mailbox, though 8 in 32-bit arithmetic.
  for (const char* fault : {"PART_COUNT value=0x0aaaaaab", "PART_SIZE value=0x80000004", "PART_COUNT value=0x1000"}) {
    Play run(p, scenario(p, kFull, std::string("el3_misbehave kind=") + fault + "\npartition_info_get"));
    ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
    const Expectation e = run.expect_last();
    EXPECT_TRUE(e.robustness);
    for (const Allowed& a : e.allowed) EXPECT_EQ(a.regs[0], kFnError) << fault;
    Outcome ok = pick(e.allowed[0]);
    ok.regs[0] = kFnSuccess32;
    EXPECT_EQ(judge(e, ok).kind, VerdictKind::kViolation) << fault;
  }
  // A count that fits: relayed (w2 as EL3 said) or refused.
  Play fits(p, scenario(p, kFull, "el3_misbehave kind=PART_COUNT value=1\npartition_info_get"));
  ASSERT_TRUE(fits.play(fits.s.ops.size() - 1));
  bool relayed = false;
  for (const Allowed& a : fits.expect_last().allowed) relayed |= a.regs[0] == kFnSuccess32 && a.regs[2] == 1;
  EXPECT_TRUE(relayed);
}

// PKVM:MBOX: the hypervisor maps its pair with the SPMC when the host maps
// its own and unmaps it with the host's; a reclaim needs it.
TEST(FfaModel, ReclaimNeedsTheHostMailboxBecauseThePairIsMappedLazily) {
  const ProxyProfile p = profile(4096, false);
  const std::string sh = share(0x80010000, 2);
  const uint64_t shared = Play(p, scenario(p, kFull, sh)).final_state();
  // Share, unmap, reclaim: the proxy has no mailbox at EL3, so the reclaim
  // fails (DENIED or INVALID_PARAMETERS) and the pages stay shared.
  Play gone(p, scenario(p, kFull, sh + "rxtx_unmap\nmem_reclaim handle=0"));
  ASSERT_TRUE(gone.play(gone.s.ops.size() - 1)) << gone.error;
  const Expectation e = gone.expect_last();
  ASSERT_FALSE(e.allowed.empty());
  for (const Allowed& a : e.allowed) {
    EXPECT_EQ(a.regs[0], kFnError) << to_string(a);
    const int32_t code = static_cast<int32_t>(a.regs[2] & 0xffffffffu);
    EXPECT_TRUE(code == kDenied || code == kInvalidParameters) << to_string(a);
    EXPECT_EQ(a.rule, *rule_by_id("FFA.MBOX.TX_REQUIRED"));
    EXPECT_EQ(a.state, gone.last_state);
  }
  // Map again: the pair is relayed to EL3 again and the reclaim succeeds.
  const uint64_t base = Play(p, scenario(p, kFull, "id_get")).final_state();
  const uint64_t back = Play(p, scenario(p, kFull, sh + "rxtx_unmap\nrxtx_map tx=0x80000000 rx=0x80001000 pages=1\n"
                                                       "mem_reclaim handle=0"))
                            .final_state();
  EXPECT_EQ(back, base);
  EXPECT_NE(shared, base);
}

// With no host pair ever mapped, a version-only session still works and a
// reclaim of a bogus handle is refused without state change.
TEST(FfaModel, NoMailboxAtEl3BeforeTheHostMapsOne) {
  const ProxyProfile p = profile(16384, false);
  Play run(p, scenario(p, kNoMap, "raw fid=MEM_RECLAIM x1=1 x2=0x80000000"));
  ASSERT_TRUE(run.ok()) << run.error;
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  for (const Allowed& a : run.expect_last().allowed) EXPECT_EQ(a.regs[0], kFnError) << to_string(a);
}

// The verdict's evidence: allowed outcomes name their registers and state.
TEST(FfaModel, AllowedOutcomesPrintRegistersAndState) {
  const ProxyProfile p = profile(4096, false);
  Play run(p, scenario(p, kFull, share(0x80010000, 1, "sender=1")));
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  const Expectation e = run.expect_last();
  ASSERT_FALSE(e.allowed.empty());
  const std::string s = to_string(e.allowed[0]);
  EXPECT_NE(s.find("x0=0x84000060"), std::string::npos) << s;
  EXPECT_NE(s.find("x2="), std::string::npos) << s;
  EXPECT_NE(s.find("(-2)"), std::string::npos) << s;
  EXPECT_NE(s.find(" state=0x"), std::string::npos) << s;
  EXPECT_NE(s.find("[FFA.DESC.SENDER]"), std::string::npos) << s;
  Outcome o = Outcome::ok(0);
  o.regs[0] = kFnSuccess32;
  o.regs[2] = 0x1234;
  o.state = 0xabc;
  EXPECT_EQ(to_string(o), "ok 0 x0=0x84000061 x2=0x1234 state=0xabc");
  EXPECT_EQ(to_string(Outcome::ok(3)), "ok 3");  // gmem outcomes unchanged
}

// scenario_ops.h: one op -> one register set, for the model and the EL2 target.
TEST(FfaScenarioOps, HostRegsAndTxBytes) {
  std::vector<Scenario> v;
  std::string err;
  ASSERT_TRUE(parse_text("kconform-scenario 1\nabi ffa\nname t\n"
                         "tx_mem_desc ranges=" + R1(0x80010000, 2) + "\n"
                         "mem_share conv=SMC32\n"
                         "mem_frag_tx handle=0 frag_len=16 sender=3\n"
                         "mem_reclaim2 handle=0 flags=ZERO offset=16 count=2 page_index=1 total_pages=5 handle_xor=1\n"
                         "tx_constituents offset=32 ranges=" + R1(0x80020000, 3) + " reserved=7\n",
                         "<t>", &v, &err))
      << err;
  const Scenario& s = v[0];
  const TxWrite d = tx_bytes(s, s.ops[0]);
  EXPECT_TRUE(d.is_desc);
  EXPECT_EQ(d.desc_len, 48u + 32u + 16u + 16u);  // v1.2 header, one EMAD, composite, one constituent
  EXPECT_EQ(d.bytes.size(), d.desc_len);
  const std::vector<uint64_t> handles = {0x8000000000000001ull};
  uint64_t in[8];
  host_regs(s.ops[1], handles, d.desc_len, in);
  EXPECT_EQ(in[0], kFnMemShare32);
  EXPECT_EQ(in[1], d.desc_len);
  EXPECT_EQ(in[2], d.desc_len);
  host_regs(s.ops[2], handles, 0, in);
  EXPECT_EQ(in[0], kFnMemFragTx);
  EXPECT_EQ(in[1], 1u);
  EXPECT_EQ(in[2], 0x80000000u);
  EXPECT_EQ(in[3], 16u);
  EXPECT_EQ(in[4], 3u << 16);
  host_regs(s.ops[3], handles, 0, in);
  EXPECT_EQ(in[0], kFnMemReclaim2);
  EXPECT_EQ(in[1], 0u);  // handle ^ 1
  EXPECT_EQ((std::vector<uint64_t>{in[3], in[4], in[5], in[6], in[7]}), (std::vector<uint64_t>{1, 16, 2, 1, 5}));
  host_regs(s.ops[3], {}, 0, in);  // no slot: FFA_MEMORY_HANDLE_INVALID ^ 1
  EXPECT_EQ(in[1], 0xfffffffeu);
  const TxWrite c = tx_bytes(s, s.ops[4]);
  EXPECT_FALSE(c.is_desc);
  EXPECT_EQ(c.offset, 32u);
  ASSERT_EQ(c.bytes.size(), 16u);
  EXPECT_EQ(c.bytes[12], 7u);  // reserved word
  // HARNESS:TX clipping.
  ProxyProfile p = profile(4096, false);
  EXPECT_EQ(tx_clip(p, false, 0x80000000, 0, 16), 0u);
  EXPECT_EQ(tx_clip(p, true, 0x80000000, 4090, 16), 6u);
  EXPECT_EQ(tx_clip(p, true, 0x80000000 + 64 * 4096, 0, 16), 0u);  // the hypervisor's memory
  // HARNESS:SLOTS.
  const uint64_t ok[8] = {kFnSuccess64, 0, 5, 0x80000000}, frag[8] = {kFnMemFragRx, 5, 0x80000000, 112};
  const uint64_t bad[8] = {kFnError, 0, static_cast<uint32_t>(kDenied)};
  EXPECT_EQ(produced_handle(ok), 0x8000000000000005ull);
  EXPECT_EQ(produced_handle(frag), 0x8000000000000005ull);
  EXPECT_EQ(produced_handle(bad), kInvalidHandle);
}

// DESC:EP-COUNT: two valid receivers may be shared or refused (a one-borrower
// Relayer); refused means no change.
TEST(FfaModel, TwoReceiversMayBeRefusedByARelayerThatSupportsOne) {
  const ProxyProfile p = profile(4096, false);
  Play run(p, scenario(p, kFull, share(0x80010000, 1, "receiver2=0x8002")));
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  bool ok = false, refused = false;
  for (const Allowed& a : run.expect_last().allowed) {
    ok |= a.regs[0] == kFnSuccess32;
    refused |= a.regs[0] == kFnError && static_cast<int32_t>(a.regs[2]) == kInvalidParameters &&
               a.state == run.last_state && a.rule == *rule_by_id("FFA.DESC.EP_COUNT");
  }
  EXPECT_TRUE(ok);
  EXPECT_TRUE(refused);
}

// DESC:PAGES + PKVM:OWNERSHIP: a zero-page constituent at address 0 may get
// DENIED; at host-owned memory only INVALID_PARAMETERS.
TEST(FfaModel, ZeroPageConstituentOutsideHostMemoryMayBeDenied) {
  const ProxyProfile p = profile(4096, false);
  for (uint64_t addr : {0ull, 0x80020000ull}) {
    SCOPED_TRACE(addr);
    Play run(p, scenario(p, kFull, "tx_mem_desc ranges=" + R({{0x80010000, 1}, {addr, 0}}) + "\nmem_share\n"));
    ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
    bool denied = false;
    for (const Allowed& a : run.expect_last().allowed) {
      EXPECT_EQ(a.regs[0], kFnError);
      EXPECT_EQ(a.state, run.last_state);
      denied |= static_cast<int32_t>(a.regs[2]) == kDenied;
    }
    EXPECT_EQ(denied, addr == 0);
  }
}

// MEM:FRAGMENT: a first fragment whose header names an unknown receiver may be
// refused at once or relayed (the SPMC refuses at the end).
TEST(FfaModel, FirstFragmentWithABadHeaderMayBeRefusedAtOnce) {
  const ProxyProfile p = profile(4096, false);
  Play run(p, scenario(p, kFull, "tx_mem_desc receiver=0x8003 ranges=" + R({{0x80010000, 1}, {0x80020000, 1}}) +
                                     "\nmem_share frag_len=112\n"));
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  bool frag_rx = false, refused = false;
  for (const Allowed& a : run.expect_last().allowed) {
    frag_rx |= a.regs[0] == kFnMemFragRx;
    refused |= a.regs[0] == kFnError && a.state == run.last_state && a.rule == *rule_by_id("FFA.DESC.RECEIVER");
  }
  EXPECT_TRUE(frag_rx);
  EXPECT_TRUE(refused);
}

// Which outcomes the last op of body allows: success (any state), and the
// error codes allowed with the state unchanged.
struct Allows {
  bool success = false;
  std::set<int32_t> refused;
  bool other = false;  // an error that changes state
};
Allows allows(const std::string& body, const std::string& pre_version = "") {
  const ProxyProfile p = profile(4096, false);
  std::string text = scenario(p, kFull, body);
  if (!pre_version.empty()) {
    const size_t at = text.find("version\n");
    text.replace(at, 8, "version version=" + pre_version + "\n");
  }
  Play run(p, text);
  Allows out;
  if (!run.play(run.s.ops.size() - 1)) {
    ADD_FAILURE() << run.error;
    return out;
  }
  for (const Allowed& a : run.expect_last().allowed) {
    if (a.regs[0] == kFnSuccess32 || a.regs[0] == kFnSuccess64)
      out.success = true;
    else if (a.regs[0] == kFnError && a.state == run.last_state)
      out.refused.insert(static_cast<int32_t>(a.regs[2]));
    else
      out.other = true;
  }
  return out;
}

// DESC:LAYOUT: a v1.2 endpoint descriptor has 16 IMPDEF bytes at +8 (any
// value) and its reserved u64 at +24 (MBZ); v1.1 has the reserved u64 at +8.
TEST(FfaModel, V12EndpointDescriptorHasImpdefAt8AndReservedAt24) {
  // Endpoint array at 48: +8 is byte 56, +24 byte 72.
  const Allows impdef = allows(desc("layout=V1_2") + "tx_write offset=56 data=hex:ff\nmem_share");
  EXPECT_TRUE(impdef.success);
  EXPECT_TRUE(impdef.refused.empty());
  const Allows reserved = allows(desc("layout=V1_2") + "tx_write offset=72 data=hex:01\nmem_share");
  EXPECT_FALSE(reserved.success);
  EXPECT_EQ(reserved.refused, std::set<int32_t>{kInvalidParameters});
  const Allows v11 = allows(desc("layout=V1_1") + "tx_write offset=56 data=hex:01\nmem_share", "V1_1");
  EXPECT_FALSE(v11.success);
  EXPECT_EQ(v11.refused, std::set<int32_t>{kInvalidParameters});
}

// DESC:ATTRS: a lend to one borrower that gives the memory type is refused;
// with the type left unspecified it is lent.
TEST(FfaModel, LendToOneBorrowerMustNotGiveTheMemoryType) {
  const Allows typed = allows(desc("") + "mem_lend");
  EXPECT_FALSE(typed.success);
  EXPECT_TRUE(typed.refused.count(kInvalidParameters));
  const Allows untyped = allows(desc("attrs=UNSPECIFIED") + "mem_lend");
  EXPECT_TRUE(untyped.success);
}

// DESC:PERMS: the sender leaves the instruction access "not specified", in
// v1.0 as from v1.1; NX is refused.
TEST(FfaModel, InstructionAccessIsNotSpecified) {
  const Allows nx = allows(desc("perms=RW|NX") + "mem_share");
  EXPECT_FALSE(nx.success);
  EXPECT_TRUE(nx.refused.count(kInvalidParameters));
  EXPECT_TRUE(allows(desc("perms=RW") + "mem_share").success);
  const Allows v10 = allows(desc("layout=V1_0 perms=RW|NX") + "mem_share", "V1_0");
  EXPECT_FALSE(v10.success);
  EXPECT_TRUE(v10.refused.count(kInvalidParameters));
  EXPECT_TRUE(allows(desc("layout=V1_0 perms=RW") + "mem_share", "V1_0").success);
}

// DESC:SENDER: INVALID_PARAMETERS or DENIED, never success.
TEST(FfaModel, SenderNotTheCallerMayBeInvalidOrDenied) {
  const Allows a = allows(desc("sender=1") + "mem_share");
  EXPECT_FALSE(a.success);
  EXPECT_TRUE(a.refused.count(kInvalidParameters));
  EXPECT_TRUE(a.refused.count(kDenied));
}

// DESC:FLAGS: the time-slicing bit may be honoured or refused (a lend too);
// DESC:COMPOSITE: an offset that is not 16-byte aligned is refused, 8-aligned
// or not.
TEST(FfaModel, TimeSliceMayBeRelayedOrRefusedAndTheCompositeIs16Aligned) {
  for (const char* call : {"mem_share", "mem_lend"}) {
    SCOPED_TRACE(call);
    const std::string attrs = std::string(call) == "mem_lend" ? " attrs=UNSPECIFIED" : "";
    const Allows ts = allows(desc("flags=TIME_SLICE" + attrs) + call);
    EXPECT_TRUE(ts.success);
    EXPECT_TRUE(ts.refused.count(kInvalidParameters));
  }
  for (const char* off : {"composite_off=88", "composite_off=84"}) {
    SCOPED_TRACE(off);
    const Allows c = allows(desc(off) + "mem_share");
    EXPECT_FALSE(c.success);
    EXPECT_EQ(c.refused, std::set<int32_t>{kInvalidParameters});
  }
}

// DESC:PAGES: a first fragment of several with many zero-page constituents
// may be refused once or relayed; the relay is still listed (a plan holds
// kMaxAlts outcomes: one allowed refusal per zero-page constituent crowded
// it out past 31 of them).
TEST(FfaModel, ManyZeroPageConstituentsInAFirstFragmentMayBeRelayed) {
  std::string rs = R1(0x80010000, 1);
  for (int i = 0; i < 40; ++i) rs += R1(0x80020000, 0).substr(4);  // 4: "hex:"
  rs += R1(0x80030000, 1).substr(4);
  const ProxyProfile p = profile(4096, false);
  // Header 48, one 32-byte endpoint, composite 16, 42 constituents: the first
  // fragment ends before the last one.
  const uint32_t total = 48 + 32 + 16 + 16 * 42;
  Play run(p, scenario(p, kFull, "tx_mem_desc ranges=" + rs + "\nmem_share total_len=" + std::to_string(total) +
                                     " frag_len=" + std::to_string(total - 16)));
  ASSERT_TRUE(run.ok()) << run.error;
  ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
  bool relayed = false, refused = false;
  for (const Allowed& a : run.expect_last().allowed) {
    relayed |= a.regs[0] == kFnMemFragRx;
    refused |= a.regs[0] == kFnError;
  }
  EXPECT_TRUE(relayed);
  EXPECT_TRUE(refused);
}

// DESC:EP-MEM-SIZE: from v1.2, v1.1's 16-byte endpoint descriptor is taken
// (success required); a larger multiple of 16 is taken or refused; one that
// is not a multiple of 16 is refused.
TEST(FfaModel, EndpointDescriptorSizeOfAnotherVersion) {
  const Allows v11 = allows(desc("ep_mem_size=16") + "mem_share");
  EXPECT_TRUE(v11.success);
  EXPECT_TRUE(v11.refused.empty());
  const Allows later = allows(desc("ep_mem_size=64") + "mem_share");
  EXPECT_TRUE(later.success);
  EXPECT_TRUE(later.refused.count(kInvalidParameters));
  const Allows odd = allows(desc("ep_mem_size=40") + "mem_share");
  EXPECT_FALSE(odd.success);
  EXPECT_EQ(odd.refused, std::set<int32_t>{kInvalidParameters});
  const Allows v11_32 = allows(desc("layout=V1_1 ep_mem_size=32") + "mem_share", "V1_1");
  EXPECT_TRUE(v11_32.success);
  EXPECT_TRUE(v11_32.refused.count(kInvalidParameters));
}

// DESC:ATTRS: a share of Normal write-back inner shareable memory succeeds;
// non-cacheable or outer shareable Normal memory is taken or refused
// (INVALID_PARAMETERS or DENIED); device or non-shareable memory is refused,
// INVALID_PARAMETERS or DENIED; the NS bit is INVALID_PARAMETERS.
TEST(FfaModel, ShareAttributesAsTheReferencesReadThem) {
  const Allows wb = allows(desc("") + "mem_share");
  EXPECT_TRUE(wb.success);
  EXPECT_TRUE(wb.refused.empty());
  for (const char* a : {"attrs=NORMAL_NC_INNER", "attrs=NORMAL_WB_OUTER"}) {
    SCOPED_TRACE(a);
    const Allows x = allows(desc(a) + "mem_share");
    EXPECT_TRUE(x.success);
    EXPECT_EQ(x.refused, (std::set<int32_t>{kInvalidParameters, kDenied}));
  }
  for (const char* a : {"attrs=DEVICE", "attrs=0x2c", "attrs=UNSPECIFIED"}) {
    SCOPED_TRACE(a);
    const Allows x = allows(desc(a) + "mem_share");
    EXPECT_FALSE(x.success);
    EXPECT_EQ(x.refused, (std::set<int32_t>{kInvalidParameters, kDenied}));
  }
  const Allows ns = allows(desc("attrs=0x6f") + "mem_share");
  EXPECT_FALSE(ns.success);
  EXPECT_EQ(ns.refused, std::set<int32_t>{kInvalidParameters});
}

// SPMC:RECLAIM: a reclaim with the time-slicing bit may be honoured or refused.
TEST(FfaModel, ReclaimTimeSliceMayBeHonouredOrRefused) {
  const Allows a = allows(share() + "mem_reclaim handle=0 flags=TIME_SLICE");
  EXPECT_TRUE(a.success);
  EXPECT_TRUE(a.refused.count(kInvalidParameters));
  const Allows plain = allows(share() + "mem_reclaim handle=0");
  EXPECT_FALSE(plain.refused.count(kInvalidParameters));
}

// PROFILE:ONE-SEND: a new send while a fragmented one is in flight may be
// refused by the proxy or relayed (the SPMC says BUSY); never success.
TEST(FfaModel, SecondSendWhileOneIsInFlightIsAProfileChoice) {
  const Allows a = allows("tx_mem_desc ranges=" + R({{0x80010000, 1}, {0x80020000, 1}}) +
                          "\nmem_share frag_len=112\n" + share(0x80030000));
  EXPECT_FALSE(a.success);
  EXPECT_TRUE(a.refused.count(kBusy));
  EXPECT_TRUE(a.refused.count(kDenied));
}

// PROFILE:DESC-BUF on both sides: a retrieve response that just fits the
// proxy's buffer is reclaimed; one byte less of buffer and the reclaim is
// NO_MEMORY with the pages still shared and the transaction still at EL3.
TEST(FfaModel, ReclaimLongerThanTheProxysBufferIsNoMemory) {
  for (const uint64_t buf : {uint64_t{112}, uint64_t{111}}) {
    SCOPED_TRACE(buf);
    ProxyProfile p = profile(4096, false);
    p.desc_buf_bytes = buf;
    Play run(p, scenario(p, kFull, share(0x80010000, 2) + "mem_reclaim handle=0"));
    ASSERT_TRUE(run.ok()) << run.error;
    // The send (as long as the response) may be refused too: play it relayed.
    for (size_t i = 0; i + 1 < run.s.ops.size(); ++i) {
      Expectation e;
      run.m->expect(run.s, i, e);
      ASSERT_FALSE(e.allowed.empty()) << e.note;
      const Allowed* ok = &e.allowed[0];
      for (const Allowed& a : e.allowed)
        if (a.regs[0] != kFnError) {
          ok = &a;
          break;
        }
      run.last_state = pick(*ok).state;
      run.m->commit(run.s, i, pick(*ok));
    }
    const uint64_t shared = run.last_state;
    const Expectation e = run.expect_last();
    ASSERT_FALSE(e.allowed.empty()) << e.note;
    EXPECT_TRUE(hit(e, kFfaProfileDescBuf));
    Outcome no_memory = Outcome::ok(0);
    no_memory.regs[0] = kFnError;
    no_memory.regs[2] = static_cast<uint32_t>(kNoMemory);
    no_memory.state = shared;
    Outcome reclaimed = pick(e.allowed[0]);
    reclaimed.regs[0] = kFnSuccess32;
    bool admits_no_memory = false, admits_success = false;
    for (const Allowed& a : e.allowed) {
      admits_no_memory |= a.admits(no_memory);
      admits_success |= a.admits(reclaimed) && a.state != shared;
    }
    EXPECT_EQ(admits_no_memory, buf == 111);
    EXPECT_EQ(admits_success, buf == 112);
  }
}

// corpora/ffa/large.kcs with the EL2 target's host RAM (more host pages below
// 0x80000000, targets/el2/ffa_target.cc) and Debian 7.3's descriptor buffer
// (hyp_ffa_proxy_pages() less two 1-page mailboxes), at each page size: each
// send of the transactions larger than a mailbox may succeed fragment by
// fragment, each reclaim from a multi-chunk retrieve response may succeed; a
// send longer than the buffer may be refused with NO_MEMORY, and the reclaim
// 16 bytes over the buffer allows NO_MEMORY only (PROFILE:DESC-BUF).
TEST(FfaModel, LargeTransactionsWithTheEl2TargetsRam) {
  struct Layout {
    uint64_t page, low, hyp_pages;
    uint32_t cap;
    size_t scenarios;
  };
  std::vector<Scenario> scenarios;
  std::string err;
  ASSERT_TRUE(load_scenario_file(source_dir() + "/../../corpora/ffa/large.kcs", &scenarios, &err)) << err;
  for (const Layout& l : {Layout{4096, 2368, 11, kCapPage4k, 7}, Layout{16384, 1088, 5, kCapPage16k, 5},
                          Layout{65536, 320, 3, kCapPage64k, 4}}) {
    ProxyProfile p = profile(l.page, false);
    p.phys_base = 0x80000000ull - l.low * l.page;
    p.host_pages = 64 + l.low;
    p.hyp_pages = l.hyp_pages;
    p.desc_buf_bytes = (l.hyp_pages - 2) * l.page;
    size_t played = 0;
    for (const Scenario& s : scenarios) {
      if (s.requires_caps & ~l.cap) continue;
      SCOPED_TRACE(s.name);
      auto m = make_model(p);
      m->begin(s);
      const bool over = s.name.find("desc-buf-over") != std::string::npos;
      for (size_t i = 0; i < s.ops.size(); ++i) {
        Expectation e;
        m->expect(s, i, e);
        ASSERT_FALSE(e.allowed.empty()) << "op " << i << ": " << e.note;
        const Allowed* ok = nullptr;
        for (const Allowed& a : e.allowed)
          if (!ok && a.regs[0] != kFnError) ok = &a;
        const bool last = i + 1 == s.ops.size();
        if (s.ops[i].code == kOpMemShare) {
          // PROFILE:DESC-BUF: a send longer than the buffer may be refused.
          bool no_memory = false;
          for (const Allowed& a : e.allowed)
            no_memory |= a.regs[0] == kFnError && static_cast<int32_t>(a.regs[2]) == kNoMemory;
          EXPECT_EQ(no_memory, over);
        }
        if (over && last) {
          EXPECT_EQ(ok, nullptr) << "the reclaim over the buffer may succeed";
          for (const Allowed& a : e.allowed) EXPECT_EQ(static_cast<int32_t>(a.regs[2]), kNoMemory) << to_string(a);
          EXPECT_TRUE(hit(e, kFfaProfileDescBuf));
        } else if (s.name.find("rx-held") == std::string::npos) {
          ASSERT_NE(ok, nullptr) << "op " << i << " cannot succeed: " << e.note;
        }
        m->commit(s, i, pick(ok ? *ok : e.allowed[0]));
      }
      ++played;
    }
    EXPECT_EQ(played, l.scenarios) << l.page;
  }
}

TEST(FfaModel, ScenarioTextRoundTrips) {
  const ProxyProfile p = profile(4096, true);
  std::vector<Scenario> v;
  std::string err;
  ASSERT_TRUE(parse_text(scenario(p, kFull, r2("count=1 total_pages=4")), "<t>", &v, &err)) << err;
  const std::string text = format_text(v[0]);
  std::vector<Scenario> w;
  ASSERT_TRUE(parse_text(text, "<t>", &w, &err)) << err;
  EXPECT_EQ(v[0], w[0]);
  Scenario d;
  ASSERT_TRUE(decode_binary(encode_binary(v[0]), &d, &err)) << err;
  EXPECT_EQ(d, v[0]);
}

// PKVM:SHARE: a share while the host owns its RX buffer is a plain share; no
// clause lets the proxy answer BUSY (only a reclaim, whose retrieve request
// uses the proxy's RX, may: PKVM:RECLAIM). A proxy that says BUSY is wrong.
TEST(FfaModel, ShareWhileTheHostOwnsRxMayNotBeBusy) {
  for (uint64_t page : {4096ull, 16384ull}) {
    SCOPED_TRACE(page);
    const ProxyProfile p = profile(page, false);
    Play run(p, scenario(p, kFull, "partition_info_get\n" + share(0x80010000, page / 4096)));
    ASSERT_TRUE(run.ok()) << run.error;
    ASSERT_TRUE(run.play(run.s.ops.size() - 1)) << run.error;
    const Expectation e = run.expect_last();
    Outcome busy = Outcome::ok(0);
    busy.regs[0] = kFnError;
    busy.regs[2] = static_cast<uint32_t>(kBusy);
    busy.state = run.last_state;  // nothing changed
    for (const Allowed& a : e.allowed) EXPECT_FALSE(a.admits(busy)) << to_string(a);
    const Verdict v = judge(e, busy);
    EXPECT_EQ(v.kind, VerdictKind::kViolation);
    // The share itself is allowed to succeed.
    bool ok = false;
    for (const Allowed& a : e.allowed) ok |= a.regs[0] == kFnSuccess32 && a.rule == *rule_by_id("FFA.PROXY.SHARE_OK");
    EXPECT_TRUE(ok);
    // A reclaim in the same situation may be BUSY.
    Play reclaim(p, scenario(p, kFull, share(0x80010000, page / 4096) + "partition_info_get\nmem_reclaim handle=0"));
    ASSERT_TRUE(reclaim.play(reclaim.s.ops.size() - 1)) << reclaim.error;
    busy.state = reclaim.last_state;
    EXPECT_EQ(judge(reclaim.expect_last(), busy).kind, VerdictKind::kPass);
  }
}

// tx_extent (the model's tx_length) is where and how much tx_bytes writes,
// and a TxWrite reused from op to op (the targets' and the model's scratch,
// kept for its capacity) builds the same bytes as a fresh one: every tx op of
// the FF-A corpora in file order, then a descriptor larger than any mailbox
// (nothing written) and a short tx_write after a long descriptor.
TEST(FfaModel, TxExtentAndAReusedBuilderAgreeWithAFreshBuild) {
  namespace fs = std::filesystem;
  const std::vector<fs::path> files = ffa_corpus_files();
  std::vector<Scenario> all;
  for (const fs::path& f : files) {
    std::string err;
    ASSERT_TRUE(load_scenario_file(f.string(), &all, &err)) << err;
  }
  std::string err;
  ASSERT_TRUE(parse_text("kconform-scenario 1\nabi ffa\nname edges\n"
                         "tx_mem_desc ranges=" + R({{0x80010000, 2}, {0x80020000, 1}}) + "\n"
                         "tx_write offset=8 data=hex:0102\n"
                         "tx_mem_desc ranges=" + R1(0x80010000, 2) + " composite_off=0x200000\n"
                         "tx_constituents offset=0 ranges=" + R1(0x80030000, 1) + "00ff reserved=3\n",
                         "<t>", &all, &err))
      << err;
  TxWrite reused;
  size_t desc = 0, write = 0, constituents = 0, empty = 0;
  for (const Scenario& s : all)
    for (size_t i = 0; i < s.ops.size(); ++i) {
      const Op& op = s.ops[i];
      if (op.code != kOpTxWrite && op.code != kOpTxMemDesc && op.code != kOpTxConstituents) continue;
      SCOPED_TRACE(s.name + ": " + format_op(s, i));
      const TxWrite fresh = tx_bytes(s, op);
      tx_bytes(s, op, &reused);
      EXPECT_EQ(reused.offset, fresh.offset);
      EXPECT_EQ(reused.bytes, fresh.bytes);
      EXPECT_EQ(reused.is_desc, fresh.is_desc);
      EXPECT_EQ(reused.desc_len, fresh.desc_len);
      const TxExtent e = tx_extent(s, op);
      EXPECT_EQ(e.offset, fresh.offset);
      EXPECT_EQ(e.size, fresh.bytes.size());
      desc += op.code == kOpTxMemDesc, write += op.code == kOpTxWrite;
      constituents += op.code == kOpTxConstituents, empty += fresh.bytes.empty();
    }
  EXPECT_GT(desc, 100u);
  EXPECT_GT(write, 10u);
  EXPECT_GT(constituents, 10u);
  EXPECT_GE(empty, 1u);  // the descriptor larger than any mailbox
}

// One way: commit() applies the effect of the outcome it is given, and that
// is exactly the state expect() predicted for it. Every scenario of the FF-A
// corpora at 4K and 16K with RECLAIM2, twice: every op taking its first
// allowed outcome, then its second (where it has one). A tx_write beyond the
// mailbox (it writes nothing) after each op shows the model's state, hashed
// again (set_model_digest_reuse off). A model that reuses the predicted digest
// instead, given the same outcomes, expects the same at every op.
TEST(FfaModel, CommitReachesTheStateExpectPredicted) {
  namespace fs = std::filesystem;
  const std::vector<fs::path> files = ffa_corpus_files();
  ASSERT_FALSE(files.empty());
  size_t checked = 0;
  for (const fs::path& f : files) {
    std::vector<Scenario> scenarios;
    std::string err;
    ASSERT_TRUE(load_scenario_file(f.string(), &scenarios, &err)) << err;
    for (const Scenario& s : scenarios) {
      for (uint64_t page : {4096ull, 16384ull}) {
        const uint32_t caps = kCapReclaim2 | (page == 4096 ? kCapPage4k : kCapPage16k);
        if (s.requires_caps & ~caps) continue;
        SCOPED_TRACE(s.name + " at " + std::to_string(page));
        // The scenario with a probe after every op.
        Scenario probed = s;
        probed.ops.clear();
        probed.blobs = s.blobs;
        const uint64_t blob = probed.blobs.size();
        probed.blobs.push_back({0});
        for (const Op& op : s.ops) {
          probed.ops.push_back(op);
          Op probe;
          probe.code = kOpTxWrite;
          probe.args[0] = 1u << 24;  // offset: beyond any mailbox
          probe.args[1] = blob;
          probed.ops.push_back(probe);
        }
        for (size_t choice = 0; choice < 2; ++choice) {
          auto m = make_model(profile(page, true));
          auto reusing = make_model(profile(page, true));
          set_model_digest_reuse(*m, false);
          m->begin(probed);
          reusing->begin(probed);
          for (size_t i = 0; i < probed.ops.size(); i += 2) {
            Expectation e, e_reusing;
            m->expect(probed, i, e);
            reusing->expect(probed, i, e_reusing);
            ASSERT_EQ(e_reusing.allowed.size(), e.allowed.size()) << "op " << i / 2;
            for (size_t k = 0; k < e.allowed.size(); ++k)
              ASSERT_EQ(to_string(e_reusing.allowed[k]), to_string(e.allowed[k])) << "op " << i / 2;
            if (e.allowed.empty()) break;
            const Allowed& a = e.allowed[std::min(choice, e.allowed.size() - 1)];
            m->commit(probed, i, pick(a));
            reusing->commit(probed, i, pick(a));
            Expectation after, after_reusing;
            m->expect(probed, i + 1, after);
            reusing->expect(probed, i + 1, after_reusing);
            ASSERT_EQ(after.allowed.size(), 1u);
            if (a.check_state)
              EXPECT_EQ(after.allowed[0].state, a.state) << "op " << i / 2 << " " << to_string(a);
            m->commit(probed, i + 1, pick(after.allowed[0]));
            reusing->commit(probed, i + 1, pick(after.allowed[0]));
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000u);
}

// Regression (UBSan stopped every empty-corpus fuzz run, issue 14): a TX write
// at a huge offset is clipped to nothing (HARNESS:TX) and forms no pointer past
// the modelled RAM; the model goes on (the asan preset's UBSan, pointer-overflow,
// is what catches the pointer; any build catches a write).
TEST(FfaModel, ATxWriteAtAHugeOffsetWritesNothing) {
  const ProxyProfile p = profile(4096, false);
  for (const char* op : {"tx_write offset=0xfffffffffffff000 data=hex:0102\n",
                         "tx_constituents offset=0x8000000000000000 ranges=hex:000001800000000001000000\n",
                         "tx_mem_desc offset=0xffffffffffffff00 ranges=hex:000001800000000001000000\n"}) {
    Play run(p, scenario(p, kFull, std::string(op) + "tx_write offset=0 data=hex:01\n"));
    ASSERT_TRUE(run.ok()) << run.error;
    EXPECT_TRUE(run.play(run.s.ops.size())) << op << run.error;
  }
}

// ProxyProfile::real_el3: the profile's name says EL3 is an implementation under test.
TEST(FfaModel, ProfileNameSaysRealEl3) {
  ProxyProfile p = profile(16384, true);
  EXPECT_EQ(profile_name(p), "ffa-16k-reclaim2");
  p.real_el3 = true;
  EXPECT_EQ(profile_name(p), "ffa-16k-reclaim2-real-el3");
}

// Fnv1a::bytes (the digest's host page views, hashed a zero run at a time) is
// byte for byte the FNV-1a of u8() over each byte: sparse and dense views, runs
// that end mid-word, mid-block and mid-run of 512, every length up to 1300.
TEST(Fnv1a, BytesIsU8OverEachByte) {
  std::vector<uint8_t> v(1300);
  for (int pattern = 0; pattern < 6; ++pattern) {
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = pattern == 0 ? 0 : pattern == 1 ? 1 : pattern == 2 ? (k % 67 == 5 ? 2 : 0)
                          : pattern == 3 ? (k == 63 || k == 64 || k == 299 ? 3 : 0)
                          : pattern == 4 ? (k == 511 || k == 512 || k == 1100 ? 1 : 0)
                                         : static_cast<uint8_t>(k * 7);
    for (size_t n = 0; n <= v.size(); ++n) {
      Fnv1a a, b;
      for (size_t k = 0; k < n; ++k) a.u8(v[k]);
      b.bytes(v.data(), n);
      ASSERT_EQ(a.h, b.h) << "pattern " << pattern << " length " << n;
    }
  }
  // And it does depend on every byte (a one-byte change anywhere is seen).
  std::vector<uint8_t> z(2432, 0);
  Fnv1a base;
  base.bytes(z.data(), z.size());
  for (size_t k = 0; k < z.size(); k += 97) {
    z[k] = 1;
    Fnv1a c;
    c.bytes(z.data(), z.size());
    EXPECT_NE(c.h, base.h) << k;
    z[k] = 0;
  }
}

// u16/u32/u64 (a zero top run hashed as one power of the prime) are byte for
// byte u8() over the field's little-endian bytes: every value with one, two
// or all bytes set, at every byte position, after a non-trivial start.
TEST(Fnv1a, FieldsAreU8OverTheirLittleEndianBytes) {
  auto ref = [](Fnv1a h, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) h.u8(static_cast<uint8_t>(v >> (8 * i)));
    return h.h;
  };
  std::vector<uint64_t> values = {0, 1, 0xff, 0x100, 0x7fff0000, 0x80000000, ~0ull, 0x0100000000000000ull};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) values.push_back((0xa5ull << (8 * i)) | (0x01ull << (8 * j)));
  Fnv1a start;
  start.u8(0x5a);
  for (uint64_t v : values) {
    Fnv1a a = start, b = start, c = start;
    a.u64(v);
    b.u32(static_cast<uint32_t>(v));
    c.u16(static_cast<uint16_t>(v));
    ASSERT_EQ(a.h, ref(start, v, 8)) << std::hex << v;
    ASSERT_EQ(b.h, ref(start, v, 4)) << std::hex << v;
    ASSERT_EQ(c.h, ref(start, v, 2)) << std::hex << v;
  }
}

}  // namespace
}  // namespace kconform::ffa
