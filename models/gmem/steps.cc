// Atomic steps of guest_memfd ops (steps.h; SPEC.md CONCURRENT:STEPS).
#include "models/gmem/steps.h"

#include <csignal>
#include <cstring>

#include "harness/scenario/gmem_abi.h"

namespace kconform::gmem {
namespace {

// Splits [offset, offset+n) of a store of pattern seed (stream from src_start)
// at page boundaries.
void split(Plan& plan, uint64_t file, uint64_t page, uint64_t offset, uint64_t n, uint64_t seed) {
  uint64_t src = 0;
  while (n > 0) {
    uint64_t chunk = std::min(n, page - offset % page);
    plan.chunks.push_back({file, offset, chunk, seed, src, false});
    offset += chunk;
    src += chunk;
    n -= chunk;
  }
}

// The bytes a store wrote before its first faulting page, as commit_store
// (ops_map.cc) applies them: a private first page or a page at or beyond EOF
// stops it (sharedness is per file, SPEC.md FLAGS:INIT-SHARED).
uint64_t stored_bytes(const State& st, const Mapping& map, uint64_t start, uint64_t len,
                      const Outcome& observed) {
  if (observed.kind == Outcome::Kind::kOk) return len;
  if (observed.kind != Outcome::Kind::kSignal || observed.value != SIGBUS) return 0;
  const GmemFile& file = st.files[map.file];
  if (!file.shared(start / st.page())) return 0;
  uint64_t stop = file.size / st.page() * st.page();
  return stop > start ? std::min(len, stop - start) : 0;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

// A page's bytes, eight at a time (the search digests every state it visits).
uint64_t mix_bytes(uint64_t h, const std::vector<uint8_t>& bytes) {
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  for (; i < bytes.size(); ++i) h = mix(h, bytes[i]);
  return mix(h, bytes.size());
}

}  // namespace

Plan plan_steps(const State& st, const Op& op, const Outcome& observed) {
  Plan plan;
  if (observed.kind != Outcome::Kind::kOk && op.code != kStore) return plan;
  const uint64_t page = st.page();
  switch (op.code) {
    case kWrite:
    case kPwrite:
    case kPwritev: {
      if (observed.value <= 0) return plan;
      const GmemFile* f = st.live_file(op.args[0]);
      if (!f) return plan;
      uint64_t offset = op.code == kWrite ? f->pos : op.args[1];
      uint64_t seed = op.code == kWrite ? op.args[2] : op.code == kPwrite ? op.args[3] : op.args[4];
      uint64_t n = static_cast<uint64_t>(observed.value);
      if (op.code == kWrite) plan.set_pos = true, plan.pos = offset + n;
      if (offset < f->size) split(plan, op.args[0], page, offset, std::min(n, f->size - offset), seed);
      break;
    }
    case kStore: {
      const Mapping* map = st.live_map(op.args[0]);
      if (!map || op.args[2] == 0) return plan;
      uint64_t start = map->offset + op.args[1];
      split(plan, map->file, page, start, stored_bytes(st, *map, start, op.args[2], observed), op.args[3]);
      break;
    }
    case kFallocate: {
      if (op.args[1] != (kFallocKeepSize | kFallocPunchHole)) return plan;
      if (op.args[0] >= st.files.size()) return plan;
      const GmemFile* f = &st.files[op.args[0]];
      uint64_t first = op.args[2] / page;
      uint64_t end = std::min(op.args[2] + op.args[3], f->size);
      uint64_t last = end / page;
      if (last <= first || last - first > kMaxSteps) return plan;
      for (uint64_t p = first; p < last; ++p) plan.chunks.push_back({op.args[0], p * page, page, 0, 0, true});
      break;
    }
    default:
      return plan;
  }
  if (plan.chunks.size() > kMaxSteps || plan.chunks.size() <= 1) plan = Plan{};
  return plan;
}

void apply_chunk(State& st, const Chunk& c) {
  GmemFile* f = st.file_at(c.file);
  if (!f || c.n == 0) return;
  if (c.punch) {
    f->pages.erase(c.offset / st.page());
  } else {
    store_bytes(*f, st.page(), c.offset, c.seed, c.src_start, c.n);
  }
}

size_t InFlight::begin(State& st, size_t op, Plan plan) {
  if (plan.set_pos)
    if (GmemFile* f = st.file_at(plan.chunks.front().file)) f->pos = plan.pos;
  apply_chunk(st, plan.chunks.front());
  size_t left = plan.chunks.size() - 1;
  if (left) ops_[op] = Started{std::move(plan), 1};
  return left;
}

size_t InFlight::more(State& st, size_t op) {
  auto it = ops_.find(op);
  if (it == ops_.end()) return 0;
  Started& s = it->second;
  apply_chunk(st, s.plan.chunks[s.next++]);
  size_t left = s.plan.chunks.size() - s.next;
  if (!left) ops_.erase(it);
  return left;
}

bool InFlight::excludes(uint64_t file, bool punch) const {
  for (const auto& [op, s] : ops_) {
    const Chunk& c = s.plan.chunks.front();
    if (c.file == file && c.punch != punch) return true;
  }
  return false;
}

uint64_t InFlight::digest(uint64_t h) const {
  for (const auto& [op, s] : ops_) h = mix(mix(h, op), s.next);
  return h;
}

uint64_t state_digest(const State& st) {
  uint64_t h = kFnvInit;
  for (const Vm& vm : st.vms) {
    h = mix(mix(h, vm.open), vm.type);
    for (const auto& [id, m] : vm.slots)
      h = mix(mix(mix(mix(mix(mix(h, id), m.gpa), m.size), m.flags), m.file), m.offset + m.gmem);
  }
  for (const GmemFile& f : st.files) {
    h = mix(mix(mix(mix(mix(h, f.open), f.vm), f.size), f.flags), f.pos);
    for (const auto& [index, bytes] : f.pages) h = mix_bytes(mix(h, index), bytes);
    h = mix(h, f.pages.size());
  }
  for (const Mapping& m : st.maps) h = mix(mix(mix(mix(mix(h, m.live), m.file), m.offset), m.len), m.prot);
  return h;
}

}  // namespace kconform::gmem
