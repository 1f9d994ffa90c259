/* The C boundary between the kernel code compiled for the host (ffa.c, the
 * shims, kc_el2_glue.c) and the C++ harness. Plain C types only, so C++ never
 * includes a kernel header. */
#ifndef KC_EL2_HOOKS_H
#define KC_EL2_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KC_SMC_NREGS 18 /* x0-x17: SMCCC v1.2 arguments and results */

/* EL3 (the SPMD/SPMC): receives x0-x17 of an SMC from EL2, writes x0-x17. */
typedef void (*kc_el3_smc_fn)(void *ctx, const uint64_t in[KC_SMC_NREGS],
			      uint64_t out[KC_SMC_NREGS]);
extern kc_el3_smc_fn kc_el3_smc;
extern void *kc_el3_ctx;

/* The host stage-2 ownership transitions of nvhe/mem_protect.h. Return 0 or a
 * negative errno, as the kernel functions do. pin/unpin take the physical
 * range [from, to) after page rounding; unpin returns non-zero on an
 * unbalanced unpin (a BUG_ON at EL2). */
struct kc_el2_stage2_ops {
	void *ctx;
	int (*share_hyp)(void *ctx, uint64_t pfn);
	int (*unshare_hyp)(void *ctx, uint64_t pfn);
	int (*share_ffa)(void *ctx, uint64_t pfn, uint64_t nr_pages);
	int (*unshare_ffa)(void *ctx, uint64_t pfn, uint64_t nr_pages);
	int (*pin_shared_mem)(void *ctx, uint64_t phys_from, uint64_t phys_to);
	int (*unpin_shared_mem)(void *ctx, uint64_t phys_from, uint64_t phys_to);
};
extern struct kc_el2_stage2_ops kc_el2_stage2;

/* "Physical memory" [base, base + size) as the kernel code sees it: the
 * hypervisor's stage-1 (el2_handler.cc, README "ffa.c's view of memory").
 * Host RAM [base, hyp_pa) at phys = virt + host_offset, every page of it
 * inaccessible but while shared with the hypervisor; the hypervisor's pages
 * [hyp_pa, hyp_pa + hyp_size) (its mailboxes, the descriptor buffer) at
 * phys = virt + hyp_offset, from hyp_va, with inaccessible guards around
 * them. Offsets are mod 2^64. */
struct kc_el2_phys_map {
	uint64_t base;
	uint64_t size;
	uint64_t hyp_pa;
	uint64_t hyp_size;
	uintptr_t host_offset;
	uintptr_t hyp_offset;
	uintptr_t hyp_va;
	/* Host pages shared with the hypervisor but not yet mapped in its view:
	 * open_pending() maps them, before the kernel code forms an address in
	 * them (hyp_phys_to_virt, hyp_pin_shared_mem) or returns to the host. */
	int pending;
	void (*open_pending)(void);
};
extern struct kc_el2_phys_map kc_el2_phys;

/* Shim state that lives outside ffa.c and is snapshotted with it. */
struct kc_el2_shim_state {
	int32_t locks_held; /* hyp spinlocks currently held */
	uint32_t warn_count; /* WARN_ON()s that fired, ever */
};
extern struct kc_el2_shim_state kc_el2_shim;

/* A WARN_ON() fired at EL2: reported to this callback (may be NULL). */
typedef void (*kc_el2_warn_fn)(void *ctx, const char *file, int line, const char *expr);
extern kc_el2_warn_fn kc_el2_on_warn;
extern void *kc_el2_warn_ctx;

void kc_el2_warn(const char *file, int line, const char *expr);
/* hyp_panic/BUG/deadlock: ends the current kc_el2_host_call with KC_EL2_FATAL. */
__attribute__((noreturn)) void kc_el2_fatal(const char *file, int line, const char *why);

enum kc_el2_status {
	KC_EL2_OK = 0,
	KC_EL2_FATAL = 1,
};

/* Values the glue reports about the build and the tree. */
struct kc_el2_build_info {
	unsigned long page_size;
	unsigned long ffa_mbox_nr_pages;   /* KVM_FFA_MBOX_NR_PAGES */
	unsigned long ffa_proxy_pages;     /* hyp_ffa_proxy_pages() */
	uint32_t smccc_version_1_2;        /* ARM_SMCCC_VERSION_1_2 */
};
void kc_el2_get_build_info(struct kc_el2_build_info *info);

void kc_el2_set_smccc_version(uint32_t version);
/* hyp_ffa_init(pages); pages is a hyp VA of hyp_ffa_proxy_pages() pages. */
int kc_el2_hyp_ffa_init(void *pages, int *status);
/* Builds a host context from x0-x17 (x18-x30 zero), calls
 * kvm_host_ffa_handler(ctx, x0) and copies x0-x17 back to out. */
int kc_el2_host_call(const uint64_t in[KC_SMC_NREGS], uint64_t out[KC_SMC_NREGS],
		     int *handled);
/* Pass-through as handle_host_smc() does for unhandled calls: x0-x17 to EL3. */
void kc_el2_forward_smc(const uint64_t in[KC_SMC_NREGS], uint64_t out[KC_SMC_NREGS]);

/* ffa.c's static state: its .data and .bss, placed in sections of their own. */
size_t kc_el2_ffa_state_size(void);
void kc_el2_ffa_state_save(void *dst);
void kc_el2_ffa_state_load(const void *src);

#ifdef __cplusplus
}
#endif
#endif
