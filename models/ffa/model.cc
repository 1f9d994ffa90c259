// The FF-A model: turns scenario ops into host calls or scenario actions,
// asks the proxy model once per call for every allowed outcome (a Plan, on the
// const world), and on commit applies the effect of the outcome the target
// produced (SPEC.md HARNESS:*); after a violation adopt() applies the effect
// whose state the target reached, if any.
#include "models/ffa/model.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "harness/scenario/ffa_abi.h"
#include "models/common/dirty_pages.h"
#include "models/ffa/desc.h"
#include "models/ffa/harness_ram.h"
#include "models/ffa/plan.h"
#include "models/ffa/scenario_ops.h"

namespace kconform::ffa {
namespace {

class FfaModel final : public Model {
 public:
  explicit FfaModel(const ProxyProfile& p)
      : profile_(p), world_(std::make_unique<World>()), plan_(std::make_unique<Plan>()),
        sp_answer_(std::make_unique<SpmcAnswer>()) {}

  void begin(const Scenario&) override {
    if (h_.mem.size() == profile_.ram_bytes() && world_snap_) {
      // h_.begin() below zeroes the pages the last scenario wrote (World::at, Spmc::phys_mut, host_fill, tx_*).
      // The world as reset() left it the first time: the proxy's state, and of
      // the SPMC only what the last scenario changed (Spmc::restore).
      // Of the proxy's state: the host pages' views (apply_effect writes no
      // other), the fields between, and the fragment constituents as far as
      // any fragmented send of the last scenarios reached (frag_high_).
      static_assert(std::is_trivially_copyable_v<ProxyState>);
      static_assert(offsetof(ProxyState, view) == 0 &&
                    offsetof(ProxyState, frag_ranges) + sizeof(ProxyState::frag_ranges) == sizeof(ProxyState));
      ProxyState& d = world_->proxy;
      const ProxyState& from = world_snap_->proxy;
      std::memcpy(d.view, from.view, profile_.host_pages);
      auto* db = reinterpret_cast<uint8_t*>(&d);
      const auto* fb = reinterpret_cast<const uint8_t*>(&from);
      std::memcpy(db + sizeof d.view, fb + sizeof d.view, offsetof(ProxyState, frag_ranges) - sizeof d.view);
      std::memcpy(d.frag_ranges, from.frag_ranges, frag_high_ * sizeof(Constituent));
      frag_high_ = 0;
      if (!skip_spmc_restore_) world_->spmc.restore(world_snap_->spmc);
    } else {
      h_.allocate(profile_);
      world_->reset(profile_, h_.mem);
      world_->dirty = &h_.dirty;
      world_->spmc.set_dirty(&h_.dirty);
      world_->spmc.mark_clean();
      world_snap_ = std::make_unique<World>(*world_);
    }
    h_.begin(skip_ram_restore_);
    planned_ = {};
    pre_known_ = false;
  }

