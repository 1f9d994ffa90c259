// kconform-host-probe: prints what the host target probed on /dev/kvm.
// Exit 0 when /dev/kvm is usable, 77 (skip) when not.
#include <cstdio>

#include "targets/host_gmem/probe.h"

int main(int argc, char** argv) {
  const char* dev = argc > 1 ? argv[1] : kconform::host_gmem::kKvmDevice;
  kconform::host_gmem::ProbeResult r = kconform::host_gmem::probe_kvm(dev);
  std::fputs(kconform::host_gmem::format_probe(r).c_str(), stdout);
  if (!r.ok) {
    std::fprintf(stderr, "kconform-host-probe: %s\n", r.error.c_str());
    return 77;
  }
  return 0;
}
