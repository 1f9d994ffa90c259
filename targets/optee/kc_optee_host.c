/* Host half of the glue (glibc): NS RAM as a memfd, OP-TEE's SHM VA space as a
 * reserved range where NS pages are aliased with MAP_FIXED (what
 * core_mmu_map_pages() does with translation tables), panic as longjmp. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "kc_optee_hooks.h"

struct kc_optee_counters kc_optee_counters;
static int ram_fd = -1;
size_t kc_optee_snapshot_bytes(void);
static uint8_t *ns_view;            /* the Normal world's view */
static uint64_t ns_base, ns_bytes;  /* the NS RAM: [ns_base, ns_base + ns_bytes) */
static uint64_t ns_ddr_base, ns_ddr_bytes;  /* of it, what the platform registers as NS DDR */
static uint8_t *shm_va;             /* OP-TEE's MEM_AREA_SHM_VASPACE */
static uint64_t shm_pa[KC_SHM_VA_SIZE / KC_PAGE];   /* 0: not mapped */
static jmp_buf *fatal_jmp;
static int verbose = -1;

void kc_optee_log(const char *s)
{
	kc_optee_counters.log_lines++;
	if (verbose < 0)
		verbose = getenv("KCONFORM_OPTEE_LOG") != NULL;
	if (verbose)
		fprintf(stderr, "optee: %s", s);
}

_Noreturn void kc_optee_fatal(const char *what)
{
	fprintf(stderr, "optee: FATAL: %s\n", what);
	if (!fatal_jmp)
		abort();
	longjmp(*fatal_jmp, 1);
}

void *kc_optee_ns(uint64_t pa)
{
	if (pa < ns_base || pa - ns_base >= ns_bytes)
		return NULL;
	return ns_view + (pa - ns_base);
}

int kc_optee_ns_ddr(uint64_t pa)
{
	return pa >= ns_ddr_base && pa - ns_ddr_base < ns_ddr_bytes;
}

uintptr_t kc_optee_shm_va_base(void) { return (uintptr_t)shm_va; }

int kc_optee_shm_map(uintptr_t va, uint64_t pa, size_t pages)
{
	size_t i0 = (va - (uintptr_t)shm_va) / KC_PAGE;

	kc_optee_counters.map_calls++;
	for (size_t i = 0; i < pages; i++) {
		uint64_t p = pa + i * KC_PAGE;

		if (!kc_optee_ns(p))
			return -1;
		if (shm_pa[i0 + i])
			kc_optee_fatal("core_mmu: Page is already mapped");
		if (mmap(shm_va + (i0 + i) * KC_PAGE, KC_PAGE, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, ram_fd, p - ns_base) == MAP_FAILED)
			kc_optee_fatal("mmap");
		shm_pa[i0 + i] = p;
	}
	return 0;
}

