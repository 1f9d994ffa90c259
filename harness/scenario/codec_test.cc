// Tests of the text and binary scenario codecs, including malformed input.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "harness/scenario/gmem_abi.h"

namespace kconform {
namespace {

constexpr std::string_view kSample =
    "# a comment\n"
    "kconform-scenario 1\n"
    "abi gmem\n"
    "name gmem/sample/one\n"
    "requires gmem mmap\n"
    "create_vm\n"
    "create_gmem vm=0 size=2M flags=MMAP|INIT_SHARED   # trailing comment\n"
    "\n"
    "pwrite gmem=0 offset=0x1000 len=4096 pattern=7 src_valid=100\n"
    "mmap gmem=0 offset=0 len=0x200000\n"
    "store map=0 offset=0 len=8192\n"
    "fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE|0x100 offset=0 len=4K\n"
    "lseek gmem=0 offset=0 whence=9\n";

std::vector<Scenario> parse_ok(std::string_view text) {
  std::vector<Scenario> out;
  std::string error;
  EXPECT_TRUE(parse_text(text, "t.kcs", &out, &error)) << error;
  return out;
}

std::string parse_error(std::string_view text) {
  std::vector<Scenario> out;
  std::string error;
  EXPECT_FALSE(parse_text(text, "bad.kcs", &out, &error)) << "accepted:\n" << text;
  return error;
}

TEST(TextCodec, ParsesFieldsNamesAndDefaults) {
  auto all = parse_ok(kSample);
  ASSERT_EQ(all.size(), 1u);
  const Scenario& s = all[0];
  EXPECT_EQ(s.name, "gmem/sample/one");
  EXPECT_EQ(s.requires_caps, gmem::kCapGmem | gmem::kCapMmap);
  ASSERT_EQ(s.ops.size(), 7u);
  EXPECT_EQ(s.ops[1].code, gmem::kCreateGmem);
  EXPECT_EQ(s.ops[1].args[1], 2u << 20);
  EXPECT_EQ(s.ops[1].args[2], gmem::kFlagMmap | gmem::kFlagInitShared);
  EXPECT_EQ(s.ops[2].args[4], 100u);                 // src_valid given
  EXPECT_EQ(s.ops[4].args[3], 1u);                   // store pattern default
  EXPECT_EQ(s.ops[3].args[3], gmem::kProtRead | gmem::kProtWrite);  // mmap prot default
  EXPECT_EQ(s.ops[5].args[1], gmem::kFallocKeepSize | gmem::kFallocPunchHole | 0x100);
  EXPECT_EQ(s.ops[6].args[2], 9u);  // out-of-table enum values are kept
}

TEST(TextCodec, CanonicalTextRoundTripsExactly) {
  auto all = parse_ok(kSample);
  std::string canon = format_text(all[0]);
  auto again = parse_ok(canon);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], all[0]);
  EXPECT_EQ(format_text(again[0]), canon);
  EXPECT_NE(canon.find("flags=MMAP|INIT_SHARED\n"), std::string::npos) << canon;
  EXPECT_NE(canon.find("mode=KEEP_SIZE|PUNCH_HOLE|0x100"), std::string::npos) << canon;
  EXPECT_EQ(canon.find("pattern=1"), std::string::npos) << "defaults are left out: " << canon;
}

TEST(TextCodec, ManyScenariosInOneFile) {
  std::string two = std::string(kSample) + "kconform-scenario 1\nabi gmem\nname second\ncreate_vm\n";
  auto all = parse_ok(two);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].name, "second");
}

struct BadText {
  const char* text;
  const char* must_contain;
};

class MalformedText : public ::testing::TestWithParam<BadText> {};

TEST_P(MalformedText, IsRejectedNamingFileLineOpAndField) {
  std::string error = parse_error(GetParam().text);
  EXPECT_NE(error.find("bad.kcs:"), std::string::npos) << error;
  EXPECT_NE(error.find(GetParam().must_contain), std::string::npos) << error;
}

