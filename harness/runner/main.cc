// kconform-runner: the C++ engine behind the `kconform` driver, with the
// target families that need no kernel tree (runner_main.cc has the commands).
#include <cstring>

#include "harness/runner/runner_main.h"

namespace kconform {
// judge.cc: outcomes recorded in a QEMU guest, packed for it and judged here.
int cmd_pack(int argc, char** argv);
int cmd_judge(int argc, char** argv);
}  // namespace kconform

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "pack") == 0) return kconform::cmd_pack(argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "judge") == 0) return kconform::cmd_judge(argc, argv);
  const kconform::TargetFamily* families[] = {&kconform::host_target_family()};
  return kconform::runner_main(argc, argv, families);
}
