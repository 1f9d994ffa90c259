// Target families "spmc-<N>k" (target_spmc.h).
#include "harness/runner/target_spmc.h"

#include "models/ffa/spmc_model.h"
#include "targets/spmc/spmc_ffa_target.h"

namespace kconform::spmc {
namespace {

template <uint64_t kPage>
bool open_spmc(OpenTarget* out, std::string* error) {
  std::unique_ptr<SpmcFfaTarget> t = open_spmc_ffa_target(kPage, error);
  if (!t) return false;
  out->model = ::kconform::ffa::make_spmc_model(t->layout());
  out->invariants = t.get();
  out->target = std::move(t);
  return true;
}

// In-process code under test: a watchdog by default, as for el2.
const TargetFamily k4k{"spmc-4k", "FF-A straight into TF-A's EL3 SPMC (built in), 4K scenarios", open_spmc<4096>, 5.0};
const TargetFamily k16k{"spmc-16k", "FF-A straight into TF-A's EL3 SPMC (built in), 16K scenarios", open_spmc<16384>,
                        5.0};
const TargetFamily k64k{"spmc-64k", "FF-A straight into TF-A's EL3 SPMC (built in), 64K scenarios", open_spmc<65536>,
                        5.0};

}  // namespace

const TargetFamily& spmc_target_family(uint64_t page_size) {
  return page_size == 16384 ? k16k : page_size == 65536 ? k64k : k4k;
}

}  // namespace kconform::spmc
