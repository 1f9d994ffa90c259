// The guest_memfd model's parameters: which ABI (with or without
// GUEST_MEMFD_FLAG_WRITE) and the machine facts the ABI itself leaves to the
// kernel to report (PAGE_SIZE, the flags KVM_CAP_GUEST_MEMFD_FLAGS
// enumerates, the VM types KVM_CAP_VM_TYPES enumerates).
#pragma once

#include <cstdint>
#include <string>

namespace kconform::gmem {

struct Profile {
  // false: the ABI of mainline (no write()); true: the ABI of the series
  // "KVM: guest_memfd: use write for population" v7.
  bool write_abi = false;
  uint64_t page_size = 4096;
  // KVM_CHECK_EXTENSION(KVM_CAP_GUEST_MEMFD_FLAGS) on a VM of type 0 and 1.
  uint64_t supported_flags[2] = {0, 0};
  // KVM_CHECK_EXTENSION(KVM_CAP_VM_TYPES) bitmask (bit t: type t exists).
  uint64_t vm_types = 1;
  bool user_memory2 = false;
  // KVM_CHECK_EXTENSION(KVM_CAP_GUEST_MEMFD) on a VM of type 0 and 1.
  bool gmem_on_vm_type[2] = {false, false};

  std::string name() const { return write_abi ? "gmem-write" : "gmem-base"; }
};

}  // namespace kconform::gmem
