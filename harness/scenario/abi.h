// Declarative description of an ABI's operations, separate from the engines
// that use it (after syzkaller's sys/linux/*.txt). The codecs, the runner and
// the fuzzers read these tables; a new ABI adds a table and never touches them.
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

struct OpSpec {
  const char* name;
  std::span<const ArgSpec> args;
  int produces = -1;  // resource kind this op creates (one new slot per op), or -1
  const char* doc;
};

struct AbiSpec {
  Abi abi;
  const char* name;
  std::span<const OpSpec> ops;
  std::span<const char* const> resources;     // resource kind names
  std::span<const NamedValue> capabilities;   // bit index -> capability name
};

// The tables of every ABI kconform knows.
const AbiSpec& abi_spec(Abi abi);
const AbiSpec* abi_spec_by_name(std::string_view name);
std::optional<uint8_t> op_code_by_name(const AbiSpec& abi, std::string_view name);

// Helpers shared by the codecs and the verdict writer.
std::string format_arg(const ArgSpec& spec, uint64_t value, const Scenario& s);
// Returns "name a=1 b=MMAP|INIT_SHARED ...", the canonical text of one op.
std::string format_op(const Scenario& s, size_t index);

}  // namespace kconform
