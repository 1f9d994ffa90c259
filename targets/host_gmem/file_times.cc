// The `times` op's baselines: fstat(), then wait out the coarse clock tick.
#include "targets/host_gmem/file_times.h"

#include <sys/stat.h>

#include <cerrno>

#include "harness/scenario/gmem_conventions.h"

namespace kconform::host_gmem {
namespace {

bool later(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

// Kernel timestamp updates read the coarse clock (a fine-grained one is never
// behind it): once it is past the baseline, an update can no longer produce
// a timestamp equal to it.
void settle(const FileTimes& t) {
  const struct timespec& newest = later(t.mtime, t.ctime) ? t.mtime : t.ctime;
  const struct timespec pause = {0, 1000 * 1000};  // 1 ms
  for (uint64_t waited = 0; waited < gmem::kTimesSettleMs; ++waited) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME_COARSE, &now) != 0 || later(now, newest)) return;
    nanosleep(&pause, nullptr);
  }
}

}  // namespace

bool take_baseline(int fd, FileTimes& baseline) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  baseline.valid = true;
  baseline.mtime = st.st_mtim;
  baseline.ctime = st.st_ctim;
  settle(baseline);
  return true;
}

Outcome times_since(int fd, FileTimes& baseline) {
  const FileTimes before = baseline;
  if (!take_baseline(fd, baseline)) return Outcome::err(errno);
  uint64_t bits = 0;
  if (before.valid && later(baseline.mtime, before.mtime)) bits |= gmem::kTimesMtimeAdvanced;
  if (before.valid && later(baseline.ctime, before.ctime)) bits |= gmem::kTimesCtimeAdvanced;
  return Outcome::ok(static_cast<int64_t>(bits));
}

}  // namespace kconform::host_gmem