INSTANTIATE_TEST_SUITE_P(
    Table, MalformedText,
    ::testing::Values(
        BadText{"", "no scenario"},
        BadText{"abi gmem\n", ":1: expected 'kconform-scenario 1'"},
        BadText{"kconform-scenario 3\nabi gmem\nname x\n", "field 'version'"},
        BadText{"kconform-scenario 1\nabi nope\n", "field 'abi'"},
        BadText{"kconform-scenario 1\nname x\ncreate_vm\n", "op before the 'abi' and 'name' lines"},
        BadText{"kconform-scenario 1\nabi gmem\ncreate_vm\n", ":3: op before the 'abi' and 'name' lines"},
        BadText{"kconform-scenario 1\nabi gmem\n", ":1: scenario starting here lacks an 'abi' or 'name'"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\nrequires gmem telepathy\n", "field 'requires'"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\nfly\n", ":4: op 0: unknown op 'fly'"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=1\n",
                ":5: op 1 (create_gmem) field 'flags': missing"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=zz flags=0\n",
                "op 1 (create_gmem) field 'size': cannot read 'zz'"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=1 flags=MMAP|BOGUS\n",
                "field 'flags': cannot read"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=1 flags=0 colour=3\n",
                "field 'colour': no such field"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 vm=0 size=1 flags=0\n",
                "field 'vm': given twice"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_gmem vm=0 size=1 flags=0\n",
                "op 0 (create_gmem) field 'vm': refers to vm #0 but only 0 created"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\nclose gmem=3\n",
                "field 'gmem': refers to gmem #3"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=99999999999999999999 flags=0\n",
                "field 'size'"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=0x10000000000000000G flags=0\n",
                "field 'size'"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm type\n", "expected name=value"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\nname y\n", ":5: field 'name': must come once"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\nname y\n", ":4: field 'name': must come once"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\nrequires gmem\n", ":5: field 'requires': must come before"}));

Scenario random_scenario(std::mt19937_64& rng) {
  const AbiSpec& abi = abi_spec(Abi::kGmem);
  Scenario s;
  s.name = "random/" + std::to_string(rng() % 1000);
  s.requires_caps = static_cast<uint32_t>(rng() & 0x3f);
  std::vector<uint64_t> produced(abi.resources.size(), 0);
  size_t n = rng() % 40;
  for (size_t i = 0; i < n; ++i) {
    Op op;
    op.code = static_cast<uint8_t>(rng() % abi.ops.size());
    const OpSpec& spec = abi.ops[op.code];
    bool ok = true;
    for (size_t a = 0; a < spec.args.size(); ++a) {
      const ArgSpec& arg = spec.args[a];
      if (arg.kind == ArgKind::kSlot) {
        if (produced[arg.resource] == 0) ok = false;
        else op.args[a] = rng() % produced[arg.resource];
      } else {
        int shape = rng() % 4;
        op.args[a] = shape == 0 ? rng() : shape == 1 ? rng() % 5000 : shape == 2 ? arg.dflt : (1ull << (rng() % 64));
      }
    }
    if (!ok) continue;
    if (spec.produces >= 0) ++produced[spec.produces];
    s.ops.push_back(op);
  }
  return s;
}

TEST(Codecs, RandomScenariosRoundTripThroughBothForms) {
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 2000; ++i) {
    Scenario s = random_scenario(rng);
    std::string error;
    ASSERT_TRUE(validate(s, &error)) << error;
    std::vector<uint8_t> bin = encode_binary(s);
    Scenario from_bin;
    ASSERT_TRUE(decode_binary(bin, &from_bin, &error)) << error;
    EXPECT_EQ(from_bin, s);
    EXPECT_EQ(encode_binary(from_bin), bin);
    std::string text = format_text(s);
    std::vector<Scenario> from_text;
    ASSERT_TRUE(parse_text(text, "r.kcs", &from_text, &error)) << error << "\n" << text;
    ASSERT_EQ(from_text.size(), 1u);
    EXPECT_EQ(from_text[0], s) << text;
    EXPECT_EQ(format_text(from_text[0]), text);
  }
}

