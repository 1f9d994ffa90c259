// The fuzz target's entry points (libFuzzer's interface, which AFL++ also
// drives in persistent mode through libAFLDriver: `afl-clang-fast++
// -fsanitize=fuzzer`). One source for both engines; KC_FUZZ_EL2 selects the
// in-process EL2 target, otherwise the running kernel's guest_memfd.
#include <cstddef>
#include <cstdint>

#include "harness/fuzz/harness.h"
#include "harness/fuzz/mutator.h"
#ifdef KC_FUZZ_EL2
#include "harness/runner/target_el2.h"
#endif

using namespace kconform;

namespace {

fuzz::Harness* g_harness = nullptr;

fuzz::HarnessConfig config() {
  fuzz::HarnessConfig c;
#ifdef KC_FUZZ_EL2
  c.abi = Abi::kFfa;
  c.limits.max_ops = 48;
#else
  c.abi = Abi::kGmem;
  c.limits.max_ops = 24;
#endif
  return c;
}

const TargetFamily& family() {
#ifdef KC_FUZZ_EL2
  return el2::el2_target_family();
#else
  return host_target_family();
#endif
}

}  // namespace

// libFuzzer's byte mutator; absent under AFL++'s driver (weak: then null).
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_harness = new fuzz::Harness(family(), config());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!g_harness) LLVMFuzzerInitialize(nullptr, nullptr);
  return g_harness->run(data, size);
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  fuzz::ByteMutator bytes;
  if (LLVMFuzzerMutate) bytes = [](uint8_t* d, size_t s, size_t m) { return LLVMFuzzerMutate(d, s, m); };
  const fuzz::HarnessConfig c = config();
  return fuzz::custom_mutate(c.abi, data, size, max_size, seed, c.limits, bytes);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* d1, size_t s1, const uint8_t* d2, size_t s2,
                                            uint8_t* out, size_t max_out, unsigned seed) {
  const fuzz::HarnessConfig c = config();
  return fuzz::custom_cross_over(c.abi, d1, s1, d2, s2, out, max_out, seed, c.limits);
}
