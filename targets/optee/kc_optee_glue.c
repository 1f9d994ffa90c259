/* OP-TEE's side of the glue: what thread_spmc.c, mobj_ffa.c and the other
 * compiled tree files call outside themselves. Compiled with the tree's
 * headers, so every definition is checked against OP-TEE's declaration. */
#include <ffa.h>
#include <kernel/notif.h>
#include <kernel/panic.h>
#include <kernel/spinlock.h>
#include <kernel/tee_misc.h>
#include <kernel/thread.h>
#include <kernel/thread_private.h>
#include <kernel/interrupt.h>
#include <malloc.h>
#include <mm/core_mmu.h>
#include <mm/tee_mm.h>
#include <string.h>
#include <tee/entry_std.h>
#include <sm/optee_smc.h>
#include <trace.h>
#include "kc_optee_hooks.h"

/* the glue's own state is part of a snapshot */
#pragma clang section bss="kc_optee_glue_bss" data="kc_optee_glue_data"


/* ---- panic, log (core/kernel/panic.c, core/kernel/trace_ext.c) ---- */
void __do_panic(const char *file __unused, const int line __unused,
		const char *func __unused, const char *msg)
{
	kc_optee_fatal(msg ? msg : "panic()");
}

const char trace_ext_prefix[] = "TC";
int trace_level = TRACE_LEVEL;
void trace_ext_puts(const char *str) { kc_optee_log(str); }
int trace_ext_get_thread_id(void) { return 0; }
int trace_ext_get_core_id(void) { return 0; }
int trace_ext_get_guest_id(void) { return 0; }

/* ---- spinlocks, exceptions, core-local (arch/arm/kernel/ assembly) ---- */
static uint32_t exceptions;
static struct thread_core_local core_local;

void kc_optee_set_exceptions(uint32_t e);
void kc_optee_set_exceptions(uint32_t e) { exceptions = e & THREAD_EXCP_ALL; }
uint32_t thread_get_exceptions(void) { return exceptions; }
uint32_t thread_mask_exceptions(uint32_t e)
{
	uint32_t old = exceptions;

	exceptions |= e & THREAD_EXCP_ALL;
	return old;
}
void thread_unmask_exceptions(uint32_t state) { exceptions = state & THREAD_EXCP_ALL; }
struct thread_core_local *thread_get_core_local(void) { return &core_local; }
size_t __get_core_pos(void) { return 0; }

/* one host thread: taking a held lock would never return on hardware */
unsigned int __cpu_spin_trylock(unsigned int *lock)
{
	if (*lock == SPINLOCK_LOCK)
		return 1;
	*lock = SPINLOCK_LOCK;
	return 0;
}
void __cpu_spin_lock(unsigned int *lock)
{
	if (__cpu_spin_trylock(lock))
		kc_optee_fatal("spinlock re-taken: deadlock");
}
void __cpu_spin_unlock(unsigned int *lock)
{
	if (*lock != SPINLOCK_LOCK)
		kc_optee_fatal("spinlock released while not held");
	*lock = SPINLOCK_UNLOCK;
}

/* ---- MMU (core/mm/core_mmu.c, arch/arm/mm/core_mmu_lpae.c) ---- */
/* core_mmu.c: the pool of VA for mapping NS shared memory (mapped_shm_init) */
tee_mm_pool_t core_virt_shm_pool;
bool cpu_mmu_enabled(void) { return true; }

bool core_pbuf_is(uint32_t attr, paddr_t pbuf, size_t len)
{
	if (!len)
		return true;
	switch (attr) {
	case CORE_MEM_NON_SEC:  /* the NS DDR the platform registered */
		return kc_optee_ns_ddr(pbuf) && kc_optee_ns_ddr(pbuf + len - 1) &&
		       pbuf + len > pbuf;
	default:
		kc_optee_fatal("core_pbuf_is: attribute not modelled");
	}
}

void core_mmu_get_mem_by_type(enum teecore_memtypes type, vaddr_t *s, vaddr_t *e)
{
	*s = 0;
	*e = 0;
	if (type == MEM_AREA_SHM_VASPACE) {
		*s = kc_optee_shm_va_base();
		*e = *s + KC_SHM_VA_SIZE;
	}
}

static void check_va(vaddr_t va, size_t n, enum teecore_memtypes mt)
{
	vaddr_t b = kc_optee_shm_va_base();

	if (mt != MEM_AREA_NSEC_SHM)
		kc_optee_fatal("core_mmu_map: memory type not modelled");
	if (va < b || va + n * SMALL_PAGE_SIZE > b + KC_SHM_VA_SIZE)
		panic("VA does not belong to any known mm region");
}

TEE_Result core_mmu_map_pages(vaddr_t vstart, paddr_t *pages, size_t num_pages,
			      enum teecore_memtypes memtype)
{
	size_t i = 0;

