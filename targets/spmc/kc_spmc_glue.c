/* What TF-A's EL3 SPMC (services/std_svc/spm/el3_spmc/ *.c, built unmodified
 * for x86-64) calls outside itself and cannot have from the tree on a host:
 * EL3 context management, the EL3 translation tables, the platform (core
 * position, the SP image, the shared-memory datastore), PSCI/interrupt/BL31
 * registration, the SPMD, spinlocks, the console/log and panic. Plus the
 * harness's entry points (kc_spmc_hooks.h). Compiled with the same flags and
 * headers as the tree's sources, so every definition here is checked against
 * the tree's own declaration. Ours, not TF-A's. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <arch_helpers.h>
#include <bl31/bl31.h>
#include <bl31/interrupt_mgmt.h>
#include <common/bl_common.h>
#include <common/debug.h>
#include <common/runtime_svc.h>
#include <drivers/console.h>
#include <lib/el3_runtime/context_mgmt.h>
#include <lib/psci/psci_lib.h>
#include <lib/spinlock.h>
#include <lib/utils.h>
#include <lib/xlat_tables/xlat_tables_v2.h>
#include <libfdt.h>
#include <plat/common/platform.h>
#include <services/ffa_svc.h>
#include <services/spmc_svc.h>
#include <services/spmd_svc.h>

#include "spmc.h"
#include "spmc_shared_mem.h"
#include "kc_spmc_hooks.h"

/* glibc, resolved at link time (TF-A's libc headers do not declare them; its
 * setjmp.h describes an aarch64 jmp_buf). glibc's x86-64 jmp_buf is 200 bytes. */
extern void abort(void) __dead2;
extern int _setjmp(void *env) __attribute__((returns_twice));
extern void longjmp(void *env, int val) __dead2;
/* Everything the glue prints goes to stderr: a runner's stdout may be its
 * verdict stream. */
extern int dprintf(int fd, const char *fmt, ...);
extern int vdprintf(int fd, const char *fmt, va_list ap);

/* Harness inputs, not SPMC state: never snapshotted. */
struct kc_spmc_knobs kc_spmc_knobs;
int kc_spmc_restore_skip;
static _Alignas(16) uint8_t kc_fatal_jmp[256];
static int kc_fatal_armed;

/* The SP's manifest (a DTB): written once by kc_spmc_init(), read by
 * spmc_setup(). In secure memory on hardware; here two pages of its own, so
 * that the dynamic region spmc_setup() maps for it overlaps nothing else. */
static _Alignas(PAGE_SIZE) uint8_t kc_manifest[2 * PAGE_SIZE];

/* The shared-memory datastore (FVP: a linker-placed array in secure DRAM).
 * Snapshotted apart from the sections: only its used prefix. */
static _Alignas(16) uint8_t kc_datastore[PLAT_SPMC_SHMEM_DATASTORE_SIZE];

/* Everything below up to the matching pragma is the glue's own state, kept in
 * sections of its own and snapshotted with the tree's. */
#pragma clang section bss = "kc_spmc_glue_bss" data = "kc_spmc_glue_data"
struct kc_spmc_counters kc_spmc_counters;

/* The EL3 translation regime's dynamic regions (PA == VA here). */
#define KC_MAX_DYN 8
static struct {
	uintptr_t va;
	size_t size;
	unsigned int attr;
} kc_dyn[KC_MAX_DYN];

/* cm_get_context()/cm_set_context(): the current context of each world. */
static void *kc_ctx[2];
/* The SP image BL2 would have loaded. */
static entry_point_info_t kc_sp_ep;
static int32_t (*kc_bl32_init)(void);
/* The caller's saved context of the SMC in flight (kc_spmc_smc). */
static cpu_context_t kc_call_ctx;
#pragma clang section bss = "" data = ""

/* --- panic, assert, log ---------------------------------------------------- */
static void __dead2 kc_fatal(const char *why)
{
	kc_spmc_counters.fatal++;
	dprintf(2, "kconform spmc: fatal: %s\n", why);
	if (kc_fatal_armed) {
		kc_fatal_armed = 0;
		longjmp(kc_fatal_jmp, 1);
	}
	abort();
}

void el3_panic(void)
{
	kc_fatal("panic()");
}

/* An access of the SPMC's to a physical address with no memory behind it: on
 * hardware a synchronous external abort taken at EL3, which BL31's exception
 * vectors report and end in panic. Called by the harness from its SIGSEGV
 * handler (the harness's SIGSEGV handler, SA_NODEFER) while a call is in flight. */
