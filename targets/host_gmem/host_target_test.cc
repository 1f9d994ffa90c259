// Tests of the host target on the running kernel's /dev/kvm. Every test
// that needs /dev/kvm skips (KC_SKIP_NO_KVM) when the machine has none this
// process may open; a /dev/kvm that opens but cannot be used fails them.
// A capability the running kernel lacks skips (KC_SKIP_KERNEL).
// Tests named Quirk* document what this kernel does, not a requirement.
#include "targets/host_gmem/host_target.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/scenario/abi.h"
#include "harness/scenario/gmem_abi.h"
#include "harness/scenario/pattern.h"
#include "targets/host_gmem/buffers.h"
#include "targets/host_gmem/fault_guard.h"
#include "targets/host_gmem/file_times.h"
#include "targets/skip_reasons.h"

namespace kconform::host_gmem {
namespace {

using namespace kconform::gmem;

constexpr uint64_t k2M = 2ull << 20;

std::string show(const Outcome& o) {
  switch (o.kind) {
    case Outcome::Kind::kOk:
      return "ok(" + std::to_string(o.value) + ", aux=" + std::to_string(o.aux) + ")";
    case Outcome::Kind::kErrno:
      return "errno " + std::to_string(o.value) + " (" + strerror(static_cast<int>(o.value)) + ")";
    case Outcome::Kind::kSignal:
      return "signal " + std::to_string(o.value) + " (" + strsignal(static_cast<int>(o.value)) +
             ")";
  }
  return "?";
}

// Builds a gmem scenario; arguments left out take the table's defaults.
struct Builder {
  Scenario s;
  Builder() { s.name = "host_target_test"; }
  Builder& op(OpCode code, std::initializer_list<uint64_t> args) {
    Op op;
    op.code = code;
    const OpSpec& spec = abi_spec(Abi::kGmem).ops[code];
    size_t i = 0;
    for (uint64_t v : args) op.args[i++] = v;
    for (; i < spec.args.size(); ++i) op.args[i] = spec.args[i].dflt;
    s.ops.push_back(op);
    return *this;
  }
};

std::vector<Outcome> run(Target& t, const Scenario& s) {
  std::vector<Outcome> out;
  t.begin(s);
  for (size_t i = 0; i < s.ops.size(); ++i) out.push_back(t.exec(s, i));
  t.end();
  return out;
}

uint64_t pattern_digest(uint64_t seed, uint64_t len) {
  std::vector<uint8_t> b(len);
  fill_pattern(seed, 0, b);
  return fnv1a(b);
}
uint64_t zero_digest(uint64_t len) {
  std::vector<uint8_t> b(len, 0);
  return fnv1a(b);
}

size_t count_fds() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}
// Mappings of guest_memfd files.
size_t count_gmem_maps() {
  std::ifstream f("/proc/self/maps");
  size_t n = 0;
  for (std::string line; std::getline(f, line);)
    if (line.find("kvm-gmem") != std::string::npos) ++n;
  return n;
}
// Virtual size of the process in KiB. The allocator's own growth stays well
// below a leak of one per-op buffer per scenario (5000 x 64 KiB = 320 MiB).
uint64_t vm_size_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7));
  return 0;
}

#define EXPECT_OUTCOME(actual, expected) \
  EXPECT_EQ(actual, expected) << "got " << show(actual) << ", want " << show(expected)

class HostTarget : public ::testing::Test {
 protected:
  void SetUp() override {
    HostOpen h = open_host_target();
    if (!h.target && h.no_device) GTEST_SKIP() << KC_SKIP_NO_KVM << h.error;
    ASSERT_TRUE(h.target) << "/dev/kvm opens but the host target cannot run: " << h.error;
    target_ = std::move(h.target);
    profile_ = h.profile;
    bits_ = target_->identity().cap_bits;
  }
  // Whether the kernel has every capability in `caps` (NEED skips if not).
  bool need(uint32_t caps) {
    return (bits_ & caps) == caps;
  }
  std::unique_ptr<Target> target_;
  Profile profile_;
  uint32_t bits_ = 0;
};

