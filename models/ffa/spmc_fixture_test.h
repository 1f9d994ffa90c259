// For the SPMC model's tests (spmc_test.cc, spmc_view_test.cc): an SPMC on 2 MiB
// of Normal-world RAM from 0x80000000, the version negotiated (v1.2) and a
// mailbox pair mapped at kTx/kRx; call() makes one SMC. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "models/ffa/spmc.h"

namespace kconform::ffa::test {

inline constexpr uint64_t kBase = 0x80000000;
inline constexpr uint64_t kTx = kBase + 0x100000, kRx = kTx + 0x1000;

class SpmcFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    mem.assign(0x200000, 0);
    SpmcConfig c;
    c.ns_base = kBase;
    c.ns_size = mem.size();
    spmc = std::make_unique<Spmc>();
    spmc->reset(c, mem, kBase);
    call({kFnVersion, kVersion12});
    call({kFnRxtxMap64, kTx, kRx, 1});
    EXPECT_TRUE(is_success(out));
  }
  const uint64_t* call(std::initializer_list<uint64_t> regs) {
    uint64_t in[kNumRegs] = {};
    int i = 0;
    for (uint64_t r : regs) in[i++] = r;
    spmc->smc(in, out);
    return out;
  }

  std::vector<uint8_t> mem;
  std::unique_ptr<Spmc> spmc;
  uint64_t out[kNumRegs] = {};
};

}  // namespace kconform::ffa::test
