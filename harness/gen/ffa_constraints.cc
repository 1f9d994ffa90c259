// FF-A validity conditions as constraints: FFA_MEM_RECLAIM2's arguments and
// the constituent descriptors it reads from TX (models/ffa/reclaim2_abi.h,
// SPEC.md R2:PROFILE), and the FFA_MEM_SHARE/LEND memory region descriptor
// (offsets of the endpoint array and the composite, counts, fragment length
// against total length; SPEC.md DESC:*, MEM:ARGS). One set per host
// PAGE_SIZE, since the TX buffer is KVM_FFA_MBOX_NR_PAGES host pages.
#include <cstring>

#include "harness/gen/constraints.h"
#include "harness/gen/generate.h"
#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/ffa_spec.h"
#include "models/ffa/proxy.h"
#include "models/ffa/reclaim2_abi.h"

namespace kconform::gen {
namespace {

using namespace kconform::ffa;

// The RAM layout of the model's default profile (proxy.h): TX and RX are the
// first two host pages; the shared region lies well inside host memory.
const uint64_t kPhysBase = ProxyProfile().phys_base;
const uint64_t kMboxPages = ProxyProfile().mbox_pages;  // KVM_FFA_MBOX_NR_PAGES of 7.3: 1
const uint64_t kRegion = kPhysBase + 0x10000;  // the shared transaction's only constituent
constexpr uint64_t kRegionPages = 8;               // 4K pages: 32 KiB, two 16K host pages
constexpr unsigned kWrittenDescs = 3;              // RECLAIM2 descriptors the case writes to TX
constexpr uint64_t kEmad12 = 32, kHeader12 = 48;   // v1.2 layout (SPEC.md DESC:LAYOUT)
// A share/lend case writes up to 12 constituents of 4 pages (16 KiB, one 16K
// host page) each, 16 KiB apart from 0x80010000 to the end of 4K host memory
// (0x80040000): enough for a composite offset that wraps in 32 bits
// (>= 0xfffffff0) to leave a descriptor length of at least the header, the
// endpoint array and five constituents.
constexpr uint64_t kDescRanges = 12, kDescRangePages = 4;
constexpr uint64_t desc_range(uint64_t i) { return 0x80010000 + i * 0x4000; }
constexpr uint64_t kSpareHostPage = 0x80008000;  // after TX/RX at 4K and 16K

void put(std::vector<uint8_t>& b, uint64_t off, uint64_t v, unsigned width) {
  if (off >= b.size()) return;
  for (unsigned i = 0; i < width && off + i < b.size(); ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

std::string kib(uint64_t page) { return std::to_string(page / 1024) + "k"; }

Scenario prelude(uint64_t page) {
  Scenario s;
  s.abi = Abi::kFfa;
  require(s, "page_" + kib(page));
  add_op(s, "version", {});
  add_op(s, "rxtx_map", {{"tx", kPhysBase}, {"rx", kPhysBase + page}, {"pages", kMboxPages * page / kFfaPage}});
  return s;
}

std::vector<uint8_t> range_record(uint64_t addr, uint32_t pages) {
  std::vector<uint8_t> r(kRangeRecordBytes, 0);
  put(r, 0, addr, 8);
  put(r, 8, pages, 4);
  return r;
}

Function reclaim2(Vocab& v, uint64_t page) {
  Function f;
  f.abi = "ffa";
  f.name = "reclaim2-" + kib(page);
  const uint64_t tx = kMboxPages * page;
  f.doc = "FFA_MEM_RECLAIM2(flags, offset, count, page_index, total) of a share of " +
          std::to_string(kRegionPages) + " 4K pages at " + "0x80010000, with up to " +
          std::to_string(kWrittenDescs) + " constituent descriptors in TX; host PAGE_SIZE " + kib(page) +
          ", TX " + std::to_string(tx) + " bytes";
  Term flags = v.var("flags", 32), offset = v.var("offset", 32), count = v.var("count", 32),
       index = v.var("page_index", 64), total = v.var("total", 32);
  f.params = {{"flags", flags, 1}, {"offset", offset, tx}, {"count", count, 8}, {"page_index", index, 16},
              {"total", total, 64}};
  std::vector<Term> addr, pc, res;
  std::vector<z3::expr> live;
  for (unsigned i = 0; i < kWrittenDescs; ++i) {
    std::string n = std::to_string(i);
    addr.push_back(v.var("addr" + n, 64));
    pc.push_back(v.var("pages" + n, 32));
    res.push_back(v.var("reserved" + n, 32));
    live.push_back(z3::ult(v.wide(i), count.wide));
    f.params.push_back({"addr" + n, addr[i], kRegion + kRegionPages * kFfaPage});
    f.params.push_back({"pages" + n, pc[i], kRegionPages});
    f.params.push_back({"reserved" + n, res[i], 0});
  }
  Term sum = v.cst(0, 32);
  for (unsigned i = 0; i < kWrittenDescs; ++i) sum = v.add(sum, v.ite(live[i], pc[i], v.cst(0, 32)));
  f.conds = {
      mask_zero("flags-mbz", "FFA.R2.FLAGS", "flags & ~ZERO == 0", flags, 0xffffffffull & ~uint64_t{kReclaimZero}),
      mask_zero("flags-zero-on-share", "FFA.R2.FLAGS", "!(flags & ZERO) on a share", flags, kReclaimZero),
      aligned("offset-align", "FFA.R2.OFFSET_ALIGN", "offset % 16 == 0", offset, kReclaim2.offset_align),
      ne("count-nonzero", "FFA.R2.COUNT", "count >= 1", count, v.cst(0, 32)),
      le("bounds", "FFA.R2.BOUNDS", "offset + 16*count <= TX size", v.add(offset, v.mul(count, 16)),
         v.cst(tx, 32), 16, true),
      le("count-written", "FFA.R2.DESC_VALID",
         "count <= " + std::to_string(kWrittenDescs) + " (later descriptors are zero bytes: 0 pages)", count,
         v.cst(kWrittenDescs, 32)),
      eq("total", "FFA.R2.TOTAL", "total == sum of the descriptors' page counts", total, sum, true),
      lt("page-index", "FFA.R2.PAGE_INDEX", "page_index < pages0", index, v.as(pc[0], 64)),
  };
  const Term region_end = v.cst(kRegion + kRegionPages * kFfaPage, 64);
  for (unsigned i = 0; i < kWrittenDescs; ++i) {
    std::string n = std::to_string(i);
    Term end = v.add(addr[i], v.mul(v.as(pc[i], 64), kFfaPage));
    auto c = [&](Cond k) { f.conds.push_back(when(live[i], std::move(k))); };
    c(aligned("addr" + n + "-align", "FFA.R2.DESC_VALID", "addr" + n + " % 4K == 0", addr[i], kFfaPage));
    c(ne("pages" + n + "-nonzero", "FFA.R2.DESC_VALID", "pages" + n + " != 0", pc[i], v.cst(0, 32)));
    c(eq("reserved" + n + "-mbz", "FFA.R2.DESC_VALID", "reserved" + n + " == 0", res[i], v.cst(0, 32)));
    // The end must be representable (the model reads an end of exactly 2^64 as a wrap).
    c(lt("desc" + n + "-nowrap", "FFA.R2.DESC_VALID", "addr" + n + " + 4K*pages" + n + " < 2^64", end,
         v.wide_pow2(64, 64)));
    c(le("desc" + n + "-in-start", "FFA.R2.NOT_IN_TX", "0x80010000 <= addr" + n, v.cst(kRegion, 64), addr[i]));
    c(le("desc" + n + "-in-end", "FFA.R2.NOT_IN_TX",
         "addr" + n + " + 4K*pages" + n + " <= end of the shared region", end, region_end, kFfaPage, true));
  }
  for (unsigned i = 0; i < kWrittenDescs; ++i)
    for (unsigned j = i + 1; j < kWrittenDescs; ++j) {
      std::string n = std::to_string(i), m = std::to_string(j);
      Term ei = v.add(addr[i], v.mul(v.as(pc[i], 64), kFfaPage));
      Term ej = v.add(addr[j], v.mul(v.as(pc[j], 64), kFfaPage));
      f.conds.push_back(custom("desc" + n + "-desc" + m + "-disjoint", "FFA.R2.OVERLAP",
                               "descriptors " + n + " and " + m + " do not overlap",
                               z3::implies(live[j], z3::ule(ei.wide, addr[j].wide) || z3::ule(ej.wide, addr[i].wide))));
    }
  f.build = [page, tx](const Solution& s) {
    Scenario sc = prelude(page);
    require(sc, "reclaim2");  // aimed at an implementation; a stock handler's NOT_SUPPORTED is checked elsewhere
    add_op(sc, "tx_mem_desc", {}, {{"ranges", range_record(kRegion, kRegionPages)}});
    add_op(sc, "mem_share", {});
    const uint64_t count = s["count"];
    const uint64_t n = count < kWrittenDescs ? count : kWrittenDescs;
    if (n > 0 && s["offset"] < tx) {
      std::vector<uint8_t> d(16 * n, 0);
      for (uint64_t i = 0; i < n; ++i) {
        std::string k = std::to_string(i);
        put(d, 16 * i, s["addr" + k], 8);
        put(d, 16 * i + 8, s["pages" + k], 4);
        put(d, 16 * i + 12, s["reserved" + k], 4);
      }
      add_op(sc, "tx_write", {{"offset", s["offset"]}}, {{"data", d}});
    }
    add_op(sc, "mem_reclaim2", {{"handle", 0}, {"flags", s["flags"]}, {"offset", s["offset"]},
                                {"count", count}, {"page_index", s["page_index"]}, {"total_pages", s["total"]}});
    add_op(sc, "mem_reclaim", {{"handle", 0}});  // the rest (or all) of the transaction
    return sc;
  };
  return f;
}

// The FF-A v1.2 memory region descriptor of a share or lend, built byte by
// byte from the solution (so every offset and count can be wrong).
Function share_desc(Vocab& v, uint64_t page, bool lend) {
  Function f;
  f.abi = "ffa";
  f.name = std::string(lend ? "lend" : "share") + "-desc-" + kib(page);
  const uint64_t tx = kMboxPages * page;
  f.doc = std::string(lend ? "FFA_MEM_LEND" : "FFA_MEM_SHARE") +
          "(total_len, frag_len) of a v1.2 descriptor (endpoint array offset/count/size, composite offset, "
          "range count, total pages)" + (lend ? std::string(", memory attributes not specified,") : std::string()) +
          " with up to 12 constituents (0x80010000 + 16K*i, 4 pages); host PAGE_SIZE " +
          kib(page) + ", TX " + std::to_string(tx) + " bytes; a second fragment follows with FFA_MEM_FRAG_TX";
  Term total = v.var("total_len", 32), frag = v.var("frag_len", 32), ep_off = v.var("ep_off", 32),
       ep_count = v.var("ep_count", 32), ep_size = v.var("ep_size", 32), comp = v.var("comp_off", 32),
       ranges = v.var("range_count", 32), pages = v.var("total_pages", 32);
  // Preferences: one receiver, the endpoint array right after the header,
  // the composite right after it (the canonical layout), one fragment.
  f.params = {{"total_len", total, 2 * tx}, {"frag_len", frag, tx},   {"ep_off", ep_off, kHeader12},
              {"ep_count", ep_count, 1},    {"ep_size", ep_size, 64}, {"comp_off", comp, kHeader12 + kEmad12},
              {"range_count", ranges, 2},   {"total_pages", pages, 16}};
  const Term ep_end = v.add(ep_off, v.mulv(ep_count, ep_size));
  const Term comp_end = v.add(comp, v.cst(16, 32));
  const Term desc_end = v.add(comp_end, v.mul(ranges, 16));
  const Term zero = v.cst(0, 32);
  Term sum = zero;
  for (uint64_t i = 0; i < kDescRanges; ++i)
    sum = v.add(sum, v.ite(z3::ult(v.wide(i), ranges.wide), v.cst(kDescRangePages, 32), zero));
  f.conds = {
      le("total-header", "FFA.DESC.HEADER", "48 <= total_len", v.cst(kHeader12, 32), total),
      le("total-spmc", "FFA.SPMC.DESC_TOO_BIG", "total_len <= " + std::to_string(kMaxDescBytes) +
         " (the largest descriptor the SPMC reassembles)", total, v.cst(kMaxDescBytes, 32)),
      le("frag-header", "FFA.DESC.HEADER", "48 <= frag_len (header in the first fragment)", v.cst(kHeader12, 32),
         frag),
      le("frag-total", "FFA.PROXY.MEM_ARGS", "frag_len <= total_len", frag, total),
      le("frag-mbox", "FFA.PROXY.MEM_ARGS", "frag_len <= mailbox size", frag, v.cst(tx, 32)),
      ne("ep-count-nonzero", "FFA.DESC.EP_COUNT", "ep_count >= 1", ep_count, zero),
      le("ep-count-max", "FFA.DESC.EP_COUNT", "ep_count <= 4", ep_count, v.cst(4, 32)),
      le("ep-count-known", "FFA.DESC.RECEIVER", "ep_count <= 2 (the SPMC knows SP1 and SP2 only)", ep_count,
         v.cst(2, 32)),
      le("ep-size-min", "FFA.DESC.EP_MEM_SIZE", "ep_size >= 16", v.cst(16, 32), ep_size),
      aligned("ep-size-align", "FFA.DESC.EP_MEM_SIZE", "ep_size % 16 == 0", ep_size, 16),
      may_succeed(le("ep-size-version", "FFA.DESC.EP_MEM_SIZE",
                     "ep_size <= 32 (v1.2's or v1.1's; a later version's may be taken or refused)", ep_size,
                     v.cst(kEmad12, 32), 16)),
      le("ep-off-header", "FFA.DESC.EP_MEM_OFFSET", "ep_off >= 48", v.cst(kHeader12, 32), ep_off),
      aligned("ep-off-align", "FFA.DESC.EP_MEM_OFFSET", "ep_off % 16 == 0", ep_off, 16),
      le("ep-end-frag", "FFA.DESC.EP_MEM_OFFSET", "ep_off + ep_count*ep_size <= frag_len", ep_end, frag, 1, true),
      ne("comp-nonzero", "FFA.DESC.COMPOSITE_OFFSET", "comp_off != 0", comp, zero),
      aligned("comp-align", "FFA.DESC.COMPOSITE_OFFSET", "comp_off % 16 == 0", comp, 16),
      le("comp-after-eps", "FFA.DESC.COMPOSITE_OFFSET", "ep_off + ep_count*ep_size <= comp_off", ep_end, comp, 1,
         true),
      le("comp-in-frag", "FFA.DESC.COMPOSITE_OFFSET", "comp_off + 16 <= frag_len", comp_end, frag, 1, true),
      ne("range-count-nonzero", "FFA.DESC.RANGE_COUNT", "range_count >= 1", ranges, zero),
      le("range-count-max", "FFA.DESC.RANGE_COUNT",
         "range_count <= " + std::to_string(kMaxRanges) + " (the constituents a transaction may hold)", ranges,
         v.cst(kMaxRanges, 32)),
      le("ranges-fit", "FFA.DESC.RANGE_COUNT", "comp_off + 16 + 16*range_count <= total_len", desc_end, total,
         16, true),
      eq("length", "FFA.DESC.LENGTH", "comp_off + 16 + 16*range_count == total_len", desc_end, total, true),
      le("ranges-written", "FFA.DESC.PAGE_COUNT",
         "range_count <= " + std::to_string(kDescRanges) + " (later constituents: a host page, 0 pages)", ranges,
         v.cst(kDescRanges, 32)),
      eq("total-pages", "FFA.DESC.TOTAL_PAGES", "total_pages == sum of the constituents' pages", pages, sum),
      custom("frag-whole", "FFA.PROXY.FRAGMENT",
             "frag_len == total_len, or the first fragment ends on a constituent boundary",
             frag.wide == total.wide ||
                 (z3::ule(comp_end.wide, frag.wide) &&
                  z3::urem(frag.wide - comp_end.wide, v.wide(16)) == v.wide(0))),
  };
  // A composite that overlaps the endpoint array (comp-after-eps broken)
  // starts 16 bytes before its end, in a v1.2 (32-byte) or larger EMAD: its
  // fields then fall on the last EMAD's implementation-defined bytes and
  // reserved field (zero in both), so the descriptor breaks the overlap
  // alone, not a reserved field or the receiver as well.
  // The canonical v1.2 endpoint descriptor size wherever a case can keep it
  // (16, v1.1's, is as valid: DESC:EP-MEM-SIZE), and a rest of the
  // descriptor that one FFA_MEM_FRAG_TX carries (build() sends no second
  // fragment otherwise, and the send stays in flight).
  f.prefer = {ep_size.wide == v.wide(kEmad12), z3::ule(total.wide, frag.wide + v.wide(tx))};
  f.context = {z3::ule(ep_end.wide, comp.wide) ||
               (comp.wide + v.wide(16) == ep_end.wide && z3::ule(v.wide(kEmad12), ep_size.wide))};
  f.build = [page, tx, lend](const Solution& s) {
    // The whole descriptor image, as far as the TX buffer can ever show it.
    const uint64_t total = s["total_len"], frag = s["frag_len"];
    uint64_t extent = std::max<uint64_t>({kHeader12, total, s["comp_off"] + 16 + 32,
                                          s["ep_off"] + 4 * std::min<uint64_t>(s["ep_size"], 64)});
    std::vector<uint8_t> img(std::min<uint64_t>(extent, 2 * tx), 0);
    // A lend (to one borrower) gives no memory attributes (DESC:ATTRS); a
    // share gives Normal write-back inner shareable.
    put(img, 2, lend ? 0 : kAttrNormalWbInner, 2);
    put(img, 24, s["ep_size"], 4);
    put(img, 28, s["ep_count"], 4);
    put(img, 32, s["ep_off"], 4);
    const uint64_t stride = s["ep_size"] >= 16 ? s["ep_size"] : kEmad12;
    for (uint64_t i = 0; i < std::min<uint64_t>(s["ep_count"], 4); ++i) {
      const uint64_t e = s["ep_off"] + i * stride;
      put(img, e, 0x8001 + i, 2);
      put(img, e + 2, kPermDataRw, 1);
      put(img, e + 4, s["comp_off"], 4);
    }
    const uint64_t c = s["comp_off"];
    put(img, c, s["total_pages"], 4);
    put(img, c + 4, s["range_count"], 4);
    for (uint64_t i = 0; i < std::min<uint64_t>(s["range_count"], kDescRanges); ++i) {
      put(img, c + 16 + 16 * i, desc_range(i), 8);
      put(img, c + 16 + 16 * i + 8, kDescRangePages, 4);
    }
    // Later constituents: a host page no constituent shares, 0 pages (so
    // only their page count is wrong).
    for (uint64_t i = kDescRanges; i < s["range_count"] && c + 16 + 16 * i < img.size(); ++i)
      put(img, c + 16 + 16 * i, kSpareHostPage, 8);
    Scenario sc = prelude(page);
    const uint64_t first = std::min<uint64_t>({frag, tx, img.size()});
    if (first) add_op(sc, "tx_write", {{"offset", 0}}, {{"data", {img.begin(), img.begin() + first}}});
    add_op(sc, lend ? "mem_lend" : "mem_share", {{"total_len", total}, {"frag_len", frag}});
    if (frag < total && frag <= img.size() && total - frag <= tx) {
      const uint64_t rest = total - frag;
      const uint64_t have = std::min<uint64_t>(rest, img.size() - frag);
      if (have) add_op(sc, "tx_write", {{"offset", 0}}, {{"data", {img.begin() + frag, img.begin() + frag + have}}});
      add_op(sc, "mem_frag_tx", {{"handle", 0}, {"frag_len", rest}});
    }
    add_op(sc, "mem_reclaim", {{"handle", 0}});
    return sc;
  };
  return f;
}

}  // namespace

std::vector<Function> ffa_functions(Vocab& v, const GenConfig& cfg) {
  std::vector<Function> out;
  for (uint64_t page : cfg.ffa_pages) {
    out.push_back(reclaim2(v, page));
    out.push_back(share_desc(v, page, false));
    out.push_back(share_desc(v, page, true));
  }
  return out;
}

}  // namespace kconform::gen
