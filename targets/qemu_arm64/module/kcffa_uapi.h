/* SPDX-License-Identifier: GPL-2.0 */
/* The interface of /dev/kcffa (kcffa.c), shared with the userspace agent. */
#ifndef KCFFA_UAPI_H
#define KCFFA_UAPI_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#else
#include <stdint.h>
#include <sys/ioctl.h>
typedef uint64_t __u64;
#endif

struct kcffa_regs {
	__u64 x[18];		/* x0..x17 in, x0..x17 out */
};

struct kcffa_info {
	__u64 pa;		/* physical address of the buffer */
	__u64 size;		/* bytes */
	__u64 page_size;	/* the kernel's PAGE_SIZE */
};

#define KCFFA_SMC	_IOWR('K', 1, struct kcffa_regs)
#define KCFFA_INFO	_IOR('K', 2, struct kcffa_info)

#endif
