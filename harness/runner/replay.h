// Outcomes recorded elsewhere (a kernel in QEMU), replayed through the one
// step (step.h) against the model here: kconform-runner's `pack` and `replay`
// subcommands (replay.cc says what they read and write). `judge` is replay's
// old name, still accepted.
#pragma once

namespace kconform {

// Runs the subcommand argv[1] if it is pack, replay or judge and returns its
// exit status; returns -1 if argv[1] is none of them.
int replay_main(int argc, char** argv);

}  // namespace kconform
