// Structure-aware scenario mutation (mutator.h).
#include "harness/fuzz/mutator.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"

namespace kconform::fuzz {
namespace {

constexpr uint64_t kCommon[] = {
    0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 48, 63, 64, 0x7f, 0x80, 0xff, 0x100, 0x3ff, 0x400, 0x7ff, 0x800,
    0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3fff, 0x4000, 0x4001, 0x8000, 0xffff, 0x10000, 0x10001,
    0x1fffff, 0x200000, 0x3ffffff, 0x4000000, 0x4000001, 0x7ffff000, 0x7fffffff, 0x80000000, 0xfffff000,
    0xffffffff, 0x100000000, 0x10000000000, 0x7ffffffffffff000, 0x7fffffffffffffff, 0x8000000000000000,
    0x8000000000001000, 0xfffffffffffff000, 0xfffffffffffffffe, 0xffffffffffffffff};
// The values worth trying in every ABI; each ABI's table adds its own
// (EngineHints::values).
std::vector<uint64_t> make_values(const AbiSpec& abi) {
  std::vector<uint64_t> v(std::begin(kCommon), std::end(kCommon));
  v.insert(v.end(), abi.engine.values.begin(), abi.engine.values.end());
  return v;
}

template <typename T>
T pick(Rng& rng, T lo, T hi) {  // inclusive
  return std::uniform_int_distribution<T>(lo, hi)(rng);
}

bool chance(Rng& rng, unsigned percent) { return pick<unsigned>(rng, 0, 99) < percent; }

// How often each kind of mutation is chosen (Mutation order): a splice adds
// several ops at once, so it comes half as often as the others.
constexpr unsigned kWeight[] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2};
static_assert(std::size(kWeight) == static_cast<size_t>(Mutation::kCount));

Mutation pick_mutation(Rng& rng) {
  unsigned total = 0;
  for (unsigned w : kWeight) total += w;
  unsigned r = pick<unsigned>(rng, 0, total - 1);
  unsigned m = 0;
  while (r >= kWeight[m]) r -= kWeight[m++];
  return static_cast<Mutation>(m);
}

// How many resources of each kind ops [0, end) produce.
std::vector<uint64_t> produced_before(const Scenario& s, size_t end) {
  const AbiSpec& abi = abi_spec(s.abi);
  std::vector<uint64_t> n(abi.resources.size(), 0);
  for (size_t i = 0; i < end && i < s.ops.size(); ++i) {
    if (s.ops[i].code >= abi.ops.size()) continue;
    int p = abi.ops[s.ops[i].code].produces;
    if (p >= 0) ++n[p];
  }
  return n;
}

uint64_t boundary(Rng& rng, Abi abi) {
  auto v = boundary_values(abi);
  return v[pick<size_t>(rng, 0, v.size() - 1)];
}

uint64_t flag_value(Rng& rng, const ArgSpec& a, Abi abi) {
  if (!a.names.empty() && chance(rng, 80)) {
    uint64_t v = 0;
    if (a.kind == ArgKind::kEnum) return a.names[pick<size_t>(rng, 0, a.names.size() - 1)].value;
    for (const NamedValue& n : a.names)
      if (chance(rng, 40)) v |= n.value;
    return v;
  }
  return chance(rng, 50) ? boundary(rng, abi) : (1ull << pick<unsigned>(rng, 0, 63));
}

std::vector<uint8_t> random_blob(Rng& rng, Abi abi, const Limits& lim) {
  std::vector<uint8_t> b;
  const EngineHints& hints = abi_spec(abi).engine;
  if (!hints.record.empty() && hints.max_records && chance(rng, 70)) {
    // Records of the ABI's byte strings (EngineHints::record), fields little endian.
    unsigned n = pick<unsigned>(rng, 1, hints.max_records);
    for (unsigned i = 0; i < n; ++i)
      for (const RecordField& f : hints.record) {
        uint64_t v = chance(rng, 70) ? f.lo + f.step * pick<uint64_t>(rng, 0, f.steps) : boundary(rng, abi);
        for (unsigned k = 0; k < f.bytes; ++k) b.push_back(static_cast<uint8_t>(k < 8 ? v >> (8 * k) : 0));
      }
    return b;
  }
  size_t n = pick<size_t>(rng, 1, std::min<size_t>(lim.max_blob, 64));
  for (size_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(rng()));
  return b;
}

// A new op with random arguments that are valid at position pos.
Op random_op(const Scenario& s, size_t pos, Rng& rng, std::vector<std::vector<uint8_t>>* new_blobs,
             const Limits& lim) {
  const AbiSpec& abi = abi_spec(s.abi);
  std::vector<uint64_t> have = produced_before(s, pos);
  Op op;
  op.code = static_cast<uint8_t>(pick<size_t>(rng, 0, abi.ops.size() - 1));
  const OpSpec& spec = abi.ops[op.code];
  for (size_t a = 0; a < spec.args.size(); ++a) {
    const ArgSpec& arg = spec.args[a];
    switch (arg.kind) {
      case ArgKind::kSlot:
        op.args[a] = have[arg.resource] ? pick<uint64_t>(rng, 0, have[arg.resource] - 1) : 0;
        break;
      case ArgKind::kFlags:
      case ArgKind::kEnum:
        op.args[a] = arg.optional && chance(rng, 40) ? arg.dflt : flag_value(rng, arg, s.abi);
        break;
      case ArgKind::kInt:
        op.args[a] = arg.optional && chance(rng, 50) ? arg.dflt : boundary(rng, s.abi);
        break;
      case ArgKind::kBytes:
        op.args[a] = ~0ull;  // placeholder: repair() numbers byte strings
        new_blobs->push_back(random_blob(rng, s.abi, lim));
        break;
    }
  }
  return op;
}

// Byte-string arguments of s in op order: (op index, arg index).
std::vector<std::pair<size_t, size_t>> blob_args(const Scenario& s) {
  const AbiSpec& abi = abi_spec(s.abi);
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const OpSpec& spec = abi.ops[s.ops[i].code];
    for (size_t a = 0; a < spec.args.size(); ++a)
      if (spec.args[a].kind == ArgKind::kBytes) out.emplace_back(i, a);
  }
  return out;
}