void kc_spmc_external_abort(void)
{
	kc_fatal("synchronous external abort (EL3 read or wrote a physical address that is not memory)");
}

void console_flush(void)
{
}

#if PLAT_LOG_LEVEL_ASSERT >= LOG_LEVEL_INFO
void __assert(const char *file, unsigned int line)
{
	dprintf(2, "kconform spmc: assert at %s:%u\n", file, line);
	kc_fatal("assert");
}
#else
void __assert(void)
{
	kc_fatal("assert");
}
#endif

void tf_log(const char *fmt, ...)
{
	va_list ap;

	/* fmt[0] is the LOG_MARKER_* level (10..50). */
	kc_spmc_counters.log_lines++;
	if (!kc_spmc_knobs.log_verbose)
		return;
	va_start(ap, fmt);
	dprintf(2, "[tf %d] ", fmt[0]);
	vdprintf(2, fmt + 1, ap);
	va_end(ap);
}

/* --- spinlocks: one host thread; a re-take is a deadlock at EL3 ------------ */
void spin_lock(spinlock_t *lock)
{
	if (lock->lock != 0U)
		kc_fatal("spin_lock: deadlock, the lock is already held");
	lock->lock = 1U;
	kc_spmc_counters.locks_held++;
}

void spin_unlock(spinlock_t *lock)
{
	if (lock->lock == 0U)
		kc_fatal("spin_unlock: the lock is not held");
	lock->lock = 0U;
	kc_spmc_counters.locks_held--;
}

/* --- the EL3 translation regime: dynamic regions are recorded and checked as
 * xlat_tables_v2 checks them (alignment, overlap, table space); PA == VA. --- */
int mmap_add_dynamic_region(unsigned long long base_pa, uintptr_t base_va,
			    size_t size, unsigned int attr)
{
	if (size == 0U || ((base_pa | base_va | size) & (PAGE_SIZE - 1U)) != 0U)
		return -EINVAL;
	if (base_pa != base_va || base_va + size < base_va)
		return -ERANGE;
	for (int i = 0; i < KC_MAX_DYN; i++)
		if (kc_dyn[i].size != 0U && base_va < kc_dyn[i].va + kc_dyn[i].size &&
		    kc_dyn[i].va < base_va + size)
			return -EPERM;
	for (int i = 0; i < KC_MAX_DYN; i++)
		if (kc_dyn[i].size == 0U) {
			kc_dyn[i].va = base_va;
			kc_dyn[i].size = size;
			kc_dyn[i].attr = attr;
			return 0;
		}
	return -ENOMEM;
}

int mmap_remove_dynamic_region(uintptr_t base_va, size_t size)
{
	for (int i = 0; i < KC_MAX_DYN; i++)
		if (kc_dyn[i].size == size && kc_dyn[i].va == base_va) {
			kc_dyn[i].size = 0U;
			return 0;
		}
	return -EINVAL;
}

/* FFA_MEM_PERM_GET/SET: S-EL0 partitions only, which this build has none of. */
int xlat_change_mem_attributes_ctx(const xlat_ctx_t *ctx, uintptr_t base_va,
				   size_t size, uint32_t attr)
{
	return -EINVAL;
}

int xlat_get_mem_attributes_ctx(const xlat_ctx_t *ctx, uintptr_t base_va,
				uint32_t *attr)
{
	return -EINVAL;
}

void disable_mmu_icache_el1(void)
{
}

/* --- the platform ------------------------------------------------------------ */
unsigned int plat_my_core_pos(void)
{
	return 0U;
}

int plat_spmc_shmem_datastore_get(uint8_t **datastore, size_t *size)
{
	*datastore = kc_datastore;
	*size = sizeof(kc_datastore);
	return 0;
}

/* Platform hooks around a share and its reclaim (FVP's return 0). */
int plat_spmc_shmem_begin(struct ffa_mtd *desc)
{
	return kc_spmc_knobs.plat_begin_ret;
}

int plat_spmc_shmem_reclaim(struct ffa_mtd *desc)
{
	return kc_spmc_knobs.plat_reclaim_ret;
}

entry_point_info_t *bl31_plat_get_next_image_ep_info(uint32_t type)
{
	if (type != SECURE)
		return NULL;
	memset(&kc_sp_ep, 0, sizeof(kc_sp_ep));
	kc_sp_ep.pc = 0x6000000; /* outside BL31_BASE..BL31_LIMIT */
	kc_sp_ep.args.arg0 = (uintptr_t)kc_manifest;
	return &kc_sp_ep;
}

