// SpmcFfaTarget: FF-A scenarios straight into TF-A's EL3 SPMC (spmc_ffa_target.h).
#include "targets/spmc/spmc_ffa_target.h"

#include <sys/mman.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness/scenario/ffa_abi.h"
#include "models/ffa/scenario_ops.h"
#include "models/ffa/spmc_model.h"
#include "models/ffa/spmc_view.h"
#include "targets/spmc/kc_spmc_hooks.h"

namespace kconform::spmc {

namespace F = kconform::ffa;

namespace {

// The one secure partition: the model's first (SpmcConfig::sp_ids[0]), FF-A
// v1.1 (the newest this SPMC accepts for memory sharing, targets/spmc/README.md).
constexpr uint16_t kSpId = 0x8001;
constexpr uint32_t kSpVersion = 0x10001;
constexpr uint64_t kFfaPage = 4096;
// Outside RAM: a reserved window the SPMC may be handed but cannot touch, and
// a tail as long as the largest buffer pair (FFA_RXTX_MAP's 6-bit page count),
// so a buffer translated into it stays inside it.
constexpr uint64_t kNoMemBytes = 1ull << 24;
constexpr uint64_t kNoMemReserve = kNoMemBytes + 64 * 4096;

// RAM as the el2 target lays it out (targets/el2/ffa_target.cc): 64 host pages
// from 0x80000000, and below them the pages corpora/ffa/large.kcs addresses.
constexpr uint64_t kHostPages = 64;
constexpr uint64_t kTopBase = 0x80000000;
uint64_t low_host_pages(uint64_t page_size) {
  switch (page_size) {
    case 4096: return 2368;
    case 16384: return 1088;
    default: return 320;
  }
}

// TF-A's SPMC is booted once per process (kc_spmc_init), with the SP's
// mailbox (never freed: the boot snapshot names it); each target after the
// first starts from that boot's snapshot. One target at a time.
struct Boot {
  bool done = false;
  std::string error;       // the boot failed: every open fails with it
  uint8_t* sp_mbox = nullptr;
  std::vector<uint8_t> snapshot;
};
Boot g_boot;
bool g_open = false;

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

// Installed at the first call into the SPMC, not when the target opens: by
// then the process has the handlers it crashes through (the runner's crash
// marker, the sanitizer's, libFuzzer's), which a foreign fault goes on to.
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

}  // namespace

// SPMC:TABLE: the table TF-A holds, read through its own structures
// (kc_spmc_table), in the view the model digests.
std::span<const kc_spmc_tx> SpmcFfaTarget::table() {
  size_t n = kc_spmc_table(table_.data(), table_.size());
  if (n > table_.size()) {
    table_.resize(n);
    n = kc_spmc_table(table_.data(), table_.size());
  }
  return {table_.data(), n};
}

uint64_t SpmcFfaTarget::table_digest() {
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

SpmcFfaTarget::SpmcFfaTarget(uint64_t page_size) {
  if (page_size != 4096 && page_size != 16384 && page_size != 65536) {
    error_ = "spmc: page size " + std::to_string(page_size) + " is not 4K, 16K or 64K";
    return;
  }
  if (g_open) {
    error_ = "spmc: TF-A's SPMC is global: one spmc target at a time";
    return;
  }
  const uint64_t low = low_host_pages(page_size);
  layout_.page_size = page_size;
  layout_.host_pages = kHostPages + low;
  layout_.phys_base = kTopBase - low * page_size;
  // The el2 target's hypervisor pages stay RAM (the spmc model's Normal-world
  // memory is the host pages only): directed scenarios address them as "not
  // the host's", which is memory all the same.
  layout_.hyp_pages = 4;
  layout_.mbox_pages = 1;
  // The model's SPMC as this one is configured: one partition, FFA_VERSION
  // answers v1.2 (the tree's FFA_VERSION_MINOR), no FFA_MEM_RECLAIM2.
  layout_.spmc.version = F::kVersion12;
  layout_.spmc.n_sps = 1;
  layout_.spmc.sp_ids[0] = kSpId;
  layout_.spmc.sp_ids[1] = 0;
  layout_.spmc.reclaim2 = false;
  layout_.spmc.donate = false;              // the tree's SPMC has no FFA_MEM_DONATE
  layout_.spmc.one_send_in_flight = false;  // PROFILE:ONE-SEND is the el2 machine's choice

  const size_t bytes = layout_.ram_bytes();
  void* r = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* n = mmap(nullptr, kNoMemReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED || n == MAP_FAILED) {
    error_ = std::string("spmc: mmap: ") + std::strerror(errno);
    return;
  }
  ram_ = static_cast<uint8_t*>(r);
  nomem_ = static_cast<uint8_t*>(n);

  g_nomem_lo = reinterpret_cast<uintptr_t>(nomem_);
  g_nomem_hi = g_nomem_lo + kNoMemReserve;

  // KCONFORM_SPMC_LOG=1: TF-A's own log lines (WARN names the check that
  // refused a call) on stdout, for triage.
  const char* log = std::getenv("KCONFORM_SPMC_LOG");
  kc_spmc_knobs.log_verbose = log && *log && *log != '0';

  if (!g_boot.done) boot();
  if (!g_boot.error.empty()) {
    error_ = g_boot.error;
    return;
  }
  sp_mbox_ = g_boot.sp_mbox;
  snapshot_ = g_boot.snapshot;
  kc_spmc_snapshot_load(snapshot_.data(), snapshot_.size());
  g_open = true;

  identity_.target = "spmc";
  identity_.release = "tf-a-" KC_SPMC_TFA_VERSION "-" + std::to_string(page_size / 1024) + "k";
  identity_.profile = F::spmc_profile_name(layout_);
  identity_.caps = {{"page_size", page_size},
                    {"reclaim2", 0},
                    {"ffa_version", layout_.spmc.version},
                    {"sp_count", 1},
                    {"sp_id", kSpId},
                    {"host_pages", layout_.host_pages},
                    {"phys_base", layout_.phys_base},
                    {"snapshot_bytes", snapshot_.size()}};
  identity_.cap_bits = page_size == 4096 ? F::kCapPage4k : page_size == 16384 ? F::kCapPage16k : F::kCapPage64k;
}

SpmcFfaTarget::~SpmcFfaTarget() {
  if (ok()) {
    // Nothing of TF-A's may point into this target's RAM once it is gone.
    kc_spmc_snapshot_load(snapshot_.data(), snapshot_.size());
    g_open = false;
  }
  if (ram_) munmap(ram_, layout_.ram_bytes());
  if (nomem_) munmap(nomem_, kNoMemReserve);
}

// Boots TF-A's SPMC once: spmc_setup() with the SP's manifest, then the SP
// maps its mailbox; the snapshot after that is where every scenario starts.
void SpmcFfaTarget::boot() {
  g_boot.done = true;
  void* m = mmap(nullptr, 2 * kFfaPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    g_boot.error = std::string("spmc: mmap: ") + std::strerror(errno);
    return;
  }
  g_boot.sp_mbox = static_cast<uint8_t*>(m);
  kc_spmc_config cfg{kSpId, kSpVersion, {0x6b636f6e, 0x666f726d, 0, kSpId}};
  const int rc = kc_spmc_init(&cfg);
  if (rc != 0) {
    g_boot.error = "spmc: TF-A's spmc_setup() failed (" + std::to_string(rc) + ")";
    return;
  }
  uint64_t in[8] = {F::kFnRxtxMap64, reinterpret_cast<uint64_t>(g_boot.sp_mbox),
                    reinterpret_cast<uint64_t>(g_boot.sp_mbox + kFfaPage), 1, 0, 0, 0, 0};
  uint64_t out[8] = {};
  if (kc_spmc_smc(KC_SPMC_FROM_SP, in, out) != KC_SPMC_OK || (out[0] & 0xffffffffu) != F::kFnSuccess32) {
    g_boot.error = "spmc: the secure partition's FFA_RXTX_MAP failed (x0 " + hex(out[0]) + ", w2 " + hex(out[2]) + ")";
    return;
  }
  g_boot.snapshot.resize(kc_spmc_snapshot_size());
  if (kc_spmc_snapshot_save(g_boot.snapshot.data(), g_boot.snapshot.size()) != g_boot.snapshot.size())
    g_boot.error = "spmc: snapshot failed";
}

std::unique_ptr<SpmcFfaTarget> open_spmc_ffa_target(uint64_t page_size, std::string* error) {
  auto t = std::make_unique<SpmcFfaTarget>(page_size);
  if (!t->ok()) {
    if (error) *error = t->error();
    return nullptr;
  }
  return t;
}

// Where the SPMC finds physical address pa in this process.
// Where the SPMC finds the buffer [pa, pa + len) in this process: in the RAM,
// or, if any of it is outside, in the no-memory window (an access is an
// external abort; on hardware only the part past RAM would be, a limit of
// this stand-in).
uint64_t SpmcFfaTarget::host_va(uint64_t pa, uint64_t len) const {
  if (uint8_t* p = ram(pa, len)) return reinterpret_cast<uint64_t>(p);
  return reinterpret_cast<uint64_t>(nomem_ + (pa & (kNoMemBytes - 1)));
}

uint8_t* SpmcFfaTarget::ram(uint64_t pa, uint64_t len) const {
  if (pa < layout_.phys_base || pa - layout_.phys_base > layout_.ram_bytes() ||
      len > layout_.ram_bytes() - (pa - layout_.phys_base))
    return nullptr;
  return ram_ + (pa - layout_.phys_base);
}

void SpmcFfaTarget::begin(const Scenario&) {
  kc_spmc_snapshot_load(snapshot_.data(), snapshot_.size());
  for (const auto& [pa, len] : dirty_)
    if (uint8_t* p = ram(pa, len)) std::memset(p, 0, len);
  dirty_.clear();
  std::memset(sp_mbox_, 0, 2 * kFfaPage);
  handles_.clear();
  last_desc_len_ = 0;
  tx_window_ = 0;
  tx_known_ = false;
  rx_pa_ = rx_bytes_ = 0;
  breaks_.clear();
}

bool SpmcFfaTarget::smc(int origin, const uint64_t in[8], uint64_t out[8]) {
  const int32_t locks = kc_spmc_counters.locks_held;
  install_fault_handler();
  g_in_call = 1;
  const int rc = kc_spmc_smc(origin, in, out);
  g_in_call = 0;
  if (rc != KC_SPMC_OK) {
    // panic, a failed assert, a deadlock or an external abort: at EL3 the
    // machine stops here. The op is a crash; begin() restores the SPMC.
    std::fprintf(stderr, "kconform spmc: fatal error at EL3 (x0 = %s)\n", hex(in[0]).c_str());
    return false;
  }
  if (kc_spmc_counters.locks_held != locks)
    breaks_.push_back({kFfaSpmcAnswer, "the SPMC returned with " + std::to_string(kc_spmc_counters.locks_held) +
                                           " lock(s) held (x0 = " + hex(in[0]) + ")"});
  return true;
}

// HARNESS:SP: the secure partition as borrower. A retrieve request (FF-A
// v1.1 layout, the SP's version) naming the handle, the sender and tag the SPMC
// holds for the transaction and the SP as its one receiver; its response is
// released at once. A relinquish descriptor naming the handle and the SP.
int SpmcFfaTarget::sp_op(bool retrieve, uint64_t handle, uint16_t sp, uint64_t out[8]) {
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
  if (!smc(KC_SPMC_FROM_SP, in, out)) return -1000;
  if (retrieve && (out[0] & 0xffffffffu) == F::kFnMemRetrieveResp) {
    uint64_t rel[8] = {F::kFnRxRelease, 0, 0, 0, 0, 0, 0, 0}, o[8] = {};
    smc(KC_SPMC_FROM_SP, rel, o);
    for (int k = 0; k < 8; ++k) out[k] = 0;
    out[0] = F::kFnSuccess32;  // HARNESS:SP reports success, not the response
  }
  return F::is_success(out) ? 0 : F::error_code(out);
}

uint64_t SpmcFfaTarget::tx_op(const Scenario& s, const Op& op) {
  const F::TxWrite w = F::tx_bytes(s, op);
  if (w.is_desc) last_desc_len_ = w.desc_len;
  const uint64_t len = F::tx_clip(layout_, tx_known_, tx_window_, w.offset, w.bytes.size());
  if (len == 0) return 0;
  uint8_t* dst = ram(tx_window_ + w.offset, len);
  if (!dst) return 0;
  std::memcpy(dst, w.bytes.data(), len);
  dirty_.push_back({tx_window_ + w.offset, len});
  return len;
}

Outcome SpmcFfaTarget::exec(const Scenario& s, size_t i) {
  Outcome o = exec_op(s, i);
  o.state = table_digest();
  return o;
}

Outcome SpmcFfaTarget::exec_op(const Scenario& s, size_t i) {
  using namespace F;
  breaks_.clear();
  const Op& op = s.ops[i];
  if (s.abi != Abi::kFfa || op.code >= kOpCount) return Outcome::err(ENOSYS);
  Outcome o = Outcome::ok(0);
  uint64_t out[8] = {};
  switch (op.code) {
    case kOpTxWrite:
    case kOpTxMemDesc:
    case kOpTxConstituents:
      return Outcome::ok(static_cast<int64_t>(tx_op(s, op)));
    case kOpEl3Misbehave:  // the SPMC under test is EL3: nothing to lie at (spmc_model.h)
    case kOpEl3Profile:
      return o;
    case kOpHostFill:
    case kOpHostCount: {
      const uint64_t len = host_mem_len(layout_, op.args[0], op.args[1]);
      uint8_t* m = len ? ram(op.args[0], len) : nullptr;
      const uint8_t v = static_cast<uint8_t>(op.args[2]);
      if (m && op.code == kOpHostFill) {
        std::memset(m, v, len);
        dirty_.push_back({op.args[0], len});
      }
      return Outcome::ok(static_cast<int64_t>(!m ? 0 : op.code == kOpHostFill ? len : count_bytes(m, len, v)));
    }
    case kOpSpRetrieve:
    case kOpSpRelinquish: {
      const uint64_t h = slot_handle(handles_, op.args[0]);
      const int rc = sp_op(op.code == kOpSpRetrieve, h, static_cast<uint16_t>(op.args[1]), out);
      if (rc == -1000) return Outcome::sig(SIGABRT);
      o = Outcome::ok(rc);
      for (int k = 0; k < 8; ++k) o.regs[k] = out[k] & 0xffffffffu;  // SMC32 replies: w0-w7
      return o;
    }
    default:
      break;
  }
  uint64_t in[8] = {};
  F::host_regs(op, handles_, last_desc_len_, in);
  const uint32_t fid = static_cast<uint32_t>(in[0]);
  uint64_t call[8];
  std::memcpy(call, in, sizeof call);
  if ((fid & ~kSmc64Bit) == kFnRxtxMap32) {
    const uint64_t len = (in[3] & 0x3f) * kFfaPage;  // FFA_RXTX_MAP w3[5:0]: pages of each buffer
    call[1] = host_va(in[1], len);
    call[2] = host_va(in[2], len);
  }
  // BL31 dispatches an SMC by its owning entity: only FF-A function IDs
  // reach the SPMD and then the SPMC; anything else is SMC_UNK from BL31's
  // runtime service table (bl31/bl31_main.c, common/runtime_svc.c), which is
  // not built here.
  if (!is_ffa_fid(in[0])) {
    for (int k = 0; k < 8; ++k) o.regs[k] = in[k];  // BL31 leaves the caller's registers
    o.regs[0] = 0xffffffffu;                         // but w0: SMC_UNK
    if (is_producer(op.code)) handles_.push_back(kInvalidHandle);
    return o;
  }
  if (!smc(KC_SPMC_FROM_NS, call, out)) {
    if (is_producer(op.code)) handles_.push_back(kInvalidHandle);
    return Outcome::sig(SIGABRT);
  }
  // SMCCC: the reply to an SMC32 call, and a reply of the SMC32 convention
  // (x0 an FF-A function ID with bit 30 clear: FFA_ERROR, FFA_SUCCESS_32,
  // FFA_MEM_FRAG_RX, ...), is in w0-w7; the upper halves are not part of it
  // (TF-A sign-extends FFA_ERROR's w2, spmc_ffa_error_return, and SMC_UNK).
  // A register the SPMC did not write holds what the caller passed: the
  // scenario's address, not where this process put it (translated above).
  for (int k = 1; k <= 2; ++k)
    if (call[k] != in[k] && out[k] == call[k]) out[k] = in[k];
  const bool smc32 = !(fid & kSmc64Bit) || (is_ffa_fid(out[0]) && !(out[0] & kSmc64Bit));
  for (int k = 0; k < 8; ++k) o.regs[k] = smc32 ? out[k] & 0xffffffffu : out[k];
  // The SPMC writes the Normal world's RX: zeroed at the next begin().
  if (rx_bytes_) dirty_.push_back({rx_pa_, rx_bytes_});
  if ((fid & ~kSmc64Bit) == kFnRxtxMap32) {
    tx_window_ = op.args[0];  // HARNESS:TX: whatever the outcome
    tx_known_ = true;
    if (fid_of(out) == kFnSuccess32) rx_pa_ = in[2], rx_bytes_ = (in[3] & 0x3f) * kFfaPage;
  }
  if (fid == kFnRxtxUnmap && fid_of(out) == kFnSuccess32) rx_bytes_ = 0;

  // FFA.SPMC.HANDLE (SPMC:HANDLE-SPEC): a new transaction's handle.
  const bool send = (fid & ~kSmc64Bit) == kFnMemShare32 || (fid & ~kSmc64Bit) == kFnMemLend32 ||
                    (fid & ~kSmc64Bit) == kFnMemDonate32;
  if (send) {
    const uint64_t h = produced_handle(out);
    if (h != kInvalidHandle) {
      std::string bad;
      if (h >> 63) bad = "bit 63 set (allocated by a hypervisor)";
      size_t named = 0;  // transactions of the SPMC's table with this handle, the new one included
      for (const kc_spmc_tx& t : table()) named += t.handle == h;
      if (named > 1) bad = "already names a live transaction";
      if (!bad.empty()) breaks_.push_back({kFfaSpmcHandle, "the SPMC gave handle " + hex(h) + ": " + bad});
    } else if (fid_of(out) == kFnMemFragRx || fid_of(out) == kFnSuccess32 || out[0] == kFnSuccess64) {
      breaks_.push_back({kFfaSpmcHandle, "the SPMC gave FFA_MEMORY_HANDLE_INVALID to a new transaction"});
    }
  }
  if (is_producer(op.code)) handles_.push_back(produced_handle(out));  // HARNESS:SLOTS
  return o;
}

}  // namespace kconform::spmc
