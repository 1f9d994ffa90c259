// Target families "spmc-optee-<N>k" (target_optee.h).
#include "harness/runner/target_optee.h"

#include "models/ffa/spmc_model.h"
#include "targets/optee/optee_ffa_target.h"

namespace kconform::optee {
namespace {

template <uint64_t kPage>
bool open_optee(OpenTarget* out, std::string* error) {
  std::unique_ptr<OpteeFfaTarget> t = open_optee_ffa_target(kPage, error);
  if (!t) return false;
  out->model = ::kconform::ffa::make_spmc_model(t->layout());
  out->invariants = t.get();
  out->target = std::move(t);
  return true;
}

// In-process code under test: a watchdog by default, as for spmc.
const TargetFamily k4k{"spmc-optee-4k", "FF-A into OP-TEE's S-EL1 SPMC (built in), 4K scenarios", open_optee<4096>,
                       5.0};
const TargetFamily k16k{"spmc-optee-16k", "FF-A into OP-TEE's S-EL1 SPMC (built in), 16K scenarios",
                        open_optee<16384>, 5.0};
const TargetFamily k64k{"spmc-optee-64k", "FF-A into OP-TEE's S-EL1 SPMC (built in), 64K scenarios",
                        open_optee<65536>, 5.0};

}  // namespace

const TargetFamily& optee_target_family(uint64_t page_size) {
  return page_size == 16384 ? k16k : page_size == 65536 ? k64k : k4k;
}

}  // namespace kconform::optee
