// The agent's wire format on a serial line, robust against kernel log lines
// that interleave with it (docs: targets/qemu/README.md):
//
//   @@KC <seq> <payload as lowercase hex> <crc32 of the payload bytes, 8 hex>@@
//
// seq counts frames from 0 so the host sees a lost frame as a gap. The host
// decoder (harness/driver/kconform/qemu.py) implements the same format.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kconform::qemu {

inline constexpr std::string_view kFrameOpen = "@@KC ";
inline constexpr std::string_view kFrameClose = "@@";

// CRC-32 (IEEE 802.3, reflected, as zlib.crc32).
uint32_t crc32(std::string_view bytes);

// One frame line, newline included.
std::string encode_frame(uint64_t seq, std::string_view payload);

enum class FrameStatus {
  kOk,
  kNoFrame,    // the line holds no "@@KC " at all (a kernel log line)
  kMalformed,  // a frame start, but the fields do not parse (cut or garbled)
  kBadCrc,     // the fields parse but the CRC does not match the payload
};

// Finds and checks the first frame in line (which may carry text before and
// after it, e.g. a kernel message printed on the same line).
FrameStatus decode_frame(std::string_view line, uint64_t* seq, std::string* payload);

}  // namespace kconform::qemu
