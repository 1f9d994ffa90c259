// The FF-A model: turns scenario ops into host calls or harness actions, asks
// the proxy model for every allowed outcome (one world copy per variant), and
// applies the variant the target's outcome matches (SPEC.md HARNESS:*).
#include "models/ffa/model.h"

#include <vector>

#include "harness/scenario/ffa_abi.h"
#include "models/ffa/desc.h"

namespace kconform::ffa {
namespace {

struct Choice {
  uint32_t variant = 0;
  bool unchanged = true;
};

class FfaModel final : public Model {
 public:
  explicit FfaModel(const ProxyProfile& p) : profile_(p), world_(std::make_unique<World>()) {}

  void begin(const Scenario&) override {
    mem_.assign(profile_.ram_bytes(), 0);
    world_->reset(profile_, mem_);
    handles_.clear();
    last_desc_len_ = 0;
    tx_window_ = 0;
    tx_known_ = false;
  }

  void expect(const Scenario& s, size_t i, Expectation& out) override {
    out.clear();
    choices_.clear();
    const Op& op = s.ops[i];
    const uint64_t pre = world_->digest();
    switch (op.code) {
      case kOpTxWrite:
      case kOpTxMemDesc:
      case kOpTxConstituents: {
        std::vector<uint8_t> copy = mem_;
        const uint64_t n = tx_op(s, op, copy, nullptr);
        Allowed a = Allowed::ok(kFfaHarnessTxWrite, static_cast<int64_t>(n));
        a.check_state = true;
        a.state = pre;
        push(out, a, {});
        out.hits.push_back({kFfaHarnessTxWrite, false});
        return;
      }
      case kOpEl3Misbehave: {
        Allowed a = Allowed::ok(kFfaHarnessEl3Knob, 0);
        a.check_state = true;
        a.state = pre;
        push(out, a, {});
        out.hits.push_back({kFfaHarnessEl3Knob, false});
        return;
      }
      case kOpSpRetrieve:
      case kOpSpRelinquish: {
        Sandbox sb(*this);
        uint64_t r[kNumRegs];
        sp_op(*sb.w, op, r);
        Allowed a = Allowed::ok(kFfaHarnessSpOp, is_success(r) ? 0 : error_code(r));
        a.regs_mask = 0b101;
        a.regs[0] = r[0];
        a.regs[2] = r[2];
        a.check_state = true;
        a.state = sb.w->digest();
        push(out, a, {0, false});
        out.hits.push_back({kFfaHarnessSpOp, false});
        out.hits.push_back({kFfaHarnessSlots, handle(op.args[0]) == kInvalidHandle});
        return;
      }
      default:
        break;
    }
    if (op.code >= kOpCount) {
      out.note = "unknown ffa op code " + std::to_string(op.code);
      return;
    }
    if (op.code == kOpMemFragTx || op.code == kOpMemReclaim || op.code == kOpMemReclaim2)
      out.hits.push_back({kFfaHarnessSlots, handle(op.args[0]) == kInvalidHandle});
    uint64_t in[8];
    host_regs(op, in);
    uint32_t n = 1;
    for (uint32_t v = 0; v < n; ++v) {
      Sandbox sb(*this);
      auto step = std::make_unique<Step>();
      proxy_call(*sb.w, in, v, step.get());
      if (v == 0) n = step->n_variants;
      const uint64_t post = sb.w->digest();
      for (uint32_t k = 0; k < step->n_alts; ++k) {
        const Alt& alt = step->alts[k];
        Allowed a = Allowed::ok(alt.rule, 0);
        a.regs_mask = alt.mask;
        for (int r = 0; r < 8; ++r) a.regs[r] = alt.regs[r];
        a.check_state = true;
        a.state = alt.unchanged ? pre : post;
        push(out, a, {v, alt.unchanged});
      }
      for (uint32_t k = 0; k < step->hits.size(); ++k) {
        const Hit& h = step->hits[k];
        bool seen = false;
        for (RuleHit& rh : out.hits)
          if (rh.rule == h.rule) {
            rh.broken |= h.broken;
            seen = true;
          }
        if (!seen) out.hits.push_back({h.rule, h.broken});
      }
      if (v == 0 && step->hits.text()[0]) out.note = step->hits.text();
    }
  }

