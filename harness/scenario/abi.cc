// ABI table look-up and the canonical text of one argument or op.
#include "harness/scenario/abi.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>

namespace kconform {

namespace gmem {
extern const AbiSpec kGmemAbi;
}
namespace ffa {
extern const AbiSpec kFfaAbi;
}

const AbiSpec& abi_spec(Abi abi) {
  switch (abi) {
    case Abi::kFfa:
      return ffa::kFfaAbi;
    case Abi::kGmem:
    default:
      return gmem::kGmemAbi;
  }
}

const AbiSpec* abi_spec_by_name(std::string_view name) {
  if (name == gmem::kGmemAbi.name) return &gmem::kGmemAbi;
  if (name == ffa::kFfaAbi.name) return &ffa::kFfaAbi;
  return nullptr;
}

std::span<const AbiSpec* const> all_abis() {
  static const AbiSpec* const kAll[] = {&gmem::kGmemAbi, &ffa::kFfaAbi};
  return kAll;
}

uint64_t byte_count(const AbiSpec& abi, const Op& op) {
  if (op.code >= abi.ops.size()) return 0;
  const ByteCount& b = abi.ops[op.code].bytes;
  if (b.arg < 0) return 0;
  if (b.unless_arg >= 0 && (op.args[b.unless_arg] & b.unless_mask)) return 0;
  return op.args[b.arg];
}

std::optional<uint8_t> op_code_by_name(const AbiSpec& abi, std::string_view name) {
  for (size_t i = 0; i < abi.ops.size(); ++i)
    if (name == abi.ops[i].name) return static_cast<uint8_t>(i);
  return std::nullopt;
}

namespace {

std::string format_int(uint64_t v) {
  // As printf's "%llu" below 4096, else "0x%llx".
  char buf[32] = {'0', 'x'};
  const bool hex = v >= 4096;
  const std::to_chars_result r = std::to_chars(buf + (hex ? 2 : 0), buf + sizeof buf, v, hex ? 16 : 10);
  return std::string(buf, r.ptr);
}

std::string format_hex_bytes(const std::vector<uint8_t>& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(4 + 2 * bytes.size(), '\0');
  std::memcpy(out.data(), "hex:", 4);
  char* p = out.data() + 4;
  for (uint8_t b : bytes) {
    *p++ = kDigits[b >> 4];
    *p++ = kDigits[b & 15];
  }
  return out;
}

}  // namespace

std::string format_arg(const ArgSpec& spec, uint64_t value, const Scenario& s) {
  switch (spec.kind) {
    case ArgKind::kInt:
    case ArgKind::kSlot:
      return format_int(value);
    case ArgKind::kEnum:
      for (const NamedValue& nv : spec.names)
        if (nv.value == value) return nv.name;
      return format_int(value);
    case ArgKind::kFlags: {
      if (value == 0) return "0";
      std::string out;
      uint64_t rest = value;
      for (const NamedValue& nv : spec.names) {
        if (nv.value != 0 && (rest & nv.value) == nv.value) {
          if (!out.empty()) out += '|';
          out += nv.name;
          rest &= ~nv.value;
        }
      }
      if (rest != 0) {
        if (!out.empty()) out += '|';
        char buf[32];
        std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(rest));
        out += buf;
      }
      return out;
    }
    case ArgKind::kBytes:
      if (value < s.blobs.size()) return format_hex_bytes(s.blobs[value]);
      return "hex:";
  }
  return format_int(value);
}

std::string format_op(const Scenario& s, size_t index) {
  const AbiSpec& abi = abi_spec(s.abi);
  const Op& op = s.ops[index];
  if (op.code >= abi.ops.size()) return "op" + std::to_string(op.code);
  const OpSpec& spec = abi.ops[op.code];
  std::string out = spec.name;
  for (size_t a = 0; a < spec.args.size(); ++a) {
    const ArgSpec& arg = spec.args[a];
    if (arg.optional && op.args[a] == arg.dflt && arg.kind != ArgKind::kBytes) continue;
    out += ' ';
    out += arg.name;
    out += '=';
    out += format_arg(arg, op.args[a], s);
  }
  return out;
}

}  // namespace kconform
