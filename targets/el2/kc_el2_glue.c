/* What ffa.c calls that is not in ffa.c: the SMC conduits, the host stage-2
 * transitions, the PSCI configuration, WARN/BUG; and the entry points the C++
 * harness calls (host SMC, hyp_ffa_init, state save/load). Built with the same
 * shims and tree headers as ffa.c. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <linux/arm-smccc.h>
#include <linux/arm_ffa.h>
#include <asm/kvm_host.h>
#include <asm/kvm_pkvm.h>
#include <nvhe/ffa.h>
#include <nvhe/mem_protect.h>
#include <nvhe/memory.h>
#include <nvhe/trap_handler.h>

kc_el3_smc_fn kc_el3_smc;
void *kc_el3_ctx;
struct kc_el2_stage2_ops kc_el2_stage2;
struct kc_el2_phys_map kc_el2_phys;
struct kc_el2_shim_state kc_el2_shim;
kc_el2_warn_fn kc_el2_on_warn;
void *kc_el2_warn_ctx;

struct kvm_host_psci_config kvm_host_psci_config = {
	.smccc_version = ARM_SMCCC_VERSION_1_2,
};

static jmp_buf fatal_jmp;
static int fatal_armed;

void kc_el2_warn(const char *file, int line, const char *expr)
{
	kc_el2_shim.warn_count++;
	if (kc_el2_on_warn)
		kc_el2_on_warn(kc_el2_warn_ctx, file, line, expr);
	else
		fprintf(stderr, "kconform el2: WARN_ON(%s) at %s:%d\n", expr, file, line);
}

void kc_el2_fatal(const char *file, int line, const char *why)
{
	fprintf(stderr, "kconform el2: fatal at %s:%d: %s\n", file, line, why);
	if (!fatal_armed)
		abort();
	longjmp(fatal_jmp, 1);
}

/* --- SMC conduits to EL3 ------------------------------------------------- */

/* SMC trace for the cost table (targets/el2/reclaim2/COST.md): every SMC the
 * handler makes to EL3 is counted; with KCONFORM_SMC_TRACE set in the
 * environment each host call and each SMC it makes is also printed to stderr
 * ("kc-smc host <x0>", "kc-smc el3 <x0> <x1..x7>", "kc-smc ret <x0> <x2>"). */
uint64_t kc_el2_smc_count;
static int smc_trace = -1;

static int trace_on(void)
{
	if (smc_trace < 0)
		smc_trace = getenv("KCONFORM_SMC_TRACE") != NULL;
	return smc_trace;
}

static void el3_call(const uint64_t in[KC_SMC_NREGS], uint64_t out[KC_SMC_NREGS])
{
	kc_el2_smc_count++;
	if (trace_on())
		fprintf(stderr, "kc-smc el3 %#llx %#llx %#llx %#llx %#llx %#llx %#llx %#llx\n",
			(unsigned long long)in[0], (unsigned long long)in[1], (unsigned long long)in[2],
			(unsigned long long)in[3], (unsigned long long)in[4], (unsigned long long)in[5],
			(unsigned long long)in[6], (unsigned long long)in[7]);
	for (int i = 0; i < KC_SMC_NREGS; i++)
		out[i] = 0;
	if (!kc_el3_smc) {
		out[0] = (uint64_t)(int64_t)SMCCC_RET_NOT_SUPPORTED;
		return;
	}
	kc_el3_smc(kc_el3_ctx, in, out);
}

void arm_smccc_1_2_smc(const struct arm_smccc_1_2_regs *args, struct arm_smccc_1_2_regs *res)
{
	_Static_assert(sizeof(struct arm_smccc_1_2_regs) == KC_SMC_NREGS * sizeof(uint64_t),
		       "arm_smccc_1_2_regs is x0-x17");
	uint64_t in[KC_SMC_NREGS], out[KC_SMC_NREGS];

	memcpy(in, args, sizeof(in));
	el3_call(in, out);
	memcpy(res, out, sizeof(out));
}

