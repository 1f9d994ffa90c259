// Outcomes print as they always did ("ok 4096 aux=0x10", " x2=0x...(-2)",
// " state=0x...", " [RULE]"): the text is what baselines, reports and triage
// match on. Checked against a printf reference of the same text.
#include "models/common/outcome.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>

namespace kconform {
namespace {

std::string reference_regs(const std::array<uint64_t, 8>& regs, uint8_t mask, bool with_state, uint64_t state) {
  std::string s;
  char buf[64];
  for (int i = 0; i < 8; ++i) {
    if (!(mask >> i & 1)) continue;
    std::snprintf(buf, sizeof buf, " x%d=0x%llx", i, static_cast<unsigned long long>(regs[i]));
    s += buf;
    if (i == 2 && (mask & 1) && (regs[0] & 0xffffffffu) == 0x84000060u) {
      std::snprintf(buf, sizeof buf, "(%d)", static_cast<int32_t>(regs[2] & 0xffffffffu));
      s += buf;
    }
  }
  if (with_state) {
    std::snprintf(buf, sizeof buf, " state=0x%llx", static_cast<unsigned long long>(state));
    s += buf;
  }
  return s;
}

TEST(Outcome, PrintsAsThePrintfReference) {
  const uint64_t values[] = {0, 1, 0xf, 0x10, 0x84000060, 0xfffffffe, 0x84000060ull | (1ull << 40), ~0ull,
                             0x8000000000000000ull, 0x123456789abcdefull};
  size_t compared = 0;
  for (uint64_t a : values)
    for (uint64_t b : values)
      for (int pattern = 0; pattern < 8; ++pattern) {
        Outcome o = Outcome::ok(static_cast<int64_t>(a), pattern & 1 ? b : 0);
        uint8_t mask = 0;
        for (int i = 0; i < 8; ++i) {
          o.regs[i] = (pattern >> 1 & 1) ? (i % 2 ? a : b) : (i == 0 ? 0x84000060 : (i == 2 ? b : 0));
          if (o.regs[i]) mask |= static_cast<uint8_t>(1u << i);
        }
        o.state = pattern & 4 ? a ^ b : 0;
        char head[96];
        if (o.aux)
          std::snprintf(head, sizeof head, "ok %lld aux=0x%llx", static_cast<long long>(o.value),
                        static_cast<unsigned long long>(o.aux));
        else
          std::snprintf(head, sizeof head, "ok %lld", static_cast<long long>(o.value));
        ASSERT_EQ(to_string(o), head + reference_regs(o.regs, mask, o.state != 0, o.state));

        Allowed al = Allowed::ok_range(1, static_cast<int64_t>(a), static_cast<int64_t>(b));
        al.check_aux = pattern & 1;
        al.aux = b;
        al.regs = o.regs;
        al.regs_mask = static_cast<uint8_t>(a & 0xff);
        al.check_state = pattern & 4;
        al.state = a;
        std::string want = "ok " + std::to_string(al.lo) + (al.lo == al.hi ? "" : ".." + std::to_string(al.hi));
        if (al.check_aux) {
          std::snprintf(head, sizeof head, " aux=0x%llx", static_cast<unsigned long long>(al.aux));
          want += head;
        }
        want += reference_regs(al.regs, al.regs_mask, al.check_state, al.state) + " [" + rule_info(1).id + "]";
        ASSERT_EQ(to_string(al), want);
        compared += 2;
      }
  EXPECT_EQ(to_string(Outcome::err(EINVAL)), "errno EINVAL");
  EXPECT_EQ(to_string(Allowed::err(1, EFAULT)), std::string("errno EFAULT [") + rule_info(1).id + "]");
  EXPECT_EQ(compared, 1600u);
}

}  // namespace
}  // namespace kconform
