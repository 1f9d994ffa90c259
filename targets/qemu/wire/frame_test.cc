// The agent's serial framing: round trips, and what kernel log lines,
// truncation and bit flips do to a frame.
#include "targets/qemu/wire/frame.h"

#include <gtest/gtest.h>

namespace kconform::qemu {
namespace {

TEST(Crc32, MatchesZlib) {
  EXPECT_EQ(crc32(""), 0u);
  EXPECT_EQ(crc32("123456789"), 0xCBF43926u);  // the CRC-32 check value
}

TEST(Frame, RoundTrips) {
  for (std::string payload : {std::string(), std::string("{\"t\":\"hello\"}"),
                              std::string("\0\xff\n@@KC 1 00 00000000@@", 23)}) {
    std::string line = encode_frame(42, payload);
    ASSERT_EQ(line.back(), '\n');
    uint64_t seq = 0;
    std::string got;
    ASSERT_EQ(decode_frame(line, &seq, &got), FrameStatus::kOk) << line;
    EXPECT_EQ(seq, 42u);
    EXPECT_EQ(got, payload);
  }
}

TEST(Frame, ExactForm) {
  EXPECT_EQ(encode_frame(7, "ab"), "@@KC 7 6162 9e83486d@@\n");
}

TEST(Frame, KernelLogLineIsNoFrame) {
  uint64_t seq;
  std::string p;
  EXPECT_EQ(decode_frame("[    4.158895] reboot: Power down", &seq, &p), FrameStatus::kNoFrame);
  EXPECT_EQ(decode_frame("", &seq, &p), FrameStatus::kNoFrame);
}

TEST(Frame, TextAroundTheFrameIsIgnored) {
  std::string line = "[ 1.0] kvm: x\r" + encode_frame(3, "xyz");
  line.insert(line.size() - 1, "\r");  // CR before the newline (a tty's ONLCR)
  uint64_t seq = 0;
  std::string p;
  ASSERT_EQ(decode_frame(line, &seq, &p), FrameStatus::kOk);
  EXPECT_EQ(p, "xyz");
}

TEST(Frame, EveryTruncationIsRejected) {
  std::string line = encode_frame(12, "{\"t\":\"op\",\"s\":1}");
  line.pop_back();
  for (size_t n = 0; n < line.size(); ++n) {
    uint64_t seq;
    std::string p;
    FrameStatus st = decode_frame(line.substr(0, n), &seq, &p);
    EXPECT_NE(st, FrameStatus::kOk) << n;
  }
}

TEST(Frame, EveryBitFlipIsRejected) {
  std::string line = encode_frame(5, "{\"t\":\"op\",\"s\":1,\"v\":-22}");
  size_t open = line.find("@@KC ") + 5;  // flips inside "@@KC " make it not a frame
  for (size_t i = open; i + 1 < line.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = line;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      uint64_t seq;
      std::string p;
      FrameStatus st = decode_frame(bad, &seq, &p);
      if (st == FrameStatus::kOk) {
        // Only a flip in the sequence number's digits can survive the CRC
        // (the host sees it as a gap or a repeat).
        EXPECT_LT(i, line.find(' ', open)) << "byte " << i << " bit " << bit;
      }
    }
  }
}

TEST(Frame, KernelMessageInsideAFrameIsRejected) {
  std::string line = encode_frame(9, "{\"t\":\"op\",\"s\":1}");
  std::string cut = line.substr(0, 20) + "[   5.1] BUG: kernel NULL pointer" + line.substr(20);
  uint64_t seq;
  std::string p;
  EXPECT_NE(decode_frame(cut, &seq, &p), FrameStatus::kOk);
}

}  // namespace
}  // namespace kconform::qemu
