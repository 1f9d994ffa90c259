// The command line of kconform-runner and its per-tree variants
// (kconform-runner-el2-4k, ...): every executable is runner_main() with the
// target families it links; the first one listed is the default --target.
#pragma once

#include <span>

#include "harness/runner/target_registry.h"

namespace kconform {

int runner_main(int argc, char** argv, std::span<const TargetFamily* const> families);

}  // namespace kconform
