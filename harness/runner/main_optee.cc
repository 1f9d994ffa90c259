// kconform-runner-optee: the runner with the "spmc-optee-<N>k" targets (OP-TEE's
// S-EL1 SPMC of this build's OP-TEE tree), and "host" too. Its own binary: OP-TEE's
// and TF-A's trees define some of the same symbols.
#include "harness/runner/runner_main.h"
#include "harness/runner/target_optee.h"

int main(int argc, char** argv) {
  const kconform::TargetFamily* families[] = {&kconform::optee::optee_target_family(4096),
                                              &kconform::optee::optee_target_family(16384),
                                              &kconform::optee::optee_target_family(65536),
                                              &kconform::host_target_family()};
  return kconform::runner_main(argc, argv, families);
}
