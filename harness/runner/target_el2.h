// Target family "el2" for the runner (harness/runner/target_registry.h).
#pragma once

#include "harness/runner/target_registry.h"

namespace kconform::el2 {

const TargetFamily& el2_target_family();

}  // namespace kconform::el2
