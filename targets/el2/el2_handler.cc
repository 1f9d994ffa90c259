// The EL2 target's C++ side: memory, hooks and snapshots around kc_el2_glue.c.
#include "targets/el2/el2_handler.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

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

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
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

struct Target {
  El2Config config;
  std::unique_ptr<uint8_t, FreeDeleter> mem;
  size_t mem_size = 0;
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
  t.mem.reset(static_cast<uint8_t*>(std::aligned_alloc(ps, t.mem_size)));
  if (!t.mem) {
    if (err) *err = "el2_init: cannot allocate physical memory";
    return false;
  }
  std::memset(t.mem.get(), 0, t.mem_size);
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
}

unsigned restore_skip = 0;  // tests only (el2_set_restore_skip)

void el2_restore() {
  Target& t = T();
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
  // The zero part (most of the host RAM) costs only the pages touched since.
  const size_t z = t.snap.zero_prefix;
  if (!(restore_skip & kRestoreRam)) {
    zero_bytes(t.mem.get(), z);
    std::memcpy(t.mem.get() + z, t.snap.memory.data() + z, t.mem_size - z);
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
