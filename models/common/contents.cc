// The text form of Contents (contents.h): pages as runs of zero, pattern and
// raw bytes.
#include "models/common/contents.h"

#include <charconv>
#include <cstdio>

#include "harness/scenario/pattern.h"

namespace kconform {
namespace {

constexpr size_t kMinPatternRun = 8;      // shorter matches are written as raw bytes
constexpr uint64_t kMaxDisplaced = 4096;  // page-displaced candidates tried per hint

std::string hex(uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
  return std::string(buf, end);
}

// Bytes of page from position p that equal pattern seed from stream index j.
size_t pattern_match(std::span<const uint8_t> page, size_t p, uint64_t seed, uint64_t j, uint64_t stream_len) {
  size_t n = 0;
  while (p + n < page.size() && j + n < stream_len && page[p + n] == pattern_byte(seed, j + n)) ++n;
  return n;
}

struct Run {
  char kind = 'h';
  uint64_t seed = 0, start = 0;
  size_t len = 0;
};

// The best run at position p of the page at file offset page_base.
Run run_at(std::span<const uint8_t> page, size_t p, uint64_t page_base, uint64_t page_size,
           std::span<const PatternHint> hints) {
  const uint64_t x = page_base + p;
  Run best;
  auto consider = [&](uint64_t seed, uint64_t j, uint64_t len) {
    if (seed == 0) return;  // zero runs say it shorter
    size_t n = pattern_match(page, p, seed, j, len);
    if (n > best.len) best = Run{'s', seed, j, n};
  };
  // Where the stream landed: byte x of the file is stream index x - base.
  for (const PatternHint& h : hints)
    if (x >= h.base && x - h.base < h.len) consider(h.seed, x - h.base, h.len);
  // Bytes that moved by whole pages (stale pages of another file or offset).
  if (p == 0 && best.len < page.size()) {
    for (const PatternHint& h : hints) {
      uint64_t r = (x % page_size + page_size - h.base % page_size) % page_size;
      for (uint64_t k = 0, j = r; k < kMaxDisplaced && j < h.len; ++k, j += page_size) consider(h.seed, j, h.len);
    }
  }
  size_t zeros = 0;
  while (p + zeros < page.size() && page[p + zeros] == 0) ++zeros;
  if (zeros >= best.len && zeros > 0) return Run{'z', 0, 0, zeros};
  if (best.len >= kMinPatternRun || p + best.len == page.size()) return best;
  return Run{'h', 0, 0, 1};
}

bool parse_hex(std::string_view s, uint64_t* v) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v, 16);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t at = s.find(sep, start);
    if (at == std::string_view::npos) at = s.size();
    out.push_back(s.substr(start, at - start));
    start = at + 1;
  }
  return out;
}

}  // namespace

std::string encode_contents(const Contents& c, std::span<const PatternHint> hints, uint64_t page_size) {
  std::string out;
  auto item = [&](const std::string& s) {
    if (!out.empty()) out += '|';
    out += s;
  };
  for (const FileContent& f : c.files) {
    if (!f.observable) {
      std::string why;
      for (char ch : f.why_not) {
        if (ch == ' ' || ch == '|' || ch == '%' || ch == ',') {
          char esc[4];
          std::snprintf(esc, sizeof esc, "%%%02x", static_cast<unsigned char>(ch));
          why += esc;
        } else {
          why += ch;
        }
      }
      item("n " + hex(f.slot) + " " + (why.empty() ? "-" : why));
      continue;
    }
    item("f " + hex(f.slot) + " " + (f.has_size ? hex(f.size) : "-") + " " + hex(f.first_page) + " " +
         hex(f.page_count));
  }
  static const char* digits = "0123456789abcdef";
  for (const PageContent& pg : c.pages) {
    std::string s = "p " + hex(pg.slot) + " " + hex(pg.index) + " ";
    std::span<const uint8_t> bytes(pg.bytes);
    const uint64_t base = pg.index * page_size;
    bool first = true, in_raw = false;
    for (size_t p = 0; p < bytes.size();) {
      Run r = run_at(bytes, p, base, page_size, hints);
      if (r.kind == 'h') {
        if (!in_raw) {
          if (!first) s += ',';
          s += 'h';
          in_raw = true;
        }
        s += digits[bytes[p] >> 4];
        s += digits[bytes[p] & 15];
        first = false;
        p += 1;
        continue;
      }
      in_raw = false;
      if (!first) s += ',';
      first = false;
      if (r.kind == 'z') {
        s += "z" + hex(r.len);
      } else {
        s += "s" + hex(r.seed) + "@" + hex(r.start) + "+" + hex(r.len);
      }
      p += r.len;
    }
    item(s);
  }
  return out;
}

