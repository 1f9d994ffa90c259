// write(), pwrite() and pwritev() on a guest_memfd (SPEC.md WRITE:*,
// WRITEV:*, FLAGS:WRITE). In the write ABI a write either fails, writes all
// of its (clamped) count, or writes a page-aligned prefix and returns a short
// count; commit_write applies exactly the count the target returned.
#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "models/gmem/guards.h"
#include "models/gmem/ops.h"

namespace kconform::gmem {
namespace {

constexpr uint64_t kIovMax = 1024;         // IOV_MAX, writev(2)
constexpr uint64_t kMaxShortCounts = 4096;  // beyond this, short counts are one range

// One write request, whichever of the three calls made it.
struct WriteRequest {
  uint64_t slot = 0;
  bool positional = false;  // pwrite/pwritev: at offset, position unchanged
  bool vectored = false;
  uint64_t offset = 0;  // write(): the file position
  uint64_t len = 0;
  uint64_t iovcnt = 1;
  uint64_t pattern = 0;
  uint64_t src_valid = kSrcAllValid;
};

WriteRequest parse(const State& st, const Op& op) {
  WriteRequest w;
  w.slot = op.args[0];
  switch (op.code) {
    case kWrite:
      w.len = op.args[1], w.pattern = op.args[2], w.src_valid = op.args[3];
      if (const GmemFile* f = st.live_file(w.slot)) w.offset = f->pos;
      break;
    case kPwrite:
      w.positional = true;
      w.offset = op.args[1], w.len = op.args[2], w.pattern = op.args[3], w.src_valid = op.args[4];
      break;
    default:  // kPwritev
      w.positional = w.vectored = true;
      w.offset = op.args[1], w.len = op.args[2], w.iovcnt = op.args[3], w.pattern = op.args[4];
      if (w.iovcnt == 0) w.len = 0;  // no segments: nothing to write
      break;
  }
  return w;
}

// VFS clamps one call's count to INT_MAX rounded down to a page (write(2)).
uint64_t clamped_count(const State& st, uint64_t len) {
  uint64_t max_rw = round_down(0x7fffffffull, st.page());
  return std::min(len, max_rw);
}

// The page-aligned short counts a write may return when only `limit` bytes of
// it can be written (SPEC.md WRITE:EOF, WRITE:SHARED-ONLY, WRITE:SRC-FAULT).
void allow_short_counts(uint64_t page, uint64_t limit, RuleId rule, Guards& g) {
  if (limit < page) return;
  if (limit / page > kMaxShortCounts) {
    g.allow(Allowed::ok_range(rule, page, limit));  // alignment of the count not checked
    return;
  }
  for (uint64_t k = page; k <= limit; k += page) g.allow(Allowed::ok(rule, k));
}

// Guards of the write ABI on a file with WRITE, after the fd and flag checks.
void expect_write_abi(const State& st, const GmemFile& file, const WriteRequest& w,
                      uint64_t count, Guards& g) {
  const uint64_t page = st.page();
  // The offset must be a valid loff_t and offset+count must not pass it.
  if (w.offset > kLoffMax || count > kLoffMax - w.offset) {
    g.fail(kGmemWriteOffsetRange, {EINVAL, EOVERFLOW, EFBIG}, "write [%#llx,+%#llx) beyond loff_t",
           (unsigned long long)w.offset, (unsigned long long)count);
  } else {
    g.pass(kGmemWriteOffsetRange);
  }
  // Offset and length must be page-aligned.
  if (!aligned(w.offset, page) || !aligned(count, page)) {
    g.fail(kGmemWriteAlign, {EINVAL}, "write [%#llx,+%#llx) not page-aligned",
           (unsigned long long)w.offset, (unsigned long long)count);
  } else {
    g.pass(kGmemWriteAlign);
  }
  if (w.vectored) g.pass(kGmemWritevSegments);
  // A zero-length write writes nothing; it may still report what it detected
  // (SPEC.md WRITE:ZERO), so the remaining guards still add their errors.
  const bool zero = count == 0;
  // When several guards fail, no source orders them: their errors are a union
  // (SPEC.md ORDER:UNION), so a failed guard does not stop the others.
  const bool hard_failure = g.failed();

  // The rest may cut the write short: `limit` is how much of it can be written.
  uint64_t limit = count;
  RuleId limit_rule = kGmemWritePopulate;
  auto shorten = [&](uint64_t to, RuleId rule) {
    if (to < limit) limit = to, limit_rule = rule;
  };
  bool cut = false;
  // The write may not extend the file.
  if (w.offset >= file.size) {
    g.fail(kGmemWriteEof, {EINVAL, EFBIG, ENOSPC}, "write at %#llx, size %#llx",
           (unsigned long long)w.offset, (unsigned long long)file.size);
    shorten(0, kGmemWriteEof);
  } else if (count > file.size - w.offset) {
    g.may_fail(kGmemWriteEof, {EINVAL, EFBIG, ENOSPC});
    shorten(file.size - w.offset, kGmemWriteEof);
    cut = true;
  } else {
    g.pass(kGmemWriteEof);
  }
  // Only shared pages may be written (pages below EOF; sharedness is per file).
  uint64_t first_page = w.offset / page;
  if (w.offset < file.size && !file.shared(first_page)) {
    g.fail(kGmemWriteSharedOnly, {EINVAL, EPERM, EACCES, EFAULT}, "page %#llx is private",
           (unsigned long long)first_page);
    shorten(0, kGmemWriteSharedOnly);
  } else {
    g.pass(kGmemWriteSharedOnly);
  }
  // The source buffer must be readable; a fault may cut the write short.
  if (w.src_valid < count) {
    g.may_fail(kGmemWriteSrcFault, {EFAULT});
    shorten(round_down(w.src_valid, page), kGmemWriteSrcFault);
    cut = true;
  } else {
    g.pass(kGmemWriteSrcFault);
  }
  if (zero) {
    g.allow(Allowed::ok(kGmemWriteZeroLen, 0));
    return;
  }
  if (hard_failure) return;
  g.pass(kGmemWritePopulate);
  if (g.failed() || cut) {
    allow_short_counts(page, limit, limit_rule, g);
    return;
  }
  g.allow(Allowed::ok(kGmemWritePopulate, static_cast<int64_t>(count)));
}

}  // namespace

void expect_write(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  WriteRequest w = parse(st, op);
  if (harness_refuses_bytes(op.code == kWrite ? op.args[1] : op.args[2], g)) return;
  // The fd must be live. pwrite(2) does not order EBADF against a negative offset.
  const GmemFile* file = st.live_file(w.slot);
  if (!file) {
    g.fail(kGmemFdBadf, {EBADF}, "gmem slot %llu is not open", (unsigned long long)w.slot);
    if (w.positional && w.offset > kLoffMax) g.may_fail(kGmemWriteOffsetRange, {EINVAL});
    return;
  }
  g.pass(kGmemFdBadf);
  // pwritev takes at most IOV_MAX segments.
  if (w.vectored) {
    if (w.iovcnt > kIovMax) {
      g.fail(kGmemWritevIovcnt, {EINVAL}, "iovcnt %llu > IOV_MAX", (unsigned long long)w.iovcnt);
    } else {
      g.pass(kGmemWritevIovcnt);
    }
  }
  uint64_t count = clamped_count(st, w.len);
  bool zero = count == 0 && !g.failed();
  // Without the write ABI there is no write(); pwrite may also be unseekable.
  if (!st.profile.write_abi) {
    if (w.positional) {
      g.fail(kGmemWriteUnsupported, {EINVAL, ESPIPE}, "pwrite on guest_memfd without write ABI");
    } else {
      g.fail(kGmemWriteUnsupported, {EINVAL}, "write on guest_memfd without write ABI");
    }
    if (zero) g.allow(Allowed::ok(kGmemWriteZeroLen, 0));
    return;
  }
  // The file must have been created with GUEST_MEMFD_FLAG_WRITE.
  if (!(file->flags & kFlagWrite)) {
    if (w.positional) {
      g.fail(kGmemWriteFlagRequired, {EINVAL, EOPNOTSUPP, ENODEV, EPERM, ESPIPE},
             "file flags %#llx lack WRITE", (unsigned long long)file->flags);
    } else {
      g.fail(kGmemWriteFlagRequired, {EINVAL, EOPNOTSUPP, ENODEV, EPERM},
             "file flags %#llx lack WRITE", (unsigned long long)file->flags);
    }
    if (zero) g.allow(Allowed::ok(kGmemWriteZeroLen, 0));
    return;
  }
  g.pass(kGmemWriteFlagRequired);
  if (g.failed()) return;  // iovcnt
  expect_write_abi(st, *file, w, count, g);
}

void commit_write(State& st, const Op& op, const Outcome& observed) {
  WriteRequest w = parse(st, op);
  GmemFile* file = st.file_at(w.slot);
  if (!file) return;
  // Whatever the outcome, these bytes were aimed at the file (CONTENT:FOREIGN).
  uint64_t aimed = std::min(w.len, kMaxOpBytes);
  if (aimed != 0 && w.offset <= kLoffMax) file->sources.push_back({st.op, w.pattern, w.offset, aimed});
  if (observed.kind != Outcome::Kind::kOk || observed.value <= 0) return;
  // Exactly the returned count was written, from the start of the source.
  uint64_t n = static_cast<uint64_t>(observed.value);
  if (w.offset < file->size) {
    store_bytes(*file, st.page(), w.offset, w.pattern, 0, std::min(n, file->size - w.offset));
  }
  if (!w.positional) file->pos = w.offset + n;
}

std::string explain_write(const State& st, const Op& op, const Outcome& observed) {
  if (op.code != kWrite && op.code != kPwrite && op.code != kPwritev) return "";
  WriteRequest w = parse(st, op);
  const uint64_t count = clamped_count(st, w.len);
  char buf[256];
  if (observed.kind != Outcome::Kind::kOk) {
    std::snprintf(buf, sizeof buf, "the write of %#llx bytes at %#llx failed (%s): the model holds none of them",
                  (unsigned long long)count, (unsigned long long)w.offset, to_string(observed).c_str());
    return buf;
  }
  const uint64_t n = static_cast<uint64_t>(observed.value);
  const GmemFile* file = st.live_file(w.slot) ? st.live_file(w.slot) : nullptr;
  const uint64_t kept = file && w.offset < file->size ? std::min(n, file->size - w.offset) : 0;
  std::snprintf(buf, sizeof buf,
                "%s write: %#llx of %#llx bytes written; the model holds pattern %#llx in [%#llx, %#llx) of gmem "
                "%llu%s and the page contents are re-read",
                n < count ? "short" : (n == count ? "whole" : "overlong"), (unsigned long long)n,
                (unsigned long long)count, (unsigned long long)w.pattern, (unsigned long long)w.offset,
                (unsigned long long)(w.offset + kept), (unsigned long long)w.slot,
                kept < n ? " (bytes beyond EOF have nowhere to go)" : "");
  return buf;
}

}  // namespace kconform::gmem
