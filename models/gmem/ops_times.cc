// mtime and ctime: the `times` op, and which ops may or must advance them
// (SPEC.md HARNESS:TIMES, TIMES:WRITE, TIMES:READ-ONLY, TIMES:OPEN).
#include <cerrno>

#include "models/gmem/guards.h"
#include "models/gmem/ops.h"

namespace kconform::gmem {
namespace {

constexpr int64_t kBothAdvanced = kTimesMtimeAdvanced | kTimesCtimeAdvanced;

void mark(State& st, uint64_t slot, uint8_t bits) {
  if (GmemFile* file = st.file_at(slot)) file->times_marks |= bits;
}

// The file a memslot of a VM binds, if it binds one.
void mark_bound(State& st, uint64_t vm_slot, uint32_t slot, uint8_t bits) {
  const Vm* vm = st.live_vm(vm_slot);
  if (!vm) return;
  auto it = vm->slots.find(slot);
  if (it != vm->slots.end() && it->second.gmem) mark(st, it->second.file, bits);
}

}  // namespace

void mark_times(State& st, const Op& op, const Outcome& observed) {
  const bool ok = observed.kind == Outcome::Kind::kOk;
  switch (op.code) {
    case kWrite:
    case kPwrite:
    case kPwritev: {
      // The harness refused it without calling the kernel.
      if ((op.code == kWrite ? op.args[1] : op.args[2]) > kMaxOpBytes) return;
      // A successful write of more than 0 bytes must advance both; a failed
      // or zero-length one may.
      mark(st, op.args[0], ok && observed.value > 0 ? kTimesMustAdvance : kTimesMayChange);
      return;
    }
    case kStore: {
      // A store that touched memory (ok or a signal; the errnos are harness
      // refusals) may update them then or at any later time.
      const Mapping* map = st.live_map(op.args[0]);
      if (map && observed.kind != Outcome::Kind::kErrno)
        mark(st, map->file, kTimesMayChange | kTimesStored);
      return;
    }
    case kFallocate:
      mark(st, op.args[0], kTimesMayChange);
      return;
    case kBind:
      // The file it binds, and the one the slot bound before (modify, delete).
      if (low_u32(op.args[6]) & kMemGuestMemfd) mark(st, op.args[4], kTimesMayChange);
      mark_bound(st, op.args[0], low_u32(op.args[1]), kTimesMayChange);
      return;
    case kUnbind:
      mark_bound(st, op.args[0], low_u32(op.args[1]), kTimesMayChange);
      return;
    default:
      // Every other op reads the file or acts on something else (TIMES:READ-ONLY).
      return;
  }
}

// times: which of mtime and ctime advanced since the previous times or creation.
void expect_times(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  const uint64_t slot = op.args[0];
  // The fd must be live.
  const GmemFile* file = st.live_file(slot);
  if (!file) {
    g.fail(kGmemFdBadf, {EBADF}, "gmem slot %llu is not open", (unsigned long long)slot);
    return;
  }
  g.pass(kGmemFdBadf);
  // A successful write of more than 0 bytes marks both for update.
  if (file->times_marks & kTimesMustAdvance) {
    out.note = "a write returned more than 0 since the baseline: mtime and ctime must have advanced";
    g.allow(Allowed::ok(kGmemTimesWrite, kBothAdvanced));
    return;
  }
  // Failed and zero-length writes, fallocate, stores and binds may change them.
  if (file->times_marks & (kTimesMayChange | kTimesStored)) {
    g.allow(Allowed::ok_range(kGmemTimesMayChange, 0, kBothAdvanced));
    return;
  }
  // Nothing since the baseline may change them.
  out.note = "no op since the baseline may change mtime or ctime";
  g.allow(Allowed::ok(kGmemTimesUnchanged, 0));
}

void commit_times(State& st, const Op& op, const Outcome& observed) {
  GmemFile* file = st.file_at(op.args[0]);
  // A new baseline; a store's update may still come later.
  if (file && observed.kind == Outcome::Kind::kOk) file->times_marks &= kTimesStored;
}

}  // namespace kconform::gmem
