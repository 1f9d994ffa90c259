// A Target wrapper that forwards to an inner target and perturbs one kind of
// result, so tests can prove the oracle catches wrong answers, and counts how
// often its lie changed an outcome (`fired`, in the verdict stream's summary).
//
// Spec: KIND:OP[:NTH]
//   KIND  wrong-errno    an error becomes a different error: gmem, an errno
//                        becomes ENOTRECOVERABLE (EOWNERDEAD when it already
//                        was that); FF-A, an FFA_ERROR's status in w2 becomes
//                        ABORTED (NO_DATA when it already was that)
//         succeed        an error is reported as success: gmem ok(0); FF-A
//                        FFA_SUCCESS_32 with x1..x7 zero
//         fail           a success is reported as an error: gmem err(EIO);
//                        FF-A FFA_ERROR(ABORTED)
//                        (FFA_VERSION answers in w0 alone, SPEC.md
//                        VERSION:FORMAT: its error is NOT_SUPPORTED in w0, so
//                        wrong-errno makes w0 ABORTED, succeed makes it version
//                        1.0, fail makes a version NOT_SUPPORTED, wrong-reg
//                        flips bit 0 of w0)
//         wrong-content  (gmem) an ok result's aux is bit-flipped (load: the
//                        digest; fstat: st_size)
//         wrong-page     (gmem) the pages re-read after the op (the content
//                        oracle, models/common/contents.h) lie: bit 0 of the
//                        first byte of the first page in memory is flipped; with
//                        no page in memory, the first observed page appears
//                        holding one byte of 1
//         wrong-count    (gmem) an ok result's count or offset is off by one
//                        page (minus one page, or plus one page when it is
//                        below a page; the page is the inner identity's
//                        "page_size" cap if any)
//         wrong-reg      (FF-A) x2 has bit 0 flipped: the status code of an
//                        FFA_ERROR, w2 of FFA_SUCCESS (the handle's low half,
//                        a RECLAIM2 count, ...)
//         wrong-state    (FF-A) the state digest is flipped, as if a host
//                        stage-2 page or an SPMC transaction differed
//   OP    an op name of a known ABI table (e.g. write, load, create_gmem)
//   NTH   which eligible result of OP in each scenario to perturb: 1 (the
//         default) is the first, 2 the second, ...; "all" perturbs every one.
// "Eligible" means a result the kind can perturb (errors for wrong-errno and
// succeed, successes for fail, ok results for the rest; an FF-A error is an
// FFA_ERROR in x0). Counting restarts at every begin().
//
// Which kinds apply to which ops of an ABI (fault_applies, applicable_faults):
//   gmem  wrong-errno, succeed, fail: every op; wrong-content: load, fstat
//         (the ops whose result carries content); wrong-page: create_gmem,
//         write, pwrite, pwritev, store, fallocate (the ops after which pages
//         are re-read; eligible: a re-read of a file with a page to look at); wrong-count:
//         write, pwrite, pwritev, read, pread, lseek (the ops that return a
//         count or offset)
//   ffa   wrong-errno, succeed, fail, wrong-reg, wrong-state: every op that is
//         a call into the code under test; wrong-state alone for the harness
//         ops (tx_write, el3_misbehave, sp_retrieve, ...: the ABI table's doc
//         says "harness:"), which return no FF-A result of the target's
// A spec that does not apply to the ABI a target runs is refused when the
// target is opened (harness/runner: `run --fault`), before anything runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/scenario/abi.h"
#include "targets/target.h"

namespace kconform {

struct FaultSpec {
  enum class Kind { kWrongErrno, kWrongContent, kWrongPage, kSucceed, kFail, kWrongCount, kWrongReg, kWrongState };
  Kind kind = Kind::kWrongErrno;
  std::string op;    // op name
  uint64_t nth = 1;  // 0: every eligible result
  std::string text;  // the canonical spec, for the identity
};

// Parses a spec; on failure returns nullopt and names the bad field in *error.
std::optional<FaultSpec> parse_fault_spec(std::string_view spec, std::string* error);

// Whether spec applies to abi (its op is one of abi's and its kind can change
// that op's result, see above); false and *error (one line naming the spec,
// the ABI and why) if not.
bool fault_applies(const FaultSpec& spec, const AbiSpec& abi, std::string* error);

// Every KIND:OP that applies to abi, op by op in table order, kinds in the
// order of the KIND list of parse errors (wrong-errno, wrong-content,
// wrong-page, succeed, fail, wrong-count, wrong-reg, wrong-state): the
// self-test's matrix.
std::vector<std::string> applicable_faults(const AbiSpec& abi);

// The ABI a target runs, from its profile's first word ("gmem-base" -> gmem,
// "ffa-4k" -> ffa); nullptr if the profile names none.
const AbiSpec* target_abi(const TargetIdentity& id);

class FaultyTarget : public Target {
 public:
  FaultyTarget(std::unique_ptr<Target> inner, FaultSpec spec);
  // Identity: the inner one with target "<inner>+fault(<spec>)".
  const TargetIdentity& identity() const override { return identity_; }
  void begin(const Scenario& s) override;
  Outcome exec(const Scenario& s, size_t i) override;
  bool observe(const Scenario& s, size_t i, Contents* out) override;
  void end() override { inner_->end(); }

  const FaultSpec& spec() const { return spec_; }
  // How many outcomes the lie changed, and in how many scenarios (over every begin()).
  uint64_t fired() const { return fired_; }
  uint64_t scenarios_fired() const { return scenarios_fired_; }

 private:
  std::unique_ptr<Target> inner_;
  FaultSpec spec_;
  TargetIdentity identity_;
  int64_t page_;
  std::optional<uint8_t> code_;  // spec_.op in this scenario's ABI
  bool ffa_ = false;             // this scenario's ABI is FF-A
  bool version_ = false;         // ... and the op is FFA_VERSION (its result is in w0)
  uint64_t seen_ = 0;            // eligible results of code_ so far in this scenario
  bool fired_here_ = false;      // the lie changed an outcome in this scenario
  uint64_t fired_ = 0, scenarios_fired_ = 0;

  void count_fired();
};

std::unique_ptr<FaultyTarget> wrap_faulty(std::unique_ptr<Target> inner, FaultSpec spec);

}  // namespace kconform