void kc_smccc_1_1_smc(unsigned long a0, unsigned long a1, unsigned long a2,
		      unsigned long a3, unsigned long a4, unsigned long a5,
		      unsigned long a6, unsigned long a7, struct arm_smccc_res *res)
{
	/* The v1.1 macro passes the function ID as (u32)a0. */
	uint64_t in[KC_SMC_NREGS] = { (u32)a0, a1, a2, a3, a4, a5, a6, a7 };
	uint64_t out[KC_SMC_NREGS];

	el3_call(in, out);
	if (res)
		*res = (struct arm_smccc_res){ out[0], out[1], out[2], out[3] };
}

void kc_el2_forward_smc(const uint64_t in[KC_SMC_NREGS], uint64_t out[KC_SMC_NREGS])
{
	el3_call(in, out);
}

/* --- host stage-2 -------------------------------------------------------- */

int __pkvm_host_share_hyp(u64 pfn)
{
	return kc_el2_stage2.share_hyp(kc_el2_stage2.ctx, pfn);
}

int __pkvm_host_unshare_hyp(u64 pfn)
{
	return kc_el2_stage2.unshare_hyp(kc_el2_stage2.ctx, pfn);
}

int __pkvm_host_share_ffa(u64 pfn, u64 nr_pages)
{
	return kc_el2_stage2.share_ffa(kc_el2_stage2.ctx, pfn, nr_pages);
}

int __pkvm_host_unshare_ffa(u64 pfn, u64 nr_pages)
{
	return kc_el2_stage2.unshare_ffa(kc_el2_stage2.ctx, pfn, nr_pages);
}

/* As mem_protect.c: the page-rounded VA range, checked by physical address. */
int hyp_pin_shared_mem(void *from, void *to)
{
	u64 start = ALIGN_DOWN((u64)(uintptr_t)from, PAGE_SIZE);
	u64 end = PAGE_ALIGN((u64)(uintptr_t)to);
	u64 phys = __kc_hyp_pa(start);

	if (kc_el2_phys.pending) /* the pages shared with the hyp, mapped before use */
		kc_el2_phys.open_pending();
	return kc_el2_stage2.pin_shared_mem(kc_el2_stage2.ctx, phys, phys + (end - start));
}

void hyp_unpin_shared_mem(void *from, void *to)
{
	u64 start = ALIGN_DOWN((u64)(uintptr_t)from, PAGE_SIZE);
	u64 end = PAGE_ALIGN((u64)(uintptr_t)to);
	u64 phys = __kc_hyp_pa(start);

	if (kc_el2_stage2.unpin_shared_mem(kc_el2_stage2.ctx, phys, phys + (end - start)))
		kc_el2_fatal(__FILE__, __LINE__, "hyp_unpin_shared_mem: BUG_ON(!p->refcount)");
}

/* --- entry points for the harness ---------------------------------------- */

void kc_el2_get_build_info(struct kc_el2_build_info *info)
{
	info->page_size = PAGE_SIZE;
	info->ffa_mbox_nr_pages = KVM_FFA_MBOX_NR_PAGES;
	info->ffa_proxy_pages = hyp_ffa_proxy_pages();
	info->smccc_version_1_2 = ARM_SMCCC_VERSION_1_2;
}

void kc_el2_set_smccc_version(uint32_t version)
{
	kvm_host_psci_config.smccc_version = version;
}

int kc_el2_hyp_ffa_init(void *pages, int *status)
{
	volatile int ret = 0;

	*status = KC_EL2_OK;
	if (setjmp(fatal_jmp)) {
		fatal_armed = 0;
		*status = KC_EL2_FATAL;
		return 0;
	}
	fatal_armed = 1;
	ret = hyp_ffa_init(pages);
	fatal_armed = 0;
	return ret;
}

/* What the tree's handle_host_smc() (hyp-main.c, copied into
 * kc_tree/host_smc.h by extract_tree.py) calls outside ffa.c:
 * - ESR_EL2: the host's SMCs are Linux's SMCCC conduit, `SMC #0` from
 *   AArch64, so the syndrome is EC SMC64 with immediate 0;
 * - kvm_host_psci_handler(): pKVM's PSCI relay is not under test here; it
 *   declines every call, so a PSCI ID goes on to ffa.c and EL3 (the model
 *   judges no non-FF-A call, FFA.PROXY.NON_FFA);
 * - default_host_smc_handler(): forwards the host's registers to EL3; here
 *   it records that ffa.c did not handle the call, and el2_host_smc()
 *   forwards them;
 * - kvm_skip_host_instr(): there is no ELR to move. */
