// TfaSpmc: TF-A's EL3 SPMC, booted once per process (tfa_spmc.h).
#include "targets/spmc/tfa_spmc.h"

#include <sys/mman.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "models/ffa/regs.h"
#include "models/ffa/spmc_view.h"

namespace kconform::spmc {

namespace F = kconform::ffa;

namespace {

constexpr uint64_t kFfaPage = 4096;
// Outside RAM: a reserved window the SPMC may be handed but cannot touch, and
// a tail as long as the largest buffer pair (FFA_RXTX_MAP's 6-bit page count),
// so a buffer translated into it stays inside it.
constexpr uint64_t kNoMemBytes = 1ull << 24;
constexpr uint64_t kNoMemReserve = kNoMemBytes + 64 * 4096;

// A fault of the SPMC's on the no-memory window while a call is in flight is
// the external abort BL31 would take (kc_spmc_external_abort); any other
// fault goes to the handler that was there before (the runner's crash marker,
// ASan's): it is restored and the access faults again.
uintptr_t g_nomem_lo = 0, g_nomem_hi = 0;
volatile sig_atomic_t g_in_call = 0;
struct sigaction g_old_segv, g_old_bus;
void on_fault(int sig, siginfo_t* info, void*) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  if (g_in_call && a >= g_nomem_lo && a < g_nomem_hi) {
    g_in_call = 0;
    kc_spmc_external_abort();  // longjmps out of the call
  }
  sigaction(sig, sig == SIGSEGV ? &g_old_segv : &g_old_bus, nullptr);
}

bool g_handler = false;

// Installed at the first call into the SPMC, not at boot: by then the process
// has the handlers it crashes through (the runner's crash marker, the
// sanitizer's, libFuzzer's), which a foreign fault goes on to.
void install_fault_handler() {
  if (g_handler) return;
  g_handler = true;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_old_segv);
  sigaction(SIGBUS, &sa, &g_old_bus);
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}

template <typename T>
void put(uint8_t* b, size_t off, T v) {
  std::memcpy(b + off, &v, sizeof v);
}

struct Process {
  bool tried = false;
  std::string error;
  std::unique_ptr<TfaSpmc> spmc;
};
Process g_process;

}  // namespace

void TfaSpmc::model_config(F::SpmcConfig* c) {
  c->version = kVersion;
  c->n_sps = 1;
  c->sp_ids[0] = kSpId;
  for (uint32_t k = 1; k < F::kMaxSps; ++k) c->sp_ids[k] = 0;
  c->reclaim2 = false;
  c->donate = false;
  c->one_send_in_flight = false;
  c->max_fnum = kc_spmc_ffa_fnum_max();  // SPMC:ROUTED: BL31 hands the SPMC only these (kc_spmc_smc)
}

const char* TfaSpmc::tree_version() { return KC_SPMC_TFA_VERSION; }

TfaSpmc* TfaSpmc::get(std::string* error) {
  // KCONFORM_SPMC_LOG=1: TF-A's own log lines (WARN names the check that
  // refused a call) on stdout, for triage.
  const char* log = std::getenv("KCONFORM_SPMC_LOG");
  kc_spmc_knobs.log_verbose = log && *log && *log != '0';
  if (!g_process.tried) {
    g_process.tried = true;
    auto s = std::unique_ptr<TfaSpmc>(new TfaSpmc());
    if (s->boot(&g_process.error)) g_process.spmc = std::move(s);
  }
  if (!g_process.spmc && error) *error = g_process.error;
  return g_process.spmc.get();
}

