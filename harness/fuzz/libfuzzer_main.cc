// The fuzz target's entry points (libFuzzer's interface, which AFL++ also
// drives in persistent mode through libAFLDriver: `afl-clang-fast++
// -fsanitize=fuzzer`). One source for both engines; KC_FUZZ_EL2 selects the
// in-process EL2 target (FF-A; with KC_FUZZ_EL2_TFA, TF-A's EL3 SPMC behind
// it), KC_FUZZ_SPMC=<page size> the spmc target (TF-A's EL3 SPMC, FF-A),
// otherwise the running kernel's guest_memfd.
#include <cstddef>
#include <cstdint>

#include "harness/fuzz/fuzz_runner.h"
#include "harness/fuzz/mutator.h"
#ifdef KC_FUZZ_EL2
#include "harness/runner/target_el2.h"
#endif
#ifdef KC_FUZZ_SPMC
#include "harness/runner/target_spmc.h"
#endif

using namespace kconform;

namespace {

fuzz::FuzzRunner* g_runner = nullptr;

#if defined(KC_FUZZ_EL2) && defined(KC_FUZZ_EL2_TFA)
constexpr Abi kAbi = Abi::kFfa;
const TargetFamily& family() { return el2::el2_tfa_target_family(); }
#elif defined(KC_FUZZ_EL2)
constexpr Abi kAbi = Abi::kFfa;
const TargetFamily& family() { return el2::el2_target_family(); }
#elif defined(KC_FUZZ_SPMC)
constexpr Abi kAbi = Abi::kFfa;
const TargetFamily& family() { return spmc::spmc_target_family(KC_FUZZ_SPMC); }
#else
constexpr Abi kAbi = Abi::kGmem;
const TargetFamily& family() { return host_target_family(); }
#endif

const fuzz::FuzzConfig& config() {
  static const fuzz::FuzzConfig c = fuzz::fuzz_config_for(kAbi);
  return c;
}

}  // namespace

// libFuzzer's byte mutator; absent under AFL++'s driver (weak: then null).
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_runner = new fuzz::FuzzRunner(family(), config());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!g_runner) LLVMFuzzerInitialize(nullptr, nullptr);
  return g_runner->run(data, size);
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  fuzz::ByteMutator bytes;
  if (LLVMFuzzerMutate) bytes = [](uint8_t* d, size_t s, size_t m) { return LLVMFuzzerMutate(d, s, m); };
  const fuzz::FuzzConfig& c = config();
  return fuzz::custom_mutate(c.abi, data, size, max_size, seed, c.limits, bytes);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* d1, size_t s1, const uint8_t* d2, size_t s2,
                                            uint8_t* out, size_t max_out, unsigned seed) {
  const fuzz::FuzzConfig& c = config();
  return fuzz::custom_cross_over(c.abi, d1, s1, d2, s2, out, max_out, seed, c.limits);
}
