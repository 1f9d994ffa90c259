// The KVM uapi definitions the host target needs that the system's
// <linux/kvm.h> (bookworm: 6.1 headers) lacks. Values are from
// include/uapi/linux/kvm.h of linux-source-7.3; GUEST_MEMFD_FLAG_WRITE is
// from "KVM: guest_memfd: use write for population" v7 (unmerged).
#pragma once

#include <linux/kvm.h>
#include <linux/types.h>

#ifndef KVM_CAP_USER_MEMORY2
#define KVM_CAP_USER_MEMORY2 231
#endif
#ifndef KVM_CAP_MEMORY_ATTRIBUTES
#define KVM_CAP_MEMORY_ATTRIBUTES 233
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