#define NEED(caps)                                                                          \
  do {                                                                                      \
    if (!need(caps))                                                                        \
      GTEST_SKIP() << KC_SKIP_KERNEL << "lacks capability bits 0x" << std::hex << ((caps) & ~bits_); \
  } while (0)

// A VM with a 2 MiB guest_memfd (MMAP|INIT_SHARED), mapped shared read-write
// over `map_len` bytes: slots vm 0, gmem 0, map 0.
Builder mapped_gmem(uint64_t map_len = k2M) {
  Builder b;
  b.op(kCreateVm, {kVmDefault})
      .op(kCreateGmem, {0, k2M, kFlagMmap | kFlagInitShared})
      .op(kMmap, {0, 0, map_len, kProtRead | kProtWrite, kMapShared});
  return b;
}
constexpr size_t kSetupOps = 3;

TEST(HostProbe, MissingDeviceGivesClearError) {
  ProbeResult r = probe_kvm("/nonexistent/kvm");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("/nonexistent/kvm"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("No such file"), std::string::npos) << r.error;
  HostOpen h = open_host_target("/nonexistent/kvm");
  EXPECT_EQ(h.target, nullptr);
  EXPECT_EQ(h.error, r.error);
  EXPECT_TRUE(h.no_device);  // absent: the machine's, a test may skip
}

// A device that opens but is not KVM (/dev/null: KVM_GET_API_VERSION fails
// with ENOTTY) is no reason to skip: the host target is broken, not absent.
TEST(HostProbe, ADeviceThatOpensButWillNotProbeIsNotAMissingOne) {
  HostOpen h = open_host_target("/dev/null");
  EXPECT_EQ(h.target, nullptr);
  EXPECT_FALSE(h.no_device);
  EXPECT_NE(h.error.find("KVM_GET_API_VERSION"), std::string::npos) << h.error;
}

TEST_F(HostTarget, ProbeFillsIdentityAndProfile) {
  const TargetIdentity& id = target_->identity();
  EXPECT_EQ(id.target, "host");
  EXPECT_FALSE(id.release.empty());
  EXPECT_EQ(id.profile, profile_.name());
  EXPECT_EQ(profile_.page_size, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  bool has_vm0_flags = false;
  for (const auto& [name, value] : id.caps) {
    if (name == "vm0.KVM_CAP_GUEST_MEMFD_FLAGS") {
      has_vm0_flags = true;
      EXPECT_EQ(value, profile_.supported_flags[0]);
    }
  }
  EXPECT_TRUE(has_vm0_flags);
  EXPECT_EQ(profile_.write_abi, (bits_ & kCapWrite) != 0);
  EXPECT_EQ((profile_.supported_flags[0] & kFlagMmap) != 0, (bits_ & kCapMmap) != 0);
  std::printf("%s", format_probe(probe_kvm()).c_str());
}

TEST_F(HostTarget, CreateVmAndGmem) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  Builder b = mapped_gmem();
  b.op(kFstat, {0});
  std::vector<Outcome> r = run(*target_, b.s);
  for (size_t i = 0; i < kSetupOps; ++i) EXPECT_OUTCOME(r[i], Outcome::ok(0)) << "op " << i;
  EXPECT_OUTCOME(r[3], Outcome::ok(0, k2M));
}

TEST_F(HostTarget, StoreLoadRoundTrip) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  const uint64_t len = 3 * 4096 + 100;
  Builder b = mapped_gmem();
  b.op(kStore, {0, 4096 + 5, len, 7})
      .op(kLoad, {0, 4096 + 5, len})
      .op(kLoad, {0, 0, 4096 + 5})
      .op(kLoad, {0, 0, 0})
      .op(kStore, {0, 0, k2M, 0})  // seed 0 = zero bytes
      .op(kLoad, {0, 0, k2M});
  std::vector<Outcome> r = run(*target_, b.s);
  ASSERT_EQ(r[2], Outcome::ok(0)) << show(r[2]);
  EXPECT_OUTCOME(r[3], Outcome::ok(0));
  EXPECT_OUTCOME(r[4], Outcome::ok(0, pattern_digest(7, len)));
  EXPECT_OUTCOME(r[5], Outcome::ok(0, zero_digest(4096 + 5)));
  EXPECT_OUTCOME(r[6], Outcome::ok(0, kFnvInit));
  EXPECT_OUTCOME(r[7], Outcome::ok(0));
  EXPECT_OUTCOME(r[8], Outcome::ok(0, zero_digest(k2M)));
}

