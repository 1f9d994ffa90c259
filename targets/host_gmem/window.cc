// The forced race window; see window.h.
#include "targets/host_gmem/window.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace kconform::host_gmem {

namespace {

// How long the others must all look blocked before the page is let go
// (a thread is in state D for a moment in many places: a page allocation, a
// folio lock), how often they are looked at, and the bound on the hold.
constexpr auto kPoll = std::chrono::microseconds(500);
constexpr int kBlockedPolls = 8;
constexpr auto kMaxHold = std::chrono::milliseconds(250);

}  // namespace

bool thread_blocked_in_kernel(int tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ...": comm may hold spaces and parentheses; the state
  // follows the last ')'.
  const char* p = std::strrchr(buf, ')');
  return p != nullptr && p[1] == ' ' && p[2] == 'D';
}

const char* RaceWindow::name(Release r) {
  switch (r) {
    case Release::kNotHeld: return "not held";
    case Release::kOthersDone: return "the other threads finished";
    case Release::kOthersBlocked: return "the other threads blocked in the kernel";
    case Release::kTimeout: return "timeout";
    case Release::kUnavailable: return "no userfaultfd";
  }
  return "?";
}

RaceWindow::~RaceWindow() { disarm(); }

bool RaceWindow::arm(uint8_t* base, size_t len, size_t page, size_t index, GroupThreads* threads,
                     size_t self) {
  arm_errno_ = 0;
  arm_error_.clear();
  if ((index + 1) * page > len) {
    arm_error_ = "page " + std::to_string(index) + " is outside the buffer";
    return false;
  }
  int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) {
    arm_errno_ = errno;
    arm_error_ = std::string("userfaultfd(2): ") + std::strerror(arm_errno_);
    release_ = Release::kUnavailable;
    return false;
  }
  struct uffdio_api api = {};
  api.api = UFFD_API;
  uint8_t* addr = base + index * page;
  saved_.assign(addr, addr + page);
  // A fresh, never touched anonymous page in its place (MAP_FIXED: kernels
  // built without madvise(2) have no MADV_DONTNEED), then registered: its
  // first touch is a missing-page fault the userfaultfd reports.
  void* fresh = mmap(addr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  struct uffdio_register reg = {};
  reg.range.start = reinterpret_cast<uintptr_t>(addr);
  reg.range.len = page;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  const char* step = fresh != addr                          ? "mmap(MAP_FIXED)"
                     : ioctl(fd, UFFDIO_API, &api) != 0      ? "UFFDIO_API"
                     : ioctl(fd, UFFDIO_REGISTER, &reg) != 0 ? "UFFDIO_REGISTER"
                                                             : nullptr;
  if (step) {
    arm_errno_ = errno;
    arm_error_ = std::string(step) + ": " + std::strerror(arm_errno_);
    if (fresh == addr) std::memcpy(addr, saved_.data(), page);  // the source as it was
    close(fd);
    release_ = Release::kUnavailable;
    return false;
  }
  uffd_ = fd;
  page_addr_ = addr;
  page_ = page;
  threads_ = threads;
  self_ = self;
  stop_ = false;
  handler_ = std::thread([this] { handle(); });
  return true;
}

void RaceWindow::disarm() {
  if (uffd_ < 0) return;
  stop_ = true;
  handler_.join();
  close(uffd_);
  uffd_ = -1;
}

bool RaceWindow::others_done_or_blocked(bool* blocked) const {
  bool all_done = true, all_blocked = true;
  for (size_t t = 0; t < threads_->count; ++t) {
    if (t == self_ || threads_->done[t].load()) continue;
    all_done = false;
    const int tid = threads_->tid[t].load();
    if (tid == 0 || !thread_blocked_in_kernel(tid)) all_blocked = false;
  }
  *blocked = !all_done && all_blocked;
  return all_done;
}

void RaceWindow::handle() {
  struct uffd_msg msg;
  for (;;) {
    struct pollfd p = {uffd_, POLLIN, 0};
    if (poll(&p, 1, 1) > 0 && read(uffd_, &msg, sizeof msg) == sizeof msg &&
        msg.event == UFFD_EVENT_PAGEFAULT)
      break;
    if (stop_.load()) return;  // the write never reached the page
  }
  // The write sleeps on the page: hold it, and let the others go.
  threads_->window = GroupThreads::kHeld;
  const auto start = std::chrono::steady_clock::now();
  int blocked_polls = 0;
  Release why = Release::kTimeout;
  while (std::chrono::steady_clock::now() - start < kMaxHold) {
    bool blocked = false;
    if (others_done_or_blocked(&blocked)) {
      why = Release::kOthersDone;
      break;
    }
    blocked_polls = blocked ? blocked_polls + 1 : 0;
    if (blocked_polls >= kBlockedPolls) {
      why = Release::kOthersBlocked;
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  struct uffdio_copy copy = {};
  copy.dst = reinterpret_cast<uintptr_t>(page_addr_);
  copy.src = reinterpret_cast<uintptr_t>(saved_.data());
  copy.len = page_;
  // Wakes the write. EAGAIN: the mappings changed under it, try again;
  // any other failure: take the page out of the userfaultfd and wake the
  // write (it faults the page in as zeroes, a wrong source the content
  // oracle reports, never a hung suite).
  for (int tries = 0; tries < 100; ++tries) {
    copy.copy = 0;
    if (ioctl(uffd_, UFFDIO_COPY, &copy) == 0 || errno != EAGAIN) break;
  }
  if (copy.copy != static_cast<int64_t>(page_)) {
    struct uffdio_range range = {reinterpret_cast<uintptr_t>(page_addr_), page_};
    if (errno != EEXIST) ioctl(uffd_, UFFDIO_UNREGISTER, &range);
    ioctl(uffd_, UFFDIO_WAKE, &range);
  }
  release_ = why;
}

}  // namespace kconform::host_gmem