  void commit(const Scenario& s, size_t i, const Outcome& observed) override {
    const Op& op = s.ops[i];
    switch (op.code) {
      case kOpTxWrite:
      case kOpTxMemDesc:
      case kOpTxConstituents:
        tx_op(s, op, mem_, &last_desc_len_);
        return;
      case kOpEl3Misbehave:
        world_->spmc.arm(static_cast<Fault>(op.args[0]), op.args[1]);
        return;
      case kOpSpRetrieve:
      case kOpSpRelinquish: {
        uint64_t r[kNumRegs];
        sp_op(*world_, op, r);
        return;
      }
      default:
        break;
    }
    if (op.code >= kOpCount) return;
    if (op.code == kOpRxtxMap) {
      tx_window_ = op.args[0];
      tx_known_ = true;
    }
    uint64_t in[8];
    host_regs(op, in);
    // Apply the first allowed outcome the target's matches.
    const Choice* c = nullptr;
    Expectation e;
    expect(s, i, e);
    for (size_t k = 0; k < e.allowed.size(); ++k)
      if (e.allowed[k].admits(observed)) {
        c = &choices_[k];
        break;
      }
    if (c && !c->unchanged) {
      auto step = std::make_unique<Step>();
      proxy_call(*world_, in, c->variant, step.get());
    }
    if (op.code == kOpMemShare || op.code == kOpMemLend || op.code == kOpMemDonate) {
      uint64_t h = kInvalidHandle;
      const uint64_t x0 = observed.regs[0] & 0xffffffffu;
      if (x0 == kFnSuccess32 || observed.regs[0] == kFnSuccess64)
        h = (observed.regs[2] & 0xffffffffu) | (observed.regs[3] & 0xffffffffu) << 32;
      else if (x0 == kFnMemFragRx)
        h = (observed.regs[1] & 0xffffffffu) | (observed.regs[2] & 0xffffffffu) << 32;
      handles_.push_back(h);
    }
  }

 private:
  // A copy of the world and its memory that expect() may change freely.
  struct Sandbox {
    std::vector<uint8_t> mem;
    std::unique_ptr<World> w;
    explicit Sandbox(const FfaModel& m) : mem(m.mem_), w(std::make_unique<World>(*m.world_)) {
      w->rebind(mem);
    }
  };

  void push(Expectation& out, const Allowed& a, Choice c) {
    for (const Allowed& b : out.allowed)
      if (b.kind == a.kind && b.lo == a.lo && b.hi == a.hi && b.regs_mask == a.regs_mask &&
          b.regs == a.regs && b.state == a.state && b.rule == a.rule)
        return;
    out.allowed.push_back(a);
    choices_.push_back(c);
  }

  uint64_t handle(uint64_t slot) const { return slot < handles_.size() ? handles_[slot] : kInvalidHandle; }

  void host_regs(const Op& op, uint64_t in[8]) const {
    for (int k = 0; k < 8; ++k) in[k] = 0;
    const auto& a = op.args;
    auto conv = [](uint64_t c, uint32_t fid64) { return c == kConvSmc32 ? (fid64 & ~0x40000000u) : fid64; };
    switch (op.code) {
      case kOpVersion: in[0] = kFnVersion, in[1] = a[0]; break;
      case kOpFeatures: in[0] = kFnFeatures, in[1] = a[0], in[2] = a[1]; break;
      case kOpIdGet: in[0] = kFnIdGet; break;
      case kOpPartitionInfo:
        in[0] = kFnPartitionInfoGet;
        for (int k = 0; k < 5; ++k) in[k + 1] = a[k];
        break;
      case kOpRxtxMap: in[0] = conv(a[3], kFnRxtxMap64), in[1] = a[0], in[2] = a[1], in[3] = a[2]; break;
      case kOpRxtxUnmap: in[0] = kFnRxtxUnmap, in[1] = a[0]; break;
      case kOpRxRelease: in[0] = kFnRxRelease, in[1] = a[0]; break;
      case kOpMemShare:
      case kOpMemLend:
      case kOpMemDonate: {
        const uint32_t fid = op.code == kOpMemShare ? kFnMemShare64 : op.code == kOpMemLend ? kFnMemLend64 : kFnMemDonate64;
        in[0] = conv(a[4], fid);
        in[1] = a[0] == kArgAuto ? last_desc_len_ : a[0];
        in[2] = a[1] == kArgAuto ? last_desc_len_ : a[1];
        in[3] = a[2], in[4] = a[3];
        break;
      }
      case kOpMemFragTx: {
        const uint64_t h = handle(a[0]);
        in[0] = kFnMemFragTx, in[1] = h & 0xffffffffu, in[2] = h >> 32, in[3] = a[1], in[4] = a[2] << 16;
        break;
      }
      case kOpMemReclaim: {
        const uint64_t h = handle(a[0]) ^ a[2];
        in[0] = kFnMemReclaim, in[1] = h & 0xffffffffu, in[2] = h >> 32, in[3] = a[1];
        break;
      }
      case kOpMemReclaim2: {
        const uint64_t h = handle(a[0]) ^ a[6];
        in[0] = kFnMemReclaim2, in[1] = h & 0xffffffffu, in[2] = h >> 32;
        in[3] = a[1], in[4] = a[2], in[5] = a[3], in[6] = a[4], in[7] = a[5];
        break;
      }
      case kOpRaw:
        for (int k = 0; k < 8; ++k) in[k] = a[k];
        break;
      default: break;
    }
  }

