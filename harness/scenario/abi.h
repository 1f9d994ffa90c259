// Declarative description of an ABI's operations, separate from the engines
// that use it (after syzkaller's sys/linux/*.txt). The codecs, the runner and
// the fuzzers read these tables; a new ABI adds a table and never touches them.
// What an engine needs to know about an ABI beyond names and kinds (which
// argument is a byte count, which resource is costly, the refusal limit, the
// values and byte strings worth trying, where to start) is data here too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "harness/scenario/scenario.h"

namespace kconform {

enum class ArgKind : uint8_t {
  kInt,    // an unsigned 64-bit integer
  kFlags,  // a bit set; named bits print by name, the rest in hex
  kEnum,   // one value; known values print by name
  kSlot,   // the index of a resource produced by an earlier op
  kBytes,  // a byte string (index into Scenario::blobs)
};

struct NamedValue {
  const char* name;
  uint64_t value;
};

struct ArgSpec {
  const char* name;
  ArgKind kind;
  int resource = -1;                   // kSlot: which resource kind it refers to
  std::span<const NamedValue> names{};  // kFlags/kEnum: symbolic names
  bool optional = false;               // may be omitted in text; then takes dflt
  uint64_t dflt = 0;
};

// How many bytes an op makes the target materialise (copy, read, store or
// allocate): argument `arg` (-1: none), unless argument `unless_arg` has a bit
// of `unless_mask` set (fallocate's len, unless mode has PUNCH_HOLE).
struct ByteCount {
  int arg = -1;
  int unless_arg = -1;
  uint64_t unless_mask = 0;
};

struct OpSpec {
  const char* name;
  std::span<const ArgSpec> args;
  int produces = -1;  // resource kind this op creates (one new slot per op), or -1
  const char* doc;
  ByteCount bytes{};
};

// One field of the records that an ABI's byte strings usually hold (FF-A:
// address ranges), for engines that make byte strings: `bytes` bytes, little
// endian; a typical value is lo + step * k for k in [0, steps].
struct RecordField {
  uint8_t bytes;
  uint64_t lo, step, steps;
};

// Two arguments that name the same place (ArgTie): a call's `arg` reads what
// the nearest earlier harness op `from_op` wrote at its `from_arg`.
struct ArgTie {
  const char* op;
  const char* arg;
  const char* from_op;
  const char* from_arg;
};

// What the engines that make and bound inputs (harness/fuzz: the fuzz runner
// and the mutator) know of an ABI beyond its ops.
struct EngineHints {
  // A resource whose every creation is costly on a real target (a VM), -1:
  // none. Fuzz inputs create few (FuzzConfig::max_costly).
  int costly_resource = -1;
  // Every target of the ABI refuses an op whose byte count (ByteCount) is
  // above this without running it (0: no such limit).
  uint64_t refused_bytes_above = 0;
  // Argument values worth trying beyond the common ones (page sizes, 32- and
  // 64-bit limits): the ABI's addresses, IDs, sizes.
  std::span<const uint64_t> values{};
  // Byte strings are usually 1..max_records records of these fields (none:
  // plain bytes).
  std::span<const RecordField> record{};
  unsigned max_records = 0;
  // Small valid scenarios, in text form (one op a line): generic uses of the
  // ABI, each a complete set-up and call the way the specification describes
  // them. The mutator starts from one of them (chosen by its seeded rng) when an
  // input does not decode or is empty, and splices one in whole
  // (Mutation::kSpliceStarter) so that a call that needs several ops of set-up
  // is reached from nothing. The first is what an empty fuzz input runs. A
  // short list: each should reach calls the others do not.
  std::span<const char* const> starters{};
  // Arguments tied to where an earlier op put something (FF-A: FFA_MEM_RECLAIM2's
  // TX offset and tx_constituents' offset). When a value mutation changes one
  // side, the mutator moves the other side with it half the time, so the
  // call's edge cases (a list ending at the buffer's end) are tried with real
  // records there rather than with whatever the buffer held.
  std::span<const ArgTie> ties{};
  // How many ops a fuzz input may have.
  size_t fuzz_max_ops = 32;
};

struct AbiSpec {
  Abi abi;
  const char* name;
  std::span<const OpSpec> ops;
  std::span<const char* const> resources;     // resource kind names
  std::span<const NamedValue> capabilities;   // bit index -> capability name
  EngineHints engine{};
};

// The tables of every ABI kconform knows.
const AbiSpec& abi_spec(Abi abi);
const AbiSpec* abi_spec_by_name(std::string_view name);
std::span<const AbiSpec* const> all_abis();  // in Abi order
std::optional<uint8_t> op_code_by_name(const AbiSpec& abi, std::string_view name);

// The bytes op makes the target materialise (its ByteCount; 0 if none).
uint64_t byte_count(const AbiSpec& abi, const Op& op);

// Helpers shared by the codecs and the verdict writer.
std::string format_arg(const ArgSpec& spec, uint64_t value, const Scenario& s);
void append_arg(std::string& out, const ArgSpec& spec, uint64_t value, const Scenario& s);
// Returns "name a=1 b=MMAP|INIT_SHARED ...", the canonical text of one op.
std::string format_op(const Scenario& s, size_t index);
// The same into *out (replacing what it held, its capacity reused: the
// runner formats every op it runs).
void format_op(const Scenario& s, size_t index, std::string* out);

}  // namespace kconform
