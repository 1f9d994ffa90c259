// SPDX-License-Identifier: GPL-2.0
/*
 * @@TITLE@@
 *
 * A standalone reproducer written by `kconform export --as c` from
 *   @@SOURCE@@
 * Build and run (needs only gcc and the kernel's uapi headers, linux/kvm.h):
 *   gcc -O2 -Wall -o repro repro.c && ./repro
 * (add -static to run it inside a guest without a C library).
 *
 * It performs the scenario's ops as kconform's host target does
 * (targets/host_gmem/host_target.cc), prints each op and its outcome in
 * kconform's words ("ok N", "errno ENAME", "signal SIGBUS"; a load's "aux" is
 * the FNV-1a 64 digest of the bytes read, fstat's the file size), and judges
 * the op of the finding against the outcomes the reference model allows.
 * Exit status, as kselftests: 0 the kernel behaves as expected, 1 it does not
 * (the finding reproduces), 4 skipped (no /dev/kvm or no guest_memfd).
 */
#define _GNU_SOURCE
#pragma GCC diagnostic ignored "-Wunused-function"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <linux/kvm.h>
#include <linux/types.h>

/* What older uapi headers lack (values of include/uapi/linux/kvm.h and
 * Documentation/virt/kvm/api.rst; GUEST_MEMFD_FLAG_WRITE from the unmerged
 * series "KVM: guest_memfd: use write for population"). */
#ifndef KVM_CAP_USER_MEMORY2
#define KVM_CAP_USER_MEMORY2 231
#endif
#ifndef KVM_CAP_GUEST_MEMFD
#define KVM_CAP_GUEST_MEMFD 234
#endif
#ifndef KVM_CAP_VM_TYPES
#define KVM_CAP_VM_TYPES 235
#endif
#ifndef KVM_CAP_GUEST_MEMFD_FLAGS
#define KVM_CAP_GUEST_MEMFD_FLAGS 244
#endif
#ifndef KVM_MEM_GUEST_MEMFD
#define KVM_MEM_GUEST_MEMFD (1UL << 2)
#endif
#ifndef GUEST_MEMFD_FLAG_MMAP
#define GUEST_MEMFD_FLAG_MMAP (1ULL << 0)
#endif
#ifndef GUEST_MEMFD_FLAG_INIT_SHARED
#define GUEST_MEMFD_FLAG_INIT_SHARED (1ULL << 1)
#endif
#ifndef GUEST_MEMFD_FLAG_WRITE
#define GUEST_MEMFD_FLAG_WRITE (1ULL << 2)
#endif
#ifndef KVM_CREATE_GUEST_MEMFD
struct kvm_create_guest_memfd {
	__u64 size;
	__u64 flags;
	__u64 reserved[6];
};
#define KVM_CREATE_GUEST_MEMFD _IOWR(KVMIO, 0xd4, struct kvm_create_guest_memfd)
#endif
#ifndef KVM_SET_USER_MEMORY_REGION2
struct kvm_userspace_memory_region2 {
	__u32 slot;
	__u32 flags;
	__u64 guest_phys_addr;
	__u64 memory_size;
	__u64 userspace_addr;
	__u64 guest_memfd_offset;
	__u32 guest_memfd;
	__u32 pad1;
	__u64 pad2[14];
};
#define KVM_SET_USER_MEMORY_REGION2 _IOW(KVMIO, 0x49, struct kvm_userspace_memory_region2)
#endif

#define KSFT_PASS 0
#define KSFT_FAIL 1
#define KSFT_SKIP 4

/* kconform's harness conventions (harness/scenario/gmem_conventions.h). */
#define MAX_OP_BYTES (64ULL << 20)
#define INT_ARG_MAX 0x7fffffffULL

enum kind { OK, ERRNO, SIG };
struct outcome {
	enum kind kind;
	long long value;
	unsigned long long aux;
};
struct allowed {
	enum kind kind;
	long long lo, hi;
	int check_aux;
	unsigned long long aux;
	const char *text;
};

static long page;
static int kvm_fd = -1;
static int vms[@@NVM@@], gmems[@@NGMEM@@];
static struct { unsigned char *addr; unsigned long long len; } maps[@@NMAP@@];
static struct { struct timespec m, c; int valid; } base_times[@@NGMEM@@];
static unsigned char *dummy;

/* The data pattern of a seed (harness/scenario/pattern.h): byte i of a
 * splitmix-style stream, all zero for seed 0. */
static unsigned char pattern_byte(unsigned long long seed, unsigned long long i)
{
	unsigned long long z;

	if (seed == 0)
		return 0;
	z = seed * 0x9e3779b97f4a7c15ULL + (i >> 3) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (unsigned char)(z >> ((i & 7) * 8));
}

static struct outcome ok(long long v, unsigned long long aux)
{
	struct outcome o = { OK, v, aux };
	return o;
}

