// The serial framing of the guest agent.
#include "targets/qemu/wire/frame.h"

#include <array>
#include <cstdio>

namespace kconform::qemu {

namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not produced, so it is garbling
}

}  // namespace

uint32_t crc32(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = kTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string encode_frame(uint64_t seq, std::string_view payload) {
  static const char* kHex = "0123456789abcdef";
  std::string out(kFrameOpen);
  out += std::to_string(seq);
  out += ' ';
  for (unsigned char b : payload) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  char crc[16];
  std::snprintf(crc, sizeof crc, " %08x", crc32(payload));
  out += crc;
  out += kFrameClose;
  out += '\n';
  return out;
}

FrameStatus decode_frame(std::string_view line, uint64_t* seq, std::string* payload) {
  size_t start = line.find(kFrameOpen);
  if (start == std::string_view::npos) return FrameStatus::kNoFrame;
  std::string_view rest = line.substr(start + kFrameOpen.size());
  // <seq>
  size_t i = 0;
  uint64_t s = 0;
  while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') {
    if (i >= 19) return FrameStatus::kMalformed;
    s = s * 10 + static_cast<uint64_t>(rest[i] - '0');
    ++i;
  }
  if (i == 0 || i >= rest.size() || rest[i] != ' ') return FrameStatus::kMalformed;
  ++i;
  // <hex payload>
  std::string bytes;
  size_t hex_start = i;
  while (i < rest.size() && hex_digit(rest[i]) >= 0) ++i;
  size_t hex_len = i - hex_start;
  if (hex_len % 2 || i >= rest.size() || rest[i] != ' ') return FrameStatus::kMalformed;
  for (size_t k = hex_start; k < hex_start + hex_len; k += 2)
    bytes += static_cast<char>(hex_digit(rest[k]) << 4 | hex_digit(rest[k + 1]));
  ++i;
  // <crc>@@
  if (rest.size() < i + 8 + kFrameClose.size()) return FrameStatus::kMalformed;
  uint32_t crc = 0;
  for (size_t k = i; k < i + 8; ++k) {
    int d = hex_digit(rest[k]);
    if (d < 0) return FrameStatus::kMalformed;
    crc = crc << 4 | static_cast<uint32_t>(d);
  }
  if (rest.substr(i + 8, kFrameClose.size()) != kFrameClose) return FrameStatus::kMalformed;
  if (crc != crc32(bytes)) return FrameStatus::kBadCrc;
  *seq = s;
  *payload = std::move(bytes);
  return FrameStatus::kOk;
}

}  // namespace kconform::qemu
