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

// As printf's "%llu" below 4096, else "0x%llx".
void put_int(std::string& out, uint64_t v) {
  char buf[32] = {'0', 'x'};
  const bool hex = v >= 4096;
  const std::to_chars_result r = std::to_chars(buf + (hex ? 2 : 0), buf + sizeof buf, v, hex ? 16 : 10);
  out.append(buf, r.ptr);
}

// Two hex digits per byte from one table look-up (a tx op of thousands of
// constituents is tens of KiB of hex: corpora/ffa/large.kcs).
struct HexPairs {
  char pair[256][2];
  constexpr HexPairs() : pair{} {
    constexpr char kDigits[] = "0123456789abcdef";
    for (int b = 0; b < 256; ++b) {
      pair[b][0] = kDigits[b >> 4];
      pair[b][1] = kDigits[b & 15];
    }
  }
};
constexpr HexPairs kHexPairs;

void put_hex_bytes(std::string& out, const std::vector<uint8_t>& bytes) {
  const size_t at = out.size();
  out.resize(at + 4 + 2 * bytes.size());
  char* p = out.data() + at;
  std::memcpy(p, "hex:", 4);
  p += 4;
  for (uint8_t b : bytes) {
    std::memcpy(p, kHexPairs.pair[b], 2);
    p += 2;
  }
}

}  // namespace

void append_arg(std::string& out, const ArgSpec& spec, uint64_t value, const Scenario& s) {
  switch (spec.kind) {
    case ArgKind::kInt:
    case ArgKind::kSlot:
      return put_int(out, value);
    case ArgKind::kEnum:
      for (const NamedValue& nv : spec.names)
        if (nv.value == value) {
          out += nv.name;
          return;
        }
      return put_int(out, value);
    case ArgKind::kFlags: {
      if (value == 0) {
        out += '0';
        return;
      }
      const size_t at = out.size();
      uint64_t rest = value;
      for (const NamedValue& nv : spec.names) {
        if (nv.value != 0 && (rest & nv.value) == nv.value) {
          if (out.size() != at) out += '|';
          out += nv.name;
          rest &= ~nv.value;
        }
      }
      if (rest != 0) {
        if (out.size() != at) out += '|';
        char buf[32];
        std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(rest));
        out += buf;
      }
      return;
    }
    case ArgKind::kBytes:
      if (value < s.blobs.size()) return put_hex_bytes(out, s.blobs[value]);
      out += "hex:";
      return;
  }
  put_int(out, value);
}

std::string format_arg(const ArgSpec& spec, uint64_t value, const Scenario& s) {
  std::string out;
  append_arg(out, spec, value, s);
  return out;
}

void format_op(const Scenario& s, size_t index, std::string* out) {
  const AbiSpec& abi = abi_spec(s.abi);
  const Op& op = s.ops[index];
  out->clear();
  if (op.code >= abi.ops.size()) {
    *out += "op";
    *out += std::to_string(op.code);
    return;
  }
  const OpSpec& spec = abi.ops[op.code];
  *out += spec.name;
  for (size_t a = 0; a < spec.args.size(); ++a) {
    const ArgSpec& arg = spec.args[a];
    if (arg.optional && op.args[a] == arg.dflt && arg.kind != ArgKind::kBytes) continue;
    *out += ' ';
    *out += arg.name;
    *out += '=';
    append_arg(*out, arg, op.args[a], s);
  }
}

std::string format_op(const Scenario& s, size_t index) {
  std::string out;
  format_op(s, index, &out);
  return out;
}

}  // namespace kconform