  void expect(const Scenario& s, size_t i, Expectation& out) override {
    out.clear();
    allowed_.clear();
    effects_.clear();
    planned_ = {&s, i};
    const Op& op = s.ops[i];
    // A harness op changes nothing the digest covers (the host page views and
    // the SPMC's table): after one, the digest is still the one it began with;
    // after a host call, the one expect() predicted for the effect commit() took.
    const uint64_t pre = pre_known_ ? pre_ : world_->digest();
    pre_ = pre;
    n_post_ = 0;
    switch (op.code) {
      case kOpTxWrite:
      case kOpTxMemDesc:
      case kOpTxConstituents: {
        // HARNESS:TX: the bytes written, no FF-A state change.
        Allowed a = Allowed::ok(kFfaHarnessTxWrite, static_cast<int64_t>(h_.tx_length(profile_, s, op)));
        a.check_state = !profile_.state_hidden;
        a.state = pre;
        push(out, a, kUnchanged);
        out.hits.push_back({kFfaHarnessTxWrite, false});
        return;
      }
      case kOpEl3Misbehave: {
        // HARNESS:EL3: arms a fault, changes nothing the digest sees.
        Allowed a = Allowed::ok(kFfaHarnessEl3Knob, 0);
        a.check_state = !profile_.state_hidden;
        a.state = pre;
        push(out, a, kUnchanged);
        out.hits.push_back({kFfaHarnessEl3Knob, false});
        return;
      }
      case kOpHostFill:
      case kOpHostCount: {
        // HARNESS:HOST-MEM: bytes written, or bytes equal to value; no FF-A state change.
        const uint64_t v = h_.host_mem_result(profile_, op);
        // host_count judges the contents: SPMC:RECLAIM-ZERO says what they are.
        const RuleId rule = op.code == kOpHostCount ? kFfaSpmcReclaimZero : kFfaHarnessHostMem;
        Allowed a = Allowed::ok(rule, static_cast<int64_t>(v));
        a.check_state = !profile_.state_hidden;
        a.state = pre;
        push(out, a, kUnchanged);
        out.hits.push_back({kFfaHarnessHostMem, false});
        if (op.code == kOpHostCount) out.hits.push_back({kFfaSpmcReclaimZero, false});
        return;
      }
      case kOpEl3Profile: {
        // PROFILE:PERMISSIVE-EL3: the SPMC's profile, changes nothing the digest sees.
        Allowed a = Allowed::ok(kFfaProfilePermissiveEl3, 0);
        a.check_state = !profile_.state_hidden;
        a.state = pre;
        push(out, a, kUnchanged);
        out.hits.push_back({kFfaProfilePermissiveEl3, false});
        return;
      }
      case kOpSpRetrieve:
      case kOpSpRelinquish: {
        // HARNESS:SP: the SPMC's answer to the borrower, and its state after.
        SpmcAnswer& ans = *sp_answer_;
        world_->spmc.answer_sp(op.code == kOpSpRetrieve, handle(op.args[0]), static_cast<uint16_t>(op.args[1]), ans);
        Allowed a = Allowed::ok(kFfaHarnessSpOp, is_success(ans.out) ? 0 : error_code(ans.out));
        a.regs_mask = kX0 | kX2;
        a.regs[0] = ans.out[0];
        a.regs[2] = ans.out[2];
        a.check_state = !profile_.state_hidden;
        a.state = world_->digest({ans.slot, &ans.tx});
        push(out, a, 0);
        out.hits.push_back({kFfaHarnessSpOp, false});
        slot_hit(h_, op, out);
        return;
      }
      default:
        break;
    }
    if (op.code >= kOpCount) {
      out.note = "unknown ffa op code " + std::to_string(op.code);
      return;
    }
    slot_hit(h_, op, out);
    uint64_t in[kCallRegs];
    host_regs(op, in);
    const Plan& plan = *plan_;
    const Fault armed = world_->spmc.armed();
    expect_call(*world_, in, *plan_);
    // HARNESS:EL3: the call consumed the armed fault (or is judged by the
    // rule that exists for EL3's faults): robustness, not conformance.
    out.robustness = armed != Fault::kNone && plan.el3_armed() != armed;
    for (uint32_t r = 0; r < kCallRegs; ++r) in_[r] = in[r];
    n_post_ = plan.n_effects();
    for (uint32_t v = 0; v < n_post_; ++v) post_[v] = digest_after(*world_, plan, v);
    for (uint32_t k = 0; k < plan.n_alts(); ++k) {
      const Alt& alt = plan.alt(k);
      Allowed a = Allowed::ok(alt.rule, 0);
      a.regs_mask = alt.mask;
      // SPMC:HANDLE-SPEC: a real EL3 picks a new transaction's handle; the
      // model's stays in regs (commit renames it to the target's).
      if (profile_.real_el3) a.regs_mask &= static_cast<uint8_t>(~new_handle_regs(in, alt.regs));
      for (uint32_t r = 0; r < kCallRegs; ++r) a.regs[r] = alt.regs[r];
      a.check_state = !profile_.state_hidden;
      a.state = alt.effect == kUnchanged ? pre : post_[alt.effect];
      push(out, a, alt.effect);
    }
    merge_hits(plan.hits, out);
    for (uint32_t k = 0; k < plan.hits.size(); ++k)
      if (plan.hits[k].rule == kFfaProxyEl3Fault) out.robustness = true;
  }

