// kconform-runner-spmc: the runner with the "spmc-<N>k" targets (TF-A's EL3
// SPMC of this build's TF-A tree), and "host" too.
#include "harness/runner/runner_main.h"
#include "harness/runner/target_spmc.h"

int main(int argc, char** argv) {
  const kconform::TargetFamily* families[] = {&kconform::spmc::spmc_target_family(4096),
                                              &kconform::spmc::spmc_target_family(16384),
                                              &kconform::spmc::spmc_target_family(65536),
                                              &kconform::host_target_family()};
  return kconform::runner_main(argc, argv, families);
}
