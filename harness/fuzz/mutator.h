// Structure-aware mutation of scenarios (after FuzzTest's domains): the
// fuzzers mutate the binary scenario through this, never as raw bytes, so
// every input they run is a valid scenario of the harness's ABI. What an op
// and its arguments are comes from the ABI table (harness/scenario/abi.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "harness/scenario/scenario.h"

namespace kconform::fuzz {

using Rng = std::mt19937_64;
// Mutates bytes in place up to max_size; returns the new size (LLVMFuzzerMutate's shape).
using ByteMutator = std::function<size_t(uint8_t* data, size_t size, size_t max_size)>;

struct Limits {
  size_t max_ops = 32;
  size_t max_blob = 4096;
};

// The limits of fuzz inputs of an ABI (max_ops: its table's EngineHints::fuzz_max_ops).
Limits limits_for(Abi abi);

// The kinds of mutation (one is chosen per call), for tests and statistics.
enum class Mutation : uint8_t {
  kInsertOp, kDeleteOp, kDuplicateOp, kSwapOps, kBoundaryArg, kFlipFlagBit, kSwapSlot,
  kNudgeArg, kMutateBlob, kCopyArg,
  kSpliceStarter,  // one of the ABI's starters (or its tail) inserted whole (splice())
  kCount
};

// Boundary values for an ABI: page sizes and their neighbours, loff_t and
// 32/64-bit limits, and the ABI's own (its table's EngineHints::values:
// addresses, function IDs, sizes).
std::span<const uint64_t> boundary_values(Abi abi);

// Makes s valid again after an edit: slot arguments refer to an existing
// resource (an op naming a kind nothing produced yet is dropped), byte strings
// are referenced in order, at most lim.max_ops ops.
void repair(Scenario& s, const Limits& lim);

// Inserts block's ops at pos (clamped to s's length) and repairs: block's byte
// strings are copied; a slot argument of block that names a resource block made
// itself names that one where it lands (after the resources s makes before pos),
// one naming a resource block does not make names the last one made before pos;
// the ops of s after pos keep naming the resources they named. Ops past
// lim.max_ops are dropped from the end.
void splice(Scenario& s, const Scenario& block, size_t pos, const Limits& lim);

// After a value mutation set s.ops[op].args[arg]: half the time (by rng) the
// argument tied to it (EngineHints::ties) takes the same value, in the nearest
// earlier op of the tie's writing kind if a call's side changed, or in the
// nearest later call if the writer's side changed. kBoundaryArg, kNudgeArg and
// kCopyArg call it.
void carry_tie(Scenario& s, size_t op, size_t arg, Rng& rng);

// One mutation of s (valid in, valid out). Returns which was applied.
Mutation mutate(Scenario& s, Rng& rng, const Limits& lim, const ByteMutator& bytes = {});

// A child of a and b: a prefix of a's ops followed by a suffix of b's, repaired.
Scenario cross_over(const Scenario& a, const Scenario& b, Rng& rng, const Limits& lim);

// The ABI's starters (its table's EngineHints::starters), parsed once, in
// table order, each named "fuzz".
std::span<const Scenario> starters(Abi abi);
// The first starter: what an empty fuzz input runs.
Scenario starter(Abi abi);

// The libFuzzer/AFL++ custom-mutator bodies: decode (or start from one of the
// ABI's starters, chosen by the seed), mutate, encode; the result fits
// max_size. Deterministic given the input and the seed. Return the new size.
size_t custom_mutate(Abi abi, uint8_t* data, size_t size, size_t max_size, unsigned seed, const Limits& lim,
                     const ByteMutator& bytes);
size_t custom_cross_over(Abi abi, const uint8_t* d1, size_t s1, const uint8_t* d2, size_t s2, uint8_t* out,
                         size_t max_out, unsigned seed, const Limits& lim);

}  // namespace kconform::fuzz