// Arguments of a given kind: (op index, arg index).
std::vector<std::pair<size_t, size_t>> args_of(const Scenario& s, bool (*want)(ArgKind)) {
  const AbiSpec& abi = abi_spec(s.abi);
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const OpSpec& spec = abi.ops[s.ops[i].code];
    for (size_t a = 0; a < spec.args.size(); ++a)
      if (want(spec.args[a].kind)) out.emplace_back(i, a);
  }
  return out;
}

// An argument index of a named op, -1 if the table has no such op or argument.
int arg_index(const AbiSpec& abi, const char* op, const char* arg, int* code) {
  std::optional<uint8_t> c = op_code_by_name(abi, op);
  if (!c) return -1;
  *code = *c;
  const OpSpec& spec = abi.ops[*c];
  for (size_t a = 0; a < spec.args.size(); ++a)
    if (std::string_view(spec.args[a].name) == arg) return static_cast<int>(a);
  return -1;
}

// An ArgTie as op codes and argument indexes.
struct ResolvedTie {
  int call, call_arg, writer, writer_arg;
};

// The ABI's ties resolved once (as starters() parses its starters once); one
// that names no real argument is left out (MutatorTest.EveryTieNamesRealArguments fails).
std::span<const ResolvedTie> resolved_ties(Abi abi) {
  static const std::vector<std::pair<Abi, std::vector<ResolvedTie>>> kTies = [] {
    std::vector<std::pair<Abi, std::vector<ResolvedTie>>> v;
    for (const AbiSpec* a : all_abis()) {
      std::vector<ResolvedTie> ties;
      for (const ArgTie& t : a->engine.ties) {
        ResolvedTie r{-1, -1, -1, -1};
        r.call_arg = arg_index(*a, t.op, t.arg, &r.call);
        r.writer_arg = arg_index(*a, t.from_op, t.from_arg, &r.writer);
        if (r.call_arg >= 0 && r.writer_arg >= 0) ties.push_back(r);
      }
      v.emplace_back(a->abi, std::move(ties));
    }
    return v;
  }();
  for (const auto& [id, list] : kTies)
    if (id == abi) return list;
  return {};
}

}  // namespace

