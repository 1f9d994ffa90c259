/* Plain-C boundary between OP-TEE's world (tree headers) and the host (glibc). */
#ifndef KC_OPTEE_HOOKS_H
#define KC_OPTEE_HOOKS_H
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#define KC_NORETURN [[noreturn]]
#else
#define KC_NORETURN _Noreturn
#endif

#define KC_NS_RAM_PA    0x80000000ULL      /* the gtest's layout (the target passes its own) */
#define KC_NS_RAM_PAGES 68
#define KC_SHM_VA_SIZE  (32u << 20)        /* core_mmu.c: SHM_VASPACE_SIZE */
#define KC_PAGE         4096u

/* x0-x17 as thread_spmc_msg_recv() takes them (struct thread_smc_1_2_regs) */
struct kc_optee_regs { uint64_t a[18]; };

/* host side (kc_optee_host.c) */
/* Boots OP-TEE once per process: NS RAM [base, base + bytes) (a memfd, the Normal
 * world's memory), of which [ddr_base, ddr_base + ddr_bytes) is the NS DDR the
 * platform registers (core_pbuf_is(CORE_MEM_NON_SEC)). 0, or -1 (OP-TEE panicked,
 * or booted already). */
int kc_optee_init(uint64_t base, uint64_t bytes, uint64_t ddr_base, uint64_t ddr_bytes);
int kc_optee_smc(struct kc_optee_regs *r);        /* 0, or -1 if OP-TEE panicked */
int kc_optee_guarded(void (*fn)(void *), void *arg);   /* runs fn; -1 if OP-TEE panicked */
void *kc_optee_ns(uint64_t pa);                   /* Normal-world view of NS RAM */
int kc_optee_ns_ddr(uint64_t pa);                 /* pa is in the NS DDR */
KC_NORETURN void kc_optee_fatal(const char *what);  /* ends the call (longjmp) */
void kc_optee_log(const char *s);
uintptr_t kc_optee_shm_va_base(void);
int kc_optee_shm_map(uintptr_t va, uint64_t pa, size_t pages);   /* alias NS pages at va */
void kc_optee_shm_unmap(uintptr_t va, size_t pages);
int kc_optee_shm_pa_of(uintptr_t va, uint64_t *pa);
unsigned int kc_optee_mobj_inactive_count(void);

/* OP-TEE's table of shared objects (mobj_ffa.c's two lists, kc_optee_mobj_unit.c):
 * active = on shm_head (in use by OP-TEE), else on shm_inactive_head. The pages of
 * object i are pages[pages_at, pages_at + npages) of the caller's page buffer. */
struct kc_optee_obj {
	uint64_t cookie;
	bool active, registered_by_cookie, ns_shm;
	unsigned int refc, inactive_refs;
	uint16_t page_offset;
	size_t npages, pages_at;
};
/* Returns the count of objects (may be > max) and in *npages the pages they hold
 * (may be > pages_max); fills what fits. */
size_t kc_optee_table(struct kc_optee_obj *out, size_t max, uint64_t *pages, size_t pages_max,
		      size_t *npages);

/* OP-TEE as borrower (kc_optee_ops.c): mobj_ffa_get_by_cookie + mobj_inc_map; 0, -1 refused,
 * -2 OP-TEE panicked */
int kc_optee_borrow(uint64_t cookie, void **mobj);
void *kc_optee_borrow_va(void *mobj, size_t offset);
int kc_optee_unborrow(void *mobj);       /* mobj_dec_map + mobj_put */

/* snapshots: the tree's and glue's sections, the SHM mappings, NS RAM */
struct kc_optee_snapshot;
struct kc_optee_snapshot *kc_optee_snapshot_save(void);
void kc_optee_snapshot_load(const struct kc_optee_snapshot *s);
void kc_optee_snapshot_free(struct kc_optee_snapshot *s);
size_t kc_optee_snapshot_bytes(void);
/* OP-TEE's state as a snapshot holds it (sections, SHM mappings) copied to out
 * (NULL: only the size); for tests of exact restore */
size_t kc_optee_state_bytes(uint8_t *out);

struct kc_optee_counters {
	unsigned long spmd_calls, notif_events, log_lines, map_calls, unmap_calls;
};
extern struct kc_optee_counters kc_optee_counters;

#ifdef __cplusplus
}
#endif
#endif
