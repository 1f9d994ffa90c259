// The proxy model's checks, one file per SPEC.md area, each on a const World
// and writing only the call's Plan (plan.h):
//   proxy_framework.cc  FFA_VERSION, FFA_FEATURES, FFA_ID_GET, FFA_PARTITION_INFO_GET
//   proxy_mailbox.cc    FFA_RXTX_MAP, FFA_RXTX_UNMAP, FFA_RX_RELEASE
//   proxy_send.cc       FFA_MEM_SHARE, FFA_MEM_LEND, FFA_MEM_FRAG_TX
//   proxy_reclaim.cc    FFA_MEM_RECLAIM
//   proxy_reclaim2.cc   FFA_MEM_RECLAIM2
// proxy.cc routes a call to them (and answers what is not theirs).
#pragma once

#include <cstdint>

#include "models/ffa/plan.h"
#include "models/ffa/proxy.h"
#include "models/ffa/regs.h"

namespace kconform::ffa {

// proxy_framework.cc
void expect_version(const World& w, const CallArgs& a, Plan& p);
void expect_features(const World& w, const CallArgs& a, Plan& p);
void expect_id_get(const World& w, const CallArgs& a, Plan& p);
void expect_partition_info(const World& w, const CallArgs& a, Plan& p);
// PKVM:UNSUPPORTED, R2:OPTIONAL: the calls the proxy refuses with NOT_SUPPORTED.
bool proxy_refuses(const ProxyProfile& p, uint32_t fid);

// proxy_mailbox.cc
void expect_rxtx_map(const World& w, const CallArgs& a, Plan& p);
void expect_rxtx_unmap(const World& w, const CallArgs& a, Plan& p);
void expect_rx_release(const World& w, const CallArgs& a, Plan& p);

// proxy_send.cc
void expect_mem_send(const World& w, const CallArgs& a, MemKind kind, Plan& p);
void expect_mem_frag_tx(const World& w, const CallArgs& a, Plan& p);

// proxy_reclaim.cc
void expect_mem_reclaim(const World& w, const CallArgs& a, Plan& p);

// proxy_reclaim2.cc
void expect_mem_reclaim2(const World& w, const CallArgs& a, Plan& p);

// Shared by the checks: the rule the last broken hit names, or fallback (the
// rule EL3 broke when it refused a relayed call).
RuleId last_broken(const Hits& h, RuleId fallback);
// The error code of an EL3 answer that is not FFA_SUCCESS.
int32_t el3_error(const uint64_t out[kNumRegs]);

}  // namespace kconform::ffa
