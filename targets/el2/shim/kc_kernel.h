/* Force-included before every kernel source compiled for the host: the
 * compiler, config and debug macros that <linux/compiler.h>, <linux/kconfig.h>,
 * <asm/bug.h> and <asm/barrier.h> give real kernel code. Ours, not the kernel's. */
#ifndef KC_KERNEL_H
#define KC_KERNEL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kc_el2_hooks.h"

/* The tree is built as arm64 code: CONFIG_ARM64 selects struct
 * arm_smccc_1_2_regs in <linux/arm-smccc.h> and FFA_FN_NATIVE() in
 * <linux/arm_ffa.h>. Only macros are affected, never code generation. */
#define CONFIG_ARM64 1
#define CONFIG_64BIT 1
#define __KVM_NVHE_HYPERVISOR__ 1

/* <linux/kconfig.h>: every option not defined above reads as disabled. */
#define __KC_ARG_PLACEHOLDER_1 0,
#define __kc_take_second_arg(ignored, val, ...) val
#define __kc_is_defined(x) ___kc_is_defined(x)
#define ___kc_is_defined(val) ____kc_is_defined(__KC_ARG_PLACEHOLDER_##val)
#define ____kc_is_defined(arg1_or_junk) __kc_take_second_arg(arg1_or_junk 1, 0)
#define IS_BUILTIN(option) __kc_is_defined(option)
#define IS_MODULE(option) 0
#define IS_ENABLED(option) IS_BUILTIN(option)
#define IS_REACHABLE(option) IS_BUILTIN(option)

/* <linux/compiler_types.h> */
#define __always_unused __attribute__((__unused__))
#define __maybe_unused __attribute__((__unused__))
#ifndef __always_inline /* glibc <sys/cdefs.h> has one too */
#define __always_inline inline __attribute__((__always_inline__))
#endif
#define __aligned(x) __attribute__((__aligned__(x)))
#define __packed __attribute__((__packed__))
#define noinline __attribute__((__noinline__))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define __must_check __attribute__((__warn_unused_result__))
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

/* <asm/barrier.h>: EL2 runs on many CPUs; the host harness runs one thread. */
#define smp_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define smp_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* <linux/build_bug.h> */
#define BUILD_BUG_ON(cond) ((void)sizeof(char[1 - 2 * !!(cond)]))

/* <asm/bug.h>: a hyp WARN is reported to the harness, which records it;
 * BUG() ends the call the way hyp_panic ends EL2. */
#define WARN_ON(cond) ({ int __kc_c = !!(cond); \
	if (__kc_c) kc_el2_warn(__FILE__, __LINE__, #cond); __kc_c; })
#define WARN_ON_ONCE(cond) WARN_ON(cond)
#define BUG() kc_el2_fatal(__FILE__, __LINE__, "BUG()")
#define BUG_ON(cond) do { if (cond) kc_el2_fatal(__FILE__, __LINE__, "BUG_ON(" #cond ")"); } while (0)

/* <linux/overflow.h> */
#define check_add_overflow(a, b, d) __builtin_add_overflow(a, b, d)
#define check_sub_overflow(a, b, d) __builtin_sub_overflow(a, b, d)
#define check_mul_overflow(a, b, d) __builtin_mul_overflow(a, b, d)

/* <linux/container_of.h>, <linux/kernel.h>, <linux/math.h>, <linux/align.h> */
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define container_of_const(ptr, type, member) container_of(ptr, type, member)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
#define __KC_ALIGN_MASK(x, mask) (((x) + (mask)) & ~(mask))
#define ALIGN(x, a) __KC_ALIGN_MASK(x, (__typeof__(x))(a) - 1)
#define ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a) - 1))
#define IS_ALIGNED(x, a) (((x) & ((__typeof__(x))(a) - 1)) == 0)

/* <asm/page-def.h>: the host PAGE_SIZE is a build-time choice (KC_PAGE_SHIFT). */
#ifndef KC_PAGE_SHIFT
#error "KC_PAGE_SHIFT must be defined (12, 14 or 16): configure with -DKCONFORM_PAGE_SIZE"
#endif
#define PAGE_SHIFT KC_PAGE_SHIFT
#define PAGE_SIZE (1UL << PAGE_SHIFT)
#define PAGE_MASK (~(PAGE_SIZE - 1))
#define PAGE_ALIGN(addr) ALIGN(addr, PAGE_SIZE)
#define PAGE_ALIGNED(addr) IS_ALIGNED((unsigned long)(addr), PAGE_SIZE)

#include <linux/types.h>
#include <linux/bits.h>
#include <linux/sizes.h>

#endif /* KC_KERNEL_H */
