// mmap(), munmap(), and loads and stores through a mapping (SPEC.md MMAP:*,
// FAULT:*, HARNESS:MAX-BYTES, HARNESS:DEAD-MAP, HARNESS:MAP-RANGE,
// HARNESS:MMAP-ARGS).
#include <csignal>
#include <cerrno>
#include <optional>

#include "models/gmem/guards.h"
#include "models/gmem/ops.h"

namespace kconform::gmem {
namespace {

constexpr uint64_t kProtExec = 4;
constexpr uint64_t kLenMayFail = 1ull << 46;   // SPEC.md MMAP:HUGE (ours)
constexpr uint64_t kLenMustFail = 1ull << 47;  // the whole x86-64 user address space

// One load or store through a mapping.
struct Access {
  uint64_t map = 0, offset = 0, len = 0, pattern = 0;
};

// The file page at which an access first faults, and the rule that makes it fault.
struct FirstFault {
  uint64_t page_index;
  RuleId rule;
};

// The live mapping an access names, with the access inside the mapping's
// page-rounded length; nullptr (and the harness refusal) otherwise.
const Mapping* require_access(const State& st, const Access& a, Guards& g) {
  if (harness_refuses_bytes(a.len, g)) return nullptr;
  // The map slot must be live (harness convention).
  const Mapping* map = st.live_map(a.map);
  if (!map) {
    g.fail(kGmemHarnessDeadMap, {EBADF}, "map slot %llu is not mapped", (unsigned long long)a.map);
    return nullptr;
  }
  g.pass(kGmemHarnessDeadMap);
  // The access must lie inside the mapping (harness convention).
  uint64_t map_len = 0, end = 0;
  if (!round_up(map->len, st.page(), map_len) || __builtin_add_overflow(a.offset, a.len, &end) ||
      end > map_len) {
    g.fail(kGmemHarnessMapRange, {ERANGE}, "access [%#llx,+%#llx) outside mapping of %#llx",
           (unsigned long long)a.offset, (unsigned long long)a.len, (unsigned long long)map_len);
    return nullptr;
  }
  g.pass(kGmemHarnessMapRange);
  // The mapping outlives the fd.
  if (!st.files[map->file].open) g.pass(kGmemMmapAfterClose);
  return map;
}

// Pages are touched in ascending order; the first one beyond EOF or private faults.
std::optional<FirstFault> first_fault(const State& st, const Mapping& map, const Access& a) {
  const GmemFile& file = st.files[map.file];
  const uint64_t page = st.page();
  uint64_t start = map.offset + a.offset;  // mmap bounded offset+len to the address space
  uint64_t first = start / page, last = (start + a.len - 1) / page;
  uint64_t eof_page = file.size / page;
  if (!file.shared(first)) {
    return FirstFault{first, first >= eof_page ? kGmemFaultBeyondEof : kGmemFaultPrivate};
  }
  if (last >= eof_page) return FirstFault{std::max(first, eof_page), kGmemFaultBeyondEof};
  return std::nullopt;
}

Access load_args(const Op& op) { return {op.args[0], op.args[1], op.args[2], 0}; }
Access store_args(const Op& op) { return {op.args[0], op.args[1], op.args[2], op.args[3]}; }

}  // namespace

// mmap(). The argument checks that do not need the file run even for a dead
// fd: mmap(2) does not order them against EBADF (SPEC.md FD:BADF).
void expect_mmap(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  uint64_t slot = op.args[0], offset = op.args[1], len = op.args[2];
  uint64_t prot = op.args[3], share = op.args[4];
  // The fd must be live.
  const GmemFile* file = st.live_file(slot);
  if (!file) {
    g.fail(kGmemFdBadf, {EBADF}, "gmem slot %llu is not open", (unsigned long long)slot);
  } else {
    g.pass(kGmemFdBadf);
  }
  // share and prot must be values the harness passes through (harness convention;
  // a dead fd is reported first).
  if (share > kMmapShareMax || (prot & ~kMmapProtMask)) {
    if (file) {
      g.fail(kGmemHarnessMmapArgs, {EINVAL}, "share %#llx / prot %#llx not passed to mmap",
             (unsigned long long)share, (unsigned long long)prot);
    }
    return;
  }
  g.pass(kGmemHarnessMmapArgs);
  // The mapping type must be MAP_SHARED or MAP_PRIVATE (3 is MAP_SHARED_VALIDATE).
  if (share == 0) {
    g.fail(kGmemMmapNoType, {EINVAL}, "neither MAP_SHARED nor MAP_PRIVATE");
  } else {
    g.pass(kGmemMmapNoType);
  }
  // The offset must be page-aligned.
  if (!aligned(offset, st.page())) {
    g.fail(kGmemMmapOffsetAlign, {EINVAL}, "offset %#llx not page-aligned",
           (unsigned long long)offset);
  } else {
    g.pass(kGmemMmapOffsetAlign);
  }
  // The length must be non-zero.
  if (len == 0) {
    g.fail(kGmemMmapLenZero, {EINVAL}, "length 0");
  } else {
    g.pass(kGmemMmapLenZero);
  }
  // A mapping must fit the address space; its file range must fit loff_t.
  uint64_t rounded = 0, end = 0;
  bool fits = round_up(len, st.page(), rounded) && !__builtin_add_overflow(offset, rounded, &end);
  if (!fits || len > kLenMustFail) {
    g.fail(kGmemMmapHuge, {ENOMEM, EINVAL, EOVERFLOW}, "length %#llx at %#llx cannot be mapped",
           (unsigned long long)len, (unsigned long long)offset);
  } else if (len > kLenMayFail || end > kLoffMax) {
    g.may_fail(kGmemMmapHuge, {ENOMEM, EINVAL, EOVERFLOW});
  } else {
    g.pass(kGmemMmapHuge);
  }
  // PROT_EXEC may be refused.
  if (prot & kProtExec) g.may_fail(kGmemMmapExec, {EPERM});
  if (!file) return;
  // Copy-on-write mappings are refused.
  if (share == kMapPrivate) {
    g.fail(kGmemMmapPrivate, {EINVAL, ENODEV, EPERM}, "MAP_PRIVATE");
  } else {
    g.pass(kGmemMmapPrivate);
  }
  // The file must have been created with GUEST_MEMFD_FLAG_MMAP.
  if (!(file->flags & kFlagMmap)) {
    g.fail(kGmemMmapNotSupported, {ENODEV, EINVAL, EPERM}, "file flags %#llx lack MMAP",
           (unsigned long long)file->flags);
  } else {
    g.pass(kGmemMmapNotSupported);
  }
  if (g.failed()) return;
  // Mapping beyond EOF is allowed; only accesses there fault.
  g.allow(produced(kGmemMmapOk));
}

void commit_mmap(State& st, const Op& op, const Outcome& observed) {
  Mapping map;
  map.live = observed.kind == Outcome::Kind::kOk && st.file_at(op.args[0]);
  map.file = op.args[0];
  map.offset = op.args[1];
  map.len = op.args[2];
  map.prot = op.args[3];
  st.maps.push_back(map);
}

// munmap().
void expect_munmap(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  // The map slot must be live (harness convention).
  if (!st.live_map(op.args[0])) {
    g.fail(kGmemHarnessDeadMap, {EBADF}, "map slot %llu is not mapped",
           (unsigned long long)op.args[0]);
    return;
  }
  g.pass(kGmemHarnessDeadMap);
  g.allow(Allowed::ok(kGmemMunmapOk));
}

void commit_munmap(State& st, const Op& op, const Outcome& observed) {
  Mapping* map = st.map_at(op.args[0]);
  if (map && observed.kind == Outcome::Kind::kOk) map->live = false;
}

// A load: the digest of the bytes read, or the signal taken.
void expect_load(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  Access a = load_args(op);
  const Mapping* map = require_access(st, a, g);
  if (!map) return;
  // Nothing to read: nothing touched.
  if (a.len == 0) {
    g.allow(Allowed::ok_aux(kGmemMmapContent, 0, kFnvInit));
    return;
  }
  // The mapping must be readable (WRITE or EXEC may imply READ on x86).
  if (!(map->prot & kProtRead)) {
    if (!(map->prot & (kProtWrite | kProtExec))) {
      g.fault(kGmemFaultProt, SIGSEGV);
      return;
    }
    g.allow(Allowed::sig(kGmemFaultProt, SIGSEGV));
    g.pass(kGmemFaultProt);
  } else {
    g.pass(kGmemFaultProt);
  }
  // A page beyond EOF, or a private page, raises SIGBUS.
  if (auto fault = first_fault(st, *map, a)) {
    g.fault(fault->rule, SIGBUS);
    return;
  }
  g.pass(kGmemFaultBeyondEof);
  g.pass(kGmemFaultPrivate);
  const GmemFile& file = st.files[map->file];
  uint64_t digest = digest_bytes(file, st.page(), map->offset + a.offset, a.len);
  g.allow(Allowed::ok_aux(kGmemMmapContent, 0, digest));
}

void commit_load(State&, const Op&, const Outcome&) {}

// A store: pattern bytes written page by page, up to the first faulting page.
void expect_store(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  Access a = store_args(op);
  const Mapping* map = require_access(st, a, g);
  if (!map) return;
  if (a.len == 0) {
    g.allow(Allowed::ok(kGmemMmapStore, 0));
    return;
  }
  // The mapping must be writable.
  if (!(map->prot & kProtWrite)) {
    g.fault(kGmemFaultProt, SIGSEGV);
    return;
  }
  g.pass(kGmemFaultProt);
  // A page beyond EOF, or a private page, raises SIGBUS.
  if (auto fault = first_fault(st, *map, a)) {
    g.fault(fault->rule, SIGBUS);
    return;
  }
  g.pass(kGmemFaultBeyondEof);
  g.pass(kGmemFaultPrivate);
  g.allow(Allowed::ok(kGmemMmapStore, 0));
}

void commit_store(State& st, const Op& op, const Outcome& observed) {
  Access a = store_args(op);
  if (a.map >= st.maps.size() || !st.maps[a.map].live) return;
  const Mapping& map = st.maps[a.map];
  uint64_t start = map.offset + a.offset;
  // The bytes were aimed at the file whatever happened (CONTENT:FOREIGN).
  if (a.len != 0 && a.len <= kMaxOpBytes && map.file < st.files.size())
    st.files[map.file].sources.push_back({st.op, a.pattern, start, a.len});
  uint64_t n = 0;
  if (observed.kind == Outcome::Kind::kOk) {
    n = a.len;
  } else if (observed.kind == Outcome::Kind::kSignal && observed.value == SIGBUS) {
    // The bytes before the first faulting page were stored.
    auto fault = first_fault(st, map, a);
    if (!fault) return;
    uint64_t stop = fault->page_index * st.page();
    n = stop > start ? stop - start : 0;
  }
  if (n == 0) return;
  store_bytes(st.files[map.file], st.page(), start, a.pattern, 0, n);
}

}  // namespace kconform::gmem