  void commit(const Scenario& s, size_t i, const Outcome& observed) override {
    const Op& op = s.ops[i];
    // pre_ stays the digest after a harness op whose expect() computed it.
    const bool planned = planned_.s == &s && planned_.i == i;
    pre_known_ = false;
    switch (op.code) {
      case kOpTxWrite:
      case kOpTxMemDesc:
      case kOpTxConstituents:
        h_.tx_write(profile_, s, op);
        pre_known_ = planned;
        return;
      case kOpEl3Misbehave:
        world_->spmc.arm(static_cast<Fault>(op.args[0]), op.args[1]);
        pre_known_ = planned;
        return;
      case kOpEl3Profile:
        world_->spmc.set_permissive(op.args[0] != 0);
        pre_known_ = planned;
        return;
      case kOpHostFill:
        h_.host_fill(profile_, op);
        pre_known_ = planned;
        return;
      case kOpHostCount:
        pre_known_ = planned;
        return;
      case kOpSpRetrieve:
      case kOpSpRelinquish: {
        uint64_t r[kNumRegs];
        const uint16_t sp = static_cast<uint16_t>(op.args[1]);
        if (op.code == kOpSpRetrieve)
          world_->spmc.sp_retrieve(handle(op.args[0]), sp, r);
        else
          world_->spmc.sp_relinquish(handle(op.args[0]), sp, r);
        return;
      }
      default:
        break;
    }
    if (op.code >= kOpCount) return;
    if (op.code == kOpRxtxMap) {  // HARNESS:TX: whatever the outcome
      h_.mapped(op);
    }
    // The plan of this op (expect() made it; a caller that skipped expect()
    // gets it made now), and the first allowed outcome the target's matches.
    if (planned_.s != &s || planned_.i != i) {
      Expectation e;
      expect(s, i, e);
    }
    int8_t effect = kUnchanged;
    for (size_t k = 0; k < allowed_.size(); ++k)
      if (allowed_[k].admits(observed)) {
        effect = effects_[k];
        break;
      }
    const uint64_t next = effect == kUnchanged ? pre_ : post_[effect];
    const uint64_t renamed = take(op, observed, effect);
    // The world's digest now is the one expect() gave this effect (what
    // FfaModel.CommitReachesTheStateExpectPredicted shows, with this off),
    // unless a real EL3's handle renamed the transaction: the next op's "before".
    if (reuse_digest_ && renamed == kInvalidHandle) {
      pre_ = next;
      pre_known_ = true;
    }
  }

  // After a violation (models/model.h): the model goes on from the target's
  // state when it is one the model can reach from here. A host call: the
  // state before the call (a refusal that changed nothing) or the one an
  // effect of its plan leaves; that effect is taken as commit() takes it
  // (HARNESS:TX, HARNESS:SLOTS, the SPMC's handle with a real EL3). A harness
  // op: the state the model expects (a borrower's op also: the state before,
  // it refused). Otherwise the model has lost track of the target.
  bool adopt(const Scenario& s, size_t i, const Outcome& observed, std::string* note) override {
    const Op& op = s.ops[i];
    pre_known_ = false;
    if (op.code >= kOpCount) {
      *note = "unknown ffa op code " + std::to_string(op.code);
      return false;
    }
    if (planned_.s != &s || planned_.i != i) {
      Expectation e;
      expect(s, i, e);
    }
    if (observed.kind != Outcome::Kind::kOk) {
      planned_ = {};
      *note = "the op returned no result (" + to_string(observed) + "): the model cannot say what it changed";
      return false;
    }
    if (profile_.state_hidden) return adopt_hidden(s, i, op, observed, note);
    if (is_harness_op(op.code)) {
      for (const Allowed& a : allowed_)
        if (a.state == observed.state) {
          commit(s, i, observed);
          *note = "the target's state is the one the model expects: the harness op's effect";
          return true;
        }
      if ((op.code == kOpSpRetrieve || op.code == kOpSpRelinquish) && observed.state == pre_) {
        planned_ = {};
        *note = "the borrower's op changed nothing: the model keeps its state";
        return true;
      }
      planned_ = {};
      *note = "the target's state matches none of the model's outcomes";
      return false;
    }
    if (op.code == kOpRxtxMap) {  // HARNESS:TX: whatever the outcome
      h_.mapped(op);
    }
    // The candidates in a fixed order: a refusal first as the state before
    // the call (FF-A: a failed call has no effect), anything else first as
    // the plan's effects in order.
    const bool refused = fid_of(observed.regs.data()) == kFnError;
    int8_t order[kMaxVariants + 1];
    uint32_t n = 0;
    if (refused) order[n++] = kUnchanged;
    for (uint32_t v = 0; v < n_post_; ++v) order[n++] = static_cast<int8_t>(v);
    if (!refused) order[n++] = kUnchanged;
    for (uint32_t k = 0; k < n; ++k) {
      const int8_t effect = order[k];
      if ((effect == kUnchanged ? pre_ : post_[effect]) != observed.state) continue;
      const uint64_t renamed = take(op, observed, effect);
      if (effect == kUnchanged) {
        *note = "the target's state is the one before the call: the model keeps its state";
      } else {
        *note = "the target's state is the one the model's effect " + std::to_string(effect) +
                " leaves: the model takes that effect";
        if (renamed != kInvalidHandle) *note += " (with the SPMC's handle " + hex(renamed) + ")";
      }
      return true;
    }
    planned_ = {};
    *note = "the target's state matches none of the model's outcomes";
    return false;
  }

