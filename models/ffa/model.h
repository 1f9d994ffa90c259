// The FF-A reference model: the oracle for pKVM's EL2 FF-A handler. Wraps the
// proxy model (proxy.h) and the SPMC model (spmc.h) behind models/model.h for
// Abi::kFfa scenarios (harness/scenario/ffa_abi.h; SPEC.md).
//
// Outcomes: a host call (version ... raw) reports ok(0) with regs = x0..x7 as
// the host sees them and state = the digest of digest.h after the call (with
// ProxyProfile::real_el3: SPEC.md DIGEST:TABLE-VIEW, and a new transaction's
// handle is the SPMC's, SPMC:HANDLE-SPEC); a
// harness op (tx_*) reports ok(bytes written); el3_misbehave ok(0); sp_* ok(0)
// or ok(FF-A error code) with the SPMC's x0..x7.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/ffa/proxy.h"
#include "models/model.h"

namespace kconform::ffa {

std::unique_ptr<Model> make_model(const ProxyProfile& profile);
std::string profile_name(const ProxyProfile& profile);  // e.g. "ffa-16k-reclaim2", "ffa-4k-real-el3"

// For the restore tests (model is make_model's): every byte of the model's
// state (its RAM, the proxy's state, its SPMC's bytes, the per-scenario
// fields), and whether begin() leaves the SPMC out of its restore (to show
// such a test catches it).
std::vector<uint8_t> model_state_bytes(const Model& model);
void set_model_restore_skip_spmc(Model& model, bool skip);
// Tests only: begin() leaves the model's RAM (its dirty pages) as the last scenario left it.
void set_model_restore_skip_ram(Model& model, bool skip);
// After a host call's commit() the model takes the digest expect() predicted
// for the effect taken as the next op's state before, rather than hashing its
// world again. Tests turn that off to compare the two.
void set_model_digest_reuse(Model& model, bool reuse);

}  // namespace kconform::ffa
