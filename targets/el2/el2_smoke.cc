// el2-smoke: initialises the EL2 target and performs a host FFA_VERSION
// through the real kvm_host_ffa_handler. Exit 0 when the handler answered
// with an FF-A 1.x version.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "targets/el2/el2_handler.h"

using namespace kconform::el2;

int main() {
  const BuildInfo& b = el2_build_info();
  std::printf("el2-smoke: ffa.c of linux %s (%s)\n", b.tree_version.c_str(), b.tree_path.c_str());
  std::printf("el2-smoke: PAGE_SIZE %" PRIu64 ", SMC conduit %s, hyp_ffa_proxy_pages() %" PRIu64
              ", FFA_MEM_RECLAIM2 %s, %s\n", b.page_size, b.smc_api.c_str(), b.ffa_proxy_pages,
              b.handles_reclaim2 ? "handled" : "not handled",
              b.sanitized ? "ASan+UBSan" : "not sanitized");
  std::string err;
  if (!el2_init(&err)) {
    std::fprintf(stderr, "el2-smoke: %s\n", err.c_str());
    return 1;
  }
  std::printf("el2-smoke: hyp_ffa_init ok; ffa.c state %zu bytes\n", el2_snapshot_bytes());

  uint64_t in[kNumRegs] = {ffa::kVersion, ffa::Version(1, 2)}, out[kNumRegs] = {};
  const bool handled = el2_host_call(in, out);
  std::printf("el2-smoke: host FFA_VERSION(1.2) -> handled=%d x0=%#" PRIx64 " (v%u.%u)\n",
              handled, out[0], unsigned(out[0] >> 16 & 0x7fff), unsigned(out[0] & 0xffff));
  const bool ok = handled && el2_last_status() == CallStatus::kOk && (out[0] >> 16) == 1 &&
                  el2_locks_held() == 0;
  std::printf("el2-smoke: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