TEST(BinaryCodec, RejectsMalformedInputNamingTheField) {
  auto all = parse_ok(kSample);
  std::vector<uint8_t> good = encode_binary(all[0]);
  std::string error;
  Scenario s;

  auto bad = good;
  bad[0] = 'X';
  EXPECT_FALSE(decode_binary(bad, &s, &error));
  EXPECT_NE(error.find("magic"), std::string::npos) << error;

  bad = good;
  bad[4] = 9;
  EXPECT_FALSE(decode_binary(bad, &s, &error));
  EXPECT_NE(error.find("field 'version'"), std::string::npos) << error;

  bad = good;
  bad.push_back(0);
  EXPECT_FALSE(decode_binary(bad, &s, &error));
  EXPECT_NE(error.find("trailing bytes"), std::string::npos) << error;

  for (size_t cut = 0; cut < good.size(); ++cut) {
    std::vector<uint8_t> prefix(good.begin(), good.begin() + cut);
    EXPECT_FALSE(decode_binary(prefix, &s, &error)) << "prefix of " << cut << " bytes accepted";
  }
}

TEST(BinaryCodec, RejectsNonMinimalVarints) {
  Scenario s;
  s.name = "v";
  std::vector<uint8_t> good = encode_binary(s);  // magic, ver, abi, req=0, len=1, 'v', nops=0
  std::vector<uint8_t> bad = good;
  bad.insert(bad.begin() + 6, 0x80);  // requires encoded as 0x80 0x00
  std::string error;
  Scenario out;
  EXPECT_FALSE(decode_binary(bad, &out, &error));
  EXPECT_NE(error.find("field 'requires': varint not minimally encoded"), std::string::npos) << error;
}

TEST(BinaryCodec, EveryAcceptedMutationReencodesToTheSameBytes) {
  auto all = parse_ok(kSample);
  std::vector<uint8_t> good = encode_binary(all[0]);
  std::mt19937_64 rng(99);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    auto m = good;
    int edits = 1 + rng() % 3;
    for (int e = 0; e < edits; ++e) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    Scenario s;
    std::string error;
    if (!decode_binary(m, &s, &error)) continue;
    ++accepted;
    EXPECT_EQ(encode_binary(s), m);
  }
  EXPECT_GT(accepted, 100);
}

// --- Version 2: concurrent groups and repeat ---

constexpr std::string_view kConcurrent =
    "kconform-scenario 2\n"
    "abi gmem\n"
    "name gmem/concurrent/sample\n"
    "requires gmem mmap write\n"
    "repeat 50\n"
    "create_vm\n"
    "create_gmem vm=0 size=0x4000 flags=MMAP|INIT_SHARED|WRITE\n"
    "mmap gmem=0 offset=0 len=0x4000\n"
    "@1 pwrite gmem=0 offset=0 len=0x2000 pattern=3\n"
    "@2 fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x1000\n"
    "@1 store map=0 offset=0x3000 len=1 pattern=4\n"
    "load map=0 offset=0 len=0x4000\n"
    "fstat gmem=0\n";

TEST(ConcurrentText, ParsesThreadsAndRepeat) {
  auto all = parse_ok(kConcurrent);
  ASSERT_EQ(all.size(), 1u);
  const Scenario& s = all[0];
  EXPECT_EQ(s.version, 2);
  EXPECT_EQ(s.repeat, 50u);
  ASSERT_EQ(s.ops.size(), 8u);
  EXPECT_EQ(s.ops[2].thread, 0);
  EXPECT_EQ(s.ops[3].thread, 1);
  EXPECT_EQ(s.ops[4].thread, 2);
  EXPECT_EQ(s.ops[5].thread, 1);
  EXPECT_EQ(s.ops[6].thread, 0);
  EXPECT_EQ(group_end(s, 3), 6u);
  EXPECT_TRUE(uses_version2(s));
}