TEST_F(HostTarget, PunchHoleZeroes) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  Builder b = mapped_gmem();
  b.op(kStore, {0, 0, 8192, 3})
      .op(kLoad, {0, 0, 8192})
      .op(kFallocate, {0, kFallocPunchHole | kFallocKeepSize, 0, 4096})
      .op(kLoad, {0, 0, 4096})
      .op(kLoad, {0, 4096, 4096})
      .op(kFstat, {0});
  std::vector<Outcome> r = run(*target_, b.s);
  EXPECT_OUTCOME(r[4], Outcome::ok(0, pattern_digest(3, 8192)));
  EXPECT_OUTCOME(r[5], Outcome::ok(0));
  EXPECT_OUTCOME(r[6], Outcome::ok(0, zero_digest(4096)));
  std::vector<uint8_t> second(8192);
  fill_pattern(3, 0, second);
  EXPECT_OUTCOME(r[7], Outcome::ok(0, fnv1a(std::span(second).subspan(4096))));
  EXPECT_OUTCOME(r[8], Outcome::ok(0, k2M));
}

// Quirk: documents this kernel (no GUEST_MEMFD_FLAG_WRITE), not a requirement.
TEST_F(HostTarget, QuirkFileIoFailsWithoutWriteAbi) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  if (profile_.write_abi) GTEST_SKIP() << KC_SKIP_KERNEL << "it has the write ABI (GUEST_MEMFD_FLAG_WRITE)";
  Builder b = mapped_gmem();
  b.op(kWrite, {0, 4096, 1})
      .op(kPwrite, {0, 0, 4096, 1})
      .op(kPread, {0, 0, 4096})
      .op(kPwritev, {0, 0, 4096, 2, 1})
      .op(kRead, {0, 4096})
      .op(kLseek, {0, 4096, 0});
  std::vector<Outcome> r = run(*target_, b.s);
  EXPECT_OUTCOME(r[3], Outcome::err(EINVAL));
  EXPECT_OUTCOME(r[4], Outcome::err(ESPIPE));
  EXPECT_OUTCOME(r[5], Outcome::err(ESPIPE));
  EXPECT_OUTCOME(r[6], Outcome::err(ESPIPE));
  EXPECT_OUTCOME(r[7], Outcome::err(EINVAL));
  EXPECT_OUTCOME(r[8], Outcome::err(ESPIPE));
}

TEST_F(HostTarget, SigbusPastEof) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  Builder b = mapped_gmem(2 * k2M);
  b.op(kLoad, {0, k2M, 1})
      .op(kStore, {0, k2M - 4096, 8192, 9})   // first page written, second faults
      .op(kLoad, {0, k2M - 4096, 4096})
      .op(kLoad, {0, k2M - 8192, 3 * 4096});  // faults in its last page
  std::vector<Outcome> r = run(*target_, b.s);
  EXPECT_OUTCOME(r[3], Outcome::sig(SIGBUS));
  EXPECT_OUTCOME(r[4], Outcome::sig(SIGBUS));
  EXPECT_OUTCOME(r[5], Outcome::ok(0, pattern_digest(9, 4096)));
  EXPECT_OUTCOME(r[6], Outcome::sig(SIGBUS));
}

TEST_F(HostTarget, SigsegvOnReadOnlyMappingAndHandlersRestored) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  struct sigaction before_bus, before_segv, after_bus, after_segv;
  sigaction(SIGBUS, nullptr, &before_bus);
  sigaction(SIGSEGV, nullptr, &before_segv);
  Builder b;
  b.op(kCreateVm, {}).op(kCreateGmem, {0, k2M, kFlagMmap | kFlagInitShared});
  b.op(kMmap, {0, 0, k2M, kProtRead, kMapShared}).op(kStore, {0, 0, 1, 1}).op(kLoad, {0, 0, 1});
  std::vector<Outcome> r = run(*target_, b.s);
  EXPECT_OUTCOME(r[2], Outcome::ok(0));
  EXPECT_OUTCOME(r[3], Outcome::sig(SIGSEGV));
  EXPECT_OUTCOME(r[4], Outcome::ok(0, zero_digest(1)));
  sigaction(SIGBUS, nullptr, &after_bus);
  sigaction(SIGSEGV, nullptr, &after_segv);
  EXPECT_EQ(before_bus.sa_handler, after_bus.sa_handler);
  EXPECT_EQ(before_segv.sa_handler, after_segv.sa_handler);
}

