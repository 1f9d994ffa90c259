// guest_memfd ABI: op codes, argument positions and named values, as used by
// the gmem model (models/gmem) and the targets that run gmem scenarios.
// The table that gives them names and kinds is in gmem_abi.cc.
#pragma once

#include <cstdint>

namespace kconform::gmem {

// Resource kinds (slot namespaces).
enum Resource : int { kVm = 0, kGmem = 1, kMap = 2 };

// Op codes, in table order. Arguments are listed as "a0, a1, ...".
enum OpCode : uint8_t {
  kCreateVm = 0,    // type
  kCreateGmem = 1,  // vm, size, flags                        -> gmem
  kClose = 2,       // gmem
  kWrite = 3,       // gmem, len, pattern, src_valid           (at file position)
  kPwrite = 4,      // gmem, offset, len, pattern, src_valid
  kPwritev = 5,     // gmem, offset, len, iovcnt, pattern
  kRead = 6,        // gmem, len
  kPread = 7,       // gmem, offset, len
  kLseek = 8,       // gmem, offset, whence
  kMmap = 9,        // gmem, offset, len, prot, share         -> map
  kMunmap = 10,     // map
  kLoad = 11,       // map, offset, len        (ok + digest of the bytes, or a signal)
  kStore = 12,      // map, offset, len, pattern
  kFallocate = 13,  // gmem, mode, offset, len
  kFstat = 14,      // gmem                    (ok + st_size in aux)
  kBind = 15,       // vm, slot, gpa, size, gmem, gmem_offset, flags
  kUnbind = 16,     // vm, slot
  kCloseVm = 17,    // vm
  kTimes = 18,      // gmem                    (ok + kTimes* bits: mtime/ctime advanced)
  kOpCount
};

// Ops after which the content oracle re-reads what the scenario can read (with
// a scenario's last op; models/gmem/SPEC.md HARNESS:OBSERVE): those that can
// change a file's data.
inline bool changes_data(uint8_t code) {
  return code == kCreateGmem || code == kWrite || code == kPwrite || code == kPwritev || code == kStore ||
         code == kFallocate;
}

// Creation flags (include/uapi/linux/kvm.h; WRITE from the write series v7).
inline constexpr uint64_t kFlagMmap = 1ull << 0;
inline constexpr uint64_t kFlagInitShared = 1ull << 1;
inline constexpr uint64_t kFlagWrite = 1ull << 2;

// VM types (KVM_X86_DEFAULT_VM, KVM_X86_SW_PROTECTED_VM).
inline constexpr uint64_t kVmDefault = 0;
inline constexpr uint64_t kVmSwProtected = 1;

// mmap arguments.
inline constexpr uint64_t kProtRead = 1;
inline constexpr uint64_t kProtWrite = 2;
inline constexpr uint64_t kMapShared = 1;
inline constexpr uint64_t kMapPrivate = 2;

// fallocate modes (linux/falloc.h).
inline constexpr uint64_t kFallocKeepSize = 0x01;
inline constexpr uint64_t kFallocPunchHole = 0x02;
inline constexpr uint64_t kFallocCollapseRange = 0x08;
inline constexpr uint64_t kFallocZeroRange = 0x10;
inline constexpr uint64_t kFallocInsertRange = 0x20;

// KVM_SET_USER_MEMORY_REGION2 flags.
inline constexpr uint64_t kMemLogDirtyPages = 1ull << 0;
inline constexpr uint64_t kMemReadonly = 1ull << 1;
inline constexpr uint64_t kMemGuestMemfd = 1ull << 2;

// src_valid's default: the whole source buffer is readable.
inline constexpr uint64_t kSrcAllValid = ~0ull;

// Capabilities a scenario can require (Scenario::requires_caps bits).
enum Capability : uint32_t {
  kCapGmem = 1u << 0,          // KVM_CAP_GUEST_MEMFD
  kCapMmap = 1u << 1,          // GUEST_MEMFD_FLAG_MMAP in KVM_CAP_GUEST_MEMFD_FLAGS
  kCapInitShared = 1u << 2,    // GUEST_MEMFD_FLAG_INIT_SHARED in it
  kCapWrite = 1u << 3,         // GUEST_MEMFD_FLAG_WRITE in it
  kCapUserMemory2 = 1u << 4,   // KVM_CAP_USER_MEMORY2
  kCapSwProtectedVm = 1u << 5, // KVM_X86_SW_PROTECTED_VM in KVM_CAP_VM_TYPES
};

}  // namespace kconform::gmem
