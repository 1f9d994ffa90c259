// A stand-in EL3 (SPMD + SPMC) that answers just enough for pKVM's FF-A proxy
// to initialise and negotiate a version: FFA_VERSION, FFA_ID_GET,
// FFA_FEATURES(FFA_RXTX_MAP), FFA_RXTX_MAP/UNMAP and FFA_RX_RELEASE succeed;
// everything else is FFA_ERROR(NOT_SUPPORTED). The SPMC model replaces it.
#pragma once

#include <cstdint>
#include <vector>

namespace kconform::el2 {

// FF-A values from the spec (DEN0077A), independent of any kernel tree: this
// side of the conduit is the model, the tree's <linux/arm_ffa.h> is under test.
namespace ffa {
constexpr uint64_t kError = 0x84000060;
constexpr uint64_t kSuccess32 = 0x84000061;
constexpr uint64_t kVersion = 0x84000063;
constexpr uint64_t kFeatures = 0x84000064;
constexpr uint64_t kRxRelease = 0x84000065;
constexpr uint64_t kRxtxMap64 = 0xC4000066;
constexpr uint64_t kRxtxUnmap = 0x84000067;
constexpr uint64_t kIdGet = 0x84000069;
constexpr uint64_t kMemShare64 = 0xC4000073;
constexpr uint64_t kMemReclaim = 0x84000077;
constexpr uint64_t kMemReclaim2 = 0xC4000091;  // DEN0140 rev K (FF-A v1.3 BET0)
constexpr int32_t kNotSupported = -1;
constexpr int32_t kInvalidParameters = -2;
constexpr uint32_t Version(uint32_t major, uint32_t minor) { return major << 16 | minor; }
}  // namespace ffa

class DefaultEl3 {
 public:
  struct Call {
    uint64_t in[18];
    uint64_t out[18];
  };

  uint32_t version = ffa::Version(1, 2);  // what FFA_VERSION answers
  uint32_t rxtx_min_size_code = 0;        // FFA_FEATURES(RXTX_MAP) w2: 0 = 4K
  bool record = true;                     // keep every call in calls

  void Smc(const uint64_t in[18], uint64_t out[18]);

  std::vector<Call> calls;
  uint64_t mapped_tx = 0, mapped_rx = 0;  // the hyp's mailboxes, once mapped
};

}  // namespace kconform::el2
