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

inline constexpr uint8_t kScenarioVersion = 1;
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
struct Op {
  uint8_t code = 0;
  std::array<uint64_t, kMaxArgs> args{};

  bool operator==(const Op&) const = default;
};

struct Scenario {
  uint8_t version = kScenarioVersion;
  Abi abi = Abi::kGmem;
  std::string name;
  uint32_t requires_caps = 0;  // bit i: the ABI's capability i (AbiSpec::capabilities)
  std::vector<Op> ops;
  std::vector<std::vector<uint8_t>> blobs;

  bool operator==(const Scenario&) const = default;
};

// Where a scenario came from, for error messages and verdict records.
struct ScenarioSource {
  std::string path;  // file path, or "<memory>"
};

}  // namespace kconform