void carry_tie(Scenario& s, size_t i, size_t a, Rng& rng) {
  const int code = s.ops[i].code, arg = static_cast<int>(a);
  const uint64_t v = s.ops[i].args[a];
  for (const ResolvedTie& t : resolved_ties(s.abi)) {
    if (code == t.call && arg == t.call_arg) {
      if (!chance(rng, 50)) return;
      for (size_t j = i; j-- > 0;)
        if (s.ops[j].code == t.writer) {
          s.ops[j].args[t.writer_arg] = v;
          return;
        }
    } else if (code == t.writer && arg == t.writer_arg) {
      if (!chance(rng, 50)) return;
      for (size_t j = i + 1; j < s.ops.size(); ++j)
        if (s.ops[j].code == t.call) {
          s.ops[j].args[t.call_arg] = v;
          return;
        }
    }
  }
}

namespace {

bool is_value(ArgKind k) { return k == ArgKind::kInt || k == ArgKind::kFlags || k == ArgKind::kEnum; }
bool is_flags(ArgKind k) { return k == ArgKind::kFlags || k == ArgKind::kEnum; }
bool is_slot(ArgKind k) { return k == ArgKind::kSlot; }

}  // namespace

Limits limits_for(Abi abi) {
  Limits lim;
  lim.max_ops = abi_spec(abi).engine.fuzz_max_ops;
  return lim;
}

std::span<const uint64_t> boundary_values(Abi abi) {
  static const std::vector<std::pair<Abi, std::vector<uint64_t>>> kValues = [] {
    std::vector<std::pair<Abi, std::vector<uint64_t>>> v;
    for (const AbiSpec* a : all_abis()) v.emplace_back(a->abi, make_values(*a));
    return v;
  }();
  for (const auto& [id, values] : kValues)
    if (id == abi) return values;
  return kValues.front().second;
}

void repair(Scenario& s, const Limits& lim) {
  const AbiSpec& abi = abi_spec(s.abi);
  if (s.ops.size() > lim.max_ops) s.ops.resize(lim.max_ops);
  std::vector<uint64_t> have(abi.resources.size(), 0);
  std::vector<Op> ops;
  std::vector<std::vector<uint8_t>> blobs;
  for (Op op : s.ops) {
    if (op.code >= abi.ops.size()) continue;
    const OpSpec& spec = abi.ops[op.code];
    bool keep = true;
    for (size_t a = 0; a < kMaxArgs; ++a) {
      if (a >= spec.args.size()) {
        op.args[a] = 0;
        continue;
      }
      const ArgSpec& arg = spec.args[a];
      if (arg.kind == ArgKind::kSlot) {
        if (!have[arg.resource]) keep = false;
        else if (op.args[a] >= have[arg.resource]) op.args[a] %= have[arg.resource];
      }
    }
    if (!keep) continue;
    for (size_t a = 0; a < spec.args.size(); ++a) {
      if (spec.args[a].kind != ArgKind::kBytes) continue;
      std::vector<uint8_t> b = op.args[a] < s.blobs.size() ? s.blobs[op.args[a]] : std::vector<uint8_t>{};
      if (b.size() > lim.max_blob) b.resize(lim.max_blob);
      op.args[a] = blobs.size();
      blobs.push_back(std::move(b));
    }
    if (spec.produces >= 0) ++have[spec.produces];
    ops.push_back(op);
  }
  s.ops = std::move(ops);
  s.blobs = std::move(blobs);
}

std::span<const Scenario> starters(Abi abi) {
  static const std::vector<std::pair<Abi, std::vector<Scenario>>> kStarters = [] {
    std::vector<std::pair<Abi, std::vector<Scenario>>> v;
    for (const AbiSpec* a : all_abis()) {
      std::vector<Scenario> parsed;
      for (const char* ops : a->engine.starters) {
        std::string err;
        std::vector<Scenario> out;
        const std::string text = std::string("kconform-scenario 1\nabi ") + a->name + "\nname fuzz\n" + ops;
        // One that does not parse is left out (MutatorTest.EveryStarterParsesAndIsValid fails).
        if (parse_text(text, "<starter>", &out, &err) && out.size() == 1) parsed.push_back(std::move(out.front()));
      }
      v.emplace_back(a->abi, std::move(parsed));
    }
    return v;
  }();
  for (const auto& [id, list] : kStarters)
    if (id == abi) return list;
  return {};
}

