// The guest_memfd model's ops split into atomic steps, for judging concurrent
// groups (models/concurrent.h; SPEC.md CONCURRENT:*): a write, a store
// through a mapping or a hole punch of several pages is atomic only per page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "harness/scenario/scenario.h"
#include "models/common/outcome.h"
#include "models/gmem/state.h"

namespace kconform::gmem {

// One page's share of an op's effect: n bytes of pattern `seed` from stream
// index src_start stored at offset of file slot `file`, or (punch) the page
// at offset made a hole.
struct Chunk {
  uint64_t file = 0, offset = 0, n = 0, seed = 0, src_start = 0;
  bool punch = false;
};

// An op's effect in steps. Empty chunks: the op is one step (its commit_*).
struct Plan {
  std::vector<Chunk> chunks;
  bool set_pos = false;  // write(): the file position after it (set by the first step)
  uint64_t pos = 0;
};

// The steps of op (its outcome observed, allowed in st), at most one a page;
// an op of more than kMaxSteps pages, or of one page, is one step.
inline constexpr size_t kMaxSteps = 64;
Plan plan_steps(const State& st, const Op& op, const Outcome& observed);
void apply_chunk(State& st, const Chunk& c);

// Ops started and not finished, by op index.
class InFlight {
 public:
  // Applies plan's first step to st and keeps the rest; returns how many remain.
  size_t begin(State& st, size_t op, Plan plan);
  // Applies op's next step; returns how many remain.
  size_t more(State& st, size_t op);
  uint64_t digest(uint64_t h) const;
  bool empty() const { return ops_.empty(); }
  // Whether an op in flight excludes a plan for file `file` that punches
  // (punch) or writes (!punch): a write and a hole punch of the same file
  // exclude each other as wholes (SPEC.md CONCURRENT:STEPS).
  bool excludes(uint64_t file, bool punch) const;

 private:
  struct Started {
    Plan plan;
    size_t next = 0;
  };
  std::map<size_t, Started> ops_;
};

// Equal states give equal digests (a hash of every field and page byte).
uint64_t state_digest(const State& st);

}  // namespace kconform::gmem
