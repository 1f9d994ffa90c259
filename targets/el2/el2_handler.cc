// The EL2 target's C++ side: memory, hooks and snapshots around kc_el2_glue.c.
#include "targets/el2/el2_handler.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include <sanitizer/asan_interface.h>

#include "models/common/zero.h"
#include "targets/el2/kc_el2_hooks.h"

#ifndef KC_TREE_PATH_STR
#define KC_TREE_PATH_STR ""
#endif
#ifndef KC_TREE_VERSION_STR
#define KC_TREE_VERSION_STR ""
#endif
#ifndef KC_TREE_HANDLES_RECLAIM2
#define KC_TREE_HANDLES_RECLAIM2 0
#endif
#ifndef KC_TREE_SMC_API_STR
#define KC_TREE_SMC_API_STR ""
#endif

namespace kconform::el2 {

namespace {

// The modelled physical memory lies in a mapping of its own, placed so that
// a virtual address and its physical address fall at the same offset in a
// 2 MiB block (as the kernel's linear map), with slack before and after it
// that nothing else uses (poisoned under ASan). el2_restore gives the host
// RAM below the first page it keeps back to the kernel from the 2 MiB
// boundary below it: whole page-table pages, which the kernel frees once
// empty (CONFIG_PT_RECLAIM), so the next give-back need not walk them (a
// quarter of the cost of MADV_DONTNEED over a range that starts mid-block).
constexpr uintptr_t kBlock = uintptr_t{2} << 20;

// That mapping is the harness's view: every byte, always (the model, the
// SPMC, the restore, the digest and the invariants read and write it). The
// kernel code (ffa.c and the glue) sees the RAM through a second mapping, the
// hypervisor's stage-1 as EL2 has it (README "ffa.c's view of memory"):
//
//   [kGuardLow][host RAM][kGuardMid][TX | RX | descriptor buffer][kGuardHigh]
//
// a host page is accessible there only while it is shared with the
// hypervisor (__pkvm_host_share_hyp: the host's mailboxes while mapped), every
// other host page and the guards are PROT_NONE, so an access outside what EL2
// maps faults at the instruction (a hyp panic at EL2; the runner's crash
// marker names the op, el2_describe_fault the region). The two views share
// memory only where the kernel code may reach it: the hypervisor's pages and
// the host pages it was given are pages of a memfd mapped into both (a host
// page is moved into the memfd, "adopted", the first time it is shared with
// the hypervisor, and stays there across scenarios while it is in use); the
// rest of the host RAM is private anonymous memory, so the restore gives it
// back to the kernel as before. An adopted page costs each restore a look
// (it is zeroed in place: giving back a shared mapping would not zero it), so
// only a few not shared with the hypervisor by the last scenario stay
// adopted (unadopt_idle). Adopted pages are each a VMA of their own in both
// views (their memfd offsets are never adjacent), so opening or closing one
// is an mprotect of one whole VMA, and only when its sharing changed (below:
// "the kernel code's view of host RAM").
constexpr size_t kGuardLow = kBlock;
constexpr size_t kGuardMid = 2 * kBlock;  // half "past host RAM", half "before the TX mailbox"
// Any 32-bit offset from the descriptor buffer lands in it (ffa.c's lengths
// and offsets are u32): a wild copy faults here rather than in other memory.
constexpr size_t kGuardHigh = (size_t{1} << 32) + kBlock;
constexpr uint32_t kIdleKeep = 2, kIdleRestores = 64;

struct Ram {
  // The harness's view.
  uint8_t* base = nullptr;  // the whole mapping
  size_t len = 0;
  uint8_t* mem = nullptr;          // physical memory
  uint8_t* block_floor = nullptr;  // the 2 MiB boundary at or below mem, inside the mapping
  // The kernel code's view.
  uint8_t* vbase = nullptr;  // the whole reservation
  size_t vlen = 0;
  uint8_t* vhost = nullptr;  // host page i at vhost + i * page size
  uint8_t* vhyp = nullptr;   // the hypervisor's pages
  int fd = -1;               // the memfd: the hypervisor's pages, then one slot per adopted host page

