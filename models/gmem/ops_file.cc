// The guest_memfd file: KVM_CREATE_GUEST_MEMFD, close(), read()/pread(),
// lseek(), fallocate() and fstat() (SPEC.md CREATE:*, CLOSE:*, READ:*,
// LSEEK:*, FALLOC:*, FSTAT:*).
#include <cerrno>

#include "models/gmem/guards.h"
#include "models/gmem/ops.h"

namespace kconform::gmem {
namespace {

constexpr uint64_t kSizeAlwaysValid = 1ull << 40;  // SPEC.md CREATE:SIZE-LIMIT (ours)

enum Whence : uint64_t { kSeekSet = 0, kSeekCur = 1, kSeekEnd = 2, kSeekData = 3, kSeekHole = 4 };

// The fd of a gmem slot must be live; on failure the op gets EBADF alone.
const GmemFile* require_file(const State& st, uint64_t slot, Guards& g) {
  const GmemFile* file = st.live_file(slot);
  if (!file) {
    g.fail(kGmemFdBadf, {EBADF}, "gmem slot %llu is not open", (unsigned long long)slot);
    return nullptr;
  }
  g.pass(kGmemFdBadf);
  return file;
}

// The flags KVM_CAP_GUEST_MEMFD_FLAGS reports for a VM type (0 beyond the profile).
uint64_t supported_flags(const Profile& p, uint64_t type) {
  return type < 2 ? p.supported_flags[type] : 0;
}

}  // namespace

// KVM_CREATE_GUEST_MEMFD.
void expect_create_gmem(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  uint64_t vm_slot = op.args[0], size = op.args[1], flags = op.args[2];
  // The VM fd must be live.
  const Vm* vm = st.live_vm(vm_slot);
  if (!vm) {
    g.fail(kGmemFdBadf, {EBADF}, "vm slot %llu is not open", (unsigned long long)vm_slot);
    return;
  }
  g.pass(kGmemFdBadf);
  // The VM's type must have KVM_CAP_GUEST_MEMFD (unknown for types beyond the profile).
  if (vm->type < 2 && !st.profile.gmem_on_vm_type[vm->type]) {
    g.fail(kGmemCreateVmSupport, {EINVAL, ENOTTY, EOPNOTSUPP},
           "VM type %llu has no KVM_CAP_GUEST_MEMFD", (unsigned long long)vm->type);
    return;
  }
  if (vm->type >= 2) {
    g.may_fail(kGmemCreateVmSupport, {EINVAL, ENOTTY, EOPNOTSUPP});
  } else {
    g.pass(kGmemCreateVmSupport);
  }
  // size must be a non-zero multiple of PAGE_SIZE.
  if (size == 0 || !aligned(size, st.page())) {
    g.fail(kGmemCreateSize, {EINVAL}, "size %#llx is zero or not a multiple of %#llx",
           (unsigned long long)size, (unsigned long long)st.page());
  } else {
    g.pass(kGmemCreateSize);
  }
  // size must be a valid loff_t; very large sizes may exceed the kernel's maximum.
  if (size > kLoffMax) {
    g.fail(kGmemCreateSizeLimit, {EINVAL}, "size %#llx is not a valid loff_t",
           (unsigned long long)size);
  } else if (size > kSizeAlwaysValid) {
    g.may_fail(kGmemCreateSizeLimit, {EINVAL, EFBIG, ENOMEM});
  } else {
    g.pass(kGmemCreateSizeLimit);
  }
  // Every flag must be one KVM_CAP_GUEST_MEMFD_FLAGS reports for this VM type.
  uint64_t unknown = flags & ~supported_flags(st.profile, vm->type);
  if (unknown) {
    g.fail(kGmemCreateFlags, {EINVAL}, "flags %#llx not in KVM_CAP_GUEST_MEMFD_FLAGS %#llx",
           (unsigned long long)unknown, (unsigned long long)supported_flags(st.profile, vm->type));
  } else {
    g.pass(kGmemCreateFlags);
  }
  if (g.failed()) return;
  g.pass(kGmemCreateInitShared);
  g.allow(produced(kGmemCreateOk));
}

void commit_create_gmem(State& st, const Op& op, const Outcome& observed) {
  GmemFile file;
  file.open = observed.kind == Outcome::Kind::kOk;
  if (file.open) {
    file.vm = op.args[0];
    file.size = op.args[1];
    file.flags = op.args[2];
  }
  st.files.push_back(std::move(file));
}

// close() of a guest_memfd.
void expect_close(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  if (!require_file(st, op.args[0], g)) return;
  g.allow(Allowed::ok(kGmemCloseOk));
}

void commit_close(State& st, const Op& op, const Outcome& observed) {
  GmemFile* file = st.file_at(op.args[0]);
  if (file && observed.kind == Outcome::Kind::kOk) file->open = false;
}

// read() and pread(): unsupported in both ABIs.
void expect_read(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  bool positional = op.code == kPread;
  uint64_t len = positional ? op.args[2] : op.args[1];
  if (harness_refuses_bytes(len, g)) return;
  if (!require_file(st, op.args[0], g)) {
    // pread(2) does not order EBADF against a negative offset.
    if (positional && op.args[1] > kLoffMax) g.may_fail(kGmemReadNone, {EINVAL});
    return;
  }
  // guest_memfd has no read(); pread() may also be refused as unseekable.
  if (positional) {
    g.fail(kGmemReadNone, {EINVAL, ESPIPE}, "pread() on guest_memfd");
  } else {
    g.fail(kGmemReadNone, {EINVAL}, "read() on guest_memfd");
  }
  // A zero-length read need not detect the error.
  if (len == 0) g.allow(Allowed::ok(kGmemReadNone, 0));
}

void commit_read(State&, const Op&, const Outcome&) {}

// lseek().
void expect_lseek(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  const GmemFile* file = require_file(st, op.args[0], g);
  if (!file) return;
  uint64_t whence = op.args[2];
  int64_t offset = static_cast<int64_t>(op.args[1]);
  // A WRITE file of the write ABI is seekable; a file without WRITE may or
  // may not be; without the write ABI lseek is unspecified.
  RuleId ok_rule = kGmemLseekUnspecified;
  if (!st.profile.write_abi) {
    g.may_fail(kGmemLseekUnspecified, {ESPIPE, EINVAL});
  } else if (file->flags & kFlagWrite) {
    ok_rule = kGmemLseekSeekable;
    g.pass(kGmemLseekSeekable);
  } else {
    ok_rule = kGmemLseekNoWriteFlag;
    g.may_fail(kGmemLseekNoWriteFlag, {ESPIPE, EINVAL});
  }
  // whence must be SET, CUR, END, DATA or HOLE.
  if (whence > kSeekHole) {
    g.fail(kGmemLseekWhence, {EINVAL}, "whence %llu", (unsigned long long)whence);
    return;
  }
  g.pass(kGmemLseekWhence);
  int64_t size = static_cast<int64_t>(file->size);
  if (whence == kSeekData || whence == kSeekHole) {
    // SEEK_DATA/SEEK_HOLE may be unsupported; at or after EOF they give ENXIO.
    g.may_fail(kGmemLseekDataHole, {EINVAL});
    if (offset < 0 || offset >= size) {
      g.fail(kGmemLseekDataHole, {ENXIO}, "SEEK_DATA/HOLE at %lld, size %lld",
             (long long)offset, (long long)size);
      return;
    }
    if (whence == kSeekData) {
      g.may_fail(kGmemLseekDataHole, {ENXIO});
      g.allow(Allowed::ok_range(kGmemLseekDataHole, offset, size - 1));
    } else {
      g.allow(Allowed::ok_range(kGmemLseekDataHole, offset, size));
    }
    return;
  }
  __int128 base = whence == kSeekSet ? 0 : whence == kSeekCur ? __int128(file->pos) : size;
  __int128 target = base + offset;
  // The resulting offset must be non-negative and representable.
  if (target < 0) {
    g.fail(kGmemLseekNegative, {EINVAL}, "lseek result %lld is negative", (long long)target);
    return;
  }
  if (target > static_cast<__int128>(kLoffMax)) {
    g.fail(kGmemLseekNegative, {EINVAL, EOVERFLOW}, "lseek result beyond loff_t");
    return;
  }
  g.pass(kGmemLseekNegative);
  // Beyond EOF may succeed or fail.
  if (target > size) {
    g.may_fail(kGmemLseekBeyondEof, {EINVAL});
    ok_rule = kGmemLseekBeyondEof;
  }
  g.allow(Allowed::ok(ok_rule, static_cast<int64_t>(target)));
}

void commit_lseek(State& st, const Op& op, const Outcome& observed) {
  GmemFile* file = st.file_at(op.args[0]);
  if (file && observed.kind == Outcome::Kind::kOk) file->pos = observed.value;
}

// fallocate().
void expect_fallocate(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  uint64_t mode = op.args[1], offset = op.args[2], len = op.args[3];
  // The harness materialises an allocation, not a hole.
  if (!(mode & kFallocPunchHole) && harness_refuses_bytes(len, g)) return;
  const GmemFile* file = require_file(st, op.args[0], g);
  if (!file) return;
  const uint64_t page = st.page();
  // Only KEEP_SIZE and KEEP_SIZE|PUNCH_HOLE are supported.
  bool punch = mode == (kFallocKeepSize | kFallocPunchHole);
  if (mode != kFallocKeepSize && !punch) {
    g.fail(kGmemFallocMode, {EOPNOTSUPP, EINVAL}, "mode %#llx", (unsigned long long)mode);
  } else {
    g.pass(kGmemFallocMode);
  }
  // offset >= 0, len > 0, offset+len within loff_t.
  if (static_cast<int64_t>(offset) < 0 || static_cast<int64_t>(len) <= 0) {
    g.fail(kGmemFallocArgs, {EINVAL}, "offset %#llx / len %#llx", (unsigned long long)offset,
           (unsigned long long)len);
  } else if (offset + len > kLoffMax) {
    g.fail(kGmemFallocArgs, {EFBIG}, "offset+len %#llx+%#llx beyond loff_t",
           (unsigned long long)offset, (unsigned long long)len);
  } else {
    g.pass(kGmemFallocArgs);
  }
  if (g.failed()) return;
  uint64_t end = offset + len;
  bool unaligned = !aligned(offset, page) || !aligned(len, page);
  if (punch) {
    // PUNCH_HOLE needs a page-aligned offset and length.
    if (unaligned) {
      g.fail(kGmemFallocPunchAlign, {EINVAL}, "punch [%#llx,+%#llx) not page-aligned",
             (unsigned long long)offset, (unsigned long long)len);
      return;
    }
    g.pass(kGmemFallocPunchAlign);
    // PUNCH_HOLE at, after or across EOF succeeds.
    if (end > file->size) {
      g.pass(kGmemFallocPunchEof);
      g.allow(Allowed::ok(kGmemFallocPunchEof));
      return;
    }
    g.pass(kGmemFallocPunch);
    g.allow(Allowed::ok(kGmemFallocPunch));
    return;
  }
  // Unaligned allocation may be refused.
  if (unaligned) {
    g.may_fail(kGmemFallocAllocAlign, {EINVAL});
  } else {
    g.pass(kGmemFallocAllocAlign);
  }
  // Allocation may not start at or after EOF; across EOF it may fail.
  if (offset >= file->size) {
    g.fail(kGmemFallocAllocEof, {EINVAL, EFBIG}, "allocation at %#llx, size %#llx",
           (unsigned long long)offset, (unsigned long long)file->size);
    return;
  }
  if (end > file->size) {
    g.may_fail(kGmemFallocAllocEof, {EINVAL, EFBIG});
  } else {
    g.pass(kGmemFallocAllocEof);
  }
  g.allow(Allowed::ok(kGmemFallocAlloc));
}

void commit_fallocate(State& st, const Op& op, const Outcome& observed) {
  if (observed.kind != Outcome::Kind::kOk) return;
  if (op.args[1] != (kFallocKeepSize | kFallocPunchHole)) return;  // allocation: no content change
  GmemFile* file = st.file_at(op.args[0]);
  if (!file) return;
  // Punched pages become holes; the range was page-aligned and within loff_t.
  uint64_t first = op.args[2] / st.page();
  uint64_t end = std::min(op.args[2] + op.args[3], file->size);
  uint64_t last = end / st.page();  // exclusive
  file->pages.erase(file->pages.lower_bound(first),
                    file->pages.lower_bound(std::max(first, last)));
}

// fstat().
void expect_fstat(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  const GmemFile* file = require_file(st, op.args[0], g);
  if (!file) return;
  g.allow(Allowed::ok_aux(kGmemFstatSize, 0, file->size));
}

void commit_fstat(State&, const Op&, const Outcome&) {}

}  // namespace kconform::gmem
