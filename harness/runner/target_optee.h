// Target families "spmc-optee-4k", "spmc-optee-16k", "spmc-optee-64k": FF-A
// scenarios into OP-TEE's S-EL1 SPMC (targets/optee) behind a stand-in of TF-A's
// SPMD, judged by the SPMC-side model configured as OP-TEE; the driver's
// `run --target spmc --spmc op-tee --page-size N`.
#pragma once

#include "harness/runner/target_registry.h"

namespace kconform::optee {

const TargetFamily& optee_target_family(uint64_t page_size);

}  // namespace kconform::optee
