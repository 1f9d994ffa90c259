// Probes /dev/kvm: API version, the guest_memfd capabilities system-wide and
// on a VM of each available type (the per-VM answer is what matters), page
// size and kernel release.
#include "targets/host_gmem/probe.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/scenario/gmem_abi.h"
#include "targets/host_gmem/kvm_uapi.h"

namespace kconform::host_gmem {
namespace {

struct CapName {
  long cap;
  const char* name;
};
// Probed system-wide and on each VM.
constexpr CapName kCaps[] = {
    {KVM_CAP_GUEST_MEMFD, "KVM_CAP_GUEST_MEMFD"},
    {KVM_CAP_GUEST_MEMFD_FLAGS, "KVM_CAP_GUEST_MEMFD_FLAGS"},
    {KVM_CAP_VM_TYPES, "KVM_CAP_VM_TYPES"},
    {KVM_CAP_USER_MEMORY2, "KVM_CAP_USER_MEMORY2"},
    {KVM_CAP_MEMORY_ATTRIBUTES, "KVM_CAP_MEMORY_ATTRIBUTES"},
};

// KVM_CHECK_EXTENSION; a failing ioctl counts as "not supported" (0).
uint64_t check(int fd, long cap) {
  int r = ioctl(fd, KVM_CHECK_EXTENSION, cap);
  return r < 0 ? 0 : static_cast<uint64_t>(r);
}

// Only types 0 and 1 exist in the model's profile; others are probed and
// recorded, never used.
constexpr int kMaxVmType = 63;

}  // namespace

ProbeResult probe_kvm_fd(int kvm_fd) {
  ProbeResult r;
  TargetIdentity& id = r.identity;
  gmem::Profile& p = r.profile;
  id.target = "host";

  struct utsname u;
  id.release = uname(&u) == 0 ? u.release : "unknown";
  long ps = sysconf(_SC_PAGESIZE);
  p.page_size = ps > 0 ? static_cast<uint64_t>(ps) : 4096;
  id.caps.emplace_back("page_size", p.page_size);

  int api = ioctl(kvm_fd, KVM_GET_API_VERSION, 0);
  if (api < 0) {
    r.error = std::string("KVM_GET_API_VERSION on /dev/kvm failed: ") + std::strerror(errno);
    return r;
  }
  id.caps.emplace_back("KVM_GET_API_VERSION", static_cast<uint64_t>(api));
  if (api != KVM_API_VERSION) {
    r.error = "KVM_GET_API_VERSION returned " + std::to_string(api) + ", expected " +
              std::to_string(KVM_API_VERSION);
    return r;
  }

  uint64_t sys[std::size(kCaps)];
  for (size_t i = 0; i < std::size(kCaps); ++i) {
    sys[i] = check(kvm_fd, kCaps[i].cap);
    id.caps.emplace_back(kCaps[i].name, sys[i]);
  }
  const uint64_t vm_types_cap = sys[2];
  p.user_memory2 = sys[3] != 0;
  // Before KVM_CAP_VM_TYPES only type 0 existed.
  p.vm_types = vm_types_cap != 0 ? vm_types_cap : 1;

  uint64_t all_flags = sys[1];
  bool any_gmem = sys[0] != 0;
  bool created_any = false;
  std::string first_create_error;
  for (int t = 0; t <= kMaxVmType; ++t) {
    if (!(p.vm_types & (1ull << t))) continue;
    const std::string prefix = "vm" + std::to_string(t) + ".";
    int vm = ioctl(kvm_fd, KVM_CREATE_VM, static_cast<unsigned long>(t));
    if (vm < 0) {
      int e = errno;
      id.caps.emplace_back(prefix + "KVM_CREATE_VM_errno", static_cast<uint64_t>(e));
      if (first_create_error.empty())
        first_create_error = "KVM_CREATE_VM(type " + std::to_string(t) + ") failed: " +
                             std::strerror(e);
      if (t < 2) p.vm_types &= ~(1ull << t);
      continue;
    }
    created_any = true;
    uint64_t v[std::size(kCaps)];
    for (size_t i = 0; i < std::size(kCaps); ++i) {
      v[i] = check(vm, kCaps[i].cap);
      id.caps.emplace_back(prefix + kCaps[i].name, v[i]);
    }
    close(vm);
    if (t < 2) {
      p.gmem_on_vm_type[t] = v[0] != 0;
      p.supported_flags[t] = v[1];
    }
    all_flags |= v[1];
    any_gmem |= v[0] != 0;
  }
  if (!created_any) {
    r.error = first_create_error.empty() ? "KVM_CAP_VM_TYPES lists no VM type"
                                         : first_create_error;
    return r;
  }

  p.write_abi = (all_flags & GUEST_MEMFD_FLAG_WRITE) != 0;
  id.profile = p.name();
  uint32_t bits = 0;
  if (any_gmem) bits |= gmem::kCapGmem;
  if (all_flags & GUEST_MEMFD_FLAG_MMAP) bits |= gmem::kCapMmap;
  if (all_flags & GUEST_MEMFD_FLAG_INIT_SHARED) bits |= gmem::kCapInitShared;
  if (all_flags & GUEST_MEMFD_FLAG_WRITE) bits |= gmem::kCapWrite;
  if (p.user_memory2) bits |= gmem::kCapUserMemory2;
  if (p.vm_types & (1ull << gmem::kVmSwProtected)) bits |= gmem::kCapSwProtectedVm;
  id.cap_bits = bits;
  r.ok = true;
  return r;
}

ProbeResult probe_kvm(const char* dev_path) {
  int fd = open(dev_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    ProbeResult r;
    r.identity.target = "host";
    r.error = std::string("cannot open ") + dev_path + ": " + std::strerror(e) +
              (e == ENOENT ? " (is the kvm module loaded?)"
               : e == EACCES || e == EPERM ? " (run as root or join group kvm)"
                                           : "");
    return r;
  }
  ProbeResult r = probe_kvm_fd(fd);
  close(fd);
  return r;
}

std::string format_probe(const ProbeResult& r) {
  std::string out;
  char buf[160];
  out += "target = " + r.identity.target + "\n";
  out += "release = " + r.identity.release + "\n";
  for (const auto& [name, value] : r.identity.caps) {
    std::snprintf(buf, sizeof buf, "%s = %llu (0x%llx)\n", name.c_str(),
                  static_cast<unsigned long long>(value), static_cast<unsigned long long>(value));
    out += buf;
  }
  if (!r.ok) return out + "error = " + r.error + "\n";
  const gmem::Profile& p = r.profile;
  std::snprintf(buf, sizeof buf,
                "profile = %s (write_abi=%d page_size=%llu vm_types=0x%llx user_memory2=%d)\n",
                p.name().c_str(), p.write_abi, static_cast<unsigned long long>(p.page_size),
                static_cast<unsigned long long>(p.vm_types), p.user_memory2);
  out += buf;
  for (int t = 0; t < 2; ++t) {
    std::snprintf(buf, sizeof buf, "profile.vm%d: gmem=%d supported_flags=0x%llx\n", t,
                  p.gmem_on_vm_type[t], static_cast<unsigned long long>(p.supported_flags[t]));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "cap_bits = 0x%x\n", r.identity.cap_bits);
  out += buf;
  return out;
}

}  // namespace kconform::host_gmem
