// Targets by name: each target family (host, el2, ...) is one TargetFamily in
// a file of its own; an executable lists the families it links
// (runner_main.h). Opening a family gives the target, the model that judges
// it (with the profile the target reports) and, if the target checks
// model-independent invariants, where to read them (invariants.h).
#pragma once

#include <memory>
#include <string>

#include "targets/invariants.h"
#include "models/model.h"
#include "targets/target.h"

namespace kconform {

struct OpenTarget {
  std::unique_ptr<Target> target;
  std::unique_ptr<Model> model;
  const InvariantSource* invariants = nullptr;  // owned by target (or the target it wraps)
  double watchdog_seconds = 0;                   // the family's default `run --watchdog`
};

struct TargetFamily {
  const char* name;     // the --target value
  const char* summary;  // one line for usage()
  // Opens the target; false and *error (without the "target NAME: " prefix) if it cannot run.
  bool (*open)(OpenTarget* out, std::string* error);
  // Default limit on one op in flight for `run` (crash_marker.h: start_watchdog); 0: none.
  double watchdog_seconds = 0;
};

// target_host.cc: guest_memfd on the running kernel through /dev/kvm.
const TargetFamily& host_target_family();

}  // namespace kconform
