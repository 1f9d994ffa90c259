// The FF-A reference model: the oracle for pKVM's EL2 FF-A handler. Wraps the
// proxy model (proxy.h) and the SPMC model (spmc.h) behind models/model.h for
// Abi::kFfa scenarios (harness/scenario/ffa_abi.h; SPEC.md).
//
// Outcomes: a host call (version ... raw) reports ok(0) with regs = x0..x7 as
// the host sees them and state = the digest of digest.h after the call; a
// harness op (tx_*) reports ok(bytes written); el3_misbehave ok(0); sp_* ok(0)
// or ok(FF-A error code) with the SPMC's x0..x7.
#pragma once

#include <memory>
#include <string>

#include "models/ffa/proxy.h"
#include "models/model.h"

namespace kconform::ffa {

std::unique_ptr<Model> make_model(const ProxyProfile& profile);
std::string profile_name(const ProxyProfile& profile);  // e.g. "ffa-16k-reclaim2"

}  // namespace kconform::ffa
