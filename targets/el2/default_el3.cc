// The stand-in EL3: see default_el3.h.
#include "targets/el2/default_el3.h"

#include <cstring>

namespace kconform::el2 {

namespace {
void Error(uint64_t out[18], int32_t code) {
  out[0] = ffa::kError;
  out[2] = static_cast<uint32_t>(code);  // w2, as an SPMC writes it
}
}  // namespace

void DefaultEl3::Smc(const uint64_t in[18], uint64_t out[18]) {
  std::memset(out, 0, 18 * sizeof(uint64_t));
  const uint32_t fid = static_cast<uint32_t>(in[0]);
  switch (fid) {
    case ffa::kVersion:
      out[0] = (in[1] >> 31) ? static_cast<uint32_t>(ffa::kNotSupported) : version;
      break;
    case ffa::kIdGet:
      out[0] = ffa::kSuccess32;
      out[2] = 0;  // the non-secure physical instance is ID 0
      break;
    case ffa::kFeatures:
      if (static_cast<uint32_t>(in[1]) == static_cast<uint32_t>(ffa::kRxtxMap64)) {
        out[0] = ffa::kSuccess32;
        out[2] = rxtx_min_size_code;
      } else {
        Error(out, ffa::kNotSupported);
      }
      break;
    case static_cast<uint32_t>(ffa::kRxtxMap64):
      if (mapped_tx) {
        Error(out, -6);  // DENIED: already mapped
      } else {
        mapped_tx = in[1], mapped_rx = in[2];
        out[0] = ffa::kSuccess32;
      }
      break;
    case ffa::kRxtxUnmap:
      mapped_tx = mapped_rx = 0;
      out[0] = ffa::kSuccess32;
      break;
    case ffa::kRxRelease:
      out[0] = ffa::kSuccess32;
      break;
    default:
      Error(out, ffa::kNotSupported);
  }
  if (record) {
    Call c;
    std::memcpy(c.in, in, sizeof c.in);
    std::memcpy(c.out, out, sizeof c.out);
    calls.push_back(c);
  }
}

}  // namespace kconform::el2