TEST_F(HostTarget, SurvivesThousandsOfFaults) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  Builder b = mapped_gmem(2 * k2M);
  for (int i = 0; i < 4000; ++i) b.op(i % 2 ? kLoad : kStore, {0, k2M + (i % 512) * 4096, 8, 1});
  std::vector<Outcome> r = run(*target_, b.s);
  for (size_t i = kSetupOps; i < r.size(); ++i)
    ASSERT_EQ(r[i], Outcome::sig(SIGBUS)) << "op " << i << ": " << show(r[i]);
}

TEST_F(HostTarget, HarnessRefusals) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  const uint64_t big = kMaxOpBytes + 1;
  Builder b = mapped_gmem();
  b.op(kWrite, {0, big, 1})                        // 3
      .op(kPwrite, {0, 0, big, 1})                 // 4
      .op(kPwritev, {0, 0, big, 2, 1})             // 5
      .op(kRead, {0, big})                         // 6
      .op(kPread, {0, 0, big})                     // 7
      .op(kLoad, {0, 0, big})                      // 8: E2BIG before ERANGE
      .op(kStore, {5, 0, big, 1})                  // 9: E2BIG before EBADF
      .op(kFallocate, {0, kFallocKeepSize, 0, big})  // 10
      .op(kLoad, {0, k2M - 1, 2})                  // 11: ERANGE
      .op(kStore, {0, ~0ull, 2, 1})                // 12: ERANGE (offset + len overflows)
      .op(kLoad, {7, 0, 1})                        // 13: EBADF, no such map
      .op(kMunmap, {0})                            // 14
      .op(kLoad, {0, 0, 1})                        // 15: EBADF, unmapped
      .op(kMunmap, {0})                            // 16: EBADF
      .op(kFallocate, {0, kFallocKeepSize | kFallocPunchHole, 0, ~0ull & ~4095ull})  // 17
      .op(kMmap, {0, 0, 4097})                     // 18: map 1, rounds up to 8192
      .op(kLoad, {1, 4097, 8192 - 4097})           // 19: inside the rounded length
      .op(kLoad, {1, 4097, 8192 - 4096})           // 20: ERANGE
      .op(kMmap, {0, 0, 4096, kProtRead, 4})       // 21: share 4: EINVAL, map 2 dead
      .op(kMmap, {0, 0, 4096, 8, kMapShared})      // 22: prot 8: EINVAL
      .op(kMmap, {9, 0, 4096, 8, kMapShared})      // 23: dead gmem first: EBADF
      .op(kLoad, {2, 0, 1})                        // 24: EBADF
      .op(kMmap, {0, 0, 4096, kProtRead, 3})       // 25: MAP_SHARED_VALIDATE
      .op(kMmap, {0, 0, 4096, kProtRead, 0});      // 26: no map type: the kernel's EINVAL
  std::vector<Outcome> r = run(*target_, b.s);
  for (size_t i = 3; i <= 10; ++i) EXPECT_OUTCOME(r[i], Outcome::err(E2BIG)) << "op " << i;
  EXPECT_OUTCOME(r[11], Outcome::err(ERANGE));
  EXPECT_OUTCOME(r[12], Outcome::err(ERANGE));
  EXPECT_OUTCOME(r[13], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[14], Outcome::ok(0));
  EXPECT_OUTCOME(r[15], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[16], Outcome::err(EBADF));
  EXPECT_EQ(r[17].kind, Outcome::Kind::kErrno) << show(r[17]);  // the kernel's answer
  EXPECT_OUTCOME(r[18], Outcome::ok(0));
  EXPECT_OUTCOME(r[19], Outcome::ok(0, zero_digest(8192 - 4097)));
  EXPECT_OUTCOME(r[20], Outcome::err(ERANGE));
  EXPECT_OUTCOME(r[21], Outcome::err(EINVAL));
  EXPECT_OUTCOME(r[22], Outcome::err(EINVAL));
  EXPECT_OUTCOME(r[23], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[24], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[25], Outcome::ok(0));
  EXPECT_OUTCOME(r[26], Outcome::err(EINVAL));
}