TEST(ConcurrentText, RoundTripsThroughBothForms) {
  auto all = parse_ok(kConcurrent);
  std::string canon = format_text(all[0]);
  EXPECT_NE(canon.find("repeat 50\n"), std::string::npos) << canon;
  EXPECT_NE(canon.find("@2 fallocate"), std::string::npos) << canon;
  auto again = parse_ok(canon);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], all[0]);
  std::vector<uint8_t> bin = encode_binary(all[0]);
  EXPECT_EQ(bin[4], 2);  // version byte
  Scenario from_bin;
  std::string error;
  ASSERT_TRUE(decode_binary(bin, &from_bin, &error)) << error;
  EXPECT_EQ(from_bin, all[0]);
  EXPECT_EQ(encode_binary(from_bin), bin);
}

TEST(ConcurrentText, VersionOneFilesKeepTheirBytes) {
  // A plain scenario stays version 1 in both forms.
  auto all = parse_ok(kSample);
  EXPECT_EQ(all[0].version, 1);
  EXPECT_EQ(format_text(all[0]).rfind("kconform-scenario 1\n", 0), 0u);
  std::vector<uint8_t> bin = encode_binary(all[0]);
  EXPECT_EQ(bin[4], 1);
  Scenario s;
  s.name = "v";
  EXPECT_EQ(encode_binary(s).size(), 10u);  // magic, ver, abi, req, len, 'v', nops: no repeat, no threads
}

INSTANTIATE_TEST_SUITE_P(
    Concurrent, MalformedText,
    ::testing::Values(
        BadText{"kconform-scenario 1\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=1 flags=0\n"
                "@1 close gmem=0\n@2 fstat gmem=0\n",
                ":6: op 2 field 'thread': needs 'kconform-scenario 2'"},
        BadText{"kconform-scenario 1\nabi gmem\nname x\nrepeat 5\n", ":4: field 'repeat': needs 'kconform-scenario 2'"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\nrepeat 0\n", ":4: field 'repeat': 0 is out of range 1..1000000"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\nrepeat lots\n", "field 'repeat': expected 'repeat <count>'"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\ncreate_vm\nrepeat 3\n", ":5: field 'repeat': must come once, before the ops"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=1 flags=0\n"
                "@9 close gmem=0\n",
                ":6: op 2 field 'thread': 9 is out of range 1..8"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\ncreate_vm\n@x close_vm vm=0\n",
                ":5: op 1 field 'thread': cannot read '@x'"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\ncreate_vm\n@1\n", ":5: op 1: no op after '@1'"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=1 flags=0\n"
                "@1 close gmem=0\n@1 fstat gmem=0\nfstat gmem=0\n",
                ":8: op 2 (close) field 'thread': the concurrent group of ops 2..3 has only thread 1; "
                "a group needs at least two threads"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=1 flags=0\n"
                "@1 fstat gmem=0\n@1 fstat gmem=0\n",
                ":1: scenario 'x': op 2 (fstat) field 'thread': the concurrent group of ops 2..3 has only thread 1"},
        BadText{"kconform-scenario 2\nabi gmem\nname x\ncreate_vm\ncreate_gmem vm=0 size=1 flags=0\n"
                "@1 mmap gmem=0 offset=0 len=1\n@2 fstat gmem=0\n",
                "op 2 (mmap) field 'thread': mmap creates a map and cannot run in a concurrent group"}));

