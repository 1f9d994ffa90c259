// The content oracle (SPEC.md CONTENT:MATCH, CONTENT:FOREIGN): after an op
// that can change data, every page the target could re-read is compared with
// the model's bytes, then the model takes the target's bytes as its own so
// that each difference is reported once and later ops are judged against
// what the file really holds.
#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "models/gmem/ops.h"

namespace kconform::gmem {
namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

// Some source of the file aimed byte b at file offset x.
bool explained_by_file(const GmemFile& f, uint64_t x, uint8_t b) {
  for (const WriteSource& src : f.sources)
    if (x >= src.base && x - src.base < src.len && pattern_byte(src.seed, x - src.base) == b) return true;
  return false;
}

// Where the bytes at [x, x+n) of a page (n >= 1) came from, if some op of
// the scenario wrote them anywhere (any file, any page-aligned displacement).
std::string provenance(const State& st, std::span<const uint8_t> bytes, uint64_t x) {
  const uint64_t page = st.page();
  const size_t want = std::min<size_t>(bytes.size(), 16);
  for (size_t slot = 0; slot < st.files.size(); ++slot) {
    for (const WriteSource& src : st.files[slot].sources) {
      if (src.seed == 0) continue;
      uint64_t r = (x % page + page - src.base % page) % page;
      for (uint64_t j = r; j < src.len; j += page) {
        size_t k = 0;
        while (k < want && j + k < src.len && pattern_byte(src.seed, j + k) == bytes[k]) ++k;
        if (k == want)
          return "bytes of op " + std::to_string(src.op) + " (pattern " + hex(src.seed) + ") meant for gmem " +
                 std::to_string(slot) + " offset " + hex(src.base + j);
      }
    }
  }
  std::string out = "bytes no op of the scenario wrote:";
  for (size_t k = 0; k < want; ++k) {
    char b[4];
    std::snprintf(b, sizeof b, " %02x", bytes[k]);
    out += b;
  }
  return out;
}

// A few words on what a span of expected bytes is.
std::string describe_expected(const GmemFile& f, uint64_t x, uint8_t b) {
  if (b == 0) return "zero";
  for (auto it = f.sources.rbegin(); it != f.sources.rend(); ++it)
    if (x >= it->base && x - it->base < it->len && pattern_byte(it->seed, x - it->base) == b)
      return "op " + std::to_string(it->op) + "'s bytes";
  return "bytes adopted from an earlier re-read";
}

}  // namespace

bool wants_contents(const Op& op) { return changes_data(op.code); }

void check_contents(State& st, const Contents& seen, ContentCheck* out) {
  const uint64_t page = st.page();
  static const std::vector<uint8_t> kZeroPage(1 << 16, 0);
  std::map<std::pair<uint64_t, uint64_t>, const PageContent*> in_memory;
  for (const PageContent& pg : seen.pages) in_memory[{pg.slot, pg.index}] = &pg;
  uint64_t h = kFnvInit;
  bool any_match = false, any_foreign = false;
  for (const FileContent& fc : seen.files) {
    if (!fc.observable) {
      out->unobserved.push_back("gmem " + std::to_string(fc.slot) + ": " + fc.why_not);
      continue;
    }
    GmemFile* f = st.file_at(fc.slot);
    if (!f) {
      out->unobserved.push_back("gmem " + std::to_string(fc.slot) + ": the model has no such file");
      continue;
    }
    ++out->files;
    for (uint64_t idx = fc.first_page; idx < fc.first_page + fc.page_count; ++idx) {
      auto model_it = f->pages.find(idx);
      std::span<const uint8_t> expected =
          model_it != f->pages.end() ? std::span<const uint8_t>(model_it->second)
                                     : std::span<const uint8_t>(kZeroPage.data(), page);
      auto seen_it = in_memory.find({fc.slot, idx});
      const bool resident = seen_it != in_memory.end() && seen_it->second->bytes.size() == page;
      std::span<const uint8_t> observed =
          resident ? std::span<const uint8_t>(seen_it->second->bytes) : std::span<const uint8_t>(kZeroPage.data(), page);
      if (resident) {
        ++out->pages;
        h = fnv1a(observed, h);
      }
      auto [e_end, o_end] = std::mismatch(expected.begin(), expected.end(), observed.begin());
      if (e_end == expected.end()) {
        if (!resident && model_it != f->pages.end()) f->pages.erase(model_it);  // all zero: a hole
        continue;
      }
      const uint64_t first = static_cast<uint64_t>(e_end - expected.begin());
      const uint64_t base = idx * page;
      // Data from elsewhere: a non-zero byte no op aimed at this file offset.
      uint64_t foreign_at = page;
      for (uint64_t k = first; k < page; ++k)
        if (observed[k] != expected[k] && observed[k] != 0 && !explained_by_file(*f, base + k, observed[k])) {
          foreign_at = k;
          break;
        }
      PageDiff d;
      d.slot = fc.slot;
      d.index = idx;
      d.first_diff = first;
      d.expected_digest = fnv1a(expected);
      d.observed_digest = fnv1a(observed);
      if (foreign_at < page) {
        any_foreign = true;
        d.rule = kGmemContentForeign;
        d.why = "offset " + hex(base + foreign_at) + " holds " +
                provenance(st, observed.subspan(foreign_at), base + foreign_at);
      } else {
        any_match = true;
        d.rule = kGmemContentMatch;
        const uint64_t x = base + first;
        d.why = "offset " + hex(x) + ": the model has " + describe_expected(*f, x, expected[first]) +
                ", the target " + (resident ? "" : "(page not in memory) ") +
                (observed[first] == 0 ? std::string("zero") : provenance(st, observed.subspan(first), x));
      }
      std::string line = "gmem " + std::to_string(fc.slot) + " page " + std::to_string(idx) + " [" +
                         rule_info(d.rule).id + "] " + d.why;
      if (!out->note.empty()) out->note += "; ";
      out->note += line;
      out->diffs.push_back(std::move(d));
      // Go on from what the target holds.
      if (resident) {
        f->pages[idx] = std::vector<uint8_t>(observed.begin(), observed.end());
      } else {
        f->pages.erase(idx);
      }
    }
  }
  out->digest = h;
  if (out->files == 0) return;
  out->hits.push_back({kGmemContentMatch, any_match});
  out->hits.push_back({kGmemContentForeign, any_foreign});
  if (any_foreign) out->violated.push_back(kGmemContentForeign);
  if (any_match) out->violated.push_back(kGmemContentMatch);
}

}  // namespace kconform::gmem