TEST_F(HostTarget, DeadSlotsGoToTheKernelAsBadFds) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  Builder b;
  b.op(kCreateVm, {})
      .op(kCreateGmem, {0, 4095, 0})      // gmem 0: fails (size not page aligned)
      .op(kFstat, {0})                    // 2
      .op(kMmap, {0, 0, 4096})            // 3: map 0 fails
      .op(kLoad, {0, 0, 1})               // 4
      .op(kCreateGmem, {0, 4096, 0})      // gmem 1
      .op(kClose, {1})                    // 6
      .op(kClose, {1})                    // 7
      .op(kFallocate, {1, kFallocKeepSize, 0, 4096})  // 8
      .op(kFstat, {9})                    // 9: never produced
      .op(kCloseVm, {0})                  // 10
      .op(kCreateGmem, {0, 4096, 0})      // 11: on a closed VM
      .op(kCloseVm, {0});                 // 12
  std::vector<Outcome> r = run(*target_, b.s);
  EXPECT_OUTCOME(r[1], Outcome::err(EINVAL));
  EXPECT_OUTCOME(r[2], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[3], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[4], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[5], Outcome::ok(0));
  EXPECT_OUTCOME(r[6], Outcome::ok(0));
  EXPECT_OUTCOME(r[7], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[8], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[9], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[10], Outcome::ok(0));
  EXPECT_OUTCOME(r[11], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[12], Outcome::err(EBADF));
}

TEST_F(HostTarget, NonsenseArgumentsDoNotCrash) {
  const uint64_t top = ~0ull;
  Builder b;
  b.op(kCreateVm, {top})                                    // 0
      .op(kCreateVm, {})                                    // 1: vm 1
      .op(kCreateGmem, {1, top & ~4095ull, top})            // 2
      .op(kCreateGmem, {1, 1ull << 62, 0})                  // 3: gmem 1 (maybe)
      .op(kCreateGmem, {1, k2M, kFlagMmap | kFlagInitShared})  // 4: gmem 2
      .op(kPwrite, {2, top, 4096, 1})                       // 5
      .op(kPwrite, {2, 1ull << 63, 4096, 1, 17})            // 6
      .op(kPwritev, {2, top - 4095, 4096, top, 1})          // 7
      .op(kPwritev, {2, 0, 4096, 5000, 1})                  // 8
      .op(kPwritev, {2, 0, 4096, 0, 1})                     // 9
      .op(kPwritev, {2, 0, 10, 7, 1})                       // 10
      .op(kRead, {2, 0})                                    // 11
      .op(kPread, {2, top, 1})                              // 12
      .op(kLseek, {2, top, top})                            // 13
      .op(kLseek, {2, 4096, 0})                             // 14
      .op(kMmap, {2, 0, top, top, top})                     // 15
      .op(kMmap, {2, top & ~4095ull, 4096})                 // 16
      .op(kMmap, {2, 0, 1ull << 45, kProtRead, kMapShared})  // 17: VA only
      .op(kFallocate, {2, top, top, top})                   // 18
      .op(kFallocate, {2, kFallocKeepSize, top & ~4095ull, 4096})  // 19
      .op(kBind, {1, top, top, top, 2, top, top})           // 20
      .op(kBind, {1, 0, 0, 1ull << 40, 2, 0, kMemGuestMemfd})  // 21: PROT_NONE reservation
      .op(kBind, {1, 1, 0, top & ~4095ull, 2, 0, kMemGuestMemfd})  // 22: dummy page
      .op(kUnbind, {1, top})                                // 23
      .op(kFstat, {top})                                    // 24
      .op(kLoad, {top, 0, 1})                               // 25
      .op(kLoad, {5, top, top});                            // 26
  b.s.ops.push_back(Op{200, {}});                           // 27: unknown op code
  std::vector<Outcome> r = run(*target_, b.s);
  for (size_t i = 0; i < r.size(); ++i) std::printf("  op %zu: %s\n", i, show(r[i]).c_str());
  EXPECT_OUTCOME(r[24], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[25], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[26], Outcome::err(E2BIG));
  EXPECT_OUTCOME(r[27], Outcome::err(ENOSYS));
}

