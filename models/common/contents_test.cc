// The text form of Contents is lossless: pattern, zero and raw bytes, pages
// moved by whole pages, and malformed text is refused with the field named.
#include "models/common/contents.h"

#include <gtest/gtest.h>

#include "harness/scenario/pattern.h"

namespace kconform {
namespace {

constexpr uint64_t kPage = 4096;

PageContent page_of(uint64_t slot, uint64_t index, uint64_t seed, uint64_t start) {
  PageContent pg{slot, index, std::vector<uint8_t>(kPage)};
  fill_pattern(seed, start, pg.bytes);
  return pg;
}

Contents round_trip(const Contents& c, std::span<const PatternHint> hints, std::string* text) {
  *text = encode_contents(c, hints, kPage);
  Contents back;
  std::string error;
  EXPECT_TRUE(decode_contents(*text, kPage, &back, &error)) << error;
  return back;
}

TEST(Contents, PatternPagesRoundTripAsOneRun) {
  Contents c;
  c.files.push_back({0, true, "", true, 4 * kPage, 0, 4});
  c.files.push_back({1, false, "no MMAP_flag", false, 0, 0, 0});
  c.pages.push_back(page_of(0, 1, 7, 0));
  const PatternHint hints[] = {{7, kPage, 2 * kPage}};
  std::string text;
  Contents back = round_trip(c, hints, &text);
  EXPECT_EQ(text, "f 0 4000 0 4|n 1 no%20MMAP_flag|p 0 1 s7@0+1000");
  ASSERT_EQ(back.pages.size(), 1u);
  EXPECT_EQ(back.pages[0].bytes, c.pages[0].bytes);
  EXPECT_EQ(back.files[1].why_not, "no MMAP_flag");
  EXPECT_TRUE(back.files[0].has_size);
}

TEST(Contents, PagesMovedByWholePagesAreFoundWithoutAHintAtThatOffset) {
  // Bytes of a stream written at offset 0 of another file, now at page 3.
  Contents c;
  c.pages.push_back(page_of(1, 3, 9, 2 * kPage));
  const PatternHint hints[] = {{9, 0, 4 * kPage}};
  std::string text;
  Contents back = round_trip(c, hints, &text);
  EXPECT_EQ(text, "p 1 3 s9@2000+1000");
  EXPECT_EQ(back.pages[0].bytes, c.pages[0].bytes);
}

TEST(Contents, MixedZeroPatternAndRawBytesRoundTrip) {
  Contents c;
  PageContent pg{2, 0, std::vector<uint8_t>(kPage, 0)};
  fill_pattern(5, 0, std::span<uint8_t>(pg.bytes.data() + 100, 200));
  pg.bytes[1000] = 0xab;
  pg.bytes[1001] = 0xcd;
  pg.bytes[kPage - 1] = 0x01;
  c.pages.push_back(pg);
  const PatternHint hints[] = {{5, 100, 200}};
  std::string text;
  Contents back = round_trip(c, hints, &text);
  EXPECT_NE(text.find("habcd"), std::string::npos) << text;
  EXPECT_EQ(back.pages[0].bytes, pg.bytes);
}

TEST(Contents, MalformedTextNamesTheItemAndField) {
  Contents out;
  std::string error;
  EXPECT_FALSE(decode_contents("f 0 4000 0 4|p 0 1 s7@0+fff", kPage, &out, &error));
  EXPECT_NE(error.find("item 2"), std::string::npos) << error;
  EXPECT_NE(error.find("'runs'"), std::string::npos) << error;
  EXPECT_FALSE(decode_contents("f 0 zz 0 4", kPage, &out, &error));
  EXPECT_NE(error.find("'size'"), std::string::npos) << error;
  EXPECT_FALSE(decode_contents("q 1", kPage, &out, &error));
  EXPECT_NE(error.find("'kind'"), std::string::npos) << error;
}

}  // namespace
}  // namespace kconform
