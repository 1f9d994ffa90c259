// The two encodings of a scenario and the checks both share.
//
// Text form (what corpora and reports hold), one or more scenarios a file:
//
//   kconform-scenario 1
//   abi gmem
//   name gmem/write/unaligned-offset
//   requires gmem write
//   create_vm
//   create_gmem vm=0 size=0x200000 flags=MMAP|INIT_SHARED|WRITE
//   pwrite gmem=0 offset=0x800 len=0x1000
//
// Version 2 adds concurrency (harness/scenario/scenario.h): a line
// `repeat N` (after `requires`, before the ops) runs the scenario N times, and
// an op line may start with `@T`, its thread (1..8; no prefix: thread 0, the
// main sequence). Consecutive ops with a thread form a concurrent group of at
// least two threads:
//
//   kconform-scenario 2
//   ...
//   repeat 50
//   @1 pwrite gmem=0 offset=0 len=0x2000 pattern=3
//   @2 fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x1000
//   load map=0 offset=0 len=0x1000
//
// '#' starts a comment; blank lines are ignored. Integers are decimal or 0x
// hex, with an optional K/M/G suffix (x1024); flags are names or numbers
// joined by '|'; enums a name or a number; slots the index of an earlier
// op's resource; byte strings hex:0011aa. An optional argument may be left
// out and takes its default. format_text() prints the canonical form
// (arguments in table order, defaults left out, numbers below 4096 in
// decimal, others in hex); parse(format(s)) == s for every valid scenario.
//
// Binary form (what fuzzers mutate), one scenario a file:
//   "KCSN" | version u8 | abi u8 | requires uleb | [v2: repeat uleb] |
//   name_len uleb | name | n_ops uleb | n_ops x (code u8 | [v2: thread u8] |
//   each argument: uleb, or for byte strings uleb length + bytes)
// Varints must be minimal and nothing may follow the last op, so
// encode(decode(b)) == b for every b that decodes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/scenario/scenario.h"

namespace kconform {

inline constexpr char kBinaryMagic[4] = {'K', 'C', 'S', 'N'};
inline constexpr std::string_view kTextMagic = "kconform-scenario";

// Checks what both codecs require: known op codes, slots that refer to a
// resource an earlier op produced, byte strings referenced in order, once
// each, within the size limits. On failure names the op index, op and field.
bool validate(const Scenario& s, std::string* error);

// Text codec. path is used only in error messages ("path:line: ...").
bool parse_text(std::string_view text, std::string_view path, std::vector<Scenario>* out,
                std::string* error);
std::string format_text(const Scenario& s);

// Binary codec.
std::vector<uint8_t> encode_binary(const Scenario& s);
bool decode_binary(std::span<const uint8_t> bytes, Scenario* out, std::string* error);

// Reads a scenario file in either form (binary files start with "KCSN").
// Errors are prefixed with the path.
bool load_scenario_file(const std::string& path, std::vector<Scenario>* out, std::string* error);

}  // namespace kconform