TEST_F(HostTarget, BindAndUnbind) {
  NEED(kCapGmem | kCapUserMemory2);
  Builder b;
  b.op(kCreateVm, {})
      .op(kCreateGmem, {0, k2M, 0})
      .op(kBind, {0, 0, 0, k2M, 0, 0, kMemGuestMemfd})   // 2
      .op(kUnbind, {0, 0})                               // 3
      .op(kUnbind, {0, 0})                               // 4: no such slot
      .op(kBind, {0, 1, 0, 0, 0, 0, kMemGuestMemfd})     // 5: size 0 deletes nothing
      .op(kBind, {0, 2, 0, k2M, 0, 0, 0})                // 6: plain userspace memory
      .op(kBind, {5, 0, 0, k2M, 0, 0, kMemGuestMemfd})   // 7: no VM
      .op(kBind, {0, (1ull << 32) | 3, 1ull << 30, k2M, 0, 0, kMemGuestMemfd})  // 8: slot 3
      .op(kUnbind, {0, 3})                                                       // 9
      .op(kBind, {0, 3, 1ull << 30, k2M, 0, 0, (1ull << 32) | kMemGuestMemfd});  // 10
  std::vector<Outcome> r = run(*target_, b.s);
  for (size_t i = 0; i < r.size(); ++i) std::printf("  op %zu: %s\n", i, show(r[i]).c_str());
  if (r[2] == Outcome::ok(0)) {  // a kernel may refuse gmem slots on a default VM
    EXPECT_OUTCOME(r[3], Outcome::ok(0));
    EXPECT_OUTCOME(r[4], Outcome::err(EINVAL));
  }
  EXPECT_OUTCOME(r[6], Outcome::ok(0));
  EXPECT_OUTCOME(r[7], Outcome::err(EBADF));
  // slot and flags are u32 fields: only the low 32 bits reach the kernel.
  if (r[2] == Outcome::ok(0)) {
    EXPECT_OUTCOME(r[8], Outcome::ok(0));
    EXPECT_OUTCOME(r[9], Outcome::ok(0));
    EXPECT_OUTCOME(r[10], Outcome::ok(0));
  }
}

// times: a baseline at creation and at each times; a dead slot is EBADF.
// Which bits fallocate sets is this kernel's business (SPEC.md TIMES:OPEN):
// only that the value is a bitmask is checked there.
TEST_F(HostTarget, TimesReportsAgainstTheSlotsBaseline) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  Builder b = mapped_gmem();
  b.op(kTimes, {0})                                              // 3
      .op(kFstat, {0})                                           // 4
      .op(kLoad, {0, 0, 4096})                                   // 5
      .op(kTimes, {0})                                           // 6
      .op(kFallocate, {0, kFallocPunchHole | kFallocKeepSize, 0, 4096})  // 7
      .op(kTimes, {0})                                           // 8
      .op(kTimes, {0})                                           // 9
      .op(kTimes, {1})                                           // 10: never produced
      .op(kClose, {0})                                           // 11
      .op(kTimes, {0});                                          // 12
  std::vector<Outcome> r = run(*target_, b.s);
  EXPECT_OUTCOME(r[3], Outcome::ok(0));
  EXPECT_OUTCOME(r[6], Outcome::ok(0));
  EXPECT_OUTCOME(r[7], Outcome::ok(0));
  ASSERT_EQ(r[8].kind, Outcome::Kind::kOk) << show(r[8]);
  EXPECT_LE(r[8].value, int64_t(kTimesMtimeAdvanced | kTimesCtimeAdvanced)) << show(r[8]);
  std::printf("times after PUNCH_HOLE on this kernel: %lld\n", static_cast<long long>(r[8].value));
  EXPECT_OUTCOME(r[9], Outcome::ok(0));
  EXPECT_OUTCOME(r[10], Outcome::err(EBADF));
  EXPECT_OUTCOME(r[12], Outcome::err(EBADF));
}