// spmc_setup() with the SP's manifest, then the SP maps its mailbox; the
// snapshot after that is where every scenario starts.
bool TfaSpmc::boot(std::string* error) {
  void* m = mmap(nullptr, 2 * kFfaPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* n = mmap(nullptr, kNoMemReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED || n == MAP_FAILED) {
    *error = std::string("spmc: mmap: ") + std::strerror(errno);
    return false;
  }
  sp_mbox_ = static_cast<uint8_t*>(m);
  nomem_ = static_cast<uint8_t*>(n);
  g_nomem_lo = reinterpret_cast<uintptr_t>(nomem_);
  g_nomem_hi = g_nomem_lo + kNoMemReserve;
  kc_spmc_config cfg{kSpId, kSpVersion, {0x6b636f6e, 0x666f726d, 0, kSpId}};
  const int rc = kc_spmc_init(&cfg);
  if (rc != 0) {
    *error = "spmc: TF-A's spmc_setup() failed (" + std::to_string(rc) + ")";
    return false;
  }
  uint64_t in[8] = {F::kFnRxtxMap64, reinterpret_cast<uint64_t>(sp_mbox_), reinterpret_cast<uint64_t>(sp_mbox_ + kFfaPage),
                    1, 0, 0, 0, 0};
  uint64_t out[8] = {};
  if (kc_spmc_smc(KC_SPMC_FROM_SP, in, out) != KC_SPMC_OK || (out[0] & 0xffffffffu) != F::kFnSuccess32) {
    *error = "spmc: the secure partition's FFA_RXTX_MAP failed (x0 " + hex(out[0]) + ", w2 " + hex(out[2]) + ")";
    return false;
  }
  boot_snapshot_ = save();
  if (boot_snapshot_.empty()) {
    *error = "spmc: snapshot failed";
    return false;
  }
  return true;
}

uint64_t TfaSpmc::nomem_va(uint64_t pa) const {
  return reinterpret_cast<uint64_t>(nomem_ + (pa & (kNoMemBytes - 1)));
}

std::vector<uint8_t> TfaSpmc::save() const {
  std::vector<uint8_t> b(kc_spmc_snapshot_size());
  if (kc_spmc_snapshot_save(b.data(), b.size()) != b.size()) b.clear();
  return b;
}

void TfaSpmc::load(const std::vector<uint8_t>& snap) {
  kc_spmc_snapshot_load(snap.data(), snap.size());
  std::memset(sp_mbox_, 0, 2 * kFfaPage);
}

bool TfaSpmc::smc(int origin, const uint64_t in[8], uint64_t out[8], std::vector<InvariantBreak>* breaks) {
  const int32_t locks = kc_spmc_counters.locks_held;
  install_fault_handler();
  g_in_call = 1;
  const int rc = kc_spmc_smc(origin, in, out);
  g_in_call = 0;
  if (rc != KC_SPMC_OK) {
    // panic, a failed assert, a deadlock or an external abort: at EL3 the
    // machine stops here. The op is a crash; the next snapshot load restores.
    std::fprintf(stderr, "kconform spmc: fatal error at EL3 (x0 = %s)\n", hex(in[0]).c_str());
    return false;
  }
  if (kc_spmc_counters.locks_held != locks && breaks)
    breaks->push_back({kFfaSpmcAnswer, "the SPMC returned with " + std::to_string(kc_spmc_counters.locks_held) +
                                           " lock(s) held (x0 = " + hex(in[0]) + ")"});
  return true;
}

int TfaSpmc::sp_op(bool retrieve, uint64_t handle, uint16_t sp, uint64_t out[8], std::vector<InvariantBreak>* breaks) {
  uint8_t* tx = sp_mbox_;
  uint16_t sender = 0;
  uint64_t tag = 0;
  for (const kc_spmc_tx& t : table())  // as the SPMC holds the transaction
    if (t.handle == handle) sender = t.sender, tag = t.tag;
  uint64_t in[8] = {};
  if (retrieve) {
    std::memset(tx, 0, 64);
    put<uint16_t>(tx, 0, sender);
    put<uint64_t>(tx, 8, handle);
    put<uint64_t>(tx, 16, tag);
    put<uint32_t>(tx, 24, 16);  // endpoint memory access descriptor size (v1.1)
    put<uint32_t>(tx, 28, 1);   // one: the SP
    put<uint32_t>(tx, 32, 48);  // at 48
    put<uint16_t>(tx, 48, sp);
    in[0] = F::kFnMemRetrieveReq64, in[1] = 64, in[2] = 64;
  } else {
    std::memset(tx, 0, 32);
    put<uint64_t>(tx, 0, handle);
    put<uint32_t>(tx, 12, 1);
    put<uint16_t>(tx, 16, sp);
    in[0] = F::kFnMemRelinquish;
  }
  if (!smc(KC_SPMC_FROM_SP, in, out, breaks)) return kFatal;
  if (retrieve && (out[0] & 0xffffffffu) == F::kFnMemRetrieveResp) {
    uint64_t rel[8] = {F::kFnRxRelease, 0, 0, 0, 0, 0, 0, 0}, o[8] = {};
    if (!smc(KC_SPMC_FROM_SP, rel, o, breaks)) return kFatal;
    for (int k = 0; k < 8; ++k) out[k] = 0;
    out[0] = F::kFnSuccess32;  // HARNESS:SP reports success, not the response
  }
  return F::is_success(out) ? 0 : F::error_code(out);
}

// SPMC:TABLE: the table TF-A holds, read through its own structures.
std::span<const kc_spmc_tx> TfaSpmc::table() {
  size_t n = kc_spmc_table(table_.data(), table_.size());
  if (n > table_.size()) {
    table_.resize(n);
    n = kc_spmc_table(table_.data(), table_.size());
  }
  return {table_.data(), n};
}

size_t TfaSpmc::count_handle(uint64_t h) {
  size_t n = 0;
  for (const kc_spmc_tx& t : table()) n += t.handle == h;
  return n;
}

uint64_t TfaSpmc::table_digest() {
  const std::span<const kc_spmc_tx> tab = table();
  const size_t n = tab.size();
  std::vector<F::SpmcViewEntry> v(n);
  for (size_t k = 0; k < n; ++k) {
    const kc_spmc_tx& t = tab[k];
    F::SpmcViewEntry& e = v[k];
    e.handle = t.handle;
    e.complete = t.complete;
    if (!t.complete) {
      e.received = t.received;
      e.total_len = t.total_len;
      continue;
    }
    e.kind = t.type;  // TF-A's flags type field: 1 share, 2 lend (the model's MemKind numbering)
    e.sender = t.sender;
    e.tag = t.tag;
    e.retrieved = t.in_use != 0;
    for (uint32_t r = 0; r < t.n_receivers && r < KC_SPMC_MAX_RECEIVERS; ++r)
      e.receivers.push_back({t.receivers[r], t.perms[r]});
    const auto* c = static_cast<const uint8_t*>(t.ranges);
    for (uint32_t r = 0; r < t.n_ranges; ++r) {  // FF-A constituent: u64 address, u32 pages, u32 reserved
      F::Constituent k2;
      std::memcpy(&k2.address, c + 16 * r, 8);
      std::memcpy(&k2.pages, c + 16 * r + 8, 4);
      e.ranges.push_back(k2);
    }
    e.total_pages = t.total_pages;
  }
  return F::spmc_view_digest(std::move(v));
}

}  // namespace kconform::spmc