 private:
  // adopt() when the target's state is hidden (ProxyProfile::state_hidden): a
  // refused host call changed nothing (FF-A), so the model keeps its state;
  // anything else may have changed what the model cannot see.
  bool adopt_hidden(const Scenario& s, size_t i, const Op& op, const Outcome& observed, std::string* note) {
    if (is_harness_op(op.code) && op.code != kOpSpRetrieve && op.code != kOpSpRelinquish) {
      commit(s, i, observed);  // changes no FF-A state: the model's bytes are written as the op says
      *note = "a harness op changes no FF-A state: the model takes its effect";
      return true;
    }
    if (!is_harness_op(op.code) && fid_of(observed.regs.data()) == kFnError) {
      if (op.code == kOpRxtxMap) h_.mapped(op);  // HARNESS:TX: whatever the outcome
      take(op, observed, kUnchanged);
      *note = "the call was refused (FFA_ERROR) and the target's state is hidden: the model keeps its state";
      return true;
    }
    planned_ = {};
    *note = "the target's state is hidden and the op did not fail: the model cannot say what it changed";
    return false;
  }

  static bool is_harness_op(uint8_t code) {
    switch (code) {
      case kOpTxWrite:
      case kOpTxMemDesc:
      case kOpTxConstituents:
      case kOpEl3Misbehave:
      case kOpEl3Profile:
      case kOpHostFill:
      case kOpHostCount:
      case kOpSpRetrieve:
      case kOpSpRelinquish:
        return true;
      default:
        return false;
    }
  }

  static std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
    return b;
  }

  // Makes effect (kUnchanged: none) of the planned host call op so, for the
  // outcome the target produced, then fills a producer's slot with the
  // handle the target returned (HARNESS:SLOTS). Returns the handle the new
  // transaction took from the target (kInvalidHandle: none).
  uint64_t take(const Op& op, const Outcome& observed, int8_t effect) {
    uint64_t renamed = kInvalidHandle;
    if (effect != kUnchanged) {
      apply_effect(*world_, *plan_, static_cast<uint32_t>(effect));
      // apply_effect writes frag_ranges below frag.n only.
      if (world_->proxy.frag.n > frag_high_) frag_high_ = world_->proxy.frag.n;
      if (profile_.real_el3) renamed = take_handle(effect, observed);
    }
    planned_ = {};
    if (is_producer(op.code)) h_.handles.push_back(produced_handle(observed.regs.data()));
    return renamed;
  }