static struct outcome err(int e)
{
	struct outcome o = { ERRNO, e, 0 };
	return o;
}

static struct outcome result(long r)
{
	return r < 0 ? err(errno) : ok(r, 0);
}

static const char *errno_text(int e)
{
	static char buf[32];

	switch (e) {
@@ERRNO_CASES@@
	}
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

static void print_outcome(const struct outcome *o)
{
	if (o->kind == ERRNO)
		printf("errno %s", errno_text((int)o->value));
	else if (o->kind == SIG)
		printf("signal %s", o->value == SIGBUS ? "SIGBUS" : o->value == SIGSEGV ? "SIGSEGV" : "?");
	else if (o->aux)
		printf("ok %lld aux=0x%llx", o->value, o->aux);
	else
		printf("ok %lld", o->value);
}

static int is_allowed(const struct outcome *o, const struct allowed *a, int n)
{
	for (int i = 0; i < n; i++) {
		if (o->kind != a[i].kind)
			continue;
		if (o->value < a[i].lo || o->value > a[i].hi)
			continue;
		if (a[i].check_aux && o->aux != a[i].aux)
			continue;
		return 1;
	}
	return 0;
}

static int sat_int(unsigned long long v)
{
	return v > INT_ARG_MAX ? INT_MAX : (int)v;
}

static unsigned long long round_up(unsigned long long v)
{
	if (v > ~0ULL - (page - 1))
		return 0;
	return (v + page - 1) & ~(unsigned long long)(page - 1);
}

static int fd_of(int *slots, int n, unsigned long long slot)
{
	return slot < (unsigned long long)n ? slots[slot] : -1;
}
#define VM(s) fd_of(vms, @@NVM@@, (s))
#define GMEM(s) fd_of(gmems, @@NGMEM@@, (s))

/* A source buffer of len bytes whose first `valid` bytes are readable and hold
 * the pattern, followed by PROT_NONE pages (src_valid < len). */
static unsigned char *source(unsigned long long len, unsigned long long seed, unsigned long long valid,
			     unsigned long long *maplen)
{
	unsigned long long head, tail;
	unsigned char *area, *start;

	if (valid > len)
		valid = len;
	head = round_up(valid);
	tail = round_up(len - valid);
	*maplen = head + tail;
	if (head + tail == 0)
		return dummy;
	area = mmap(NULL, head + tail, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED)
		return NULL;
	start = area + head - valid;
	for (unsigned long long i = 0; i < valid; i++)
		start[i] = pattern_byte(seed, i);
	if (tail)
		mprotect(area + head, tail, PROT_NONE);
	return start;
}

static void drop_source(unsigned char *src, unsigned long long maplen)
{
	if (src && src != dummy && maplen)
		munmap((void *)((uintptr_t)src & ~(uintptr_t)(page - 1)), maplen);
}

/* Loads and stores through a mapping: a fault (SIGBUS, SIGSEGV) is caught by
 * a handler and becomes the op's outcome, as in kconform's host target. */
static sigjmp_buf landing;
static volatile sig_atomic_t guarded;

static void on_fault(int sig)
{
	if (guarded) {
		guarded = 0;
		siglongjmp(landing, sig);
	}
	signal(sig, SIG_DFL);
}

static struct outcome access_map(unsigned long long slot, unsigned long long offset, unsigned long long len,
				 int store, unsigned long long seed)
{
	volatile unsigned char *p;
	unsigned long long map_len, h = 0xcbf29ce484222325ULL;
	int sig;

	if (len > MAX_OP_BYTES)
		return err(E2BIG);
	if (slot >= @@NMAP@@ || !maps[slot].addr)
		return err(EBADF);
	map_len = round_up(maps[slot].len);
	if (offset > map_len || len > map_len - offset)
		return err(ERANGE);
	p = maps[slot].addr + offset;
	sig = sigsetjmp(landing, 1);
	if (sig) {
		struct outcome o = { SIG, sig, 0 };
		return o;
	}
	guarded = 1;
	for (unsigned long long i = 0; i < len; i++) {
		if (store) {
			p[i] = pattern_byte(seed, i);
		} else {
			h ^= p[i];
			h *= 0x100000001b3ULL;
		}
	}
	guarded = 0;
	return ok(0, store ? 0 : h);
}

/* `times`: which of mtime (1) and ctime (2) advanced since the previous times
 * or creation; after each baseline wait until the coarse clock is past it. */
static int later(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec : a->tv_nsec > b->tv_nsec;
}

static int take_baseline(int fd, unsigned long long slot)
{
	struct stat st;
	struct timespec now, pause = { 0, 1000000 };

	if (fstat(fd, &st))
		return -1;
	base_times[slot].m = st.st_mtim;
	base_times[slot].c = st.st_ctim;
	base_times[slot].valid = 1;
	for (int waited = 0; waited < 2000; waited++) {
		const struct timespec *newest = later(&st.st_mtim, &st.st_ctim) ? &st.st_mtim : &st.st_ctim;

		if (clock_gettime(CLOCK_REALTIME_COARSE, &now) || later(&now, newest))
			break;
		nanosleep(&pause, NULL);
	}
	return 0;
}

static struct outcome op_create_vm(unsigned long long type)
{
	static int n;
	int fd = ioctl(kvm_fd, KVM_CREATE_VM, (unsigned long)type);
	int e = errno;

	vms[n++] = fd < 0 ? -1 : fd;
	return fd < 0 ? err(e) : ok(0, 0);
}

static struct outcome op_create_gmem(unsigned long long vm, unsigned long long size, unsigned long long flags,
				     int track_times)
{
	static int n;
	struct kvm_create_guest_memfd args;
	int fd, e;

	memset(&args, 0, sizeof(args));
	args.size = size;
	args.flags = flags;
	fd = ioctl(VM(vm), KVM_CREATE_GUEST_MEMFD, &args);
	e = errno;
	gmems[n] = fd < 0 ? -1 : fd;
	if (fd >= 0 && track_times)
		take_baseline(fd, n);
	n++;
	return fd < 0 ? err(e) : ok(0, 0);
}

static struct outcome op_close(int *slots, int n, unsigned long long slot)
{
	struct outcome o = result(close(fd_of(slots, n, slot)));

	if (slot < (unsigned long long)n)
		slots[slot] = -1;
	return o;
}

static struct outcome op_write(unsigned long long gmem, int positional, unsigned long long offset,
			       unsigned long long len, unsigned long long seed, unsigned long long valid)
{
	unsigned long long maplen;
	unsigned char *src;
	long r;

	if (len > MAX_OP_BYTES)
		return err(E2BIG);
	src = source(len, seed, valid, &maplen);
	if (!src)
		return err(ENOMEM);
	r = positional ? pwrite(GMEM(gmem), src, len, (off_t)offset) : write(GMEM(gmem), src, len);
	{
		struct outcome o = result(r);

		drop_source(src, maplen);
		return o;
	}
}

static struct outcome op_pwritev(unsigned long long gmem, unsigned long long offset, unsigned long long len,
				 unsigned long long iovcnt, unsigned long long seed)
{
	unsigned long long maplen, built = iovcnt < IOV_MAX ? iovcnt : IOV_MAX, seg;
	struct iovec *iov;
	unsigned char *src;
	struct outcome o;

	if (len > MAX_OP_BYTES)
		return err(E2BIG);
	src = source(len, seed, len, &maplen);
	if (!src)
		return err(ENOMEM);
	iov = calloc(built ? built : 1, sizeof(*iov));
	if (built) {
		seg = len / iovcnt;
		for (unsigned long long k = 0; k < built; k++) {
			iov[k].iov_base = src + k * seg;
			iov[k].iov_len = k + 1 == iovcnt ? len - k * seg : seg;
		}
	}
	o = result(pwritev(GMEM(gmem), iov, sat_int(iovcnt), (off_t)offset));
	free(iov);
	drop_source(src, maplen);
	return o;
}

static struct outcome op_read(unsigned long long gmem, int positional, unsigned long long offset,
			      unsigned long long len)
{
	void *dst = dummy;
	unsigned long long maplen = 0;
	struct outcome o;

	if (len > MAX_OP_BYTES)
		return err(E2BIG);
	if (len) {
		maplen = round_up(len);
		dst = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (dst == MAP_FAILED)
			return err(ENOMEM);
	}
	o = result(positional ? pread(GMEM(gmem), dst, len, (off_t)offset) : read(GMEM(gmem), dst, len));
	if (maplen)
		munmap(dst, maplen);
	return o;
}

static struct outcome op_mmap(unsigned long long gmem, unsigned long long offset, unsigned long long len,
			      unsigned long long prot, unsigned long long share)
{
	static int n;
	int fd = GMEM(gmem), e;
	void *p;

	/* Only a map type (0..3) and READ|WRITE|EXEC reach mmap (kconform's harness). */
	if (share > 3 || (prot & ~0x7ULL)) {
		n++;
		return err(fd < 0 ? EBADF : EINVAL);
	}
	p = mmap(NULL, len, (int)prot, (int)share, fd, (off_t)offset);
	e = errno;
	if (p == MAP_FAILED) {
		n++;
		return err(e);
	}
	maps[n].addr = p;
	maps[n].len = len;
	n++;
	return ok(0, 0);
}

static struct outcome op_munmap(unsigned long long slot)
{
	if (slot >= @@NMAP@@ || !maps[slot].addr)
		return err(EBADF);
	if (munmap(maps[slot].addr, maps[slot].len))
		return err(errno);
	maps[slot].addr = NULL;
	return ok(0, 0);
}

static struct outcome op_fallocate(unsigned long long gmem, unsigned long long mode, unsigned long long offset,
				   unsigned long long len)
{
	if (!(mode & 0x02) && len > MAX_OP_BYTES)
		return err(E2BIG);
	return result(fallocate(GMEM(gmem), sat_int(mode), (off_t)offset, (off_t)len));
}

static struct outcome op_fstat(unsigned long long gmem)
{
	struct stat st;

	if (fstat(GMEM(gmem), &st))
		return err(errno);
	return ok(0, (unsigned long long)st.st_size);
}

/* The userspace memory behind a bind: anonymous read-write up to
 * MAX_OP_BYTES, a PROT_NONE reservation above, a dummy page for size 0. */
static unsigned long long backing(unsigned long long size)
{
	unsigned long long rounded = round_up(size);
	void *p;

	if (size && rounded) {
		p = mmap(NULL, rounded, size <= MAX_OP_BYTES ? PROT_READ | PROT_WRITE : PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED)
			return (uintptr_t)p;
	}
	return (uintptr_t)dummy;
}

static struct outcome op_bind(unsigned long long vm, unsigned long long slot, unsigned long long gpa,
			      unsigned long long size, unsigned long long gmem, unsigned long long gmem_offset,
			      unsigned long long flags)
{
	struct kvm_userspace_memory_region2 r;

	memset(&r, 0, sizeof(r));
	r.slot = (__u32)slot;
	r.guest_phys_addr = gpa;
	r.memory_size = size;
	r.guest_memfd = (__u32)GMEM(gmem);
	r.guest_memfd_offset = gmem_offset;
	r.flags = (__u32)flags;
	r.userspace_addr = backing(size);
	return result(ioctl(VM(vm), KVM_SET_USER_MEMORY_REGION2, &r));
}

static struct outcome op_unbind(unsigned long long vm, unsigned long long slot)
{
	struct kvm_userspace_memory_region2 r;

	memset(&r, 0, sizeof(r));
	r.slot = (__u32)slot;
	return result(ioctl(VM(vm), KVM_SET_USER_MEMORY_REGION2, &r));
}

static struct outcome op_times(unsigned long long gmem)
{
	struct timespec m, c;
	int was_valid, bits = 0;

	if (gmem >= @@NGMEM@@)
		return err(EBADF);
	m = base_times[gmem].m;
	c = base_times[gmem].c;
	was_valid = base_times[gmem].valid;
	if (take_baseline(GMEM(gmem), gmem))
		return err(errno);
	if (was_valid && later(&base_times[gmem].m, &m))
		bits |= 1;
	if (was_valid && later(&base_times[gmem].c, &c))
		bits |= 2;
	return ok(bits, 0);
}

static int failed, judged;

/* Prints one op and its outcome; judges it when the finding names its allowed outcomes. */
static void report(int index, const char *call, struct outcome o, const struct allowed *a, int n,
		   const char *rule, const char *seen)
{
	printf("# op %d: %s -> ", index, call);
	print_outcome(&o);
	printf("\n");
	if (!rule)
		return;
	judged++;
	printf("#   %s: expected: ", rule);
	for (int i = 0; i < n; i++)
		printf("%s%s", i ? " | " : "", a[i].text);
	printf("%s\n#   %s: observed: ", n ? "" : "(nothing)", rule);
	print_outcome(&o);
	printf("\n#   (observed when the finding was made: %s)\n", seen);
	if (is_allowed(&o, a, n)) {
		printf("ok %d %s: op %d %s\n", judged, rule, index, call);
	} else {
		printf("not ok %d %s: op %d %s\n", judged, rule, index, call);
		failed++;
	}
}

static int skip(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	return KSFT_SKIP;
}

int main(void)
{
	struct sigaction sa;
	struct outcome o;
	int vm, flags;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("TAP version 13\n");
	page = sysconf(_SC_PAGESIZE);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fault;
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	dummy = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm_fd < 0)
		return skip("/dev/kvm cannot be opened");
	if (ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_GUEST_MEMFD) <= 0)
		return skip("the kernel lacks guest_memfd (KVM_CAP_GUEST_MEMFD)");
@@REQUIRES@@
	printf("1..%d\n", @@NJUDGED@@);
	printf("# %s\n", @@TITLE_C@@);
	{
		char rel[256] = "";
		FILE *f = fopen("/proc/sys/kernel/osrelease", "r");

		if (f) {
			if (fgets(rel, sizeof(rel), f))
				rel[strcspn(rel, "\n")] = 0;
			fclose(f);
		}
		printf("# kernel %s, page size %ld\n", rel, page);
	}
@@OPS@@
	printf("# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0\n", judged - failed, failed);
	return failed ? KSFT_FAIL : KSFT_PASS;
}