Scenario starter(Abi abi) {
  std::span<const Scenario> all = starters(abi);
  if (!all.empty()) return all.front();
  Scenario s;
  s.abi = abi;
  return s;
}

void splice(Scenario& s, const Scenario& block, size_t pos, const Limits& lim) {
  const AbiSpec& abi = abi_spec(s.abi);
  if (block.abi != s.abi) return;
  pos = std::min(pos, s.ops.size());
  const std::vector<uint64_t> have = produced_before(s, pos);
  std::vector<uint64_t> made(abi.resources.size(), 0);
  std::vector<Op> ops;
  ops.reserve(block.ops.size());
  for (Op op : block.ops) {
    if (op.code >= abi.ops.size()) continue;
    const OpSpec& spec = abi.ops[op.code];
    for (size_t a = 0; a < spec.args.size(); ++a) {
      const ArgSpec& arg = spec.args[a];
      uint64_t& v = op.args[a];
      if (arg.kind == ArgKind::kSlot) {
        const int r = arg.resource;
        // The block's own resource lands after what s made before pos; any other
        // names the last one s made before pos (none: repair() drops the op).
        v = v < made[r] ? have[r] + v : (have[r] ? have[r] - 1 : 0);
      } else if (arg.kind == ArgKind::kBytes) {
        s.blobs.push_back(v < block.blobs.size() ? block.blobs[v] : std::vector<uint8_t>{});
        v = s.blobs.size() - 1;  // repair() orders them
      }
    }
    op.thread = 0;
    if (spec.produces >= 0) ++made[spec.produces];
    ops.push_back(op);
  }
  // The ops after pos keep naming the resources they named.
  for (size_t i = pos; i < s.ops.size(); ++i) {
    Op& op = s.ops[i];
    if (op.code >= abi.ops.size()) continue;
    const OpSpec& spec = abi.ops[op.code];
    for (size_t a = 0; a < spec.args.size(); ++a)
      if (spec.args[a].kind == ArgKind::kSlot && op.args[a] >= have[spec.args[a].resource])
        op.args[a] += made[spec.args[a].resource];
  }
  s.ops.insert(s.ops.begin() + static_cast<std::ptrdiff_t>(pos), ops.begin(), ops.end());
  repair(s, lim);
}