void kc_optee_shm_unmap(uintptr_t va, size_t pages)
{
	size_t i0 = (va - (uintptr_t)shm_va) / KC_PAGE;

	kc_optee_counters.unmap_calls++;
	for (size_t i = 0; i < pages; i++) {
		if (mmap(shm_va + (i0 + i) * KC_PAGE, KC_PAGE, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			kc_optee_fatal("mmap");
		shm_pa[i0 + i] = 0;
	}
}

int kc_optee_shm_pa_of(uintptr_t va, uint64_t *pa)
{
	if (va < (uintptr_t)shm_va || va >= (uintptr_t)shm_va + KC_SHM_VA_SIZE)
		return -1;
	uint64_t p = shm_pa[(va - (uintptr_t)shm_va) / KC_PAGE];
	if (!p)
		return -1;
	*pa = p + (va & (KC_PAGE - 1));
	return 0;
}

/* OP-TEE's side (kc_optee_glue.c / the units) */
void thread_spmc_msg_recv(struct kc_optee_regs *args);
unsigned int kc_optee_spmc_init(void);
unsigned int kc_optee_mobj_init(void);
void kc_optee_heap_init(void);
void kc_optee_set_exceptions(uint32_t e);

int kc_optee_guarded(void (*fn)(void *), void *arg)
{
	jmp_buf jb;
	jmp_buf *saved = fatal_jmp;
	int rc = 0;

	fatal_jmp = &jb;
	if (setjmp(jb))
		rc = -1;
	else
		fn(arg);
	fatal_jmp = saved;
	return rc;
}

static void do_init(void *unused)
{
	(void)unused;
	kc_optee_heap_init();  /* boot: the linker script's heap */
	/* boot order: preinit (mapped_shm_init), then service init (spmc_init) */
	if (kc_optee_mobj_init() || kc_optee_spmc_init())
		kc_optee_fatal("initcall failed");
}

int kc_optee_init(uint64_t base, uint64_t bytes, uint64_t ddr_base, uint64_t ddr_bytes)
{
	if (ram_fd >= 0)
		return -1;   /* OP-TEE boots once per process */
	ns_base = base;
	ns_bytes = bytes;
	ns_ddr_base = ddr_base;
	ns_ddr_bytes = ddr_bytes;
	ram_fd = memfd_create("kc-optee-ns-ram", 0);
	if (ram_fd < 0 || ftruncate(ram_fd, (off_t)bytes))
		abort();
	ns_view = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ram_fd, 0);
	shm_va = mmap(NULL, KC_SHM_VA_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ns_view == MAP_FAILED || shm_va == MAP_FAILED)
		abort();
	return kc_optee_guarded(do_init, NULL);
}

static void do_smc(void *r)
{
	/* thread_spmc_a64.S enters with every exception masked */
	kc_optee_set_exceptions(~0u);
	thread_spmc_msg_recv(r);
}

int kc_optee_smc(struct kc_optee_regs *r) { return kc_optee_guarded(do_smc, r); }


/* ---- snapshots ---- */
extern uint8_t __start_kc_optee_bss[], __stop_kc_optee_bss[];
extern uint8_t __start_kc_optee_data[], __stop_kc_optee_data[];
extern uint8_t __start_kc_optee_glue_bss[], __stop_kc_optee_glue_bss[];
extern uint8_t __start_kc_optee_glue_data[], __stop_kc_optee_glue_data[];
#define KC_SECTIONS(X) X(kc_optee_bss) X(kc_optee_data) X(kc_optee_glue_bss) X(kc_optee_glue_data)

/* the sections hold ASan redzones between globals: copy them unchecked */
__attribute__((no_sanitize("address")))
static void raw_copy(uint8_t *d, const uint8_t *s, size_t n)
{
	while (n--)
		*(volatile uint8_t *)d++ = *s++;
}

/* OP-TEE's state: its sections and what its SHM VA space maps. Not the NS RAM:
 * that is the Normal world's, which the harness restores itself. */
struct kc_optee_snapshot {
	uint8_t *sec[4];
	uint64_t shm_pa[KC_SHM_VA_SIZE / KC_PAGE];
};

struct kc_optee_snapshot *kc_optee_snapshot_save(void)
{
	struct kc_optee_snapshot *s = calloc(1, sizeof(*s));
	int i = 0;

#define SAVE(n) s->sec[i] = malloc(__stop_##n - __start_##n + 1); \
	raw_copy(s->sec[i++], __start_##n, __stop_##n - __start_##n);
	KC_SECTIONS(SAVE)
	memcpy(s->shm_pa, shm_pa, sizeof(shm_pa));
	return s;
}

void kc_optee_snapshot_load(const struct kc_optee_snapshot *s)
{
	int i = 0;

#define LOAD(n) raw_copy(__start_##n, s->sec[i++], __stop_##n - __start_##n);
	KC_SECTIONS(LOAD)
	for (size_t p = 0; p < KC_SHM_VA_SIZE / KC_PAGE; p++) {
		if (shm_pa[p] == s->shm_pa[p])
			continue;
		if (shm_pa[p])
			kc_optee_shm_unmap((uintptr_t)shm_va + p * KC_PAGE, 1);
		if (s->shm_pa[p])
			kc_optee_shm_map((uintptr_t)shm_va + p * KC_PAGE, s->shm_pa[p], 1);
	}
}

size_t kc_optee_state_bytes(uint8_t *out)
{
	size_t n = 0;

#define STATE(x) if (out) raw_copy(out + n, __start_##x, __stop_##x - __start_##x); \
	n += __stop_##x - __start_##x;
	KC_SECTIONS(STATE)
	if (out)
		memcpy(out + n, shm_pa, sizeof(shm_pa));
	return n + sizeof(shm_pa);
}

size_t kc_optee_snapshot_bytes(void)
{
	size_t n = sizeof(struct kc_optee_snapshot);

#define SIZE(x) n += __stop_##x - __start_##x;
	KC_SECTIONS(SIZE)
	return n;
}

void kc_optee_snapshot_free(struct kc_optee_snapshot *s)
{
	for (int i = 0; i < 4; i++)
		free(s->sec[i]);
	free(s);
}