/* EL3 logical partitions live in a linker section; this build has none. */
__asm__(".globl __EL3_LP_DESCS_START__\n.globl __EL3_LP_DESCS_END__\n"
	".section .rodata\n.balign 8\n__EL3_LP_DESCS_START__:\n__EL3_LP_DESCS_END__:\n.text\n");

/* --- BL31 registration ------------------------------------------------------ */
void psci_register_spd_pm_hook(const spd_pm_ops_t *pm)
{
}

int32_t register_interrupt_type_handler(uint32_t type, interrupt_type_handler_t handler,
					uint32_t flags)
{
	return 0;
}

void bl31_register_bl32_init(int32_t (*func)(void))
{
	kc_bl32_init = func;
}

/* --- EL3 context management: the SPMC only switches worlds through these ---- */
void *cm_get_context(uint32_t security_state)
{
	return kc_ctx[security_state & 1U];
}

void cm_set_context(void *context, uint32_t security_state)
{
	kc_ctx[security_state & 1U] = context;
}

void cm_setup_context(cpu_context_t *ctx, const struct entry_point_info *ep)
{
}

void cm_el1_sysregs_context_save(uint32_t security_state)
{
}

void cm_el1_sysregs_context_restore(uint32_t security_state)
{
}

void cm_set_next_eret_context(uint32_t security_state)
{
}

void print_entry_point_info(const entry_point_info_t *ep_info)
{
}

void zeromem(void *mem, u_register_t length)
{
	memset(mem, 0, length);
}

/* common/bl_common.c is not host-buildable as a whole (it needs the ENABLE_FEAT_*
 * build options); only find_and_prepare_sp_context() uses this, to map the
 * manifest's pages. */
uintptr_t page_align(uintptr_t value, unsigned dir)
{
	if ((value & (PAGE_SIZE - 1U)) != 0U) {
		value &= ~(uintptr_t)(PAGE_SIZE - 1U);
		if (dir == UP)
			value += PAGE_SIZE;
	}
	return value;
}

/* Running the SP (its init, direct requests, FFA_RUN): no SP code runs here. */
uint64_t spm_secure_partition_enter(uint64_t *c_rt_ctx)
{
	kc_fatal("spm_secure_partition_enter: an SP cannot run here");
}

void spm_secure_partition_exit(uint64_t c_rt_ctx, uint64_t ret)
{
	kc_fatal("spm_secure_partition_exit: an SP cannot run here");
}

/* --- the SPMD: calls the SPMC sends on to the normal world ------------------- */
uint64_t spmd_smc_handler(uint32_t smc_fid, uint64_t x1, uint64_t x2, uint64_t x3,
			  uint64_t x4, void *cookie, void *handle, uint64_t flags)
{
	kc_spmc_counters.spmd_calls++;
	SMC_RET1(handle, SMC_UNK);
}

uint64_t spmd_smc_switch_state(uint32_t smc_fid, bool secure_origin, uint64_t x1,
			       uint64_t x2, uint64_t x3, uint64_t x4, void *handle,
			       uint64_t flags)
{
	kc_spmc_counters.spmd_calls++;
	SMC_RET1(handle, SMC_UNK);
}

/* --- the harness's entry points (kc_spmc_hooks.h) ---------------------------- */
static int kc_write_manifest(const struct kc_spmc_config *cfg)
{
	void *f = kc_manifest;
	fdt32_t uuid[4];
	int r;

	for (int i = 0; i < 4; i++)
		uuid[i] = cpu_to_fdt32(cfg->sp_uuid[i]);
	/* The FF-A manifest binding (DEN0077 v1.1 chapter 5 "Partition setup",
	 * "arm,ffa-manifest-1.0"): what spmc_setup() reads of an S-EL1 SP. */
	r = fdt_create(f, sizeof(kc_manifest));
	r |= fdt_finish_reservemap(f);
	r |= fdt_begin_node(f, "");
	r |= fdt_property_string(f, "compatible", "arm,ffa-manifest-1.0");
	r |= fdt_property(f, "uuid", uuid, sizeof(uuid));
	r |= fdt_property_u32(f, "exception-level", 2); /* S-EL1 */
	r |= fdt_property_u32(f, "ffa-version", cfg->sp_ffa_version);
	r |= fdt_property_u32(f, "execution-state", 0); /* AArch64 */
	r |= fdt_property_u32(f, "messaging-method", 3); /* direct requests in and out */
	r |= fdt_property_u32(f, "execution-ctx-count", PLATFORM_CORE_COUNT);
	r |= fdt_property_u32(f, "id", cfg->sp_id);
	r |= fdt_end_node(f);
	r |= fdt_finish(f);
	return r;
}