  static std::vector<Constituent> ranges_of(const std::vector<uint8_t>& blob, uint32_t reserved) {
    std::vector<Constituent> rs;
    for (size_t o = 0; o + kRangeRecordBytes <= blob.size(); o += kRangeRecordBytes) {
      Constituent c;
      get_u64(blob, o, &c.address);
      get_u32(blob, o + 8, &c.pages);
      c.reserved = reserved;
      rs.push_back(c);
    }
    return rs;
  }

  // Writes bytes into the host TX window of mem at offset; returns how many
  // (HARNESS:TX: nothing unless the whole window is host memory).
  uint64_t write_tx(std::vector<uint8_t>& mem, uint64_t offset, const uint8_t* data, uint64_t n) const {
    const uint64_t mbox = profile_.mbox_bytes(), host_end = profile_.phys_base + profile_.host_pages * profile_.page_size;
    if (!tx_known_ || tx_window_ < profile_.phys_base || tx_window_ > host_end || mbox > host_end - tx_window_ ||
        offset >= mbox)
      return 0;
    const uint64_t len = n < mbox - offset ? n : mbox - offset;
    uint8_t* dst = mem.data() + (tx_window_ - profile_.phys_base) + offset;
    for (uint64_t k = 0; k < len; ++k) dst[k] = data[k];
    return len;
  }

  uint64_t tx_op(const Scenario& s, const Op& op, std::vector<uint8_t>& mem, uint64_t* desc_len) const {
    const auto& a = op.args;
    switch (op.code) {
      case kOpTxWrite: {
        const auto& blob = s.blobs[a[1]];
        return write_tx(mem, a[0], blob.data(), blob.size());
      }
      case kOpTxConstituents: {
        std::vector<Constituent> rs = ranges_of(s.blobs[a[1]], static_cast<uint32_t>(a[2]));
        std::vector<uint8_t> bytes(rs.size() * kConstituentSize);
        build_constituents(rs.data(), static_cast<uint32_t>(rs.size()), bytes);
        return write_tx(mem, a[0], bytes.data(), bytes.size());
      }
      default: {  // kOpTxMemDesc
        std::vector<Constituent> rs = ranges_of(s.blobs[a[9]], 0);
        DescSpec d;
        d.layout = static_cast<Layout>(a[0] > 2 ? 2 : a[0]);
        d.sender = static_cast<uint16_t>(a[1]);
        d.receivers[0] = {static_cast<uint16_t>(a[2]), static_cast<uint8_t>(a[3]), 0, 0, 0};
        d.n_receivers = 1;
        if (a[4] != kNoReceiver) {
          d.receivers[1] = {static_cast<uint16_t>(a[4]), static_cast<uint8_t>(a[5]), 0, 0, 0};
          d.n_receivers = 2;
        }
        d.attributes = static_cast<uint16_t>(a[6]);
        d.flags = static_cast<uint32_t>(a[7]);
        d.tag = a[8];
        d.n_ranges = static_cast<uint32_t>(rs.size());
        d.ranges = rs.data();
        d.total_pages = a[10], d.composite_off = a[11], d.ep_count = a[12], d.range_count = a[13];
        d.ep_mem_size = a[14];
        const uint64_t size = region_size(d);
        if (size > (1u << 20)) return 0;  // HARNESS:TX: larger than any mailbox
        std::vector<uint8_t> bytes(size);
        build_region(d, bytes);
        if (desc_len) *desc_len = size;
        return write_tx(mem, a[15], bytes.data(), bytes.size());
      }
    }
  }

  void sp_op(World& w, const Op& op, uint64_t r[kNumRegs]) const {
    const uint64_t h = handle(op.args[0]);
    if (op.code == kOpSpRetrieve)
      w.spmc.sp_retrieve(h, static_cast<uint16_t>(op.args[1]), r);
    else
      w.spmc.sp_relinquish(h, static_cast<uint16_t>(op.args[1]), r);
  }

  ProxyProfile profile_;
  std::vector<uint8_t> mem_;
  std::unique_ptr<World> world_;
  std::vector<uint64_t> handles_;
  uint64_t last_desc_len_ = 0;
  uint64_t tx_window_ = 0;
  bool tx_known_ = false;
  std::vector<Choice> choices_;
};

}  // namespace

std::unique_ptr<Model> make_model(const ProxyProfile& profile) { return std::make_unique<FfaModel>(profile); }

std::string profile_name(const ProxyProfile& p) {
  return "ffa-" + std::to_string(p.page_size / 1024) + "k" + (p.reclaim2 ? "-reclaim2" : "");
}

}  // namespace kconform::ffa
