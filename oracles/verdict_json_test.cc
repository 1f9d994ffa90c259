// The op record VerdictWriter::op writes directly is byte for byte what the
// same record built through nlohmann::json prints (op_record_reference), over
// every optional key and every kind of byte a string may hold.
#include "oracles/verdict_json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "oracles/json_text.h"

namespace kconform {
namespace {

// The record VerdictWriter::op writes; quote_call: given the call quoted, as
// the runner gives it.
std::string written(const ScenarioRef& ref, size_t op, const Expectation& e, const Outcome& o, const Verdict& v,
                    const ContentCheck* c, bool adopted, bool quote_call = false) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  try {
    VerdictWriter w(f);
    std::string call_json;
    if (quote_call) json_put_string(call_json, format_op(*ref.scenario, op));
    w.op(ref, op, e, o, v, c, adopted, quote_call ? &call_json : nullptr);
  } catch (...) {
    std::fclose(f);
    std::free(buf);
    throw;
  }
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  EXPECT_FALSE(s.empty());
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(VerdictJson, OpRecordIsWhatNlohmannPrints) {
  std::vector<Scenario> parsed;
  std::string error;
  ASSERT_TRUE(parse_text("kconform-scenario 1\nabi gmem\nname a/b\ncreate_vm\n"
                         "create_gmem vm=0 size=0x4000 flags=0\npwrite gmem=0 offset=0 len=0x1000 pattern=7\n",
                         "dir/f\"ile\\.kcs", &parsed, &error))
      << error;
  parsed[0].name = "a/\"quoted\"\\name\tx";  // what a parsed name cannot hold, escaped all the same
  const std::string notes[] = {"", "plain note", "quote\" back\\ nl\n cr\r tab\t bs\b ff\f ctl\x01\x1f del\x7f",
                               "utf-8 \xc3\xa9 and \xe2\x80\x94 \xf0\x9f\x98\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf"};
  const std::vector<Allowed> allowed_sets[] = {
      {}, {Allowed::ok(1, 0)}, {Allowed::err(2, EINVAL), Allowed::err(3, EFAULT)},
      {Allowed::ok_range(1, 0, 4096), Allowed::err(2, EINVAL), Allowed::sig(3, 11)}};
  const Outcome observed[] = {Outcome::ok(0), Outcome::err(EINVAL), Outcome::sig(11), Outcome::ok(4096, 0x1234)};
  ContentCheck none, plain, full;
  plain.taken = true;
  plain.files = 2;
  plain.pages = 7;
  plain.digest = 0xabcdef;
  full = plain;
  full.unobserved = {"gmem 1: closed", "gmem \"2\": x\ty"};
  full.diffs.push_back({1, 3, 0x10, 0x1111, 0x2222, 1, "bytes \"from\" op 4\n"});
  const ContentCheck* contents[] = {nullptr, &none, &plain, &full};
  size_t compared = 0;
  for (const VerdictKind kind : {VerdictKind::kPass, VerdictKind::kViolation, VerdictKind::kUnchecked})
    for (const std::string& note : notes)
      for (const auto& allowed : allowed_sets)
        for (const Outcome& o : observed)
          for (const ContentCheck* c : contents)
            for (int flags = 0; flags < 4; ++flags) {
              Expectation e;
              e.allowed = allowed;
              e.note = note;
              e.robustness = flags & 1;
              e.hits = {{1, false}, {2, true}};
              if (flags & 2) e.hits.clear();
              Verdict v;
              v.kind = kind;
              if (kind == VerdictKind::kViolation) v.violated = {1, 3};
              const ScenarioRef ref{&parsed[0], "dir/f\"ile\\.kcs", static_cast<size_t>(flags) * 1000003};
              const size_t op = static_cast<size_t>(flags);
              for (bool adopted : {false, true}) {
                const std::string want = op_record_reference(ref, op, e, o, v, c, adopted);
                ASSERT_EQ(written(ref, op, e, o, v, c, adopted), want)
                    << "kind " << static_cast<int>(kind) << " note '" << note << "' flags " << flags;
                ASSERT_EQ(written(ref, op, e, o, v, c, adopted, /*quote_call=*/true), want);
                ++compared;
              }
            }
  EXPECT_EQ(compared, 3u * 4 * 4 * 4 * 4 * 4 * 2);
}

// A string that is not UTF-8 is refused by both, as nlohmann always refused it.
TEST(VerdictJson, InvalidUtf8IsRefusedAsBefore) {
  std::vector<Scenario> parsed;
  std::string error;
  ASSERT_TRUE(parse_text("kconform-scenario 1\nabi gmem\nname n\ncreate_vm\n", "f.kcs", &parsed, &error)) << error;
  const ScenarioRef ref{&parsed[0], "f.kcs", 0};
  for (const char* bad : {"cut \xc3", "surrogate \xed\xa0\x80", "overlong \xe0\x80\x80", "past \xf4\x90\x80\x80",
                          "lone \x80", "c0 \xc0\xaf", "f5 \xf5\x80\x80\x80"}) {
    Expectation e;
    e.allowed = {Allowed::ok(1, 0)};
    e.note = bad;
    Verdict v;
    v.kind = VerdictKind::kViolation;
    EXPECT_ANY_THROW(op_record_reference(ref, 0, e, Outcome::ok(1), v, nullptr, false)) << bad;
    EXPECT_ANY_THROW(written(ref, 0, e, Outcome::ok(1), v, nullptr, false)) << bad;
  }
}

// Every special byte at every position of a word, and every byte value: the
// eight-bytes-at-a-time scan misses none.
TEST(VerdictJson, StringsAreWhatNlohmannPrints) {
  std::vector<std::string> specials = {"\"", "\\", "\n", "\x01", "\x1f", " ", "\x7f", "\xc3\xa9", "\xe2\x80\x94"};
  for (int c = 1; c < 0x80; ++c) specials.push_back(std::string(1, static_cast<char>(c)));
  size_t compared = 0;
  for (const std::string& sp : specials)
    for (size_t pos = 0; pos < 26; ++pos)
      for (size_t len : {pos, pos + 1, pos + 7, pos + 30}) {
        const std::string v = std::string(pos, 'a') + sp + std::string(len - pos, '0');
        std::string o;
        json_put_string(o, v);
        ASSERT_EQ(o, nlohmann::json(v).dump()) << "special at " << pos;
        // json_plain: for ASCII, exactly when the JSON is the string between
        // quotes (UTF-8, which is too, it leaves to json_put_string).
        const bool ascii = std::all_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
        ASSERT_EQ(json_plain(v), ascii && o == "\"" + v + "\"") << "special at " << pos;
        ++compared;
      }
  std::string o;
  json_put_string(o, std::string(100000, 'f'));
  EXPECT_EQ(o, nlohmann::json(std::string(100000, 'f')).dump());
  EXPECT_GT(compared, 10000u);
}

// The comparison above can fail: a record that differs in one byte is told apart.
TEST(VerdictJson, ADifferentRecordIsToldApart) {
  std::vector<Scenario> parsed;
  std::string error;
  ASSERT_TRUE(parse_text("kconform-scenario 1\nabi gmem\nname n\ncreate_vm\n", "f.kcs", &parsed, &error)) << error;
  Expectation e;
  e.allowed = {Allowed::ok(1, 0)};
  Verdict v;
  const ScenarioRef ref{&parsed[0], "f.kcs", 0};
  EXPECT_NE(written(ref, 0, e, Outcome::ok(1), v, nullptr, false),
            op_record_reference(ref, 0, e, Outcome::ok(0), v, nullptr, false));
}

}  // namespace
}  // namespace kconform