int kc_spmc_init(const struct kc_spmc_config *cfg)
{
	volatile int ret;

	if (kc_write_manifest(cfg) != 0)
		return -EINVAL;
	kc_fatal_armed = 1;
	if (_setjmp(kc_fatal_jmp) != 0)
		return KC_SPMC_FATAL + 1000;
	ret = spmc_setup();
	kc_fatal_armed = 0;
	return ret;
}

/* Whether BL31 hands an SMC with this x0 to the SPMC at all (SPMC:ROUTED).
 * bl31/aarch64/runtime_exceptions.S: a fast call with any of bits [23:17] set
 * is SMC_UNK; the SVE hint bit is masked off; the call goes to the runtime
 * service registered for its type and owning entity (common/runtime_svc.c:
 * std_svc for fast calls of OEN_STD_START), and std_svc_smc_handler()
 * (services/std_svc/std_svc_setup.c) gives the SPMD/SPMC only the IDs
 * is_ffa_fid() takes (include/services/ffa_svc.h: FFA_FNUM_MIN_VALUE..
 * FFA_FNUM_MAX_VALUE). Each macro is the tree's own. */
static uint32_t kc_bl31_smc_fid(uint64_t x0)
{
	return (uint32_t)(x0 & ~(uint64_t)(FUNCID_SVE_HINT_MASK << FUNCID_SVE_HINT_SHIFT));
}

static int kc_bl31_routes_to_spmc(uint64_t x0)
{
	const uint32_t fid = kc_bl31_smc_fid(x0);

	if (GET_SMC_TYPE(x0) == SMC_TYPE_FAST &&
	    (x0 & (FUNCID_FC_RESERVED_MASK << FUNCID_FC_RESERVED_SHIFT)) != 0U)
		return 0;
	return GET_SMC_TYPE(fid) == SMC_TYPE_FAST && GET_SMC_OEN(fid) == OEN_STD_START &&
	       is_ffa_fid(fid);
}

uint32_t kc_spmc_ffa_fnum_max(void)
{
	return FFA_FNUM_MAX_VALUE;
}

int kc_spmc_smc(int origin, const uint64_t in[KC_SPMC_NREGS], uint64_t out[KC_SPMC_NREGS])
{
	bool secure = origin == KC_SPMC_FROM_SP;
	uint64_t ret;

	if (!kc_bl31_routes_to_spmc(in[0])) {
		/* smc_unknown / SMC_RET1(handle, SMC_UNK): x0 only; ERET restores
		 * x1-x7 as the caller left them. */
		for (int i = 0; i < KC_SPMC_NREGS; i++)
			out[i] = in[i];
		out[0] = (uint64_t)(int64_t)SMC_UNK;
		kc_spmc_counters.unrouted++;
		return KC_SPMC_OK;
	}
	memset(&kc_call_ctx, 0, sizeof(kc_call_ctx));
	for (int i = 0; i < KC_SPMC_NREGS; i++)
		write_ctx_reg(get_gpregs_ctx(&kc_call_ctx), CTX_GPREG_X0 + 8 * i, in[i]);
	kc_fatal_armed = 1;
	if (_setjmp(kc_fatal_jmp) != 0)
		return KC_SPMC_FATAL;
	/* As spmd_smc_handler() forwards a normal-world call and the SP's own SMCs
	 * arrive: only x1-x4 are passed; the handler reads the rest from handle. */
	ret = spmc_smc_handler(kc_bl31_smc_fid(in[0]), secure, in[1], in[2], in[3], in[4], NULL,
			       &kc_call_ctx, secure ? 0U : SMC_FROM_NON_SECURE);
	kc_fatal_armed = 0;
	if (ret != (uint64_t)(uintptr_t)&kc_call_ctx)
		kc_spmc_counters.bad_return++;
	for (int i = 0; i < KC_SPMC_NREGS; i++)
		out[i] = read_ctx_reg(get_gpregs_ctx(&kc_call_ctx), CTX_GPREG_X0 + 8 * i);
	return KC_SPMC_OK;
}

size_t kc_spmc_shmem_allocated(void)
{
	return spmc_shmem_obj_state.allocated;
}

/* --- snapshots ----------------------------------------------------------------
 * The linker defines __start_/__stop_ for a section that exists; weak, since a
 * section may be empty (no initialised data). */
