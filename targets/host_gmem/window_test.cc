// The forced race window (window.h) on ordinary files: a write whose source
// page is held sleeps until the other threads are done or blocked, and the
// bytes written are the source's.
#include "targets/host_gmem/window.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "targets/skip_reasons.h"

namespace kconform::host_gmem {
namespace {

using Clock = std::chrono::steady_clock;

struct Source {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t len = 4 * page;
  uint8_t* base = nullptr;
  Source() {
    base = static_cast<uint8_t*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (size_t i = 0; i < len; ++i) base[i] = static_cast<uint8_t>(i * 7 + i / page);
  }
  ~Source() { munmap(base, len); }
  std::vector<uint8_t> bytes() const { return {base, base + len}; }
};

std::vector<uint8_t> file_bytes(int fd, size_t len) {
  std::vector<uint8_t> out(len);
  EXPECT_EQ(pread(fd, out.data(), len, 0), static_cast<ssize_t>(len));
  return out;
}

// A source, the file written, and a window armed on page `held` of the
// source for thread 0 of a two-thread group.
class RaceWindowTest : public ::testing::Test {
 protected:
  // Arms the window; the test goes on only if it is armed. A kernel built
  // without userfaultfd (ENOSYS) skips, as the running kernel's matter; any
  // other refusal (a sysctl or seccomp profile that forbids it, a step
  // that fails) is a failure.
  void arm(size_t held) {
    fd = memfd_create("kconform-window-test", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    threads.count = 2;
    armed = w.arm(src.base, src.len, src.page, held, &threads, 0);
    if (armed) return;
    EXPECT_EQ(w.release(), RaceWindow::Release::kUnavailable);
    if (w.arm_errno() == ENOSYS) GTEST_SKIP() << KC_SKIP_KERNEL << "no userfaultfd (" << w.arm_error() << ")";
    FAIL() << "the window cannot be armed: " << w.arm_error();
  }
  void TearDown() override {
    if (fd >= 0) close(fd);
  }
  // Writes the whole source at offset 0 while `other` runs, then ends both;
  // how long the write took.
  Clock::duration write_all(std::thread& other) {
    const auto start = Clock::now();
    const ssize_t n = pwrite(fd, src.base, src.len, 0);
    const auto took = Clock::now() - start;
    other.join();
    w.disarm();
    EXPECT_EQ(n, static_cast<ssize_t>(src.len));
    return took;
  }
  Source src;
  const std::vector<uint8_t> want = src.bytes();
  int fd = -1;
  GroupThreads threads;
  RaceWindow w;
  bool armed = false;
};

TEST_F(RaceWindowTest, AHeldWriteWaitsForTheOtherThreadsToFinish) {
  arm(2);
  if (!armed) return;  // skipped or failed in arm()
  std::thread other([&] {
    threads.tid[1] = static_cast<int>(gettid());
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // sleeping in S, not blocked
    threads.done[1] = true;
  });
  const auto held = write_all(other);
  EXPECT_EQ(w.release(), RaceWindow::Release::kOthersDone);
  EXPECT_GE(held, std::chrono::milliseconds(50));
  EXPECT_EQ(file_bytes(fd, src.len), want);  // the held page was given back intact
}

TEST_F(RaceWindowTest, AHeldWriteIsLetGoWhenTheOthersBlockOnItsLock) {
  // The first write holds the file's inode lock while its copy sleeps on the
  // held page; the second write to the same file blocks on that lock (state
  // D), which the window sees: it lets go long before its bound.
  arm(1);
  if (!armed) return;  // skipped or failed in arm()
  std::vector<uint8_t> other_bytes(src.page, 0x5a);
  std::thread other([&] {
    threads.tid[1] = static_cast<int>(gettid());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the first write is asleep by now
    EXPECT_EQ(pwrite(fd, other_bytes.data(), src.page, 0), static_cast<ssize_t>(src.page));
    threads.done[1] = true;
  });
  const auto held = write_all(other);
  EXPECT_EQ(w.release(), RaceWindow::Release::kOthersBlocked);
  EXPECT_LT(held, std::chrono::milliseconds(240));
  // Serialised by the lock: the big write first, then the one-page write.
  std::vector<uint8_t> got = file_bytes(fd, src.len);
  EXPECT_EQ(std::memcmp(got.data(), other_bytes.data(), src.page), 0);
  EXPECT_EQ(std::memcmp(got.data() + src.page, want.data() + src.page, src.len - src.page), 0);
}

TEST_F(RaceWindowTest, AWriteThatNeverReachesThePageIsNotHeld) {
  arm(3);
  if (!armed) return;  // skipped or failed in arm()
  ASSERT_EQ(pwrite(fd, src.base, src.page, 0), static_cast<ssize_t>(src.page));  // page 0 only
  w.disarm();
  EXPECT_EQ(w.release(), RaceWindow::Release::kNotHeld);
}

TEST(RaceWindow, ARunningOrUnknownThreadIsNotBlocked) {
  EXPECT_FALSE(thread_blocked_in_kernel(static_cast<int>(gettid())));  // running: R
  EXPECT_FALSE(thread_blocked_in_kernel(1 << 30));                      // no such thread
}

}  // namespace
}  // namespace kconform::host_gmem