#ifndef UL
#define UL(x) (_UL(x)) /* include/vdso/const.h */
#endif
#define read_sysreg_el2(r) kc_host_smc_esr()
static int kc_forwarded;
static u64 kc_host_smc_esr(void);

static bool kvm_host_psci_handler(struct kvm_cpu_context *host_ctxt, u32 func_id)
{
	return false;
}

static void default_host_smc_handler(struct kvm_cpu_context *host_ctxt)
{
	kc_forwarded = 1;
}

static void kvm_skip_host_instr(void)
{
}

#include <kc_tree/host_smc.h>

static u64 kc_host_smc_esr(void)
{
	return (ESR_ELx_EC_SMC64 << ESR_ELx_EC_SHIFT) | ESR_ELx_IL;
}

int kc_el2_host_call(const uint64_t in[KC_SMC_NREGS], uint64_t out[KC_SMC_NREGS], int *handled)
{
	/* static: the context must survive a longjmp out of the handler. */
	static struct kvm_cpu_context ctxt;
	int i;

	memset(&ctxt, 0, sizeof(ctxt));
	for (i = 0; i < KC_SMC_NREGS; i++)
		cpu_reg(&ctxt, i) = in[i];
	*handled = 0;
	if (setjmp(fatal_jmp)) {
		fatal_armed = 0;
		for (i = 0; i < KC_SMC_NREGS; i++)
			out[i] = cpu_reg(&ctxt, i);
		return KC_EL2_FATAL;
	}
	fatal_armed = 1;
	if (trace_on())
		fprintf(stderr, "kc-smc host %#llx\n", (unsigned long long)in[0]);
	/* The tree's own dispatch: it masks the SMCCC hint, refuses what it
	 * refuses, and hands kvm_host_ffa_handler() the func_id it computes. */
	kc_forwarded = 0;
	handle_host_smc(&ctxt);
	*handled = !kc_forwarded;
	fatal_armed = 0;
	for (i = 0; i < KC_SMC_NREGS; i++)
		out[i] = cpu_reg(&ctxt, i);
	if (trace_on())
		fprintf(stderr, "kc-smc ret %#llx %#llx\n", (unsigned long long)out[0],
			(unsigned long long)out[2]);
	return KC_EL2_OK;
}

/* ffa.c's statics (ffa_unit.c puts them in these sections). The linker
 * defines __start_/__stop_ for a section that exists; weak, since ffa.c
 * may have no initialised data at all. */
extern char __start_kc_ffa_bss[] __attribute__((weak));
extern char __stop_kc_ffa_bss[] __attribute__((weak));
extern char __start_kc_ffa_data[] __attribute__((weak));
extern char __stop_kc_ffa_data[] __attribute__((weak));

static size_t span(const char *b, const char *e)
{
	return b && e ? (size_t)(e - b) : 0;
}

size_t kc_el2_ffa_state_size(void)
{
	return span(__start_kc_ffa_bss, __stop_kc_ffa_bss) +
	       span(__start_kc_ffa_data, __stop_kc_ffa_data);
}

/* The sections hold ASan's redzones between globals: copy them byte by
 * byte without instrumentation (memcpy would be checked by ASan). */
__attribute__((no_sanitize("address")))
static void copy_raw(volatile char *dst, const volatile char *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

void kc_el2_ffa_state_save(void *dst)
{
	size_t nb = span(__start_kc_ffa_bss, __stop_kc_ffa_bss);

	copy_raw(dst, __start_kc_ffa_bss, nb);
	copy_raw((char *)dst + nb, __start_kc_ffa_data,
		 span(__start_kc_ffa_data, __stop_kc_ffa_data));
}

void kc_el2_ffa_state_load(const void *src)
{
	size_t nb = span(__start_kc_ffa_bss, __stop_kc_ffa_bss);

	copy_raw(__start_kc_ffa_bss, src, nb);
	copy_raw(__start_kc_ffa_data, (const char *)src + nb,
		 span(__start_kc_ffa_data, __stop_kc_ffa_data));
}