extern char __start_kc_spmc_bss[] __attribute__((weak));
extern char __stop_kc_spmc_bss[] __attribute__((weak));
extern char __start_kc_spmc_data[] __attribute__((weak));
extern char __stop_kc_spmc_data[] __attribute__((weak));
extern char __start_kc_spmc_glue_bss[] __attribute__((weak));
extern char __stop_kc_spmc_glue_bss[] __attribute__((weak));
extern char __start_kc_spmc_glue_data[] __attribute__((weak));
extern char __stop_kc_spmc_glue_data[] __attribute__((weak));

struct kc_span {
	char *begin, *end;
	int piece;
};

static size_t kc_spans(struct kc_span s[4])
{
	s[0] = (struct kc_span){__start_kc_spmc_bss, __stop_kc_spmc_bss, KC_SPMC_PIECE_TREE};
	s[1] = (struct kc_span){__start_kc_spmc_data, __stop_kc_spmc_data, KC_SPMC_PIECE_TREE};
	s[2] = (struct kc_span){__start_kc_spmc_glue_bss, __stop_kc_spmc_glue_bss, KC_SPMC_PIECE_GLUE};
	s[3] = (struct kc_span){__start_kc_spmc_glue_data, __stop_kc_spmc_glue_data, KC_SPMC_PIECE_GLUE};
	return 4;
}

static size_t kc_span_len(const struct kc_span *s)
{
	return s->begin != NULL && s->end != NULL ? (size_t)(s->end - s->begin) : 0U;
}

/* The sections hold ASan's redzones between globals: copy them byte by byte
 * without instrumentation (memcpy would be checked by ASan). */
__attribute__((no_sanitize("address")))
static void kc_copy_raw(volatile char *dst, const volatile char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

/* The datastore's used prefix: up to its last non-zero byte (at least
 * allocated; a freed object leaves its bytes behind it, and they must come
 * back as they were). */
static size_t kc_datastore_extent(void)
{
	size_t n = sizeof(kc_datastore);

	while (n > 0U && kc_datastore[n - 1U] == 0U)
		n--;
	return n > spmc_shmem_obj_state.allocated ? n : spmc_shmem_obj_state.allocated;
}

size_t kc_spmc_piece_bytes(int piece, void *dst)
{
	struct kc_span s[4];
	size_t n = 0U, k = kc_spans(s);

	if (piece == KC_SPMC_PIECE_DATASTORE) {
		if (dst != NULL)
			memcpy(dst, kc_datastore, sizeof(kc_datastore));
		return sizeof(kc_datastore);
	}
	for (size_t i = 0; i < k; i++) {
		if (s[i].piece != piece)
			continue;
		if (dst != NULL)
			kc_copy_raw((char *)dst + n, s[i].begin, kc_span_len(&s[i]));
		n += kc_span_len(&s[i]);
	}
	return n;
}

size_t kc_spmc_snapshot_size(void)
{
	return kc_spmc_piece_bytes(KC_SPMC_PIECE_TREE, NULL) +
	       kc_spmc_piece_bytes(KC_SPMC_PIECE_GLUE, NULL) + kc_datastore_extent();
}

size_t kc_spmc_snapshot_save(void *dst, size_t cap)
{
	size_t tree = kc_spmc_piece_bytes(KC_SPMC_PIECE_TREE, NULL);
	size_t glue = kc_spmc_piece_bytes(KC_SPMC_PIECE_GLUE, NULL);
	size_t ds = kc_datastore_extent();

	if (cap < tree + glue + ds)
		return 0U;
	kc_spmc_piece_bytes(KC_SPMC_PIECE_TREE, dst);
	kc_spmc_piece_bytes(KC_SPMC_PIECE_GLUE, (char *)dst + tree);
	memcpy((char *)dst + tree + glue, kc_datastore, ds);
	return tree + glue + ds;
}

void kc_spmc_snapshot_load(const void *src, size_t n)
{
	struct kc_span s[4];
	size_t off = 0U, k = kc_spans(s);
	size_t ds;

	for (int piece = KC_SPMC_PIECE_TREE; piece <= KC_SPMC_PIECE_GLUE; piece <<= 1)
		for (size_t i = 0; i < k; i++) {
			if (s[i].piece != piece)
				continue;
			if ((kc_spmc_restore_skip & piece) == 0)
				kc_copy_raw(s[i].begin, (const char *)src + off, kc_span_len(&s[i]));
			off += kc_span_len(&s[i]);
		}
	if ((kc_spmc_restore_skip & KC_SPMC_PIECE_DATASTORE) != 0 || n < off)
		return;
	ds = n - off;
	if (ds > sizeof(kc_datastore))
		ds = sizeof(kc_datastore);
	memcpy(kc_datastore, (const char *)src + off, ds);
	memset(kc_datastore + ds, 0, sizeof(kc_datastore) - ds);
}
