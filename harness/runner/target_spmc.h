// Target families "spmc-4k", "spmc-16k", "spmc-64k": FF-A scenarios straight
// into TF-A's EL3 SPMC (targets/spmc), judged by the SPMC-side model
// (models/ffa/spmc_model.h); the driver's `run --target spmc --page-size N`.
#pragma once

#include "harness/runner/target_registry.h"

namespace kconform::spmc {

const TargetFamily& spmc_target_family(uint64_t page_size);

}  // namespace kconform::spmc
