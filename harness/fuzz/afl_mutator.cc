// The same structure-aware mutator (mutator.h) as an AFL++ custom mutator
// library (AFL_CUSTOM_MUTATOR_LIBRARY; AFL++ 4.x afl_custom_* API). The ABI
// is the table named by KCONFORM_FUZZ_ABI (gmem, ffa; default gmem); add_buf
// is the splice partner.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "harness/fuzz/mutator.h"
#include "harness/scenario/abi.h"

namespace {

struct State {
  kconform::Abi abi = kconform::Abi::kGmem;
  kconform::fuzz::Limits limits;
  kconform::fuzz::Rng rng;
  std::vector<uint8_t> buf;
};

}  // namespace

extern "C" void* afl_custom_init(void* /*afl*/, unsigned int seed) {
  auto* st = new State;
  const char* name = std::getenv("KCONFORM_FUZZ_ABI");
  if (const kconform::AbiSpec* abi = kconform::abi_spec_by_name(name ? name : "")) st->abi = abi->abi;
  st->limits = kconform::fuzz::limits_for(st->abi);
  st->rng.seed(seed);
  return st;
}

extern "C" size_t afl_custom_fuzz(void* data, uint8_t* buf, size_t buf_size, uint8_t** out_buf, uint8_t* add_buf,
                                  size_t add_buf_size, size_t max_size) {
  auto* st = static_cast<State*>(data);
  const size_t cap = max_size ? max_size : (1u << 16);
  st->buf.assign(cap, 0);
  size_t n = 0;
  if (add_buf && add_buf_size && st->rng() % 8 == 0) {
    n = kconform::fuzz::custom_cross_over(st->abi, buf, buf_size, add_buf, add_buf_size, st->buf.data(), cap,
                                          static_cast<unsigned>(st->rng()), st->limits);
  }
  if (!n) {
    std::memcpy(st->buf.data(), buf, std::min(buf_size, cap));
    n = kconform::fuzz::custom_mutate(st->abi, st->buf.data(), std::min(buf_size, cap), cap,
                                      static_cast<unsigned>(st->rng()), st->limits, {});
  }
  *out_buf = st->buf.data();
  return n;
}

extern "C" void afl_custom_deinit(void* data) { delete static_cast<State*>(data); }
