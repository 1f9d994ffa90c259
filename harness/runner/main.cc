// kconform-runner: the C++ engine behind the `kconform` driver, with the
// target families that need no kernel tree (runner_main.cc has the commands)
// and replay of outcomes recorded in a QEMU guest (replay.h: pack, replay).
#include "harness/runner/replay.h"
#include "harness/runner/runner_main.h"

int main(int argc, char** argv) {
  if (int rc = kconform::replay_main(argc, argv); rc >= 0) return rc;
  const kconform::TargetFamily* families[] = {&kconform::host_target_family()};
  return kconform::runner_main(argc, argv, families);
}
