// Target family "host": guest_memfd scenarios on the running kernel.
#include "harness/runner/target_registry.h"
#include "models/gmem/model.h"
#include "targets/host_gmem/host_target.h"

namespace kconform {
namespace {

bool open_host(OpenTarget* out, std::string* error) {
  gmem::HostOpen host = gmem::open_host_target();
  if (!host.target) {
    *error = host.error;
    return false;
  }
  out->model = gmem::make_model(host.profile);
  out->target = std::move(host.target);
  return true;
}

const TargetFamily kHost{"host", "guest_memfd on the running kernel (/dev/kvm)", open_host};

}  // namespace

const TargetFamily& host_target_family() { return kHost; }

}  // namespace kconform
