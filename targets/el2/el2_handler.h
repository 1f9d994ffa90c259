// The EL2 target: a kernel tree's unmodified arch/arm64/kvm/hyp/nvhe/ffa.c,
// compiled for the host, with "physical memory", a host stage-2 page tracker
// and an EL3 behind its SMC conduit. One instance per process (ffa.c's state
// is global); the library is built once per host PAGE_SIZE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "targets/el2/default_el3.h"
#include "targets/el2/page_tracker.h"

namespace kconform::el2 {

constexpr size_t kNumRegs = 18;  // x0-x17

// An EL3 (SPMD + SPMC): x0-x17 of an SMC from EL2 in, x0-x17 out.
using El3Fn = std::function<void(const uint64_t in[kNumRegs], uint64_t out[kNumRegs])>;

struct El2Config {
  uint64_t phys_base = 0x80000000;  // where "physical memory" starts
  uint64_t host_pages = 64;         // host PAGE_SIZE pages the host owns
  uint32_t smccc_version = 0;       // 0: the tree's ARM_SMCCC_VERSION_1_2
  unsigned ipa_bits = 48;           // host stage-2 IPA size (pfn_range_is_valid)
  El3Fn el3;                        // EL3 from the start, hyp_ffa_init() included;
                                    // empty: the default EL3
};

struct BuildInfo {
  std::string tree_path;        // the tree ffa.c was compiled from
  std::string tree_version;     // its Makefile version, e.g. "7.3.4"
  std::string smc_api;          // what ffa.c calls: hyp_smccc_1_2_smc, arm_smccc_1_1_smc, ...
  bool handles_reclaim2 = false;  // ffa.c names FFA_MEM_RECLAIM2 (stock trees do not)
  uint64_t page_size = 0;       // host PAGE_SIZE of this build
  uint64_t ffa_mbox_pages = 0;  // KVM_FFA_MBOX_NR_PAGES
  uint64_t ffa_proxy_pages = 0; // hyp_ffa_proxy_pages(): mailboxes + descriptor buffer
  bool sanitized = false;       // built with ASan+UBSan
};
const BuildInfo& el2_build_info();

// Allocates memory, runs hyp_ffa_init() with the hyp's pages at the top of
// physical memory, installs the default EL3 and takes a first snapshot.
// False (and *err) if hyp_ffa_init fails. May be called again to start over.
bool el2_init(std::string* err);
bool el2_init(const El2Config& config, std::string* err);

// Snapshot of everything the target holds: ffa.c's .data/.bss, shim state,
// page tracker, physical memory, the default EL3 and the warning list.
void el2_snapshot();
void el2_restore();
size_t el2_snapshot_bytes();      // size of ffa.c's own state in the snapshot
std::vector<uint8_t> el2_ffa_state();  // ffa.c's .data/.bss as they are now

// A host SMC trapped to EL2: x0-x17 in, x0-x17 out. Calls
// kvm_host_ffa_handler() and returns whether it handled the call (out is then
// what the host sees). If not handled, out is the registers unchanged.
bool el2_host_call(const uint64_t in[kNumRegs], uint64_t out[kNumRegs]);
// As handle_host_smc(): unhandled calls are forwarded to EL3 unchanged.
void el2_host_smc(const uint64_t in[kNumRegs], uint64_t out[kNumRegs]);

enum class CallStatus { kOk, kFatal };  // kFatal: BUG, deadlock, unbalanced unpin
CallStatus el2_last_status();
int el2_locks_held();  // hyp spinlocks held now (should be 0 between calls)

struct Warning {
  std::string file;
  int line;
  std::string expr;
};
const std::vector<Warning>& el2_warnings();

// EL3 behind the conduit. Unset (nullptr function) restores the default EL3.
void el2_set_el3(El3Fn fn);
DefaultEl3& el2_default_el3();

// Physical memory: [phys_base, phys_base + size). Host pages first, then the
// hyp's (TX, RX, descriptor buffer).
std::span<uint8_t> el2_phys_mem();
uint64_t el2_phys_base();
uint8_t* el2_phys(uint64_t pa, size_t len);  // nullptr if not all inside
uint64_t el2_host_page_pa(uint64_t i);       // physical address of host page i
uint64_t el2_hyp_tx_pa();                    // the hyp's own mailboxes
uint64_t el2_hyp_rx_pa();
PageTracker& el2_tracker();

// The kernel code's view of memory: the hypervisor's stage-1 (README "ffa.c's
// view of memory"). The RAM above (el2_phys, el2_phys_mem) is the harness's
// view of the same memory, every byte always accessible. In the hypervisor's
// view a host page is accessible only while it is shared with the hypervisor
// (__pkvm_host_share_hyp), the hypervisor's own pages always, and inaccessible
// guards lie below host memory, between it and the hypervisor's pages and
// past the descriptor buffer: an access elsewhere faults (SIGSEGV).
// A host page the restore unshared stays mapped until the kernel code next
// forms an address in host memory (it holds none before: README), and a page
// just shared is mapped then or when the host call returns; el2_hyp_settle()
// does what that would do now.
uint8_t* el2_hyp_va(uint64_t pa);  // where the kernel code sees pa (hyp_phys_to_virt)
bool el2_hyp_maps(uint64_t pa);    // whether the view maps pa now
void el2_hyp_settle();
// Names the region a fault address of the hypervisor's view missed, and the
// physical address (access: 1 read, 2 write, 0 unknown): writes a NUL-
// terminated line of at most n bytes into buf and returns true; false for an
// address outside the view. Async-signal-safe (for the crash marker:
// harness/runner/crash_marker.h set_fault_describer).
bool el2_describe_fault(uintptr_t addr, int access, char* buf, size_t n);

// For the restore tests: every byte el2_restore() restores (physical memory,
// ffa.c's statics, the shim state, the page tracker's pages and log), and
// pieces it is told to leave out, to show such a test catches each.
enum RestorePiece : unsigned { kRestoreRam = 1, kRestoreTracker = 2, kRestoreFfaStatics = 4, kRestoreSpmc = 8 };
std::vector<uint8_t> el2_state_bytes();
void el2_set_restore_skip(unsigned mask);
unsigned el2_restore_skip();

}  // namespace kconform::el2
