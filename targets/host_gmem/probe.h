// Probes the running kernel's /dev/kvm for what the guest_memfd model needs
// to know (gmem::Profile) and what every verdict records (TargetIdentity).
#pragma once

#include <string>

#include "models/gmem/profile.h"
#include "targets/target.h"

namespace kconform::host_gmem {

inline constexpr const char* kKvmDevice = "/dev/kvm";

struct ProbeResult {
  bool ok = false;
  std::string error;  // when !ok: why /dev/kvm is missing or unusable (print it and skip)
  gmem::Profile profile;
  TargetIdentity identity;  // target "host"; caps hold every probed value by name
};

// Probes through an open /dev/kvm file descriptor (not closed).
ProbeResult probe_kvm_fd(int kvm_fd);
// Opens dev_path, probes, closes it again.
ProbeResult probe_kvm(const char* dev_path = kKvmDevice);

// Human-readable dump: one "name = value" line per probed value, then the
// profile and the capability bits.
std::string format_probe(const ProbeResult& r);

}  // namespace kconform::host_gmem
