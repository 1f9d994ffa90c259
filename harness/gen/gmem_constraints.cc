// guest_memfd validity conditions as constraints, one function per ABI call
// the generator aims at: KVM_CREATE_GUEST_MEMFD (size, flags), pwrite() and
// write() of the write ABI (offset, length, file size, flags, page size),
// fallocate() PUNCH_HOLE and KEEP_SIZE allocation (mode, offset, len, size).
// Each condition restates one guard of models/gmem (SPEC.md clause in the
// rule's citation); the model, not this file, judges the cases.
#include "harness/gen/constraints.h"
#include "harness/gen/generate.h"
#include "harness/scenario/gmem_abi.h"
#include "harness/scenario/gmem_conventions.h"

namespace kconform::gen {
namespace {

constexpr uint64_t kLoffMax = 0x7fffffffffffffffull;  // loff_t (SPEC.md WRITE:OFFSET-RANGE)
constexpr uint64_t kTiB = 1ull << 40;                 // SPEC.md CREATE:SIZE-LIMIT: must succeed up to here
constexpr uint64_t kKnownFlags = gmem::kFlagMmap | gmem::kFlagInitShared | gmem::kFlagWrite;

Scenario base(uint64_t size, uint64_t flags) {
  Scenario s;
  s.abi = Abi::kGmem;
  require(s, "gmem");
  if (flags & gmem::kFlagMmap) require(s, "mmap");
  if (flags & gmem::kFlagInitShared) require(s, "init_shared");
  if (flags & gmem::kFlagWrite) require(s, "write");
  add_op(s, "create_vm", {});
  add_op(s, "create_gmem", {{"vm", 0}, {"size", size}, {"flags", flags}});
  return s;
}

// The file every write/fallocate case makes: a valid KVM_CREATE_GUEST_MEMFD.
void file_context(Vocab& v, Function& f, const Term& size, uint64_t page) {
  f.context.push_back(size.wide != v.wide(0));
  f.context.push_back(z3::urem(size.wide, v.wide(page)) == v.wide(0));
  f.context.push_back(z3::ule(size.wide, v.wide(kTiB)));
}

Function create(Vocab& v, uint64_t page) {
  Function f;
  f.abi = "gmem";
  f.name = "create";
  f.doc = "KVM_CREATE_GUEST_MEMFD(size, flags), PAGE_SIZE " + std::to_string(page) +
          "; flags outside MMAP|INIT_SHARED|WRITE are unknown to every profile";
  Term size = v.var("size", 64), flags = v.var("flags", 64);
  f.params = {{"size", size, 0x100000}, {"flags", flags, kKnownFlags}};
  f.conds = {
      ne("size-nonzero", "GMEM.CREATE.SIZE", "size != 0", size, v.cst(0, 64), page),
      aligned("size-align", "GMEM.CREATE.SIZE", "size % PAGE_SIZE == 0", size, page),
      // Above 1 TiB creation may fail; above 2^63-1 it must (size-loff), so
      // size-tib applies to valid loff_t sizes only.
      may_succeed(when(z3::ule(size.wide, v.wide(kLoffMax)),
                       le("size-tib", "GMEM.CREATE.SIZE_LIMIT", "size <= 1 TiB (must succeed; where size <= 2^63-1)",
                          size, v.cst(kTiB, 64), page))),
      le("size-loff", "GMEM.CREATE.SIZE_LIMIT", "size <= 2^63-1 (a valid loff_t)", size, v.cst(kLoffMax, 64), page),
      mask_zero("flags-known", "GMEM.CREATE.FLAGS", "flags & ~(MMAP|INIT_SHARED|WRITE) == 0", flags,
                ~kKnownFlags),
  };
  f.build = [](const Solution& s) {
    Scenario sc = base(s["size"], s["flags"]);
    add_op(sc, "fstat", {{"gmem", 0}});
    return sc;
  };
  return f;
}

// pwrite(offset, len) or lseek(offset) + write(len) on a file of `size` with `flags`.
//
// Stages follow models/gmem ops_write.cc: the harness refuses more than 64 MiB
// before anything else (0), a file without WRITE fails before the write ABI's
// checks (1), which are then all evaluated, their errors a union (2).
// write() writes at the file position, set by lseek(SEEK_SET), which is
// certain to succeed only in [0, size] (SPEC.md LSEEK:SEEKABLE) and can never
// pass 2^63-1: its cases keep offset <= size and have no loff_t conditions.
Function write_fn(Vocab& v, uint64_t page, bool positional) {
  Function f;
  f.abi = "gmem";
  f.name = positional ? "pwrite" : "write";
  f.doc = positional ? "pwrite(offset, len) on a guest_memfd of size with flags (write ABI), PAGE_SIZE " +
                           std::to_string(page)
                     : "lseek(offset, SEEK_SET) then write(len) on a guest_memfd of size with flags (write "
                       "ABI; offset <= size, where lseek must succeed), PAGE_SIZE " + std::to_string(page);
  Term size = v.var("size", 64), flags = v.var("flags", 64), offset = v.var("offset", 64),
       len = v.var("len", 64);
  f.params = {{"size", size, 0x10000}, {"flags", flags, kKnownFlags}, {"offset", offset, 0x10000},
              {"len", len, 0x10000}};
  file_context(v, f, size, page);
  f.context.push_back((flags.wide & v.wide(~kKnownFlags)) == v.wide(0));
  if (!positional) f.context.push_back(z3::ule(offset.wide, size.wide));
  Term end = v.add(offset, len);
  const z3::expr offset_loff = z3::ule(offset.wide, v.wide(kLoffMax));
  const z3::expr offset_inside = z3::ult(offset.wide, size.wide);
  f.conds.push_back(le("len-max", "GMEM.HARNESS.MAX_BYTES", "len <= 64 MiB (harness)", len,
                       v.cst(gmem::kMaxOpBytes, 64), page));
  f.conds.push_back(at_stage(1, ne("flag-write", "GMEM.WRITE.FLAG_REQUIRED", "flags & WRITE",
                                   v.bitand_(flags, gmem::kFlagWrite), v.cst(0, 64))));
  auto add = [&](Cond c) { f.conds.push_back(at_stage(2, std::move(c))); };
  add(ne("shared", "GMEM.WRITE.SHARED_ONLY", "flags & INIT_SHARED (the pages are shared)",
         v.bitand_(flags, gmem::kFlagInitShared), v.cst(0, 64)));
  if (positional) {
    add(le("offset-loff", "GMEM.WRITE.OFFSET_RANGE", "offset <= 2^63-1", offset, v.cst(kLoffMax, 64), page));
    add(when(offset_loff, le("end-loff", "GMEM.WRITE.OFFSET_RANGE", "offset + len <= 2^63-1 (where offset is)",
                             end, v.cst(kLoffMax, 64), page, true)));
  }
  add(aligned("offset-align", "GMEM.WRITE.ALIGN", "offset % PAGE_SIZE == 0", offset, page));
  add(aligned("len-align", "GMEM.WRITE.ALIGN", "len % PAGE_SIZE == 0", len, page));
  add(lt("offset-eof", "GMEM.WRITE.EOF", "offset < size", offset, size, page));
  // Crossing EOF may fail or write up to EOF; starting at or past it is offset-eof.
  add(may_succeed(when(offset_inside, le("end-eof", "GMEM.WRITE.EOF", "offset + len <= size (where offset < size)",
                                         end, size, page, true))));
  add(may_succeed(ne("len-nonzero", "GMEM.WRITE.ZERO_LEN", "len != 0", len, v.cst(0, 64), page)));
  f.build = [positional](const Solution& s) {
    Scenario sc = base(s["size"], s["flags"]);
    require(sc, "write");
    if (positional) {
      add_op(sc, "pwrite", {{"gmem", 0}, {"offset", s["offset"]}, {"len", s["len"]}});
    } else {
      add_op(sc, "lseek", {{"gmem", 0}, {"offset", s["offset"]}, {"whence", 0}});
      add_op(sc, "write", {{"gmem", 0}, {"len", s["len"]}});
    }
    add_op(sc, "fstat", {{"gmem", 0}});
    return sc;
  };
  return f;
}

// fallocate(mode, offset, len) with mode KEEP_SIZE|PUNCH_HOLE (punch) or KEEP_SIZE (allocate).
Function fallocate_fn(Vocab& v, uint64_t page, bool punch) {
  Function f;
  f.abi = "gmem";
  f.name = punch ? "fallocate-punch" : "fallocate-alloc";
  f.doc = std::string("fallocate(") + (punch ? "KEEP_SIZE|PUNCH_HOLE" : "KEEP_SIZE") +
          ", offset, len) on a guest_memfd of size, PAGE_SIZE " + std::to_string(page);
  const uint64_t want = punch ? (gmem::kFallocKeepSize | gmem::kFallocPunchHole) : gmem::kFallocKeepSize;
  Term size = v.var("size", 64), mode = v.var("mode", 64), offset = v.var("offset", 64),
       len = v.var("len", 64);
  f.params = {{"size", size, 0x10000}, {"mode", mode, 0x7f}, {"offset", offset, 0x10000},
              {"len", len, 0x10000}};
  file_context(v, f, size, page);
  Term end = v.add(offset, len);
  const char* align_rule = punch ? "GMEM.FALLOC.PUNCH_ALIGN" : "GMEM.FALLOC.ALLOC_ALIGN";
  const z3::expr nonneg = z3::ule(offset.wide, v.wide(kLoffMax)) && z3::ule(len.wide, v.wide(kLoffMax));
  const z3::expr args_ok = nonneg && z3::ule(end.wide, v.wide(kLoffMax));
  // Stages follow models/gmem ops_file.cc: the harness refuses to allocate
  // more than 64 MiB first (0), then mode and arguments are checked together
  // (1), then alignment and EOF (2; a punch checks EOF only once aligned, 3).
  if (!punch)
    f.conds.push_back(le("len-max", "GMEM.HARNESS.MAX_BYTES", "len <= 64 MiB (harness)", len,
                         v.cst(gmem::kMaxOpBytes, 64), page));
  auto add = [&](unsigned stage, Cond c) { f.conds.push_back(at_stage(stage, std::move(c))); };
  add(1, eq("mode", "GMEM.FALLOC.MODE", punch ? "mode == KEEP_SIZE|PUNCH_HOLE" : "mode == KEEP_SIZE", mode,
            v.cst(want, 64)));
  add(1, le("offset-nonneg", "GMEM.FALLOC.ARGS", "offset <= 2^63-1 (not negative)", offset, v.cst(kLoffMax, 64),
            page));
  add(1, ne("len-nonzero", "GMEM.FALLOC.ARGS", "len != 0", len, v.cst(0, 64), page));
  add(1, le("len-nonneg", "GMEM.FALLOC.ARGS", "len <= 2^63-1 (not negative)", len, v.cst(kLoffMax, 64), page));
  // Where offset or len is negative, offset-nonneg or len-nonneg is what breaks.
  add(1, when(nonneg, le("end-loff", "GMEM.FALLOC.ARGS",
                         "offset + len <= 2^63-1 (else EFBIG; where offset and len are not negative)", end,
                         v.cst(kLoffMax, 64), page)));
  auto align = [&](Cond c) { add(2, punch ? std::move(c) : may_succeed(std::move(c))); };
  align(aligned("offset-align", align_rule, "offset % PAGE_SIZE == 0", offset, page));
  align(aligned("len-align", align_rule, "len % PAGE_SIZE == 0", len, page));
  if (punch) {
    // A punch at, after or across EOF succeeds too (SPEC.md FALLOC:PUNCH-EOF).
    add(3, may_succeed(when(args_ok, le("end-eof", "GMEM.FALLOC.PUNCH_EOF",
                                        "offset + len <= size (inside the file; where offset + len <= 2^63-1)", end,
                                        size, page))));
  } else {
    add(2, when(z3::ule(offset.wide, v.wide(kLoffMax)),
                lt("offset-eof", "GMEM.FALLOC.ALLOC_EOF", "offset < size (where offset <= 2^63-1)", offset, size,
                   page)));
    // Across EOF an allocation may fail or succeed; at or past it is offset-eof.
    add(2, may_succeed(when(args_ok && z3::ult(offset.wide, size.wide),
                            le("end-eof", "GMEM.FALLOC.ALLOC_EOF",
                               "offset + len <= size (where offset < size and offset + len <= 2^63-1)", end, size,
                               page))));
  }
  f.build = [](const Solution& s) {
    Scenario sc = base(s["size"], 0);
    add_op(sc, "fallocate", {{"gmem", 0}, {"mode", s["mode"]}, {"offset", s["offset"]}, {"len", s["len"]}});
    add_op(sc, "fstat", {{"gmem", 0}});
    return sc;
  };
  return f;
}

}  // namespace

std::vector<Function> gmem_functions(Vocab& v, const GenConfig& cfg) {
  const uint64_t page = cfg.gmem_page;
  std::vector<Function> fns = {create(v, page), write_fn(v, page, true), write_fn(v, page, false),
                               fallocate_fn(v, page, true), fallocate_fn(v, page, false)};
  // Every case keeps each condition it does not name (gmem_cases_test checks it).
  for (Function& f : fns) f.fewest_others = true;
  return fns;
}

}  // namespace kconform::gen
