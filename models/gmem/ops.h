// The guest_memfd model's per-op checks (expect_*) and effects (commit_*).
// Each expect_* evaluates the op's guard clauses against a const State; each
// commit_* applies the effect of an outcome that expect_* allowed.
#pragma once

#include "harness/scenario/scenario.h"
#include "models/gmem/guards.h"
#include "models/gmem/state.h"
#include "models/common/outcome.h"
#include "models/model.h"

namespace kconform::gmem {

#define KCONFORM_GMEM_OP(name)                                              \
  void expect_##name(const State& st, const Op& op, Expectation& out);      \
  void commit_##name(State& st, const Op& op, const Outcome& observed);

// ops_vm.cc: VMs and memslots.
KCONFORM_GMEM_OP(create_vm)
KCONFORM_GMEM_OP(close_vm)
KCONFORM_GMEM_OP(bind)
KCONFORM_GMEM_OP(unbind)
// ops_file.cc: the file itself.
KCONFORM_GMEM_OP(create_gmem)
KCONFORM_GMEM_OP(close)
KCONFORM_GMEM_OP(read)
KCONFORM_GMEM_OP(lseek)
KCONFORM_GMEM_OP(fallocate)
KCONFORM_GMEM_OP(fstat)
// ops_write.cc: write(), pwrite(), pwritev().
KCONFORM_GMEM_OP(write)
// ops_map.cc: mmap(), munmap(), loads and stores.
KCONFORM_GMEM_OP(mmap)
KCONFORM_GMEM_OP(munmap)
KCONFORM_GMEM_OP(load)
KCONFORM_GMEM_OP(store)
// ops_times.cc: mtime/ctime.
KCONFORM_GMEM_OP(times)

#undef KCONFORM_GMEM_OP

// What the model adopts of a write's observed outcome, in words ("short write:
// N of M bytes written; ..."); empty for other ops.
std::string explain_write(const State& st, const Op& op, const Outcome& observed);

// Content oracle (content.cc, SPEC.md CONTENT:*): whether op i is one after
// which the target re-reads contents, and the comparison (which then takes
// the target's contents as the model's).
bool wants_contents(const Op& op);
void check_contents(State& st, const Contents& seen, ContentCheck* out);

// GmemFile::times_marks bits (SPEC.md TIMES:*). No bit set: mtime and ctime
// must not have advanced since the last `times` (TIMES:READ-ONLY).
enum TimesMark : uint8_t {
  kTimesMustAdvance = 1 << 0,  // a successful write of more than 0 bytes (TIMES:WRITE)
  kTimesMayChange = 1 << 1,    // an op that may change them (TIMES:OPEN)
  kTimesStored = 1 << 2,       // a store through a mapping, ever: the update may come
                               // at any later time, so every later `times` may see it
                               // (TIMES:OPEN); `times` does not clear this bit
};

// Sets the times_marks of every file op may touch, from what op did; the
// model calls it for every op before the op's commit_* (which may forget
// which file a memslot named).
void mark_times(State& st, const Op& op, const Outcome& observed);

// Success of an op that produces a resource: the harness reports ok(0), never
// the fd or address (SPEC.md HARNESS:SLOTS).
inline Allowed produced(RuleId r) { return Allowed::ok(r, 0); }

// The harness refuses to materialise more than kMaxOpBytes for one op and
// reports E2BIG before anything else (SPEC.md HARNESS:MAX-BYTES). Returns true
// (with the refusal as the only outcome) when it does.
bool harness_refuses_bytes(uint64_t len, Guards& g);

}  // namespace kconform::gmem
