// A forced race window for concurrent groups (models/gmem/SPEC.md
// HARNESS:WINDOW): one page of a write's source buffer is left missing behind
// a userfaultfd, so the kernel's copy of that page sleeps in the middle of
// the write; only then do the group's other threads start, and the write
// sleeps until they have finished their ops or are all blocked in the kernel
// (then the page is filled in and the write goes on). A write that holds a lock the others need shows as blocked threads and
// is released at once; a write that holds none is overtaken. Either way the
// outcome is one some interleaving allows; which one the kernel made is then
// judged by the interleaving search, as for jitter.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace kconform::host_gmem {

// What the threads of a group tell each other: their kernel thread IDs (0
// until known), whether they are done with their ops, and where the window
// is (the other threads start their ops once the write is held there, or
// the window is over: the write returned without reaching the page).
struct GroupThreads {
  static constexpr size_t kMax = 16;
  enum Window : int { kPending = 0, kHeld = 1, kOver = 2 };
  std::atomic<int> tid[kMax] = {};
  std::atomic<bool> done[kMax] = {};
  std::atomic<int> window{kOver};
  size_t count = 0;
};

class RaceWindow {
 public:
  // Why the held page was let go (or that it never was held).
  enum class Release : uint8_t { kNotHeld, kOthersDone, kOthersBlocked, kTimeout, kUnavailable };

  RaceWindow() = default;
  ~RaceWindow();
  RaceWindow(const RaceWindow&) = delete;
  RaceWindow& operator=(const RaceWindow&) = delete;

  // Makes page `index` of the page-aligned buffer [base, base + len) missing
  // behind a userfaultfd: its current bytes are kept and given back when the
  // page is first touched and the window closes. `self` is the slot of the
  // writing thread in `threads`. False (and nothing changed) where the kernel
  // has no userfaultfd or refuses it: the op then runs without a window.
  bool arm(uint8_t* base, size_t len, size_t page, size_t index, GroupThreads* threads, size_t self);
  // After arm() returned false: the errno of the step that failed (0 if
  // none: a page outside the buffer) and that step with its error in words.
  // userfaultfd(2) failing with ENOSYS is a kernel built without it.
  int arm_errno() const { return arm_errno_; }
  const std::string& arm_error() const { return arm_error_; }
  // Ends the handler; call after the write returned.
  void disarm();
  Release release() const { return release_.load(); }
  static const char* name(Release r);

 private:
  void handle();
  bool others_done_or_blocked(bool* blocked) const;

  int uffd_ = -1;
  uint8_t* page_addr_ = nullptr;
  size_t page_ = 0;
  std::vector<uint8_t> saved_;
  int arm_errno_ = 0;
  std::string arm_error_;
  GroupThreads* threads_ = nullptr;
  size_t self_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<Release> release_{Release::kNotHeld};
  std::thread handler_;
};

// Whether thread `tid` of this process is sleeping uninterruptibly in the
// kernel (state D in /proc/self/task/TID/stat); false if it cannot be read.
bool thread_blocked_in_kernel(int tid);

}  // namespace kconform::host_gmem
