// A Target wrapper that forwards to an inner target and perturbs one kind of
// result, so tests can prove the oracle catches wrong answers.
//
// Spec: KIND:OP[:NTH]
//   KIND  wrong-errno    an errno result becomes a different errno
//                        (ENOTRECOVERABLE; EOWNERDEAD when it already was that)
//         wrong-content  an ok result's aux is bit-flipped (load: the digest)
//         succeed        an errno result is reported as ok(0)
//         fail           an ok result is reported as err(EIO)
//         wrong-count    an ok result's value is off by one page (minus one
//                        page, or plus one page when it is below a page; the
//                        page is the inner identity's "page_size" cap if any)
//         wrong-reg      (FF-A) an ok result's x2 has bit 0 flipped: the
//                        status code of an FFA_ERROR, w2 of FFA_SUCCESS (the
//                        handle's low half, a RECLAIM2 count, ...)
//         wrong-state    (FF-A) an ok result's state digest is flipped, as if
//                        a host stage-2 page or an SPMC transaction differed
//   OP    an op name of a known ABI table (e.g. write, load, create_gmem)
//   NTH   which eligible result of OP in each scenario to perturb: 1 (the
//         default) is the first, 2 the second, ...; "all" perturbs every one.
// "Eligible" means a result the kind can perturb (errno results for
// wrong-errno and succeed, ok results for the rest). Counting restarts at
// every begin().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "targets/target.h"

namespace kconform {

struct FaultSpec {
  enum class Kind { kWrongErrno, kWrongContent, kSucceed, kFail, kWrongCount, kWrongReg, kWrongState };
  Kind kind = Kind::kWrongErrno;
  std::string op;    // op name
  uint64_t nth = 1;  // 0: every eligible result
  std::string text;  // the canonical spec, for the identity
};

// Parses a spec; on failure returns nullopt and names the bad field in *error.
std::optional<FaultSpec> parse_fault_spec(std::string_view spec, std::string* error);

// Identity: the inner one with target "<inner>+fault(<spec>)".
std::unique_ptr<Target> wrap_faulty(std::unique_ptr<Target> inner, FaultSpec spec);

}  // namespace kconform
