// Harness conventions of every target that runs gmem scenarios, mirrored by
// the gmem model (models/gmem). Where a scenario asks for something the
// harness will not do, the target answers with a "refusal" errno without
// calling the kernel. targets/README.md lists them all. (Candidates to move
// into harness/scenario/gmem_abi.h once the model uses them.)
#pragma once

#include <cstdint>

namespace kconform::gmem {

// Largest byte count a target materialises for one op: the len of write,
// pwrite, pwritev, read, pread, load, store, and of a fallocate that
// allocates (mode without PUNCH_HOLE). Above it: Outcome::err(E2BIG).
inline constexpr uint64_t kMaxOpBytes = 64ull << 20;
// The content re-read looks at most at this many pages of a file, from its
// start or a mapping's (SPEC.md HARNESS:OBSERVE).
inline constexpr uint64_t kObservePages = 1024;

// Refusal order, before any kernel call:
//   1. E2BIG  the op's byte count exceeds kMaxOpBytes (see above);
//   2. EBADF  munmap/load/store on a map slot that failed, was unmapped or
//             was never produced (memory is not touched);
//   3. ERANGE load/store where offset + len exceeds the mapping's length
//             rounded up to the page size (or overflows).
// A vm or gmem slot that failed, was closed or was never produced goes to
// the kernel as fd -1.

// mmap: share is passed as mmap's flags and prot as its prot, but only a map
// type (share <= kMmapShareMax: 0 none, 1 MAP_SHARED, 2 MAP_PRIVATE,
// 3 MAP_SHARED_VALIDATE) and READ|WRITE|EXEC bits; anything else is refused
// with EINVAL (EBADF when the gmem slot is dead, as the kernel would order
// them). The map slot is produced (dead) either way.
inline constexpr uint64_t kMmapShareMax = 3;
inline constexpr uint64_t kMmapProtMask = 0x7;

// Narrowing: lseek whence, fallocate mode and pwritev iovcnt are C ints and
// saturate at kIntArgMax instead of wrapping; the u32 fields of
// kvm_userspace_memory_region2 (bind/unbind slot, bind flags) take the low 32
// bits of the argument, as the struct does. Offsets and sizes go as the same
// 64 bits (values >= 2^63 are negative off_t).
inline constexpr uint64_t kIntArgMax = 0x7fffffff;

// times: fstat() of the gmem slot's fd, reported as ok(bits) with
// kTimesMtimeAdvanced if st_mtim is later than the slot's baseline and
// kTimesCtimeAdvanced if st_ctim is. The baseline is what fstat() reported
// at the slot's previous `times`, or right after its create_gmem succeeded;
// after taking a baseline the target waits (at most kTimesSettleMs) until
// CLOCK_REALTIME_COARSE is later than both of its timestamps, so an update
// in the same clock tick as the baseline is never mistaken for none. Targets
// take baselines only in scenarios that contain a `times` op.
inline constexpr uint64_t kTimesMtimeAdvanced = 1;
inline constexpr uint64_t kTimesCtimeAdvanced = 2;
inline constexpr uint64_t kTimesSettleMs = 2000;

// Ops that produce a resource report ok(0) on success (never the fd number or
// address); an op code the ABI table does not know, or a scenario of another
// ABI, reports ENOSYS.

}  // namespace kconform::gmem