// The baseline logic on a file whose timestamps write() is known to update (a
// memfd): a write in the very tick of the baseline is still seen, because
// take_baseline waits until the coarse clock has passed the baseline.
TEST(HostFileTimes, AWriteRightAfterTheBaselineIsSeen) {
  const int fd = memfd_create("kconform-times", MFD_CLOEXEC);
  ASSERT_GE(fd, 0) << strerror(errno);
  for (int round = 0; round < 20; ++round) {
    FileTimes t;
    ASSERT_TRUE(take_baseline(fd, t));
    struct timespec now;
    ASSERT_EQ(clock_gettime(CLOCK_REALTIME_COARSE, &now), 0);
    EXPECT_TRUE(now.tv_sec > t.mtime.tv_sec || (now.tv_sec == t.mtime.tv_sec && now.tv_nsec > t.mtime.tv_nsec));
    ASSERT_EQ(write(fd, "x", 1), 1);
    EXPECT_OUTCOME(times_since(fd, t), Outcome::ok(kTimesMtimeAdvanced | kTimesCtimeAdvanced)) << round;
    EXPECT_OUTCOME(times_since(fd, t), Outcome::ok(0)) << round;
    ASSERT_EQ(fchmod(fd, 0600 | (round & 1 ? 0 : 0040)), 0);  // status only
    EXPECT_OUTCOME(times_since(fd, t), Outcome::ok(kTimesCtimeAdvanced)) << round;
  }
  close(fd);
  FileTimes none;
  EXPECT_OUTCOME(times_since(-1, none), Outcome::err(EBADF));
  EXPECT_FALSE(none.valid);
  // Without a baseline nothing counts as advanced; the call takes one.
  const int fd2 = memfd_create("kconform-times", MFD_CLOEXEC);
  ASSERT_GE(fd2, 0);
  EXPECT_OUTCOME(times_since(fd2, none), Outcome::ok(0));
  EXPECT_TRUE(none.valid);
  close(fd2);
}

TEST_F(HostTarget, OtherAbiIsNotRun) {
  Scenario s;
  s.abi = Abi::kFfa;
  s.ops.push_back(Op{0, {}});
  std::vector<Outcome> r = run(*target_, s);
  EXPECT_OUTCOME(r[0], Outcome::err(ENOSYS));
}