	if (vstart & SMALL_PAGE_MASK)
		return TEE_ERROR_BAD_PARAMETERS;
	check_va(vstart, num_pages, memtype);
	for (i = 0; i < num_pages; i++) {
		if (pages[i] & SMALL_PAGE_MASK ||
		    kc_optee_shm_map(vstart + i * SMALL_PAGE_SIZE, pages[i], 1)) {
			if (i)
				core_mmu_unmap_pages(vstart, i);
			return TEE_ERROR_BAD_PARAMETERS;
		}
	}
	return TEE_SUCCESS;
}

TEE_Result core_mmu_map_contiguous_pages(vaddr_t vstart, paddr_t pstart,
					 size_t num_pages,
					 enum teecore_memtypes memtype)
{
	if ((vstart | pstart) & SMALL_PAGE_MASK)
		return TEE_ERROR_BAD_PARAMETERS;
	check_va(vstart, num_pages, memtype);
	/* OP-TEE maps any PA it is given here; the callers check core_pbuf_is() */
	if (kc_optee_shm_map(vstart, pstart, num_pages))
		kc_optee_fatal("core_mmu_map_contiguous_pages: PA outside the host RAM");
	return TEE_SUCCESS;
}

void core_mmu_unmap_pages(vaddr_t vstart, size_t num_pages)
{
	check_va(vstart, num_pages, MEM_AREA_NSEC_SHM);
	kc_optee_shm_unmap(vstart, num_pages);
}

paddr_t virt_to_phys(void *va)
{
	uint64_t pa = 0;

	return kc_optee_shm_pa_of((uintptr_t)va, &pa) ? 0 : pa;
}

/* ---- the SPMD at EL3 (thread_smccc/thread_smc: an SMC from S-EL1) ---- */
void thread_smccc(struct thread_smc_args *a)
{
	kc_optee_counters.spmd_calls++;
	switch (a->a0) {
	case FFA_ID_GET:         /* our (the SPMC's) ID, from the SPMC manifest */
		*a = (struct thread_smc_args){ .a0 = FFA_SUCCESS_32, .a2 = 0x8000 };
		break;
	case FFA_SPM_ID_GET:     /* the SPMD's ID (TF-A: SPMD_DIRECT_MSG_ENDPOINT_ID) */
		*a = (struct thread_smc_args){ .a0 = FFA_SUCCESS_32, .a2 = 0xffff };
		break;
	default:
		*a = (struct thread_smc_args){ .a0 = FFA_ERROR, .a2 = (uint32_t)FFA_NOT_SUPPORTED };
	}
}

unsigned long thread_smc(unsigned long func_id, unsigned long a1 __unused,
			 unsigned long a2 __unused, unsigned long a3 __unused)
{
	kc_optee_counters.spmd_calls++;
	return func_id == FFA_SECONDARY_EP_REGISTER_64 ? FFA_SUCCESS_32 : OPTEE_SMC_RETURN_UNKNOWN_FUNCTION;
}

/* ---- notifications: counted ---- */
void notif_deliver_atomic_event(enum notif_event ev __unused, uint16_t guest_id __unused)
{
	kc_optee_counters.notif_events++;
}

/* ---- not on the memory-sharing paths: threads, RPC, the TEE itself ---- */
struct thread_ctx *threads;
void thread_check_canaries(void) { }
short int thread_get_id(void) { kc_optee_fatal("thread_get_id: no OP-TEE threads"); }
short int thread_get_id_may_fail(void) { return THREAD_ID_INVALID; }
struct thread_specific_data *thread_get_tsd(void) { kc_optee_fatal("thread_get_tsd: no OP-TEE threads"); }
void thread_alloc_and_run(uint32_t a0 __unused, uint32_t a1 __unused, uint32_t a2 __unused,
			  uint32_t a3 __unused, uint32_t a4 __unused, uint32_t a5 __unused)
{ kc_optee_fatal("thread_alloc_and_run: yielding call (a TEE thread) not modelled"); }
void thread_resume_from_rpc(uint32_t thread_id __unused, uint32_t a0 __unused, uint32_t a1 __unused,
			    uint32_t a2 __unused, uint32_t a3 __unused)
{ kc_optee_fatal("thread_resume_from_rpc: not modelled"); }
void __thread_rpc(uint32_t rv[THREAD_RPC_NUM_ARGS] __unused)
{ kc_optee_fatal("__thread_rpc: RPC to the normal world not modelled"); }
void thread_rpc_shm_cache_clear(struct thread_shm_cache *cache __unused)
{ kc_optee_fatal("thread_rpc_shm_cache_clear: not modelled"); }
TEE_Result tee_entry_std(struct optee_msg_arg *arg __unused, uint32_t num_params __unused)
{ kc_optee_fatal("tee_entry_std: the TEE (TAs, sessions) is not here"); }
struct itr_chip *interrupt_get_main_chip(void)
{ kc_optee_fatal("interrupt_get_main_chip: no GIC"); }