Mutation mutate(Scenario& s, Rng& rng, const Limits& lim, const ByteMutator& bytes) {
  const AbiSpec& abi = abi_spec(s.abi);
  Mutation m = pick_mutation(rng);
  if (s.ops.empty()) m = Mutation::kInsertOp;
  switch (m) {
    case Mutation::kInsertOp: {
      if (s.ops.size() >= lim.max_ops) {
        s.ops.erase(s.ops.begin() + pick<size_t>(rng, 0, s.ops.size() - 1));
        m = Mutation::kDeleteOp;
        break;
      }
      size_t pos = pick<size_t>(rng, 0, s.ops.size());
      std::vector<std::vector<uint8_t>> nb;
      Op op = random_op(s, pos, rng, &nb, lim);
      // Number the new op's byte strings after the existing ones; repair() orders them.
      size_t k = 0;
      const OpSpec& spec = abi.ops[op.code];
      for (size_t a = 0; a < spec.args.size(); ++a)
        if (spec.args[a].kind == ArgKind::kBytes) {
          op.args[a] = s.blobs.size();
          s.blobs.push_back(std::move(nb[k++]));
        }
      s.ops.insert(s.ops.begin() + pos, op);
      break;
    }
    case Mutation::kDeleteOp:
      s.ops.erase(s.ops.begin() + pick<size_t>(rng, 0, s.ops.size() - 1));
      break;
    case Mutation::kDuplicateOp: {
      size_t i = pick<size_t>(rng, 0, s.ops.size() - 1);
      s.ops.insert(s.ops.begin() + i + 1, s.ops[i]);  // its byte strings are copied by repair()
      break;
    }
    case Mutation::kSwapOps: {
      size_t i = pick<size_t>(rng, 0, s.ops.size() - 1), j = pick<size_t>(rng, 0, s.ops.size() - 1);
      std::swap(s.ops[i], s.ops[j]);
      break;
    }
    case Mutation::kBoundaryArg:
    case Mutation::kNudgeArg:
    case Mutation::kCopyArg: {
      auto args = args_of(s, is_value);
      if (args.empty()) break;
      auto [i, a] = args[pick<size_t>(rng, 0, args.size() - 1)];
      uint64_t& v = s.ops[i].args[a];
      if (m == Mutation::kBoundaryArg) {
        v = boundary(rng, s.abi);
      } else if (m == Mutation::kNudgeArg) {
        static constexpr int64_t kDelta[] = {1, -1, 16, -16, 4096, -4096, 16384, -16384};
        v += static_cast<uint64_t>(kDelta[pick<size_t>(rng, 0, std::size(kDelta) - 1)]);
      } else {
        auto [j, b] = args[pick<size_t>(rng, 0, args.size() - 1)];
        v = s.ops[j].args[b];
      }
      carry_tie(s, i, a, rng);
      break;
    }
    case Mutation::kFlipFlagBit: {
      auto args = args_of(s, is_flags);
      if (args.empty()) args = args_of(s, is_value);
      if (args.empty()) break;
      auto [i, a] = args[pick<size_t>(rng, 0, args.size() - 1)];
      const ArgSpec& spec = abi.ops[s.ops[i].code].args[a];
      uint64_t bit = 1ull << pick<unsigned>(rng, 0, 63);
      if (!spec.names.empty() && chance(rng, 60)) {
        uint64_t named = spec.names[pick<size_t>(rng, 0, spec.names.size() - 1)].value;
        if (named) bit = named & (~named + 1);
      }
      s.ops[i].args[a] ^= bit;
      break;
    }
    case Mutation::kSwapSlot: {
      auto args = args_of(s, is_slot);
      if (args.empty()) break;
      auto [i, a] = args[pick<size_t>(rng, 0, args.size() - 1)];
      std::vector<uint64_t> have = produced_before(s, i);
      int res = abi.ops[s.ops[i].code].args[a].resource;
      if (have[res]) s.ops[i].args[a] = pick<uint64_t>(rng, 0, have[res] - 1);
      break;
    }
    case Mutation::kMutateBlob: {
      auto args = blob_args(s);
      if (args.empty()) break;
      auto [i, a] = args[pick<size_t>(rng, 0, args.size() - 1)];
      std::vector<uint8_t>& b = s.blobs[s.ops[i].args[a]];
      if (bytes) {
        size_t old = b.size();
        b.resize(std::max<size_t>(lim.max_blob, 1));
        size_t n = bytes(b.data(), std::max<size_t>(old, 1), b.size());
        b.resize(n);
      } else if (!b.empty()) {
        b[pick<size_t>(rng, 0, b.size() - 1)] ^= static_cast<uint8_t>(1u << pick<unsigned>(rng, 0, 7));
      }
      break;
    }
    case Mutation::kSpliceStarter: {
      std::span<const Scenario> all = starters(s.abi);
      if (all.empty()) break;
      const Scenario& from = all[pick<size_t>(rng, 0, all.size() - 1)];
      if (from.ops.empty()) break;
      // The whole starter, or its tail from a random op (its set-up left out: the
      // tail's calls then act on what s set up); the tail names what the ops
      // before it made as made before the block (splice()).
      size_t first = chance(rng, 50) ? 0 : pick<size_t>(rng, 0, from.ops.size() - 1);
      size_t n = std::min(from.ops.size() - first, lim.max_ops);
      Scenario block;
      block.abi = from.abi;
      block.blobs = from.blobs;
      block.ops.assign(from.ops.begin() + static_cast<std::ptrdiff_t>(first),
                       from.ops.begin() + static_cast<std::ptrdiff_t>(first + n));
      if (first) {
        const std::vector<uint64_t> skipped = produced_before(from, first);
        for (Op& op : block.ops) {
          const OpSpec& spec = abi.ops[op.code];
          for (size_t a = 0; a < spec.args.size(); ++a)
            if (spec.args[a].kind == ArgKind::kSlot) {
              uint64_t& v = op.args[a];
              v = v >= skipped[spec.args[a].resource] ? v - skipped[spec.args[a].resource] : ~0ull;
            }
        }
      }
      splice(s, block, pick<size_t>(rng, 0, std::min(s.ops.size(), lim.max_ops - n)), lim);
      return m;
    }
    case Mutation::kCount:
      break;
  }
  repair(s, lim);
  return m;
}

