// Target family "el2" for the runner (harness/runner/target_registry.h).
#pragma once

#include "harness/runner/target_registry.h"

namespace kconform::el2 {

const TargetFamily& el2_target_family();
// target_el2_tfa.cc (only when TF-A's SPMC is built: KC_HAVE_TFA): the el2
// target with TF-A's EL3 SPMC as its EL3.
const TargetFamily& el2_tfa_target_family();

}  // namespace kconform::el2