TEST(ConcurrentBinary, RejectsBadThreadAndRepeatNamingTheField) {
  auto all = parse_ok(kConcurrent);
  std::string error;
  Scenario s = all[0];
  s.ops[3].thread = 9;
  EXPECT_FALSE(decode_binary(encode_binary(s), &s, &error));
  EXPECT_NE(error.find("op 3 (pwrite) field 'thread': 9 is out of range 1..8"), std::string::npos) << error;
  s = all[0];
  s.ops[4].thread = 1;  // the group has thread 1 only
  EXPECT_FALSE(decode_binary(encode_binary(s), &s, &error));
  EXPECT_NE(error.find("field 'thread': the concurrent group of ops 3..5 has only thread 1"), std::string::npos)
      << error;
  s = all[0];
  s.repeat = 0;
  EXPECT_FALSE(decode_binary(encode_binary(s), &s, &error));
  EXPECT_NE(error.find("field 'repeat': 0 is out of range"), std::string::npos) << error;
  s = all[0];
  std::vector<uint8_t> bin = encode_binary(s);
  bin[4] = 1;  // a version-1 header cannot carry threads: the layout no longer parses
  EXPECT_FALSE(decode_binary(bin, &s, &error));
}

TEST(ConcurrentCodecs, RandomGroupsRoundTripThroughBothForms) {
  std::mt19937_64 rng(4321);
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    Scenario s = random_scenario(rng);
    s.version = 2;
    s.repeat = 1 + static_cast<uint32_t>(rng() % 3) * 50;
    const AbiSpec& abi = abi_spec(s.abi);
    for (Op& op : s.ops)
      if (abi.ops[op.code].produces < 0 && rng() % 2) op.thread = static_cast<uint8_t>(1 + rng() % 3);
    std::string error;
    if (!validate(s, &error)) continue;  // a group of one thread
    ++checked;
    std::vector<uint8_t> bin = encode_binary(s);
    Scenario from_bin;
    ASSERT_TRUE(decode_binary(bin, &from_bin, &error)) << error;
    EXPECT_EQ(from_bin, s);
    std::string text = format_text(s);
    std::vector<Scenario> from_text;
    ASSERT_TRUE(parse_text(text, "r.kcs", &from_text, &error)) << error << "\n" << text;
    ASSERT_EQ(from_text.size(), 1u);
    EXPECT_EQ(from_text[0], s) << text;
  }
  EXPECT_GT(checked, 300);
}

// Scenario text prints integers as printf's "%llu" below 4096 and "0x%llx"
// from there, and blobs as "hex:" and two lower-case digits a byte: the
// formatter writes them without printf (it runs for every op of every run).
TEST(TextCodec, IntegersAndBlobsPrintAsThePrintfReference) {
  const ArgSpec int_arg{"n", ArgKind::kInt};
  const ArgSpec bytes_arg{"b", ArgKind::kBytes};
  Scenario s;
  for (uint64_t v : {0ull, 1ull, 9ull, 10ull, 4095ull, 4096ull, 0xabcdefull, 0x80000000ull, 0xffffffffffffffffull,
                     0x8000000000000000ull, 123456789ull}) {
    char ref[32];
    std::snprintf(ref, sizeof ref, v < 4096 ? "%llu" : "0x%llx", static_cast<unsigned long long>(v));
    EXPECT_EQ(format_arg(int_arg, v, s), ref) << v;
  }
  s.blobs = {{}, {0x00, 0x0f, 0xf0, 0xff, 0x5a}};
  EXPECT_EQ(format_arg(bytes_arg, 0, s), "hex:");
  EXPECT_EQ(format_arg(bytes_arg, 1, s), "hex:000ff0ff5a");
  // Every byte value, as "%02x" prints it.
  std::vector<uint8_t> every(256);
  std::string ref = "hex:";
  for (int b = 0; b < 256; ++b) {
    every[b] = static_cast<uint8_t>(b);
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    ref += two;
  }
  s.blobs.push_back(every);
  EXPECT_EQ(format_arg(bytes_arg, 2, s), ref);
}

}  // namespace
}  // namespace kconform
