// The canonical scenario: a versioned sequence of operations on one ABI.
//
// Every engine in kconform (models, targets, runner, fuzzers, corpora,
// reports) speaks this one type. It has two encodings that round-trip
// exactly: a compact binary form (codec_binary.h, what fuzzers mutate) and a
// readable text form (codec_text.h, what corpora and reports hold). What each
// operation and argument means is declared once, in the ABI table (abi.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kconform {

// Version 1: a plain sequence. Version 2 (the newest this build reads and
// writes) adds concurrent groups (Op::thread) and repetition
// (Scenario::repeat); a scenario that uses neither is written as version 1,
// so every version-1 file reads and writes back unchanged.
inline constexpr uint8_t kScenarioVersion = 2;
inline constexpr uint8_t kScenarioVersionPlain = 1;
inline constexpr uint8_t kMaxThreads = 8;        // thread numbers 1..8 in a group
inline constexpr uint32_t kMaxRepeat = 1000000;  // repeat 1..1000000
inline constexpr size_t kMaxArgs = 16;  // ffa's tx_mem_desc has 16
inline constexpr size_t kMaxOps = 4096;
inline constexpr size_t kMaxBlobBytes = 1 << 20;
inline constexpr size_t kMaxNameBytes = 255;

enum class Abi : uint8_t {
  kGmem = 1,  // guest_memfd (KVM_CREATE_GUEST_MEMFD and the file it returns)
  kFfa = 2,   // FF-A memory management through pKVM's EL2 proxy
};

// One call. args[] are in the order of the op's ArgSpec list; an argument of
// kind kBytes holds an index into Scenario::blobs.
//
// thread: 0 for the main sequence. A maximal run of consecutive ops with a
// non-zero thread is a concurrent group: the ops of one thread run in their
// order, the group's threads (at least two) run concurrently, and the op
// after the group starts when all of them have ended (harness/runner/linearize.h
// judges a group).
struct Op {
  uint8_t code = 0;
  uint8_t thread = 0;
  std::array<uint64_t, kMaxArgs> args{};

  bool operator==(const Op&) const = default;
};

struct Scenario {
  uint8_t version = kScenarioVersionPlain;  // 2 when it has a group or repeat > 1
  Abi abi = Abi::kGmem;
  std::string name;
  uint32_t requires_caps = 0;  // bit i: the ABI's capability i (AbiSpec::capabilities)
  // How many times a runner runs the scenario (each time from nothing, with
  // different timing in its concurrent groups); 1 unless version 2.
  uint32_t repeat = 1;
  std::vector<Op> ops;
  std::vector<std::vector<uint8_t>> blobs;

  bool operator==(const Scenario&) const = default;
};

// The first op after the concurrent group that op `first` starts (its thread
// is not 0): the group is [first, group_end(s, first)).
inline size_t group_end(const Scenario& s, size_t first) {
  size_t i = first;
  while (i < s.ops.size() && s.ops[i].thread != 0) ++i;
  return i;
}

// Whether the scenario uses anything of version 2.
inline bool uses_version2(const Scenario& s) {
  if (s.repeat != 1) return true;
  for (const Op& op : s.ops)
    if (op.thread != 0) return true;
  return false;
}

// The timing seed of run rep (0-based) of s: what a target varies its
// concurrent groups' jitter by (Target::exec_group). The host runner and the
// QEMU agent use the same one, so a run can be told again. Bit 0 is the
// run's parity: the 1st, 3rd, ... runs force a race window (forces_window).
inline uint64_t jitter_seed(const Scenario& s, uint32_t rep) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (char c : s.name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return ((h ^ (0x9e3779b97f4a7c15ull * (rep + 1ull))) & ~1ull) | (rep & 1u);
}

// Whether the run with this timing seed holds a write's source page back in
// the middle of the copy until the group's other threads are done or blocked
// (models/gmem/SPEC.md HARNESS:WINDOW; targets/host_gmem/window.h). Runs
// alternate: a forced window, then jitter only.
inline bool forces_window(uint64_t seed) { return (seed & 1) == 0; }

// Where a scenario came from, for error messages and verdict records.
struct ScenarioSource {
  std::string path;  // file path, or "<memory>"
};

}  // namespace kconform