TEST_F(HostTarget, ThousandsOfScenariosLeakNothing) {
  NEED(kCapGmem | kCapMmap | kCapInitShared | kCapUserMemory2);
  Builder b = mapped_gmem(2 * k2M);
  b.op(kStore, {0, 0, 8192, 5})
      .op(kLoad, {0, 0, 8192})
      .op(kLoad, {0, k2M, 1})  // SIGBUS
      .op(kPwrite, {0, 0, 65536, 1, 100})
      .op(kRead, {0, 65536})
      .op(kCreateGmem, {0, k2M, 0})
      .op(kBind, {0, 0, 0, k2M, 1, 0, kMemGuestMemfd})
      .op(kBind, {0, 1, 1ull << 32, k2M, 1, 0, 0})
      .op(kMmap, {0, 0, 4096})
      .op(kClose, {0});  // the mappings outlive the fd; end() must still unmap
  // Warm up once so lazily created process state is counted in "before".
  run(*target_, b.s);
  const size_t fds = count_fds(), gmem_maps = count_gmem_maps();
  const uint64_t vm_kib = vm_size_kib();
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t want = pattern_digest(5, 8192);
  for (int i = 0; i < 5000; ++i) {
    std::vector<Outcome> r = run(*target_, b.s);
    ASSERT_EQ(r[4], Outcome::ok(0, want)) << "scenario " << i << ": " << show(r[4]);
    ASSERT_EQ(r[5], Outcome::sig(SIGBUS)) << "scenario " << i << ": " << show(r[5]);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("5000 scenarios in %.1f s\n", secs);
  EXPECT_EQ(count_fds(), fds);
  EXPECT_EQ(count_gmem_maps(), gmem_maps);
  EXPECT_LT(vm_size_kib(), vm_kib + 16 * 1024) << "VmSize grew from " << vm_kib << " KiB";
  // A scenario that never reaches end() is cleaned by the next begin().
  target_->begin(b.s);
  for (size_t i = 0; i < b.s.ops.size(); ++i) target_->exec(b.s, i);
  target_->begin(b.s);
  target_->end();
  EXPECT_EQ(count_fds(), fds);
  EXPECT_EQ(count_gmem_maps(), gmem_maps);
  EXPECT_LT(vm_size_kib(), vm_kib + 16 * 1024) << "VmSize grew from " << vm_kib << " KiB";
}

// A concurrent group: each thread's ops in order, the threads at once, every
// op's outcome reported in its place; faults in two threads at once are
// caught, and the process's own SIGBUS/SIGSEGV handlers are back afterwards.
TEST_F(HostTarget, ExecGroupRunsThreadsAndReportsEveryOutcome) {
  NEED(kCapGmem | kCapMmap | kCapInitShared);
  Builder b;
  b.op(kCreateVm, {})
      .op(kCreateGmem, {0, 4 * 4096, kFlagMmap | kFlagInitShared})
      .op(kMmap, {0, 0, 8 * 4096});                     // 2: four pages past EOF
  b.op(kStore, {0, 0, 1, 7}).op(kLoad, {0, 2 * 4096, 4096}).op(kStore, {0, 5 * 4096, 1, 7});
  b.op(kFallocate, {0, kFallocKeepSize | kFallocPunchHole, 4096, 4096}).op(kLoad, {0, 6 * 4096, 1})
      .op(kFstat, {0});
  for (size_t i = 3; i < 6; ++i) b.s.ops[i].thread = 1;
  for (size_t i = 6; i < 9; ++i) b.s.ops[i].thread = 2;
  b.s.version = 2;
  struct sigaction before{}, after{};
  sigaction(SIGBUS, nullptr, &before);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    target_->begin(b.s);
    for (size_t i = 0; i < 3; ++i) ASSERT_EQ(target_->exec(b.s, i), Outcome::ok(0)) << i;
    Outcome out[6];
    target_->exec_group(b.s, 3, 9, seed, out);
    EXPECT_OUTCOME(out[0], Outcome::ok(0));
    EXPECT_OUTCOME(out[1], Outcome::ok(0, zero_digest(4096)));
    EXPECT_OUTCOME(out[2], Outcome::sig(SIGBUS));
    EXPECT_OUTCOME(out[3], Outcome::ok(0));
    EXPECT_OUTCOME(out[4], Outcome::sig(SIGBUS));
    EXPECT_OUTCOME(out[5], Outcome::ok(0, 4 * 4096));
    target_->end();
  }
  sigaction(SIGBUS, nullptr, &after);
  EXPECT_EQ(reinterpret_cast<void*>(before.sa_sigaction), reinterpret_cast<void*>(after.sa_sigaction));
}

// The write source buffer's readable part ends exactly at byte src_valid.
TEST(HostBuffers, SourceBoundaryFallsAtSrcValid) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  static const uint8_t empty = 0;
  for (uint64_t valid : {0ull, 1ull, 100ull, 4095ull, 4096ull, 4097ull, 10000ull}) {
    AnonArea area;
    const uint64_t len = 3 * 4096 + 17;
    const uint8_t* src = build_source(area, len, 11, valid, page, &empty);
    ASSERT_NE(src, nullptr);
    uint64_t digest = 0;
    EXPECT_EQ(guarded_load(src, valid, page, &digest), 0) << "valid " << valid;
    EXPECT_EQ(digest, pattern_digest(11, valid)) << "valid " << valid;
    EXPECT_EQ(guarded_load(src + valid, 1, page, &digest), SIGSEGV) << "valid " << valid;
  }
  AnonArea area;
  const uint8_t* src = build_source(area, 5000, 11, kSrcAllValid, page, &empty);
  uint64_t digest = 0;
  EXPECT_EQ(guarded_load(src, 5000, page, &digest), 0);
  EXPECT_EQ(digest, pattern_digest(11, 5000));
  AnonArea none;
  EXPECT_EQ(build_source(none, 0, 11, 0, page, &empty), &empty);
}

}  // namespace
}  // namespace kconform::host_gmem
