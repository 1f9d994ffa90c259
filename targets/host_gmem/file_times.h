// Timestamps for the `times` op (gmem_conventions.h, SPEC.md HARNESS:TIMES):
// a baseline of a file's mtime and ctime, taken so that any later update is
// visible despite coarse clock ticks, and the bits saying which advanced.
#pragma once

#include <time.h>

#include <cstdint>

#include "models/common/outcome.h"

namespace kconform::host_gmem {

struct FileTimes {
  bool valid = false;  // a baseline was taken
  struct timespec mtime {}, ctime{};
};

// fstat(fd) into a new baseline, then wait (at most kTimesSettleMs) until
// CLOCK_REALTIME_COARSE is later than both timestamps. False (errno set) if
// fstat fails.
bool take_baseline(int fd, FileTimes& baseline);

// The times op: ok(kTimesMtimeAdvanced | kTimesCtimeAdvanced bits) against
// the baseline (none set when there is no baseline), which becomes the
// present timestamps; err(errno) if fstat fails (the baseline is kept).
Outcome times_since(int fd, FileTimes& baseline);

}  // namespace kconform::host_gmem