  Ram() = default;
  Ram(const Ram&) = delete;
  Ram& operator=(const Ram&) = delete;
  ~Ram() { release(); }
  void release() {
    if (base) {
      ASAN_UNPOISON_MEMORY_REGION(base, len);  // the next mapping there starts clean
      munmap(base, len);
    }
    if (vbase) munmap(vbase, vlen);
    if (fd >= 0) close(fd);
    base = mem = block_floor = vbase = vhost = vhyp = nullptr;
    len = vlen = 0;
    fd = -1;
  }
};

[[noreturn]] void ram_fatal(const char* what) {
  std::fprintf(stderr, "kconform el2: %s failed: %s\n", what, std::strerror(errno));
  std::abort();
}

// Everything that changes while the handler runs, except ffa.c's statics and
// the shim struct (copied by the glue) and memory (copied separately).
struct Mutable {
  PageTracker tracker;
  DefaultEl3 el3;
  std::vector<Warning> warnings;
};

struct Snapshot {
  std::vector<uint8_t> ffa_state;
  kc_el2_shim_state shim{};
  std::optional<Mutable> m;
  std::vector<uint8_t> memory;
  size_t zero_prefix = 0;  // memory[0, zero_prefix) is all zero (the host RAM no op touched)
};

// At most this many pages are zeroed in place (restore_ram below); more
// written through el2_phys() and the whole RAM is restored as before the
// guess: zero part given back to the kernel, the rest copied.
constexpr size_t kKeptPagesMax = 64;

struct Target {
  El2Config config;
  Ram ram;
  size_t mem_size = 0;
  size_t host_bytes = 0, hyp_bytes = 0;
  size_t page_size = 0;
  // The kernel code's view, per host page: whether the view maps it (the
  // page is shared with the hypervisor, but for `pending` and `stale`), its
  // memfd slot (-1: private anonymous).
  std::vector<uint8_t> open;
  std::vector<int32_t> slot;
  std::vector<uint32_t> adopted;     // host pages with a slot
  std::vector<uint32_t> last_open;   // per host page: `restores` when it was last opened
  uint32_t restores = 0;             // restores of the RAM so far
  std::vector<uint32_t> stale;       // open host pages a restore unshared, to close (settle)
  std::vector<uint32_t> free_slots;  // slots no page holds
  std::vector<uint32_t> pending;     // adopted host pages shared with the hyp, to open (settle)
  uint32_t n_slots = 0;
  // The pages handed out by el2_phys() since the last restore (the harness's
  // TX writes, host_fill, the RXTX_MAP buffers), listed once each up to
  // kKeptPagesMax; written_over: more than that.
  std::vector<uint32_t> written;
  bool written_over = false;
  std::vector<uint32_t> kept;  // el2_restore's scratch list
  uint64_t hyp_base_pa = 0;
  std::optional<Mutable> m;
  El3Fn el3;  // empty: m->el3
  CallStatus last = CallStatus::kOk;
  Snapshot snap;
};

Target& T() {
  static Target t;
  return t;
}

BuildInfo MakeBuildInfo() {
  kc_el2_build_info bi{};
  kc_el2_get_build_info(&bi);
  BuildInfo b;
  b.tree_path = KC_TREE_PATH_STR;
  b.tree_version = KC_TREE_VERSION_STR;
  b.smc_api = KC_TREE_SMC_API_STR;
  b.handles_reclaim2 = KC_TREE_HANDLES_RECLAIM2 != 0;
  b.page_size = bi.page_size;
  b.ffa_mbox_pages = bi.ffa_mbox_nr_pages;
  b.ffa_proxy_pages = bi.ffa_proxy_pages;
#ifdef KC_EL2_SANITIZED
  b.sanitized = true;
#endif
  return b;
}

// --- C hooks -----------------------------------------------------------------

void El3Smc(void*, const uint64_t in[KC_SMC_NREGS], uint64_t out[KC_SMC_NREGS]) {
  Target& t = T();
  if (t.el3)
    t.el3(in, out);
  else
    t.m->el3.Smc(in, out);
}

// --- the kernel code's view of host RAM ---------------------------------------
//
// Per host page: `open` (accessible in the view) follows the tracker's
// "shared with the hypervisor", with two delays that save an mprotect each:
// - a page shared is opened (`pending`) before the kernel code forms an
//   address in host memory (kc_el2_hyp_va, hyp_pin_shared_mem) or when the
//   host call returns, so the host's TX and RX, shared one after the other,
//   open with one mprotect;
// - a page the restore unshares stays open (`stale`) until the kernel code
//   first forms an address in host memory after the restore, and is closed
//   then. The restore gave the kernel code back its statics as at the
//   snapshot, so until that first conversion it holds no address in host
//   memory that is not shared at the snapshot (and host memory lies apart
//   from the hypervisor's pages, behind guards): a stale page cannot be
//   reached, and a scenario that shares the same mailboxes again (nearly
//   every scenario: TX and RX at the first two pages) costs no mprotect.
// A page unshared during a scenario (FFA_RXTX_UNMAP) closes at once.

off_t slot_offset(const Target& t, uint32_t k) {
  return static_cast<off_t>(t.hyp_bytes + (2 * size_t{k} + 1) * t.page_size);
}

void protect(Target& t, uint32_t first, size_t n, bool on) {
  if (mprotect(t.ram.vhost + size_t{first} * t.page_size, n * t.page_size, on ? PROT_READ | PROT_WRITE : PROT_NONE) !=
      0)
    ram_fatal("mprotect of the hypervisor's view");
  for (size_t r = 0; r < n; ++r) t.open[first + r] = on;
}

// Host page i moves into a memfd slot, mapped at its place in both views
// (open: it is being shared with the hypervisor).
void adopt(Target& t, uint32_t i) {
  const size_t ps = t.page_size;
  uint32_t k;
  if (!t.free_slots.empty()) {
    k = t.free_slots.back();
    t.free_slots.pop_back();
  } else {
    k = t.n_slots++;
    if (ftruncate(t.ram.fd, slot_offset(t, k) + static_cast<off_t>(ps)) != 0) ram_fatal("ftruncate of the RAM's memfd");
  }
  uint8_t* const h = t.ram.mem + size_t{i} * ps;
  const off_t off = slot_offset(t, k);
  if (pwrite(t.ram.fd, h, ps, off) != static_cast<ssize_t>(ps)) ram_fatal("pwrite into the RAM's memfd");
  if (mmap(h, ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, t.ram.fd, off) == MAP_FAILED)
    ram_fatal("mmap of an adopted host page");
  if (mmap(t.ram.vhost + size_t{i} * ps, ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, t.ram.fd, off) ==
      MAP_FAILED)
    ram_fatal("mmap of an adopted host page into the hypervisor's view");
  t.slot[i] = static_cast<int32_t>(k);
  t.open[i] = 1;
  t.adopted.push_back(i);
}

// Host page i back to private anonymous memory (all zero) and out of the
// kernel code's view; its slot freed. The caller drops it from `adopted`.
void unadopt(Target& t, uint32_t i) {
  const size_t ps = t.page_size;
  uint8_t* const h = t.ram.mem + size_t{i} * ps;
  if (mmap(h, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
    ram_fatal("mmap of a host page");
  madvise(h, ps, MADV_NOHUGEPAGE);  // as the rest of the mapping (it merges back)
  if (mmap(t.ram.vhost + size_t{i} * ps, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
           0) == MAP_FAILED)
    ram_fatal("mmap of a host page out of the hypervisor's view");
  const uint32_t k = static_cast<uint32_t>(t.slot[i]);
  fallocate(t.ram.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, slot_offset(t, k), static_cast<off_t>(ps));
  t.free_slots.push_back(k);
  t.slot[i] = -1;
  t.open[i] = 0;
}

void drop(std::vector<uint32_t>& v, uint32_t i) {
  const auto it = std::find(v.begin(), v.end(), i);
  if (it != v.end()) v.erase(it);
}

// The pages of `list` (sorted here) set to `on`, consecutive ones at once.
void protect_runs(Target& t, std::vector<uint32_t>& list, bool on) {
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  for (size_t k = 0; k < list.size();) {
    size_t run = 1;
    while (k + run < list.size() && list[k + run] == list[k] + run) ++run;
    protect(t, list[k], run, on);
    k += run;
  }
  list.clear();
}

// The view as the tracker says: pending pages opened, stale ones closed.
void settle(Target& t) {
  kc_el2_phys.pending = 0;
  if (!t.pending.empty()) protect_runs(t, t.pending, true);
  if (!t.stale.empty()) protect_runs(t, t.stale, false);
}

void OpenPending() { settle(T()); }

// Host page i became shared with the hypervisor.
void share_open(Target& t, uint32_t i) {
  t.last_open[i] = t.restores;
  if (t.open[i]) {  // a stale page shared again: open already
    drop(t.stale, i);
    return;
  }
  if (t.slot[i] < 0) {
    adopt(t, i);
    return;
  }
  t.pending.push_back(i);
  kc_el2_phys.pending = 1;
}

// Host page i is no longer shared: closed now (never opened: nothing to do).
void unshare_close(Target& t, uint32_t i) {
  const auto it = std::find(t.pending.begin(), t.pending.end(), i);
  if (it != t.pending.end()) {
    t.pending.erase(it);
    return;
  }
  if (t.open[i]) protect(t, i, 1, false);
}

// The host page of pfn, if it is one.
bool host_page(const Target& t, uint64_t pfn, uint32_t* i) {
  const uint64_t first = t.config.phys_base / t.page_size;
  if (pfn < first || pfn - first >= t.config.host_pages) return false;
  *i = static_cast<uint32_t>(pfn - first);
  return true;
}

// After a restore (the tracker as at the snapshot): open pages no longer
// shared are stale, pages shared at the snapshot but closed are opened (a
// page shared at the snapshot stays adopted: unadopt_idle).
void restore_view(Target& t) {
  t.pending.clear();
  t.stale.clear();
  const std::vector<uint8_t>& views = t.m->tracker.views();
  const uint8_t shared = static_cast<uint8_t>(PageView::kSharedWithHyp);
  for (uint32_t i : t.adopted) {
    const bool want = views[i] == shared;
    if (t.open[i] && !want) t.stale.push_back(i);
    if (!t.open[i] && want) protect(t, i, 1, true);
  }
  kc_el2_phys.pending = !t.stale.empty();
}

// A restore keeps the adopted pages the scenario shared with the hypervisor
// (or that are shared at the snapshot) and, of the others (idle), the
// kIdleKeep last shared, if within kIdleRestores restores; the rest go back
// into anonymous memory. (Mailboxes alternate between a few pages: the
// corpora's scenarios map TX and RX at the first two pages or at the first
// and the 64K-th; an idle page costs each restore a look.)
void unadopt_idle(Target& t) {
  const uint32_t now = t.restores++;  // share_open stamped this scenario's pages with it
  const std::vector<uint8_t>& snap = t.snap.m->tracker.views();
  const uint8_t shared = static_cast<uint8_t>(PageView::kSharedWithHyp);
  size_t n = 0, idle = 0;
  for (uint32_t i : t.adopted) idle += t.last_open[i] != now && snap[i] != shared;
  if (idle == 0) return;
  // The kIdleKeep idle pages shared last.
  uint32_t keep_from = 0;  // idle pages last shared before this are dropped
  if (idle > kIdleKeep) {
    std::vector<uint32_t> stamps;
    for (uint32_t i : t.adopted)
      if (t.last_open[i] != now && snap[i] != shared) stamps.push_back(t.last_open[i]);
    std::nth_element(stamps.begin(), stamps.begin() + (kIdleKeep - 1), stamps.end(), std::greater<uint32_t>());
    keep_from = stamps[kIdleKeep - 1];
  }
  for (uint32_t i : t.adopted) {
    const bool keep = t.last_open[i] == now || snap[i] == shared ||
                      (t.last_open[i] >= keep_from && now - t.last_open[i] <= kIdleRestores);
    if (keep) {
      t.adopted[n++] = i;
    } else {
      unadopt(t, i);
      drop(t.stale, i);
      drop(t.pending, i);
    }
  }
  t.adopted.resize(n);
}

int ShareHyp(void*, uint64_t pfn) {
  Target& t = T();
  const int r = t.m->tracker.ShareHyp(pfn);
  uint32_t i;
  if (r == 0 && host_page(t, pfn, &i)) share_open(t, i);
  return r;
}

int UnshareHyp(void*, uint64_t pfn) {
  Target& t = T();
  const int r = t.m->tracker.UnshareHyp(pfn);
  uint32_t i;
  if (r == 0 && host_page(t, pfn, &i)) unshare_close(t, i);
  return r;
}

int ShareFfa(void*, uint64_t pfn, uint64_t n) { return T().m->tracker.ShareFfa(pfn, n); }
int UnshareFfa(void*, uint64_t pfn, uint64_t n) { return T().m->tracker.UnshareFfa(pfn, n); }
int Pin(void*, uint64_t from, uint64_t to) { return T().m->tracker.Pin(from, to); }
int Unpin(void*, uint64_t from, uint64_t to) { return T().m->tracker.Unpin(from, to); }

void OnWarn(void*, const char* file, int line, const char* expr) {
  T().m->warnings.push_back(Warning{file, line, expr});
}

}  // namespace

const BuildInfo& el2_build_info() {
  static const BuildInfo b = MakeBuildInfo();
  return b;
}

bool el2_init(std::string* err) { return el2_init(El2Config{}, err); }

bool el2_init(const El2Config& config, std::string* err) {
  Target& t = T();
  const BuildInfo& bi = el2_build_info();
  const uint64_t ps = bi.page_size;
  const uint64_t hyp_pages = bi.ffa_proxy_pages;
  unsigned shift = 0;
  while ((uint64_t{1} << shift) < ps) shift++;

  if (config.host_pages == 0 || config.phys_base % ps) {
    if (err) *err = "el2_init: host_pages must be > 0 and phys_base page aligned";
    return false;
  }
  t.config = config;
  t.mem_size = (config.host_pages + hyp_pages) * ps;
  t.page_size = ps;
  t.ram.release();
  t.host_bytes = config.host_pages * ps;
  t.hyp_bytes = hyp_pages * ps;
  {
    // The harness's view.
    const size_t len = t.mem_size + 2 * kBlock;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      if (err) *err = "el2_init: cannot map physical memory";
      return false;
    }
    uint8_t* const base = static_cast<uint8_t*>(m);
    const uintptr_t floor = (reinterpret_cast<uintptr_t>(base) + kBlock - 1) / kBlock * kBlock;
    uint8_t* const mem = reinterpret_cast<uint8_t*>(floor + config.phys_base % kBlock);
    t.ram.base = base;
    t.ram.len = len;
    t.ram.mem = mem;
    t.ram.block_floor = reinterpret_cast<uint8_t*>(floor);
    // Small pages only: el2_restore gives single pages back to the kernel and
    // keeps others mapped, which would split a transparent huge page each time.
    madvise(base, len, MADV_NOHUGEPAGE);
    ASAN_UNPOISON_MEMORY_REGION(base, len);
    ASAN_POISON_MEMORY_REGION(base, static_cast<size_t>(mem - base));
    ASAN_POISON_MEMORY_REGION(mem + t.mem_size, static_cast<size_t>(base + len - (mem + t.mem_size)));
    // The hypervisor's pages: in the memfd, at offset 0.
    t.ram.fd = memfd_create("kconform-el2-ram", MFD_CLOEXEC);
    if (t.ram.fd < 0 || ftruncate(t.ram.fd, static_cast<off_t>(t.hyp_bytes + ps)) != 0 ||
        mmap(mem + t.host_bytes, t.hyp_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, t.ram.fd, 0) ==
            MAP_FAILED) {
      if (err) *err = std::string("el2_init: cannot map the hypervisor's pages: ") + std::strerror(errno);
      return false;
    }
    // The kernel code's view: all inaccessible but the hypervisor's pages.
    // Each part at its physical address's offset in a 2 MiB block, as the
    // harness's (the kernel code aligns virtual addresses to PAGE_SIZE).
    t.ram.vlen = kGuardLow + t.host_bytes + kGuardMid + t.hyp_bytes + kGuardHigh + 3 * kBlock;
    void* v = mmap(nullptr, t.ram.vlen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (v == MAP_FAILED) {
      if (err) *err = std::string("el2_init: cannot reserve the hypervisor's view: ") + std::strerror(errno);
      return false;
    }
    t.ram.vbase = static_cast<uint8_t*>(v);
    auto at_offset = [](uintptr_t from, uint64_t pa) {  // the first address >= from at pa's offset in a block
      const uintptr_t off = static_cast<uintptr_t>(pa % kBlock), a = (from - off + kBlock - 1) / kBlock * kBlock + off;
      return reinterpret_cast<uint8_t*>(a);
    };
    t.ram.vhost = at_offset(reinterpret_cast<uintptr_t>(t.ram.vbase) + kGuardLow, config.phys_base);
    t.ram.vhyp = at_offset(reinterpret_cast<uintptr_t>(t.ram.vhost) + t.host_bytes + kGuardMid,
                           config.phys_base + t.host_bytes);
    if (mmap(t.ram.vhyp, t.hyp_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, t.ram.fd, 0) == MAP_FAILED) {
      if (err) *err = std::string("el2_init: cannot map the hypervisor's view: ") + std::strerror(errno);
      return false;
    }
    // Under ASan the view's pages are addressable (an access outside what it
    // maps faults, as in a plain build); no stale poison from an earlier use
    // of these addresses.
    ASAN_UNPOISON_MEMORY_REGION(t.ram.vhost, t.host_bytes);
    ASAN_UNPOISON_MEMORY_REGION(t.ram.vhyp, t.hyp_bytes);
  }
  t.open.assign(config.host_pages, 0);
  t.slot.assign(config.host_pages, -1);
  t.adopted.clear();
  t.pending.clear();
  t.last_open.assign(config.host_pages, 0);
  t.restores = 0;
  t.stale.clear();
  t.free_slots.clear();
  t.n_slots = 0;
  t.hyp_base_pa = config.phys_base + t.host_bytes;

  kc_el2_phys = kc_el2_phys_map{config.phys_base,
                                t.mem_size,
                                t.hyp_base_pa,
                                t.hyp_bytes,
                                static_cast<uintptr_t>(config.phys_base) - reinterpret_cast<uintptr_t>(t.ram.vhost),
                                static_cast<uintptr_t>(t.hyp_base_pa) - reinterpret_cast<uintptr_t>(t.ram.vhyp),
                                reinterpret_cast<uintptr_t>(t.ram.vhyp),
                                0,
                                OpenPending};
  t.m.emplace(Mutable{PageTracker(config.phys_base, config.host_pages, hyp_pages, shift,
                                  config.ipa_bits),
                      DefaultEl3{}, {}});
  t.el3 = config.el3;
  kc_el3_smc = El3Smc;
  kc_el3_ctx = nullptr;
  kc_el2_stage2 = kc_el2_stage2_ops{nullptr, ShareHyp, UnshareHyp, ShareFfa, UnshareFfa, Pin, Unpin};
  kc_el2_on_warn = OnWarn;
  kc_el2_warn_ctx = nullptr;
  kc_el2_shim = kc_el2_shim_state{};

  // A fresh ffa.c: zero its statics, as at boot.
  std::vector<uint8_t> zero(kc_el2_ffa_state_size());
  kc_el2_ffa_state_load(zero.data());

  kc_el2_build_info kbi{};
  kc_el2_get_build_info(&kbi);
  kc_el2_set_smccc_version(config.smccc_version ? config.smccc_version : kbi.smccc_version_1_2);
  int status = KC_EL2_OK;
  const int ret = kc_el2_hyp_ffa_init(t.ram.vhyp, &status);
  if (status != KC_EL2_OK || ret != 0) {
    if (err)
      *err = "hyp_ffa_init failed: " +
             (status != KC_EL2_OK ? std::string("fatal error at EL2") : "returned " + std::to_string(ret));
    return false;
  }
  t.last = CallStatus::kOk;
  el2_snapshot();
  return true;
}

void el2_snapshot() {
  Target& t = T();
  t.snap.ffa_state.resize(kc_el2_ffa_state_size());
  kc_el2_ffa_state_save(t.snap.ffa_state.data());
  t.snap.shim = kc_el2_shim;
  t.snap.m = t.m;
  t.snap.memory.assign(t.ram.mem, t.ram.mem + t.mem_size);
  size_t z = 0;
  while (z < t.mem_size && t.snap.memory[z] == 0) ++z;
  t.snap.zero_prefix = z;
  t.written.clear();
  t.written_over = false;
}

unsigned restore_skip = 0;  // tests only (el2_set_restore_skip)

// [a, b) zero again, by page: most kept pages (the hyp's descriptor buffer,
// a mailbox no op wrote) are zero already, and reading a page is cheaper than
// writing it.
static void zero_written(uint8_t* a, uint8_t* b) {
  constexpr size_t kChunk = 4096;
  for (uint8_t* p = a; p < b; p += kChunk)
    if (!all_zero(p, kChunk)) std::memset(p, 0, kChunk);
}

// The RAM as at the snapshot. The snapshot's zero part (most of the host RAM,
// [0, zero_prefix)) is where a scenario's writes usually land, on a few pages:
// the pages we know it may have written (`kept`: what el2_phys() handed out,
// host pages shared with the hyp, which ffa.c writes as the host's RX, and
// the hyp's own pages) are zeroed in place and stay mapped (no fault when the
// next scenario writes them again), and every other page of the zero part is
// given back to the kernel. A write through a path not in the guess (the
// SPMC zeroing memory it was lent, a real EL3) is undone all the same: the
// guess decides the cost, never the result. The pages in the memfd (the
// hyp's, the adopted host pages) are always zeroed in place: giving a shared
// mapping back would not zero it. The part past the zero prefix is copied.
static void restore_ram(Target& t) {
  // (Not when a test leaves the kernel code's statics out: it keeps its addresses: el2_restore.)
  if (!(restore_skip & kRestoreFfaStatics)) unadopt_idle(t);
  const size_t ps = t.page_size, z = t.snap.zero_prefix / ps * ps;  // zero pages: [0, z)
  uint8_t* const mem = t.ram.mem;
  const uint64_t host_pages = t.config.host_pages, pages = t.mem_size / ps;
  std::vector<uint32_t>& kept = t.kept;
  kept.clear();
  bool over = t.written_over;
  if (!over) {
    kept = t.written;
    const uint64_t base_pfn = t.config.phys_base / ps;
    for (const Stage2Call& c : t.m->tracker.log())
      if (c.kind == Stage2Call::Kind::kShareHyp && c.a >= base_pfn && c.a - base_pfn < pages)
        kept.push_back(static_cast<uint32_t>(c.a - base_pfn));
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    // Host pages past the bound (a scenario that mapped mailboxes at many
    // places): the cost of zeroing them in place would pass the kernel's.
    over = kept.size() > 2 * kKeptPagesMax;
    if (over) kept.clear();
  }
  kept.insert(kept.end(), t.adopted.begin(), t.adopted.end());
  for (uint64_t p = host_pages; p < pages; ++p) kept.push_back(static_cast<uint32_t>(p));
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  size_t done = 0;  // [0, done) restored
  // [done, to): the first gap from the 2 MiB boundary below the RAM (slack
  // of the mapping before it).
  auto gap = [&](size_t to) {
    if (done == 0 && madvise(t.ram.block_floor, static_cast<size_t>(mem + to - t.ram.block_floor), MADV_DONTNEED) == 0)
      return;
    give_back(mem + done, to - done);
  };
  for (size_t k = 0; k < kept.size() && size_t{kept[k]} * ps < z;) {
    size_t run = 1;  // kept[k, k + run): consecutive pages
    while (k + run < kept.size() && kept[k + run] == kept[k] + run && size_t{kept[k + run]} * ps < z) ++run;
    const size_t a = size_t{kept[k]} * ps, b = a + run * ps;
    gap(a);
    zero_written(mem + a, mem + b);
    done = b;
    k += run;
  }
  gap(z);
  std::memset(mem + z, 0, t.snap.zero_prefix - z);
  const size_t zp = t.snap.zero_prefix;
  std::memcpy(mem + zp, t.snap.memory.data() + zp, t.mem_size - zp);
}

void el2_restore() {
  Target& t = T();
  // RAM first: its guess of the pages written reads the tracker's log.
  if (!(restore_skip & kRestoreRam)) restore_ram(t);
  t.written.clear();
  t.written_over = false;
  if (!(restore_skip & kRestoreFfaStatics)) {
    kc_el2_ffa_state_load(t.snap.ffa_state.data());
    kc_el2_shim = t.snap.shim;
  }
  if (!(restore_skip & kRestoreTracker)) {
    // The tracker's pages changed since (PageTracker::RestoreFrom), its log,
    // the default EL3's calls and the warnings.
    t.m->tracker.RestoreFrom(t.snap.m->tracker);
    t.m->el3 = t.snap.m->el3;
    t.m->warnings = t.snap.m->warnings;
  }
  // The kernel code's view follows the tracker (the pages shared with the
  // hypervisor at the snapshot), since the kernel code's statics are back as
  // at the snapshot too (stale pages: restore_view). A test that leaves the
  // statics out (el2_set_restore_skip) keeps the view as it is: the kernel
  // code keeps the addresses it had, and the state that differs is the test's
  // finding, not a fault.
  if (!(restore_skip & kRestoreFfaStatics)) restore_view(t);
  t.last = CallStatus::kOk;
}

void el2_set_restore_skip(unsigned mask) { restore_skip = mask; }
unsigned el2_restore_skip() { return restore_skip; }

std::vector<uint8_t> el2_state_bytes() {
  Target& t = T();
  std::vector<uint8_t> b(t.ram.mem, t.ram.mem + t.mem_size);
  auto put = [&b](const void* p, size_t n) {
    const uint8_t* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  };
  const std::vector<uint8_t> s = el2_ffa_state();
  put(s.data(), s.size());
  put(&kc_el2_shim, sizeof kc_el2_shim);
  const PageTracker& tr = t.m->tracker;
  put(tr.pages().data(), tr.pages().size() * sizeof(PageState));
  for (const Stage2Call& c : tr.log()) {
    put(&c.kind, sizeof c.kind);
    put(&c.a, sizeof c.a);
    put(&c.b, sizeof c.b);
    put(&c.ret, sizeof c.ret);
  }
  const uint64_t n_log = tr.log().size(), n_warn = t.m->warnings.size();
  put(&n_log, sizeof n_log);
  put(&n_warn, sizeof n_warn);
  return b;
}

size_t el2_snapshot_bytes() { return kc_el2_ffa_state_size(); }

std::vector<uint8_t> el2_ffa_state() {
  std::vector<uint8_t> s(kc_el2_ffa_state_size());
  kc_el2_ffa_state_save(s.data());
  return s;
}

bool el2_host_call(const uint64_t in[kNumRegs], uint64_t out[kNumRegs]) {
  int handled = 0;
  const int status = kc_el2_host_call(in, out, &handled);
  Target& t = T();
  if (!t.pending.empty()) settle(t);  // what the call shared with the hypervisor and did not touch yet
  t.last = status == KC_EL2_OK ? CallStatus::kOk : CallStatus::kFatal;
  return handled != 0;
}

void el2_host_smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs]) {
  if (!el2_host_call(in, out) && T().last == CallStatus::kOk) kc_el2_forward_smc(in, out);
}

CallStatus el2_last_status() { return T().last; }
int el2_locks_held() { return kc_el2_shim.locks_held; }
const std::vector<Warning>& el2_warnings() { return T().m->warnings; }

void el2_set_el3(El3Fn fn) { T().el3 = std::move(fn); }
DefaultEl3& el2_default_el3() { return T().m->el3; }

std::span<uint8_t> el2_phys_mem() { return {T().ram.mem, T().mem_size}; }
uint64_t el2_phys_base() { return T().config.phys_base; }

uint8_t* el2_phys(uint64_t pa, size_t len) {
  Target& t = T();
  const uint64_t base = t.config.phys_base;
  if (pa < base || pa - base > t.mem_size || len > t.mem_size - (pa - base)) return nullptr;
  // What el2_restore copies back rather than giving back to the kernel.
  if (len && !t.written_over) {
    const uint64_t first = (pa - base) / t.page_size, last = (pa - base + len - 1) / t.page_size;
    for (uint64_t p = first; p <= last && !t.written_over; ++p) {
      if (std::find(t.written.begin(), t.written.end(), p) != t.written.end()) continue;
      if (t.written.size() >= kKeptPagesMax)
        t.written_over = true;
      else
        t.written.push_back(static_cast<uint32_t>(p));
    }
  }
  return t.ram.mem + (pa - base);
}

uint64_t el2_host_page_pa(uint64_t i) { return T().config.phys_base + i * el2_build_info().page_size; }
uint64_t el2_hyp_tx_pa() { return T().hyp_base_pa; }
uint64_t el2_hyp_rx_pa() {
  const BuildInfo& b = el2_build_info();
  return T().hyp_base_pa + b.ffa_mbox_pages * b.page_size;
}
PageTracker& el2_tracker() { return T().m->tracker; }

// --- the hypervisor's view ----------------------------------------------------

uint8_t* el2_hyp_va(uint64_t pa) {
  const Target& t = T();
  if (pa - t.hyp_base_pa < t.hyp_bytes) return t.ram.vhyp + (pa - t.hyp_base_pa);
  return t.ram.vhost + (pa - t.config.phys_base);  // (wraps: outside RAM is outside the view's RAM)
}

void el2_hyp_settle() { settle(T()); }

bool el2_hyp_maps(uint64_t pa) {
  const Target& t = T();
  const uint64_t base = t.config.phys_base;
  if (pa - t.hyp_base_pa < t.hyp_bytes) return true;
  if (pa < base || pa - base >= t.host_bytes) return false;
  return t.open[(pa - base) / t.page_size] != 0;
}

namespace {

// A bounded string in a caller's buffer; no allocation (signal handlers).
struct Text {
  char* buf;
  size_t n, k = 0;
  void put(const char* s) {
    while (*s && k + 1 < n) buf[k++] = *s++;
    buf[k] = 0;
  }
  void hex(uint64_t v) {
    char d[19];
    int i = 0;
    do {
      d[i++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v && i < 16);
    put("0x");
    while (i > 0 && k + 1 < n) buf[k++] = d[--i];
    buf[k] = 0;
  }
  // A byte count: decimal below 64 KiB, hexadecimal past it; "what" after it.
  void bytes(uint64_t v, const char* what) {
    if (v < 65536) dec(v); else hex(v);
    put(v == 1 ? " byte " : " bytes ");
    put(what);
  }
  // How far past an end: "just past" for the first byte.
  void past(uint64_t v, const char* what) {
    if (v == 0) {
      put("just past ");
      put(what);
    } else {
      bytes(v, "past ");
      put(what);
    }
  }
  void dec(uint64_t v) {
    char d[21];
    int i = 0;
    do {
      d[i++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v && i < 20);
    while (i > 0 && k + 1 < n) buf[k++] = d[--i];
    buf[k] = 0;
  }
};

const char* view_name(uint8_t v) {
  switch (static_cast<PageView>(v)) {
    case PageView::kHostOwned: return "host-owned";
    case PageView::kSharedWithFfa: return "shared with FF-A";
    case PageView::kSharedWithHyp: return "shared with the hypervisor";
    case PageView::kHypOwned: return "hypervisor-owned";
    case PageView::kNotMemory: break;
  }
  return "?";
}

}  // namespace

bool el2_describe_fault(uintptr_t addr, int access, char* buf, size_t n) {
  const Target& t = T();
  if (!buf || n == 0 || !t.ram.vbase || addr < reinterpret_cast<uintptr_t>(t.ram.vbase) ||
      addr - reinterpret_cast<uintptr_t>(t.ram.vbase) >= t.ram.vlen)
    return false;
  const uintptr_t host = reinterpret_cast<uintptr_t>(t.ram.vhost), hyp = reinterpret_cast<uintptr_t>(t.ram.vhyp);
  const uint64_t base = t.config.phys_base, ps = t.page_size;
  Text o{buf, n};
  o.put(access == 2 ? "EL2 write at " : access == 1 ? "EL2 read at " : "EL2 access at ");
  o.hex(addr);
  o.put(" in the hypervisor's view of memory: ");
  if (addr < host) {
    o.bytes(host - addr, "below host memory (PA ");
    o.hex(base);
    o.put("): not mapped at EL2, a hyp panic");
  } else if (addr - host < t.host_bytes) {
    const uint64_t pa = base + (addr - host), page = pa / ps * ps;
    const size_t i = static_cast<size_t>((addr - host) / ps);
    o.put("PA ");
    o.hex(pa);
    o.put(", host page ");
    o.hex(page);
    const uint8_t v = t.m && i < t.m->tracker.views().size() ? t.m->tracker.views()[i] : 0;
    if (v == static_cast<uint8_t>(PageView::kSharedWithHyp)) {
      o.put(" is shared with the hypervisor yet was not mapped (a fault in the harness's view)");
    } else {
      o.put(" not shared with the hypervisor (");
      o.put(view_name(v));
      o.put("): EL2 maps a host page only while the host shares it with the hypervisor (__pkvm_host_share_hyp), "
            "so this is a hyp panic");
    }
  } else if (addr < host + t.host_bytes + (hyp - (host + t.host_bytes)) / 2) {
    o.past(addr - (host + t.host_bytes), "the end of host memory (PA ");
    o.hex(base + t.host_bytes);
    o.put("): not mapped at EL2, a hyp panic");
  } else if (addr < hyp) {
    o.bytes(hyp - addr, "before the proxy's TX mailbox (PA ");
    o.hex(t.hyp_base_pa);
    o.put("): outside the pages hyp_ffa_init() was given");
  } else if (addr - hyp < t.hyp_bytes) {
    const uint64_t mbox = el2_build_info().ffa_mbox_pages * ps, off = addr - hyp;
    o.put("PA ");
    o.hex(t.hyp_base_pa + off);
    o.put(off < mbox ? " in the proxy's TX mailbox" : off < 2 * mbox ? " in the proxy's RX mailbox"
                                                                     : " in the proxy's descriptor buffer");
    o.put(", which EL2 maps (a fault in the harness's view)");
  } else {
    o.past(addr - (hyp + t.hyp_bytes), "the end of the proxy's descriptor buffer (PA ");
    o.hex(t.hyp_base_pa + t.hyp_bytes);
    o.put("): outside the hyp_ffa_proxy_pages() pages hyp_ffa_init() was given");
  }
  return true;
}

}  // namespace kconform::el2
