// Target family "el2-tfa": the el2 target (the tree's ffa.c, this build's
// PAGE_SIZE) with TF-A's EL3 SPMC behind it instead of the SPMC model
// (`./kconform run --target el2 --el3 tf-a`), judged by the FF-A model with a
// real EL3 (ProxyProfile::real_el3). Built when a TF-A tree was configured.
#include "harness/runner/target_el2.h"

#include "harness/runner/crash_marker.h"
#include "models/ffa/model.h"
#include "targets/el2/ffa_target.h"
#include "targets/spmc/tfa_el3.h"

namespace kconform::el2 {
namespace {

bool open_el2_tfa(OpenTarget* out, std::string* error) {
  std::unique_ptr<spmc::TfaEl3> el3 = spmc::TfaEl3::open(error);
  if (!el3) return false;
  std::unique_ptr<El2FfaTarget> t = open_el2_ffa_target(error, std::move(el3));
  if (!t) return false;
  set_fault_describer(el2_describe_fault);  // as target_el2.cc
  out->model = ::kconform::ffa::make_model(t->profile());
  out->invariants = t.get();
  out->target = std::move(t);
  return true;
}

const TargetFamily kEl2Tfa{"el2-tfa", "FF-A through pKVM's EL2 handler (the tree's ffa.c) to TF-A's EL3 SPMC (both built in)",
                           open_el2_tfa, 5.0};

}  // namespace

const TargetFamily& el2_tfa_target_family() { return kEl2Tfa; }

}  // namespace kconform::el2
