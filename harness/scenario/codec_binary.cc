// The binary scenario encoding (see codec.h for the layout).
#include <algorithm>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"

namespace kconform {
namespace {

void put_uleb(std::vector<uint8_t>& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(v ? (b | 0x80) : b);
  } while (v);
}

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool u8(uint8_t* v) {
    if (pos_ >= b_.size()) return false;
    *v = b_[pos_++];
    return true;
  }
  // Minimal LEB128 only: a final byte of 0 after another byte is rejected.
  bool uleb(uint64_t* v, std::string* why) {
    uint64_t r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= b_.size()) {
        *why = "truncated varint";
        return false;
      }
      uint8_t byte = b_[pos_++];
      if (shift == 63 && (byte & 0x7e)) {
        *why = "varint overflows 64 bits";
        return false;
      }
      r |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) {
        if (byte == 0 && shift != 0) {
          *why = "varint not minimally encoded";
          return false;
        }
        *v = r;
        return true;
      }
    }
    *why = "varint longer than 10 bytes";
    return false;
  }
  bool bytes(size_t n, const uint8_t** p) {
    if (b_.size() - pos_ < n) return false;
    *p = b_.data() + pos_;
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }
  bool done() const { return pos_ == b_.size(); }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<uint8_t> encode_binary(const Scenario& s) {
  std::vector<uint8_t> out(kBinaryMagic, kBinaryMagic + 4);
  out.push_back(s.version);
  out.push_back(static_cast<uint8_t>(s.abi));
  put_uleb(out, s.requires_caps);
  if (s.version >= 2) put_uleb(out, s.repeat);
  put_uleb(out, s.name.size());
  out.insert(out.end(), s.name.begin(), s.name.end());
  put_uleb(out, s.ops.size());
  const AbiSpec& abi = abi_spec(s.abi);
  for (const Op& op : s.ops) {
    out.push_back(op.code);
    if (s.version >= 2) out.push_back(op.thread);
    if (op.code >= abi.ops.size()) continue;
    const OpSpec& spec = abi.ops[op.code];
    for (size_t a = 0; a < spec.args.size(); ++a) {
      if (spec.args[a].kind == ArgKind::kBytes) {
        const auto& blob = s.blobs.at(op.args[a]);
        put_uleb(out, blob.size());
        out.insert(out.end(), blob.begin(), blob.end());
      } else {
        put_uleb(out, op.args[a]);
      }
    }
  }
  return out;
}

bool decode_binary(std::span<const uint8_t> bytes, Scenario* out, std::string* error) {
  Reader r(bytes);
  Scenario s;
  std::string why;
  auto fail = [&](const std::string& msg) {
    *error = "byte " + std::to_string(r.pos()) + ": " + msg;
    return false;
  };
  const uint8_t* magic;
  if (!r.bytes(4, &magic) || std::string_view(reinterpret_cast<const char*>(magic), 4) !=
                                 std::string_view(kBinaryMagic, 4))
    return fail("not a binary scenario (magic KCSN missing)");
  uint8_t abi_byte;
  if (!r.u8(&s.version) || !r.u8(&abi_byte)) return fail("truncated header");
  if (s.version < kScenarioVersionPlain || s.version > kScenarioVersion)
    return fail("field 'version': " + std::to_string(s.version) + " is not supported");
  s.abi = static_cast<Abi>(abi_byte);
  if (s.abi != Abi::kGmem && s.abi != Abi::kFfa) return fail("field 'abi': unknown ABI " + std::to_string(abi_byte));
  uint64_t v;
  if (!r.uleb(&v, &why)) return fail("field 'requires': " + why);
  if (v > 0xffffffffull) return fail("field 'requires': too large");
  s.requires_caps = static_cast<uint32_t>(v);
  if (s.version >= 2) {
    if (!r.uleb(&v, &why)) return fail("field 'repeat': " + why);
    if (v < 1 || v > kMaxRepeat)
      return fail("field 'repeat': " + std::to_string(v) + " is out of range 1.." + std::to_string(kMaxRepeat));
    s.repeat = static_cast<uint32_t>(v);
  }
  if (!r.uleb(&v, &why)) return fail("field 'name': " + why);
  if (v > kMaxNameBytes) return fail("field 'name': longer than 255 bytes");
  const uint8_t* name;
  if (!r.bytes(v, &name)) return fail("field 'name': truncated");
  s.name.assign(reinterpret_cast<const char*>(name), v);
  uint64_t nops;
  if (!r.uleb(&nops, &why)) return fail("field 'ops': " + why);
  if (nops > kMaxOps) return fail("field 'ops': more than " + std::to_string(kMaxOps));
  const AbiSpec& abi = abi_spec(s.abi);
  s.ops.reserve(std::min<uint64_t>(nops, bytes.size() - r.pos()));  // an op takes at least a byte
  for (uint64_t i = 0; i < nops; ++i) {
    Op op;
    if (!r.u8(&op.code)) return fail("op " + std::to_string(i) + ": truncated");
    if (s.version >= 2 && !r.u8(&op.thread)) return fail("op " + std::to_string(i) + " field 'thread': truncated");
    if (op.code >= abi.ops.size())
      return fail("op " + std::to_string(i) + ": unknown op code " + std::to_string(op.code));
    const OpSpec& spec = abi.ops[op.code];
    for (size_t a = 0; a < spec.args.size(); ++a) {
      // The field's name is spelled out only for an error (this runs on every fuzz input).
      auto where = [&] {
        return "op " + std::to_string(i) + " (" + std::string(spec.name) + ") field '" +
               std::string(spec.args[a].name) + "': ";
      };
      if (!r.uleb(&v, &why)) return fail(where() + why);
      if (spec.args[a].kind == ArgKind::kBytes) {
        if (v > kMaxBlobBytes) return fail(where() + "byte string larger than 1 MiB");
        const uint8_t* p;
        if (!r.bytes(v, &p)) return fail(where() + "byte string truncated");
        op.args[a] = s.blobs.size();
        s.blobs.emplace_back(p, p + v);
      } else {
        op.args[a] = v;
      }
    }
    s.ops.push_back(op);
  }
  if (!r.done()) return fail("trailing bytes after the last op");
  if (!validate(s, &why)) {
    *error = why;
    return false;
  }
  *out = std::move(s);
  return true;
}

}  // namespace kconform
