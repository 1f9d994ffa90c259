// The FF-A state digest (digest.h has the exact definition).
#include "models/ffa/digest.h"

namespace kconform::ffa {

uint64_t state_digest(std::span<const uint8_t> host_views, const Spmc& spmc) {
  return state_digest(host_views, spmc, {});
}

uint64_t state_digest(std::span<const uint8_t> host_views, const Spmc& spmc, TableOverlay o) {
  Fnv1a h;
  h.u32(static_cast<uint32_t>(host_views.size()));
  h.bytes(host_views.data(), host_views.size());
  spmc.digest(h, o);
  return h.h;
}

}  // namespace kconform::ffa
