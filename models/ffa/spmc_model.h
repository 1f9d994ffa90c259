// The SPMC-side model: the oracle for a real SPMC (TF-A's EL3 SPMC,
// targets/spmc) called straight from the Normal world, with no proxy in
// between (`kconform run --target spmc`). Each host call of an Abi::kFfa
// scenario is the Normal world's SMC to the SPMC; the SPMC model (spmc.h)
// decides the reply, judged on x0 and the result registers of the reply's
// function (SPEC.md SPMC:ANSWER), where the specification leaves a choice to
// the SPMC every allowed reply is admitted (the handle it allocates:
// SPMC:HANDLE-SPEC). Harness ops: tx_* and host_* as for the EL2 target;
// sp_retrieve/sp_relinquish act as the borrower; el3_misbehave and
// el3_profile change nothing here (the SPMC under test is EL3 itself: there is
// no boundary to lie at, and its profile is what it is).
#pragma once

#include <memory>

#include "models/ffa/proxy.h"
#include "models/model.h"

namespace kconform::ffa {

// layout: RAM (phys_base, host_pages, page_size, mbox_pages for HARNESS:TX);
// layout.spmc: what the model's SPMC is configured as (its version, its
// partitions, RECLAIM2 or not), matching the implementation under test.
std::unique_ptr<Model> make_spmc_model(const ProxyProfile& layout);
// e.g. "spmc-4k-sp1-v1.2"
std::string spmc_profile_name(const ProxyProfile& layout);

// The result registers of a reply of the SPMC to call fid (SPEC.md SPMC:ANSWER):
// a bit per register x0..x7 that the reply's function defines. Reserved (SBZ)
// registers are not judged: the caller must ignore them.
uint8_t spmc_result_regs(const uint64_t call[8], const uint64_t reply[8]);

}  // namespace kconform::ffa