Scenario cross_over(const Scenario& a, const Scenario& b, Rng& rng, const Limits& lim) {
  Scenario c = a;
  size_t cut_a = a.ops.empty() ? 0 : pick<size_t>(rng, 0, a.ops.size());
  size_t cut_b = b.ops.empty() ? 0 : pick<size_t>(rng, 0, b.ops.size());
  c.ops.resize(cut_a);
  for (size_t i = cut_b; i < b.ops.size(); ++i) {
    Op op = b.ops[i];
    const OpSpec& spec = abi_spec(b.abi).ops[op.code];
    for (size_t k = 0; k < spec.args.size(); ++k)
      if (spec.args[k].kind == ArgKind::kBytes) {
        c.blobs.push_back(op.args[k] < b.blobs.size() ? b.blobs[op.args[k]] : std::vector<uint8_t>{});
        op.args[k] = c.blobs.size() - 1;
      }
    c.ops.push_back(op);
  }
  repair(c, lim);
  return c;
}

namespace {
// One of the ABI's starters, chosen by rng.
Scenario any_starter(Abi abi, Rng& rng) {
  std::span<const Scenario> all = starters(abi);
  if (all.size() < 2) return starter(abi);
  return all[pick<size_t>(rng, 0, all.size() - 1)];
}

size_t emit(const Scenario& s, uint8_t* out, size_t max) {
  std::vector<uint8_t> bytes = encode_binary(s);
  if (bytes.size() > max) return 0;
  std::memcpy(out, bytes.data(), bytes.size());
  return bytes.size();
}
}  // namespace

size_t custom_mutate(Abi abi, uint8_t* data, size_t size, size_t max_size, unsigned seed, const Limits& lim,
                     const ByteMutator& bytes) {
  Rng rng(seed);
  Scenario s;
  std::string err;
  if (!decode_binary({data, size}, &s, &err) || s.abi != abi) s = any_starter(abi, rng);
  s.name = "fuzz";
  s.requires_caps = 0;
  repair(s, lim);
  unsigned rounds = 1 + (chance(rng, 30) ? pick<unsigned>(rng, 1, 3) : 0);
  for (unsigned r = 0; r < rounds; ++r) mutate(s, rng, lim, bytes);
  for (int tries = 0; tries < 8; ++tries) {
    if (size_t n = emit(s, data, max_size)) return n;
    if (s.ops.empty()) break;
    s.ops.pop_back();
    repair(s, lim);
  }
  return emit(starter(abi), data, max_size);
}

size_t custom_cross_over(Abi abi, const uint8_t* d1, size_t s1, const uint8_t* d2, size_t s2, uint8_t* out,
                         size_t max_out, unsigned seed, const Limits& lim) {
  Rng rng(seed);
  Scenario a, b;
  std::string err;
  if (!decode_binary({d1, s1}, &a, &err) || a.abi != abi) a = any_starter(abi, rng);
  if (!decode_binary({d2, s2}, &b, &err) || b.abi != abi) b = any_starter(abi, rng);
  Scenario c = cross_over(a, b, rng, lim);
  c.name = "fuzz";
  c.requires_caps = 0;
  for (int tries = 0; tries < 8; ++tries) {
    if (size_t n = emit(c, out, max_out)) return n;
    if (c.ops.empty()) break;
    c.ops.pop_back();
    repair(c, lim);
  }
  return 0;
}

}  // namespace kconform::fuzz