bool decode_contents(std::string_view text, uint64_t page_size, Contents* out, std::string* error) {
  out->clear();
  if (text.empty()) return true;
  size_t n = 0;
  for (std::string_view it : split(text, '|')) {
    ++n;
    auto bad = [&](const std::string& field, const std::string& what) {
      *error = "contents item " + std::to_string(n) + " ('" + std::string(it.substr(0, 40)) + "'): field '" +
               field + "': " + what;
      return false;
    };
    std::vector<std::string_view> f = split(it, ' ');
    if (f[0] == "n" && f.size() == 3) {
      FileContent fc;
      if (!parse_hex(f[1], &fc.slot)) return bad("slot", "not a hex number");
      std::string_view why = f[2] == "-" ? std::string_view() : f[2];
      for (size_t k = 0; k < why.size(); ++k) {
        uint64_t ch = 0;
        if (why[k] == '%') {
          if (k + 2 >= why.size() || !parse_hex(why.substr(k + 1, 2), &ch)) return bad("why", "bad %-escape");
          fc.why_not += static_cast<char>(ch);
          k += 2;
        } else {
          fc.why_not += why[k];
        }
      }
      out->files.push_back(std::move(fc));
    } else if (f[0] == "f" && f.size() == 5) {
      FileContent fc;
      fc.observable = true;
      if (!parse_hex(f[1], &fc.slot)) return bad("slot", "not a hex number");
      if (f[2] != "-") {
        if (!parse_hex(f[2], &fc.size)) return bad("size", "not a hex number or '-'");
        fc.has_size = true;
      }
      if (!parse_hex(f[3], &fc.first_page)) return bad("first", "not a hex number");
      if (!parse_hex(f[4], &fc.page_count)) return bad("count", "not a hex number");
      out->files.push_back(std::move(fc));
    } else if (f[0] == "p" && f.size() == 4) {
      PageContent pg;
      if (!parse_hex(f[1], &pg.slot)) return bad("slot", "not a hex number");
      if (!parse_hex(f[2], &pg.index)) return bad("index", "not a hex number");
      pg.bytes.reserve(page_size);
      for (std::string_view run : split(f[3], ',')) {
        if (run.empty()) return bad("runs", "empty run");
        uint64_t len = 0;
        if (run[0] == 'z') {
          if (!parse_hex(run.substr(1), &len)) return bad("runs", "zero run '" + std::string(run) + "'");
          if (len > page_size - pg.bytes.size()) return bad("runs", "runs exceed the page");
          pg.bytes.insert(pg.bytes.end(), len, 0);
        } else if (run[0] == 's') {
          size_t at = run.find('@'), plus = run.find('+');
          uint64_t seed = 0, start = 0;
          if (at == std::string_view::npos || plus == std::string_view::npos || plus < at ||
              !parse_hex(run.substr(1, at - 1), &seed) || !parse_hex(run.substr(at + 1, plus - at - 1), &start) ||
              !parse_hex(run.substr(plus + 1), &len))
            return bad("runs", "pattern run '" + std::string(run) + "'");
          if (len > page_size - pg.bytes.size()) return bad("runs", "runs exceed the page");
          for (uint64_t k = 0; k < len; ++k) pg.bytes.push_back(pattern_byte(seed, start + k));
        } else if (run[0] == 'h') {
          std::string_view digits = run.substr(1);
          if (digits.size() % 2 || digits.size() / 2 > page_size - pg.bytes.size())
            return bad("runs", "raw run of odd length or beyond the page");
          for (size_t k = 0; k < digits.size(); k += 2) {
            uint64_t b = 0;
            if (!parse_hex(digits.substr(k, 2), &b)) return bad("runs", "raw byte is not hex");
            pg.bytes.push_back(static_cast<uint8_t>(b));
          }
        } else {
          return bad("runs", "unknown run kind '" + std::string(1, run[0]) + "'");
        }
      }
      if (pg.bytes.size() != page_size)
        return bad("runs", "runs give " + std::to_string(pg.bytes.size()) + " bytes, not a page of " +
                               std::to_string(page_size));
      out->pages.push_back(std::move(pg));
    } else {
      return bad("kind", "expected 'f SLOT SIZE FIRST COUNT', 'n SLOT WHY' or 'p SLOT INDEX RUNS'");
    }
  }
  return true;
}

}  // namespace kconform
