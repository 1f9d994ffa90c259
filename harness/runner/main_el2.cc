// kconform-runner-el2-<page size>: the runner with the "el2" target (this
// build's tree and PAGE_SIZE) as default, "el2-tfa" (the same with TF-A's
// EL3 SPMC behind it) when TF-A was built, and "host" too.
#include "harness/runner/runner_main.h"
#include "harness/runner/target_el2.h"

int main(int argc, char** argv) {
  const kconform::TargetFamily* families[] = {&kconform::el2::el2_target_family(),
#ifdef KC_HAVE_TFA
                                              &kconform::el2::el2_tfa_target_family(),
#endif
                                              &kconform::host_target_family()};
  return kconform::runner_main(argc, argv, families);
}
