// Target family "el2": FF-A scenarios on pKVM's EL2 handler (the tree's ffa.c
// built into this executable for one host PAGE_SIZE), judged by the FF-A model
// with the profile the build gives (El2FfaTarget::profile()).
#include "harness/runner/target_el2.h"

#include "harness/runner/crash_marker.h"
#include "models/ffa/model.h"
#include "targets/el2/ffa_target.h"

namespace kconform::el2 {
namespace {

bool open_el2(OpenTarget* out, std::string* error) {
  std::unique_ptr<El2FfaTarget> t = open_el2_ffa_target(error);
  if (!t) return false;
  // A fault outside the hypervisor's view of memory names the region it missed.
  set_fault_describer(el2_describe_fault);
  out->model = ::kconform::ffa::make_model(t->profile());
  out->invariants = t.get();
  out->target = std::move(t);
  return true;
}

// In-process code under test: an infinite loop in it would hang the run, so
// `run` has a watchdog by default (5 s per op; µs are typical, ASan -O0 included).
const TargetFamily kEl2{"el2", "FF-A through pKVM's EL2 handler (the tree's ffa.c, built in)", open_el2, 5.0};

}  // namespace

const TargetFamily& el2_target_family() { return kEl2; }

}  // namespace kconform::el2