  // SPMC:HANDLE-SPEC with a real EL3: the transaction effect made carries
  // the model's handle; when the target's reply gave it another, the model
  // takes that one (at EL3 and as the proxy's send in flight). Returns it,
  // or kInvalidHandle if nothing was renamed.
  uint64_t take_handle(int8_t effect, const Outcome& observed) {
    const uint64_t* reply = observed.regs.data();
    if (!new_handle_regs(in_, reply)) return kInvalidHandle;
    uint64_t mine = kInvalidHandle;
    for (size_t k = 0; k < allowed_.size() && mine == kInvalidHandle; ++k)
      if (effects_[k] == effect && new_handle_regs(in_, allowed_[k].regs.data()))
        mine = produced_handle(allowed_[k].regs.data());
    const uint64_t theirs = produced_handle(reply);
    if (mine == kInvalidHandle || theirs == kInvalidHandle || mine == theirs) return kInvalidHandle;
    if (!world_->spmc.rename_handle(mine, theirs)) return kInvalidHandle;
    if (world_->proxy.frag.handle == mine) world_->proxy.frag.handle = theirs;
    return theirs;
  }

  // Lists a, unless an equal outcome is listed already; effect: which of the
  // plan's effects taking it applies.
  void push(Expectation& out, const Allowed& a, int8_t effect) {
    for (const Allowed& b : out.allowed)
      if (b.kind == a.kind && b.lo == a.lo && b.hi == a.hi && b.regs_mask == a.regs_mask &&
          same_regs(b.regs, a.regs) && b.state == a.state && b.rule == a.rule)
        return;
    out.allowed.push_back(a);
    allowed_.push_back(a);
    effects_.push_back(effect);
  }

  uint64_t handle(uint64_t slot) const { return h_.handle(slot); }

  void host_regs(const Op& op, uint64_t in[kCallRegs]) const { h_.host_regs(op, in); }

  ProxyProfile profile_;
  HarnessRam h_;  // the RAM and the harness fields (HARNESS:SLOTS, HARNESS:TX)
  std::unique_ptr<World> world_;
  std::unique_ptr<Plan> plan_;
  std::unique_ptr<SpmcAnswer> sp_answer_;
  std::unique_ptr<World> world_snap_;  // the world right after the first reset()
  uint32_t frag_high_ = 0;             // proxy.frag.n's highest since the last begin()
  // Of the op expect() last planned: the state before it, of a host call its
  // registers and the state each effect of its plan leaves (adopt).
  uint64_t pre_ = 0;
  bool pre_known_ = false;  // pre_ is the world's digest now (after commit())
  uint64_t in_[kCallRegs] = {};
  uint64_t post_[kMaxVariants] = {};
  uint32_t n_post_ = 0;

 public:
  bool skip_spmc_restore_ = false;  // tests only
  bool skip_ram_restore_ = false;   // tests only
  bool reuse_digest_ = true;        // tests turn it off (set_model_digest_reuse)
  std::vector<uint8_t> state_bytes() const {
    std::vector<uint8_t> b(h_.mem.begin(), h_.mem.end());
    auto put = [&b](const void* p, size_t n) {
      const uint8_t* c = static_cast<const uint8_t*>(p);
      b.insert(b.end(), c, c + n);
    };
    put(&world_->proxy, sizeof world_->proxy);
    const std::vector<uint8_t> s = world_->spmc.bytes();
    b.insert(b.end(), s.begin(), s.end());
    h_.append_bytes(b);
    return b;
  }
  // The op expect() last planned, its allowed outcomes and their effects.
  struct Planned {
    const Scenario* s = nullptr;
    size_t i = 0;
  } planned_;
  std::vector<Allowed> allowed_;
  std::vector<int8_t> effects_;
};

}  // namespace

std::unique_ptr<Model> make_model(const ProxyProfile& profile) { return std::make_unique<FfaModel>(profile); }

std::vector<uint8_t> model_state_bytes(const Model& model) {
  return static_cast<const FfaModel&>(model).state_bytes();
}
void set_model_restore_skip_spmc(Model& model, bool skip) { static_cast<FfaModel&>(model).skip_spmc_restore_ = skip; }
void set_model_restore_skip_ram(Model& model, bool skip) { static_cast<FfaModel&>(model).skip_ram_restore_ = skip; }
void set_model_digest_reuse(Model& model, bool reuse) { static_cast<FfaModel&>(model).reuse_digest_ = reuse; }

std::string profile_name(const ProxyProfile& p) {
  return "ffa-" + std::to_string(p.page_size / 1024) + "k" + (p.reclaim2 ? "-reclaim2" : "") +
         (p.real_el3 ? "-real-el3" : "") + (p.state_hidden ? "-regs-only" : "");
}

}  // namespace kconform::ffa
