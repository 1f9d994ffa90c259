// What a target re-read of the data a scenario can read (the content oracle):
// for each file, the page range it could observe and whether it could at all,
// and for each page in that range that is in memory, its bytes. A model
// compares them with its own contents after an op that can change data
// (Model::check_contents); a target that cannot re-read state reports nothing.
//
// Text form (one line, for a recording that crosses a process or a VM
// boundary: QEMU frames, replay observations), '|'-separated items:
//   f SLOT SIZE FIRST COUNT        file SLOT observed: pages [FIRST, FIRST+COUNT);
//                                  SIZE is st_size ('-' when the fd is closed)
//   n SLOT WHY                     file SLOT not observable (WHY: ' ', '|', ',', '%' as %XX)
//   p SLOT INDEX RUN,RUN,...       a page in memory; its bytes as runs:
//       zLEN            LEN zero bytes
//       sSEED@START+LEN LEN bytes of pattern SEED from stream index START (pattern.h)
//       hHEX            raw bytes, two hex digits each
// Pages of an observed range that are not listed are not in memory (they read
// as zero and were not touched). Numbers are hex without 0x.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/common/outcome.h"

namespace kconform {

struct FileContent {
  uint64_t slot = 0;
  bool observable = false;
  std::string why_not;     // !observable: the reason (no MMAP flag, private pages, ...)
  bool has_size = false;   // the fd was live: st_size was read
  uint64_t size = 0;
  uint64_t first_page = 0, page_count = 0;  // observable: the pages looked at
};

struct PageContent {
  uint64_t slot = 0;
  uint64_t index = 0;
  std::vector<uint8_t> bytes;  // page_size bytes
};

struct Contents {
  std::vector<FileContent> files;
  std::vector<PageContent> pages;  // in memory only, by (slot, index) within a file's range
  void clear() {
    files.clear();
    pages.clear();
  }
};

// A stream a scenario wrote from: bytes [0, len) of pattern seed landed at
// file offset base. Hints for the text form's runs (any set is lossless; a
// good one gives short lines).
struct PatternHint {
  uint64_t seed = 0;
  uint64_t base = 0;
  uint64_t len = 0;
};

// One page whose contents differ from the model's (content oracle).
struct PageDiff {
  uint64_t slot = 0, index = 0;
  uint64_t first_diff = 0;  // byte offset in the page of the first difference
  uint64_t expected_digest = 0, observed_digest = 0;  // FNV-1a of the page
  RuleId rule = kNoRule;    // the content rule the difference breaks
  std::string why;          // what the bytes are, where they came from
};

// The content oracle's judgement after one op (Model::check_contents).
struct ContentCheck {
  bool taken = false;          // the target re-read contents after this op
  uint64_t files = 0, pages = 0;  // files observed, pages in memory compared
  uint64_t digest = 0;         // FNV-1a over every observed page, in order
  std::vector<RuleHit> hits;   // the content rules evaluated
  std::vector<RuleId> violated;
  std::vector<PageDiff> diffs;
  std::vector<std::string> unobserved;  // "gmem N: reason"
  std::string note;            // one line per broken rule, for the verdict's note
  void clear() {
    taken = false;
    files = pages = digest = 0;
    hits.clear();
    violated.clear();
    diffs.clear();
    unobserved.clear();
    note.clear();
  }
};

std::string encode_contents(const Contents& c, std::span<const PatternHint> hints, uint64_t page_size);
// False with *error naming the item and field on malformed text.
bool decode_contents(std::string_view text, uint64_t page_size, Contents* out, std::string* error);

}  // namespace kconform
