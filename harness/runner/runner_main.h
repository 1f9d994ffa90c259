// The command line of kconform-runner and its per-tree variants
// (kconform-runner-el2-4k, ...): every executable is runner_main() with the
// target families it links; the first one listed is the default --target.
#pragma once

#include <span>
#include <string>

#include "harness/runner/target_registry.h"

namespace kconform {

int runner_main(int argc, char** argv, std::span<const TargetFamily* const> families);

// Opens the family called name among families, wrapped in the faulty target
// (targets/faulty) when fault is a spec: what `run --target NAME --fault SPEC`
// runs. False and *error (naming the flag or target) if it cannot.
bool open_target(std::span<const TargetFamily* const> families, const std::string& name, const std::string& fault,
                 OpenTarget* out, std::string* error);

}  // namespace kconform
