// JSON text written directly (oracles/json_text.h).
#include "oracles/json_text.h"

#include <charconv>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace kconform {
namespace {

// Whether v is well-formed UTF-8 as nlohmann's decoder reads it (no overlong
// forms, no surrogates, nothing past U+10FFFF).

bool utf8_ok(std::string_view v) {
  for (size_t i = 0; i < v.size();) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 1;
    else if (c == 0xe0) n = 2, lo = 0xa0;
    else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) n = 2;
    else if (c == 0xed) n = 2, hi = 0x9f;
    else if (c == 0xf0) n = 3, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) n = 3;
    else if (c == 0xf4) n = 3, hi = 0x8f;
    else return false;
    if (i + n >= v.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const unsigned char d = static_cast<unsigned char>(v[i + k]);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xbf)) return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

// A JSON string as json::dump() prints it: \" \\ \b \f \n \r \t, other
// control bytes as \u00xx, UTF-8 as it is; a string that is not UTF-8 goes to
// nlohmann, which rejects it as it always did. Runs of plain bytes are copied
// whole.
namespace {

// Eight bytes at a time: whether a word holds a byte < 0x20, '"', '\\' or >= 0x80.
constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
uint64_t special(uint64_t x) {
  const uint64_t q = x ^ (kOnes * '"'), b = x ^ (kOnes * '\\');
  return ((x - kOnes * 0x20) | ((q - kOnes) & ~q) | ((b - kOnes) & ~b) | x) & kHigh;
}

// The length of v's prefix of whole plain words.
size_t plain_words(std::string_view v) {
  size_t plain = 0;
  while (plain + 8 <= v.size()) {
    uint64_t x;
    std::memcpy(&x, v.data() + plain, 8);
    if (special(x)) break;
    plain += 8;
  }
  return plain;
}

bool plain_byte(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

}  // namespace

bool json_plain(std::string_view v) {
  for (size_t i = plain_words(v); i < v.size(); ++i)
    if (!plain_byte(static_cast<unsigned char>(v[i]))) return false;
  return true;
}

void json_put_string(std::string& o, std::string_view v) {
  // A word of plain bytes is copied as it is (the long hex payloads of FF-A
  // calls are all such bytes).
  const size_t plain = plain_words(v);
  bool ascii = true;
  for (size_t i = plain; i < v.size(); ++i)
    if (static_cast<unsigned char>(v[i]) >= 0x80) {
      ascii = false;
      break;
    }
  if (!ascii && !utf8_ok(v)) {
    o += nlohmann::json(std::string(v)).dump();
    return;
  }
  o += '"';
  o.append(v.data(), plain);
  size_t run = plain;
  for (size_t i = plain; i < v.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    o.append(v.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\b': o += "\\b"; break;
      case '\f': o += "\\f"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        o += buf;
      }
    }
  }
  o.append(v.data() + run, v.size() - run);
  o += '"';
}

void json_put_key(std::string& o, std::string_view key) {
  o += o.size() > 1 ? ",\"" : "\"";
  o += key;
  o += "\":";
}

void json_put_uint(std::string& o, uint64_t v) {
  char buf[24];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  o.append(buf, r.ptr);
}

bool ScenarioJson::update(const std::string& scenario, const std::string& file, uint64_t index) {
  if (set_ && scenario == scenario_ && file == file_ && index == index_) return false;
  set_ = true;
  scenario_ = scenario;
  file_ = file;
  index_ = index;
  file_index.clear();
  json_put_string(file_index, file);
  file_index += ",\"index\":";
  json_put_uint(file_index, index);
  name.clear();
  json_put_string(name, scenario);
  return true;
}

}  // namespace kconform
