// HostGmemTarget: each gmem op executed literally on the running kernel.
#include "targets/host_gmem/host_target.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

#include "harness/scenario/gmem_abi.h"
#include "targets/host_gmem/buffers.h"
#include "targets/host_gmem/fault_guard.h"
#include "targets/host_gmem/kvm_uapi.h"
#include "targets/host_gmem/window.h"

namespace kconform::host_gmem {
namespace {

using gmem::kMaxOpBytes;

int sat_int(uint64_t v) { return v > gmem::kIntArgMax ? INT_MAX : static_cast<int>(v); }
uint32_t low32(uint64_t v) { return static_cast<uint32_t>(v); }
off_t as_off(uint64_t v) { return static_cast<off_t>(v); }

// ok(return value) or err(errno) of a syscall that returns -1 on failure.
Outcome result(long r) { return r < 0 ? Outcome::err(errno) : Outcome::ok(r); }

}  // namespace

HostGmemTarget::HostGmemTarget(int kvm_fd, ProbeResult probe)
    : kvm_fd_(kvm_fd), probe_(std::move(probe)), page_size_(probe_.profile.page_size) {
  void* p = mmap(nullptr, page_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  dummy_page_ = p == MAP_FAILED ? nullptr : p;
}

HostGmemTarget::~HostGmemTarget() {
  end();
  if (dummy_page_ != nullptr) munmap(dummy_page_, page_size_);
  close(kvm_fd_);
}

void HostGmemTarget::begin(const Scenario& s) {
  end();
  gmem_abi_ = s.abi == Abi::kGmem;
  // Baselines cost a wait of up to a clock tick per file: only when observed.
  track_times_ = false;
  for (const Op& op : s.ops) track_times_ |= gmem_abi_ && op.code == gmem::kTimes;
}

void HostGmemTarget::end() {
  for (Mapping& m : maps_)
    if (m.addr != nullptr) munmap(m.addr, m.len);
  for (int fd : gmems_)
    if (fd >= 0) close(fd);
  for (int fd : vms_)
    if (fd >= 0) close(fd);
  for (const Area& a : areas_) munmap(a.addr, a.len);
  maps_.clear();
  gmems_.clear();
  gmem_info_.clear();
  vms_.clear();
  areas_.clear();
  times_.clear();
}

// Slots are read and closed atomically: in a concurrent group one thread may
// close a file while another uses it (groups create nothing, so the vectors
// keep their size).
int HostGmemTarget::vm_fd(uint64_t slot) const {
  return slot < vms_.size() ? __atomic_load_n(&vms_[slot], __ATOMIC_RELAXED) : -1;
}
int HostGmemTarget::gmem_fd(uint64_t slot) const {
  return slot < gmems_.size() ? __atomic_load_n(&gmems_[slot], __ATOMIC_RELAXED) : -1;
}
HostGmemTarget::Mapping* HostGmemTarget::map_slot(uint64_t slot) {
  if (slot >= maps_.size() || maps_[slot].addr == nullptr) return nullptr;
  return &maps_[slot];
}

Outcome HostGmemTarget::exec(const Scenario& s, size_t i) {
  if (!gmem_abi_ || i >= s.ops.size()) return Outcome::err(ENOSYS);
  const Op& op = s.ops[i];
  const uint64_t* a = op.args.data();
  switch (op.code) {
    case gmem::kCreateVm:
      return op_create_vm(a);
    case gmem::kCreateGmem:
      return op_create_gmem(a);
    case gmem::kClose:
      return op_close(gmems_, a[0]);
    case gmem::kWrite:
      return op_write(a, false);
    case gmem::kPwrite:
      return op_write(a, true);
    case gmem::kPwritev:
      return op_pwritev(a);
    case gmem::kRead:
      return op_read(gmem_fd(a[0]), false, 0, a[1]);
    case gmem::kPread:
      return op_read(gmem_fd(a[0]), true, a[1], a[2]);
    case gmem::kLseek:
      return result(lseek(gmem_fd(a[0]), as_off(a[1]), sat_int(a[2])));
    case gmem::kMmap:
      return op_mmap(a);
    case gmem::kMunmap:
      return op_munmap(a);
    case gmem::kLoad:
      return op_access(a, false);
    case gmem::kStore:
      return op_access(a, true);
    case gmem::kFallocate:
      return op_fallocate(a);
    case gmem::kFstat:
      return op_fstat(a);
    case gmem::kBind:
      return op_bind(a);
    case gmem::kUnbind:
      return op_unbind(a);
    case gmem::kCloseVm:
      return op_close(vms_, a[0]);
    case gmem::kTimes:
      return op_times(a);
    default:
      return Outcome::err(ENOSYS);
  }
}

namespace {

// splitmix64: the jitter of one thread of one run.
uint64_t next_random(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void spin(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    asm volatile("" ::: "memory");
#endif
  }
}

}  // namespace

namespace {

// The op of a group that runs with a forced window (window.h), set by its
// thread around exec() of that op.
struct WindowRequest {
  GroupThreads* threads;
  size_t self;
};
thread_local const WindowRequest* t_window = nullptr;

// The first write of a group whose source can hold a page back: a whole
// number of at least two pages, all readable, not beyond kMaxOpBytes.
size_t window_op(const Scenario& s, size_t first, size_t last, size_t page) {
  for (size_t i = first; i < last; ++i) {
    const Op& op = s.ops[i];
    const bool positional = op.code == gmem::kPwrite;
    if (op.code != gmem::kWrite && !positional) continue;
    const uint64_t* rest = positional ? op.args.data() + 2 : op.args.data() + 1;
    const uint64_t len = rest[0], valid = rest[2];
    if (len >= 2 * page && len % page == 0 && len <= kMaxOpBytes && valid >= len) return i;
  }
  return last;
}

}  // namespace

void HostGmemTarget::exec_group(const Scenario& s, size_t first, size_t last, uint64_t seed, Outcome* out) {
  std::vector<uint8_t> ids;
  for (size_t i = first; i < last; ++i)
    if (std::find(ids.begin(), ids.end(), s.ops[i].thread) == ids.end()) ids.push_back(s.ops[i].thread);
  if (!gmem_abi_ || ids.size() < 2 || ids.size() > GroupThreads::kMax)
    return Target::exec_group(s, first, last, seed, out);
  FaultHandlers held;  // for the whole group (fault_guard.h)
  GroupThreads threads;
  threads.count = ids.size();
  const size_t held_op = forces_window(seed) ? window_op(s, first, last, page_size_) : last;
  threads.window = held_op < last ? GroupThreads::kPending : GroupThreads::kOver;
  std::atomic<size_t> ready{0};
  std::atomic<bool> go{false};
  auto body = [&](size_t slot) {
    const uint8_t id = ids[slot];
    uint64_t rng = seed ^ (0xd1b54a32d192ed03ull * id);
    threads.tid[slot] = static_cast<int>(gettid());
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    const bool holds = held_op < last && s.ops[held_op].thread == id;
    if (held_op < last && !holds) {  // start once the write is held (or the window is over)
      const auto bound = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (threads.window.load() == GroupThreads::kPending && std::chrono::steady_clock::now() < bound)
        std::this_thread::yield();
    }
    for (size_t i = first; i < last; ++i) {
      if (s.ops[i].thread != id) continue;
      spin(next_random(rng) % 4096);  // up to a few microseconds
      const WindowRequest request{&threads, slot};
      t_window = i == held_op ? &request : nullptr;
      out[i - first] = exec(s, i);
      t_window = nullptr;
      if (i == held_op) threads.window = GroupThreads::kOver;
    }
    threads.done[slot] = true;
  };
  std::vector<std::thread> workers;
  workers.reserve(ids.size());
  for (size_t slot = 0; slot < ids.size(); ++slot) workers.emplace_back(body, slot);
  while (ready.load() < ids.size()) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (std::thread& t : workers) t.join();
}

// create_vm type
Outcome HostGmemTarget::op_create_vm(const uint64_t* a) {
  int fd = ioctl(kvm_fd_, KVM_CREATE_VM, static_cast<unsigned long>(a[0]));
  int e = errno;
  vms_.push_back(fd < 0 ? -1 : fd);
  return fd < 0 ? Outcome::err(e) : Outcome::ok(0);
}

// create_gmem vm, size, flags
Outcome HostGmemTarget::op_create_gmem(const uint64_t* a) {
  struct kvm_create_guest_memfd args = {};
  args.size = a[1];
  args.flags = a[2];
  int fd = ioctl(vm_fd(a[0]), KVM_CREATE_GUEST_MEMFD, &args);
  int e = errno;
  gmems_.push_back(fd < 0 ? -1 : fd);
  gmem_info_.push_back({fd >= 0, a[2]});
  if (fd < 0) return Outcome::err(e);
  if (track_times_) {
    times_.resize(gmems_.size());
    take_baseline(fd, times_.back());
  }
  return Outcome::ok(0);
}

// close gmem / close_vm vm: the slot is dead afterwards whatever close says.
Outcome HostGmemTarget::op_close(std::vector<int>& slots, uint64_t slot) {
  int fd = slot < slots.size() ? __atomic_load_n(&slots[slot], __ATOMIC_RELAXED) : -1;
  Outcome o = result(close(fd));
  if (slot < slots.size()) __atomic_store_n(&slots[slot], -1, __ATOMIC_RELAXED);
  return o;
}

// write gmem, len, pattern, src_valid / pwrite gmem, offset, len, pattern, src_valid
Outcome HostGmemTarget::op_write(const uint64_t* a, bool positional) {
  const int fd = gmem_fd(a[0]);
  const uint64_t offset = positional ? a[1] : 0;
  const uint64_t* rest = positional ? a + 2 : a + 1;
  const uint64_t len = rest[0], seed = rest[1], valid = rest[2];
  if (len > kMaxOpBytes) return Outcome::err(E2BIG);
  AnonArea area;
  const uint8_t* src =
      build_source(area, len, seed, valid, page_size_, static_cast<uint8_t*>(dummy_page_));
  if (src == nullptr) return Outcome::err(ENOMEM);
  RaceWindow window;  // a concurrent group's forced window: the middle page held back
  if (t_window != nullptr &&
      !window.arm(const_cast<uint8_t*>(src), len, page_size_, len / page_size_ / 2, t_window->threads,
                  t_window->self))
    t_window->threads->window = GroupThreads::kOver;  // no window: the others race it by jitter
  Outcome o = result(positional ? pwrite(fd, src, len, as_off(offset)) : write(fd, src, len));
  window.disarm();
  return o;
}

// pwritev gmem, offset, len, iovcnt, pattern
Outcome HostGmemTarget::op_pwritev(const uint64_t* a) {
  const int fd = gmem_fd(a[0]);
  const uint64_t offset = a[1], len = a[2], iovcnt = a[3], seed = a[4];
  if (len > kMaxOpBytes) return Outcome::err(E2BIG);
  AnonArea area;
  const uint8_t* src =
      build_source(area, len, seed, len, page_size_, static_cast<uint8_t*>(dummy_page_));
  if (src == nullptr) return Outcome::err(ENOMEM);
  // The kernel refuses more than IOV_MAX segments before reading any, so
  // only that many are built; the count passed is the scenario's (saturated).
  const uint64_t built = iovcnt < IOV_MAX ? iovcnt : IOV_MAX;
  std::vector<struct iovec> iov(built == 0 ? 1 : built);
  if (built != 0) {
    const uint64_t seg = len / iovcnt;
    for (uint64_t k = 0; k < built; ++k) {
      iov[k].iov_base = const_cast<uint8_t*>(src) + k * seg;
      iov[k].iov_len = k + 1 == iovcnt ? len - k * seg : seg;
    }
  }
  return result(pwritev(fd, iov.data(), sat_int(iovcnt), as_off(offset)));
}

// read gmem, len / pread gmem, offset, len
Outcome HostGmemTarget::op_read(int fd, bool positional, uint64_t offset, uint64_t len) {
  if (len > kMaxOpBytes) return Outcome::err(E2BIG);
  AnonArea area;
  void* dst = dummy_page_;
  if (len != 0) {
    if (!area.map(round_up(len, page_size_), PROT_READ | PROT_WRITE)) return Outcome::err(ENOMEM);
    dst = area.base();
  }
  return result(positional ? pread(fd, dst, len, as_off(offset)) : read(fd, dst, len));
}

// mmap gmem, offset, len, prot, share
Outcome HostGmemTarget::op_mmap(const uint64_t* a) {
  const int fd = gmem_fd(a[0]);
  const uint64_t len = a[2], prot = a[3], share = a[4];
  // Only a map type (share 0..3) and READ|WRITE|EXEC reach mmap: a fuzzed
  // MAP_FIXED or MAP_ANONYMOUS would test the host process, not the file.
  if (share > gmem::kMmapShareMax || (prot & ~gmem::kMmapProtMask) != 0) {
    maps_.push_back({});
    return Outcome::err(fd < 0 ? EBADF : EINVAL);
  }
  void* p = mmap(nullptr, len, static_cast<int>(prot), static_cast<int>(share), fd, as_off(a[1]));
  int e = errno;
  if (p == MAP_FAILED) {
    maps_.push_back({});
    return Outcome::err(e);
  }
  maps_.push_back({static_cast<uint8_t*>(p), len, a[0], a[1], prot});
  return Outcome::ok(0);
}

// munmap map
Outcome HostGmemTarget::op_munmap(const uint64_t* a) {
  Mapping* m = map_slot(a[0]);
  if (m == nullptr) return Outcome::err(EBADF);
  if (munmap(m->addr, m->len) != 0) return Outcome::err(errno);
  *m = {};
  return Outcome::ok(0);
}

// load map, offset, len / store map, offset, len, pattern
Outcome HostGmemTarget::op_access(const uint64_t* a, bool store) {
  const uint64_t offset = a[1], len = a[2];
  if (len > kMaxOpBytes) return Outcome::err(E2BIG);
  Mapping* m = map_slot(a[0]);
  if (m == nullptr) return Outcome::err(EBADF);
  const uint64_t map_len = round_up(m->len, page_size_);
  if (offset > map_len || len > map_len - offset) return Outcome::err(ERANGE);
  uint8_t* p = m->addr + offset;
  if (store) {
    int sig = guarded_store(p, len, page_size_, a[3]);
    return sig != 0 ? Outcome::sig(sig) : Outcome::ok(0);
  }
  uint64_t digest = 0;
  int sig = guarded_load(p, len, page_size_, &digest);
  return sig != 0 ? Outcome::sig(sig) : Outcome::ok(0, digest);
}

// fallocate gmem, mode, offset, len
Outcome HostGmemTarget::op_fallocate(const uint64_t* a) {
  const uint64_t mode = a[1], len = a[3];
  if (!(mode & gmem::kFallocPunchHole) && len > kMaxOpBytes) return Outcome::err(E2BIG);
  return result(fallocate(gmem_fd(a[0]), sat_int(mode), as_off(a[2]), as_off(len)));
}

// fstat gmem
Outcome HostGmemTarget::op_fstat(const uint64_t* a) {
  struct stat st;
  if (fstat(gmem_fd(a[0]), &st) != 0) return Outcome::err(errno);
  return Outcome::ok(0, static_cast<uint64_t>(st.st_size));
}

// Userspace memory behind a bind of `size` bytes: an anonymous read-write
// mapping up to kMaxOpBytes, a PROT_NONE reservation above, the dummy page
// when size is 0 or nothing that large can be reserved. Owned until end().
uint64_t HostGmemTarget::bind_backing(uint64_t size) {
  const uint64_t rounded = round_up(size, page_size_);
  if (size != 0 && rounded != 0) {
    const int prot = size <= kMaxOpBytes ? PROT_READ | PROT_WRITE : PROT_NONE;
    void* p = mmap(nullptr, rounded, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      areas_.push_back({p, rounded});
      return reinterpret_cast<uint64_t>(p);
    }
  }
  return reinterpret_cast<uint64_t>(dummy_page_);
}

// bind vm, slot, gpa, size, gmem, gmem_offset, flags
Outcome HostGmemTarget::op_bind(const uint64_t* a) {
  struct kvm_userspace_memory_region2 r = {};
  r.slot = low32(a[1]);
  r.guest_phys_addr = a[2];
  r.memory_size = a[3];
  r.guest_memfd = static_cast<uint32_t>(gmem_fd(a[4]));
  r.guest_memfd_offset = a[5];
  r.flags = low32(a[6]);
  r.userspace_addr = bind_backing(a[3]);
  return result(ioctl(vm_fd(a[0]), KVM_SET_USER_MEMORY_REGION2, &r));
}

// unbind vm, slot: the same slot with memory_size 0 (everything else 0).
Outcome HostGmemTarget::op_unbind(const uint64_t* a) {
  struct kvm_userspace_memory_region2 r = {};
  r.slot = low32(a[1]);
  return result(ioctl(vm_fd(a[0]), KVM_SET_USER_MEMORY_REGION2, &r));
}

// SPEC.md HARNESS:OBSERVE: files made with MMAP|INIT_SHARED, pages in memory only.
bool HostGmemTarget::observe(const Scenario&, size_t, Contents* out) {
  out->clear();
  if (!gmem_abi_) return false;
  for (uint64_t slot = 0; slot < gmem_info_.size(); ++slot) {
    const GmemInfo& info = gmem_info_[slot];
    if (!info.created) continue;
    if ((info.flags & (gmem::kFlagMmap | gmem::kFlagInitShared)) != (gmem::kFlagMmap | gmem::kFlagInitShared)) {
      FileContent fc;
      fc.slot = slot;
      fc.why_not = (info.flags & gmem::kFlagMmap) ? "private pages (no INIT_SHARED)" : "no MMAP flag";
      out->files.push_back(std::move(fc));
      continue;
    }
    if (gmem_fd(slot) >= 0) {
      observe_file(slot, out);
    } else {
      observe_through_maps(slot, out);
    }
  }
  return true;
}

namespace {

// Reads the pages of [addr, addr+pages*page) that mincore() says are in
// memory into out->pages as pages first_index.. of slot. False: the range
// could not be examined.
bool read_resident(uint64_t slot, const uint8_t* addr, uint64_t pages, uint64_t first_index, size_t page,
                   Contents* out) {
  std::vector<unsigned char> vec(pages);
  if (pages == 0) return true;
  if (mincore(const_cast<uint8_t*>(addr), pages * page, vec.data()) != 0) return false;
  for (uint64_t k = 0; k < pages; ++k) {
    if (!(vec[k] & 1)) continue;
    PageContent pg;
    pg.slot = slot;
    pg.index = first_index + k;
    pg.bytes.resize(page);
    if (guarded_copy(pg.bytes.data(), addr + k * page, page, page) != 0) continue;  // gone meanwhile
    out->pages.push_back(std::move(pg));
  }
  return true;
}

}  // namespace

void HostGmemTarget::observe_file(uint64_t slot, Contents* out) {
  FileContent fc;
  fc.slot = slot;
  struct stat st;
  const int fd = gmem_fd(slot);
  if (fstat(fd, &st) != 0) {
    fc.why_not = std::string("fstat failed: ") + errno_name(errno);
    out->files.push_back(std::move(fc));
    return;
  }
  fc.has_size = true;
  fc.size = static_cast<uint64_t>(st.st_size);
  const uint64_t pages = std::min<uint64_t>(fc.size / page_size_, gmem::kObservePages);
  fc.first_page = 0;
  fc.page_count = pages;
  if (pages != 0) {
    void* p = mmap(nullptr, pages * page_size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      fc.why_not = std::string("mmap for the re-read failed: ") + errno_name(errno);
      out->files.push_back(std::move(fc));
      return;
    }
    bool ok = read_resident(slot, static_cast<const uint8_t*>(p), pages, 0, page_size_, out);
    munmap(p, pages * page_size_);
    if (!ok) {
      fc.why_not = "mincore failed";
      out->files.push_back(std::move(fc));
      return;
    }
  }
  fc.observable = true;
  out->files.push_back(std::move(fc));
}

void HostGmemTarget::observe_through_maps(uint64_t slot, Contents* out) {
  bool any = false;
  for (const Mapping& m : maps_) {
    if (m.addr == nullptr || m.gmem != slot || !(m.prot & PROT_READ) || m.offset % page_size_ != 0) continue;
    // Only the part of the mapping within the file's size: beyond it a read faults.
    const uint64_t pages = std::min<uint64_t>(round_up(m.len, page_size_) / page_size_, gmem::kObservePages);
    Contents part;
    if (!read_resident(slot, m.addr, pages, m.offset / page_size_, page_size_, &part)) continue;
    FileContent fc;
    fc.slot = slot;
    fc.observable = true;
    fc.first_page = m.offset / page_size_;
    fc.page_count = pages;
    out->files.push_back(std::move(fc));
    for (PageContent& pg : part.pages) out->pages.push_back(std::move(pg));
    any = true;
  }
  if (!any) {
    FileContent fc;
    fc.slot = slot;
    fc.why_not = "fd closed and no readable mapping left";
    out->files.push_back(std::move(fc));
  }
}

std::vector<PatternHint> pattern_hints(const Scenario& s) {
  std::vector<PatternHint> out;
  std::vector<uint64_t> map_offsets;  // by map slot
  for (const Op& op : s.ops) {
    const uint64_t* a = op.args.data();
    switch (op.code) {
      case gmem::kMmap:
        map_offsets.push_back(a[1]);
        break;
      case gmem::kWrite:
        out.push_back({a[2], 0, std::min(a[1], kMaxOpBytes)});
        break;
      case gmem::kPwrite:
        out.push_back({a[3], a[1], std::min(a[2], kMaxOpBytes)});
        break;
      case gmem::kPwritev:
        out.push_back({a[4], a[1], std::min(a[2], kMaxOpBytes)});
        break;
      case gmem::kStore:
        if (a[0] < map_offsets.size()) out.push_back({a[3], map_offsets[a[0]] + a[1], std::min(a[2], kMaxOpBytes)});
        break;
      default:
        break;
    }
  }
  return out;
}

// times gmem: which timestamps advanced since the slot's baseline.
Outcome HostGmemTarget::op_times(const uint64_t* a) {
  const uint64_t slot = a[0];
  FileTimes none;
  return times_since(gmem_fd(slot), slot < times_.size() ? times_[slot] : none);
}

HostOpen open_host_target(const char* dev_path) {
  HostOpen out;
  int fd = open(dev_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    out.no_device = e == ENOENT || e == ENODEV || e == ENXIO || e == EACCES || e == EPERM;
    out.error = probe_kvm(dev_path).error;  // the same message the probe gives
    return out;
  }
  ProbeResult probe = probe_kvm_fd(fd);
  if (!probe.ok) {
    close(fd);
    out.error = probe.error;
    return out;
  }
  out.profile = probe.profile;
  out.target = std::make_unique<HostGmemTarget>(fd, std::move(probe));
  return out;
}

}  // namespace kconform::host_gmem
