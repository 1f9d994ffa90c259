// The FF-A model: turns scenario ops into host calls or harness actions, asks
// the proxy model for every allowed outcome (one world copy per variant), and
// applies the variant the target's outcome matches (SPEC.md HARNESS:*).
#include "models/ffa/model.h"

#include <vector>

#include "harness/scenario/ffa_abi.h"
#include "models/ffa/desc.h"
#include "models/ffa/harness_ops.h"

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
            rh.forbidden |= h.forbidden;
            seen = true;
          }
        if (!seen) out.hits.push_back({h.rule, h.forbidden});
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
    if (is_producer(op.code)) handles_.push_back(produced_handle(observed.regs.data()));
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

  uint64_t handle(uint64_t slot) const { return slot_handle(handles_, slot); }

  void host_regs(const Op& op, uint64_t in[8]) const { ffa::host_regs(op, handles_, last_desc_len_, in); }

  // Writes a tx_* op's bytes into the host TX window of mem; returns how many
  // (HARNESS:TX, harness_ops.h).
  uint64_t tx_op(const Scenario& s, const Op& op, std::vector<uint8_t>& mem, uint64_t* desc_len) const {
    const TxWrite w = tx_bytes(s, op);
    if (w.is_desc && desc_len) *desc_len = w.desc_len;
    const uint64_t len = tx_clip(profile_, tx_known_, tx_window_, w.offset, w.bytes.size());
    if (len == 0) return 0;  // nothing lands: do not form a pointer out of bounds
    uint8_t* dst = mem.data() + (tx_window_ - profile_.phys_base) + w.offset;
    for (uint64_t k = 0; k < len; ++k) dst[k] = w.bytes[k];
    return len;
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
