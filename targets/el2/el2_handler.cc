// The EL2 target's C++ side: memory, hooks and snapshots around kc_el2_glue.c.
#include "targets/el2/el2_handler.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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

struct RamMapping {
  uint8_t* base = nullptr;  // the whole mapping
  size_t len = 0;
  void operator()(uint8_t*) const {
    if (!base) return;
    ASAN_UNPOISON_MEMORY_REGION(base, len);  // the next mapping there starts clean
    munmap(base, len);
  }
};

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
  std::unique_ptr<uint8_t, RamMapping> mem;
  size_t mem_size = 0;
  uint8_t* block_floor = nullptr;  // the 2 MiB boundary at or below mem, inside the mapping
  size_t page_size = 0;
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

int ShareHyp(void*, uint64_t pfn) { return T().m->tracker.ShareHyp(pfn); }
int UnshareHyp(void*, uint64_t pfn) { return T().m->tracker.UnshareHyp(pfn); }
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
  t.mem.reset();
  {
    const size_t len = t.mem_size + 2 * kBlock;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      if (err) *err = "el2_init: cannot map physical memory";
      return false;
    }
    uint8_t* const base = static_cast<uint8_t*>(m);
    const uintptr_t floor = (reinterpret_cast<uintptr_t>(base) + kBlock - 1) / kBlock * kBlock;
    uint8_t* const mem = reinterpret_cast<uint8_t*>(floor + config.phys_base % kBlock);
    t.mem = std::unique_ptr<uint8_t, RamMapping>(mem, RamMapping{base, len});
    t.block_floor = reinterpret_cast<uint8_t*>(floor);
    // Small pages only: el2_restore gives single pages back to the kernel and
    // keeps others mapped, which would split a transparent huge page each time.
    madvise(base, len, MADV_NOHUGEPAGE);
    ASAN_UNPOISON_MEMORY_REGION(base, len);
    ASAN_POISON_MEMORY_REGION(base, static_cast<size_t>(mem - base));
    ASAN_POISON_MEMORY_REGION(mem + t.mem_size, static_cast<size_t>(base + len - (mem + t.mem_size)));
  }
  t.hyp_base_pa = config.phys_base + config.host_pages * ps;

  kc_el2_phys = kc_el2_phys_map{t.mem.get(), config.phys_base, t.mem_size,
                                static_cast<uintptr_t>(config.phys_base) -
                                    reinterpret_cast<uintptr_t>(t.mem.get())};
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
  const int ret = kc_el2_hyp_ffa_init(t.mem.get() + config.host_pages * ps, &status);
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
  t.snap.memory.assign(t.mem.get(), t.mem.get() + t.mem_size);
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
// given back to the kernel. A write through a path not in the guess (ffa.c
// writing a page it has no business in) is undone all the same: the guess
// decides the cost, never the result. The part past the zero prefix is copied.
static void restore_ram(Target& t) {
  const size_t ps = t.page_size, z = t.snap.zero_prefix / ps * ps;  // zero pages: [0, z)
  uint8_t* const mem = t.mem.get();
  std::vector<uint32_t>& kept = t.kept;
  bool over = t.written_over;
  if (!over) {
    kept = t.written;
    const uint64_t base_pfn = t.config.phys_base / ps, pages = t.mem_size / ps;
    for (const Stage2Call& c : t.m->tracker.log())
      if (c.kind == Stage2Call::Kind::kShareHyp && c.a >= base_pfn && c.a - base_pfn < pages)
        kept.push_back(static_cast<uint32_t>(c.a - base_pfn));
    for (uint64_t p = t.config.host_pages; p < pages; ++p) kept.push_back(static_cast<uint32_t>(p));
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    // Host pages past the bound (a scenario that mapped mailboxes at many
    // places): the cost of zeroing them in place would pass the kernel's.
    over = kept.size() - (pages - t.config.host_pages) > 2 * kKeptPagesMax;
  }
  if (over) {
    zero_bytes(mem, t.snap.zero_prefix);
  } else {
    size_t done = 0;  // [0, done) restored
    // [done, to): the first gap from the 2 MiB boundary below the RAM (slack
    // of the mapping before it: RamMapping).
    auto gap = [&](size_t to) {
      if (done == 0 && madvise(t.block_floor, static_cast<size_t>(mem + to - t.block_floor), MADV_DONTNEED) == 0)
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
  }
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
  t.last = CallStatus::kOk;
}

void el2_set_restore_skip(unsigned mask) { restore_skip = mask; }
unsigned el2_restore_skip() { return restore_skip; }

std::vector<uint8_t> el2_state_bytes() {
  Target& t = T();
  std::vector<uint8_t> b(t.mem.get(), t.mem.get() + t.mem_size);
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
  T().last = status == KC_EL2_OK ? CallStatus::kOk : CallStatus::kFatal;
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

std::span<uint8_t> el2_phys_mem() { return {T().mem.get(), T().mem_size}; }
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
  return t.mem.get() + (pa - base);
}

uint64_t el2_host_page_pa(uint64_t i) { return T().config.phys_base + i * el2_build_info().page_size; }
uint64_t el2_hyp_tx_pa() { return T().hyp_base_pa; }
uint64_t el2_hyp_rx_pa() {
  const BuildInfo& b = el2_build_info();
  return T().hyp_base_pa + b.ffa_mbox_pages * b.page_size;
}
PageTracker& el2_tracker() { return T().m->tracker; }

}  // namespace kconform::el2
