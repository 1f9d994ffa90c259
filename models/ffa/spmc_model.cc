// The SPMC-side model (spmc_model.h): scenario ops straight to the SPMC model.
#include "models/ffa/spmc_model.h"

#include <cstring>
#include <utility>
#include <string>
#include <vector>

#include "harness/scenario/ffa_abi.h"
#include "models/ffa/harness_ram.h"
#include "models/ffa/scenario_ops.h"
#include "models/ffa/spmc_view.h"

namespace kconform::ffa {

uint8_t spmc_result_regs(const uint64_t call[8], const uint64_t reply[8]) {
  const uint32_t call_fid = static_cast<uint32_t>(call[0]);
  const uint32_t r = fid_of(reply);
  if (r == kFnError) return kX0 | kX2;  // FFA_ERROR: w2 the error code
  if (r == kFnMemFragRx) return 0x1f;   // handle w1/w2, offset w3, w4 (sender, v1.1+)
  if (r == kFnMemRetrieveResp) return kX0 | 0x06;  // total and fragment length
  if (r != kFnSuccess32 && reply[0] != kFnSuccess64) return kX0;  // FFA_VERSION: the version in w0
  switch (call_fid & ~kSmc64Bit) {
    case kFnFeatures & ~kSmc64Bit:
      return kX0 | kX2 | 0x08;  // interface properties w2, w3
    case kFnIdGet:
      return kX0 | kX2;
    case kFnPartitionInfoGet:
      // count w2, descriptor size w3; count only (w5 bit 0): w3 not judged
      // (PARTINFO:COUNT; our reading of DEN0077: reserved then, TF-A answers 0).
      return (call[5] & kPartitionInfoCountOnly) ? kX0 | kX2 : kX0 | kX2 | 0x08;
    case kFnMemShare32:
    case kFnMemLend32:
    case kFnMemDonate32:
    case kFnMemFragTx:
      return kX0 | kX2 | 0x08;  // the handle, w2/w3
    case kFnMemReclaim2 & ~kSmc64Bit:
      return kX0 | kX2;  // pages reclaimed
    default:
      return kX0;
  }
}

namespace {

// Whether reply gives a send's new transaction its handle (SPMC:HANDLE-SPEC:
// the SPMC's choice; the target checks what the specification asks of it).
bool new_handle(const uint64_t call[8], const uint64_t reply[8]) { return new_handle_regs(call, reply) != 0; }

// The registers of reply an allowed outcome fixes: its result registers
// (spmc_result_regs) less a new transaction's handle.
uint8_t judged_regs(const uint64_t call[8], const uint64_t reply[8]) {
  return spmc_result_regs(call, reply) & static_cast<uint8_t>(~new_handle_regs(call, reply));
}

// The target refused op: FFA_ERROR, SMC_UNK (w0 = -1: the firmware did not
// take the call), or a borrower's op that failed.
bool refused(const Op& op, const Outcome& observed) {
  if (op.code == kOpSpRetrieve || op.code == kOpSpRelinquish) return observed.value != 0;
  return fid_of(observed.regs.data()) == kFnError || static_cast<uint32_t>(observed.regs[0]) == 0xffffffffu;
}

// The rule that licenses a reply nothing more specific decides.
RuleId call_rule(uint32_t fid) {
  switch (fid & ~kSmc64Bit) {
    case kFnVersion: return kFfaVersionNegotiate;
    case kFnFeatures & ~kSmc64Bit: return kFfaFeaturesConsistent;
    case kFnIdGet: return kFfaIdGet;
    case kFnPartitionInfoGet: return kFfaPartitionInfo;
    case kFnRxtxMap32: return kFfaMboxMapOk;
    case kFnRxtxUnmap: return kFfaMboxUnmap;
    case kFnRxRelease: return kFfaMboxRxRelease;
    case kFnMemReclaim: return kFfaSpmcReclaimHandle;
    case kFnMemReclaim2 & ~kSmc64Bit: return kFfaR2NotImplemented;
    default: return kFfaSpmcAnswer;
  }
}

// The error codes besides the model's own that rule allows for a refusal of
// call fid (the rule's statement lists them; SPEC.md clause in brackets).
std::vector<int32_t> other_codes(RuleId rule, uint32_t fid, const uint64_t reply[8]) {
  if (!is_error(reply)) return {};
  const int32_t mine = error_code(reply);
  std::vector<int32_t> v;
  auto add = [&](int32_t c) {
    if (c != mine) v.push_back(c);
  };
  if (rule == kFfaMboxTxRequired || rule == kFfaDescSender || rule == kFfaDescOverlap) {
    add(kInvalidParameters);  // MBOX:TX-REQUIRED, DESC:SENDER, DESC:OVERLAP: INVALID_PARAMETERS or DENIED
    add(kDenied);
  }
  // MBOX:RX-BUSY: FFA_PARTITION_INFO_GET with no RX mapped: DENIED, INVALID_PARAMETERS or BUSY.
  if ((fid & ~kSmc64Bit) == kFnPartitionInfoGet && mine == kDenied) {
    add(kInvalidParameters);
    add(kBusy);
  }
  return v;
}

class SpmcModel final : public Model {
 public:
  explicit SpmcModel(const ProxyProfile& p)
      : layout_(p), ans_(std::make_unique<SpmcAnswer>()), trust_ans_(std::make_unique<SpmcAnswer>()) {
    h_.allocate(layout_);
    SpmcConfig c = layout_.spmc;
    c.ns_base = layout_.phys_base;
    c.ns_size = layout_.host_pages * layout_.page_size;
    spmc_ = std::make_unique<Spmc>();
    spmc_->reset(c, h_.mem, layout_.phys_base);
    spmc_->set_dirty(&h_.dirty);
    spmc_->mark_clean();
    snap_ = std::make_unique<Spmc>(*spmc_);
  }

  void begin(const Scenario&) override {
    spmc_->restore(*snap_);
    h_.begin();
    planned_ = {};
  }

  void expect(const Scenario& s, size_t i, Expectation& out) override {
    expect_regs(s, i, out);
    // SPMC:TABLE: each allowed outcome leaves the table it says (the model's
    // with the answer's one transaction changed; a refusal or a harness op:
    // the table as it is).
    const uint64_t pre = spmc_view_digest(*spmc_);
    const Op& op = s.ops[i];
    const bool call = op.code < kOpCount && op.code != kOpTxWrite && op.code != kOpTxMemDesc &&
                      op.code != kOpTxConstituents && op.code != kOpEl3Misbehave && op.code != kOpEl3Profile &&
                      op.code != kOpHostFill && op.code != kOpHostCount;
    for (Allowed& a : out.allowed) {
      a.check_state = true;
      a.state = pre;
      if (!call || !have_ans_ || non_ffa_) continue;
      // An allowed refusal where the model's answer succeeds: the table as it is.
      if (a.regs[0] == kFnError && !is_error(ans_->out)) continue;
      const SpmcAnswer& from = (trusting_ && a.rule == kFfaSpmcNsTrust) ? *trust_ans_ : *ans_;
      a.state = spmc_view_digest(*spmc_, {from.slot, &from.tx});
    }
    // SPMC:FRAG: a refused fragment may end the send (the model's choice) or
    // leave it as it was for the sender to go on or reclaim (TF-A's).
    keep_send_ = false;
    if (call && have_ans_ && !non_ffa_ && is_error(ans_->out) && ans_->slot >= 0 && !ans_->tx.live &&
        !spmc_->slot(static_cast<uint32_t>(ans_->slot)).complete) {
      const size_t n = out.allowed.size();
      for (size_t k = 0; k < n; ++k) {
        if (out.allowed[k].state == pre) continue;
        Allowed keep = out.allowed[k];
        keep.state = pre;
        out.allowed.push_back(keep);
      }
      keep_send_ = true;
      keep_pre_ = pre;
    }
  }

  void expect_regs(const Scenario& s, size_t i, Expectation& out) {
    out.clear();
    planned_ = {&s, i};
    have_ans_ = false;
    const Op& op = s.ops[i];
    switch (op.code) {
      case kOpTxWrite:
      case kOpTxMemDesc:
      case kOpTxConstituents:
        out.allowed.push_back(Allowed::ok(kFfaHarnessTxWrite, static_cast<int64_t>(h_.tx_length(layout_, s, op))));
        out.hits.push_back({kFfaHarnessTxWrite, false});
        return;
      case kOpEl3Misbehave:  // nothing to arm: the SPMC under test is EL3 (spmc_model.h)
        out.allowed.push_back(Allowed::ok(kFfaHarnessEl3Knob, 0));
        out.hits.push_back({kFfaHarnessEl3Knob, false});
        return;
      case kOpEl3Profile:
        out.allowed.push_back(Allowed::ok(kFfaProfilePermissiveEl3, 0));
        out.hits.push_back({kFfaProfilePermissiveEl3, false});
        return;
      case kOpHostFill:
      case kOpHostCount: {
        const uint64_t v = h_.host_mem_result(layout_, op);
        const RuleId rule = op.code == kOpHostCount ? kFfaSpmcReclaimZero : kFfaHarnessHostMem;
        out.allowed.push_back(Allowed::ok(rule, static_cast<int64_t>(v)));
        out.hits.push_back({kFfaHarnessHostMem, false});
        if (op.code == kOpHostCount) out.hits.push_back({kFfaSpmcReclaimZero, false});
        return;
      }
      case kOpSpRetrieve:
      case kOpSpRelinquish: {
        spmc_->answer_sp(op.code == kOpSpRetrieve, handle(op.args[0]), static_cast<uint16_t>(op.args[1]), *ans_);
        have_ans_ = true;
        Allowed a = Allowed::ok(kFfaHarnessSpOp, is_success(ans_->out) ? 0 : error_code(ans_->out));
        a.regs_mask = kX0 | kX2;
        a.regs[0] = ans_->out[0];
        a.regs[2] = ans_->out[2];
        out.allowed.push_back(a);
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
    uint64_t in[kNumRegs] = {};
    h_.host_regs(op, in);
    if (!is_ffa_fid(without_hint(in[0]))) {  // SMCCC:HINT
      // SMCCC: a function ID nobody implements is SMC_UNK (w0 = -1); BL31
      // answers it before any SPMC sees it (SPEC.md SPMC:ANSWER).
      Allowed a = Allowed::ok(kFfaSpmcAnswer, 0);
      a.regs_mask = kX0;
      a.regs[0] = 0xffffffffu;
      out.allowed.push_back(a);
      out.hits.push_back({kFfaSpmcAnswer, false});
      non_ffa_ = true;
      return;
    }
    non_ffa_ = false;
    hits_.clear();
    spmc_->answer(in, spmc_->tx_window(), spmc_->session(), *ans_, hits_);
    // SPMC:NS-TRUST: the reply of an SPMC that leaves the hypervisor's checks
    // to it, when it differs.
    trust_hits_.clear();
    spmc_->set_ns_trust(true);
    spmc_->answer(in, spmc_->tx_window(), spmc_->session(), *trust_ans_, trust_hits_);
    spmc_->set_ns_trust(false);
    have_ans_ = true;
    const uint32_t fid = static_cast<uint32_t>(without_hint(in[0]));
    const uint64_t* r = ans_->out;
    // The rule: on an error, the first rule the call broke; else the call's.
    RuleId rule = call_rule(fid);
    if (is_error(r))
      for (uint32_t k = 0; k < hits_.size(); ++k)
        if (hits_[k].forbidden) {
          rule = hits_[k].rule;
          break;
        }
    // Where the rule that refuses lets the SPMC pick among error codes, each.
    for (int32_t code : other_codes(rule, fid, r)) {
      Allowed e = Allowed::ok(rule, 0);
      e.regs_mask = kX0 | kX2;
      e.regs[0] = kFnError;
      e.regs[2] = static_cast<uint32_t>(code);
      out.allowed.push_back(e);
    }
    // Where the specification leaves an SPMC a choice the model does not take
    // (DescLeeway: DESC:EP-MEM-SIZE, DESC:ATTRS, DESC:FLAGS), the other answers.
    for (uint32_t k = 0; k < ans_->leeway.n; ++k) {
      const DescLeeway::Alt& l = ans_->leeway.alt[k];
      if (is_error(r) && error_code(r) == l.code) continue;
      Allowed e = Allowed::ok(l.rule, 0);
      e.regs_mask = kX0 | kX2;
      e.regs[0] = kFnError;
      e.regs[2] = static_cast<uint32_t>(l.code);
      out.allowed.push_back(e);
      out.hits.push_back({l.rule, false});
    }
    // SPMC:RECLAIM: the time-slicing flag may be honoured or refused.
    if ((fid & ~kSmc64Bit) == kFnMemReclaim && is_success(r) && (static_cast<uint32_t>(in[3]) & kReclaimTimeSlice)) {
      Allowed e = Allowed::ok(kFfaSpmcReclaimFlags, 0);
      e.regs_mask = kX0 | kX2;
      e.regs[0] = kFnError;
      e.regs[2] = static_cast<uint32_t>(kInvalidParameters);
      out.allowed.push_back(e);
      out.hits.push_back({kFfaSpmcReclaimFlags, false});
    }
    Allowed a = Allowed::ok(rule, 0);
    a.regs_mask = judged_regs(in, r);
    if (new_handle(in, r)) out.hits.push_back({kFfaSpmcHandle, false});
    for (uint32_t k = 0; k < kCallRegs; ++k) a.regs[k] = r[k];
    out.allowed.push_back(a);
    const uint64_t* t = trust_ans_->out;
    trusting_ = false;
    if (fid_of(t) != fid_of(r) || (is_error(t) && error_code(t) != error_code(r))) {
      Allowed b = Allowed::ok(kFfaSpmcNsTrust, 0);
      b.regs_mask = judged_regs(in, t);
      for (uint32_t k = 0; k < kCallRegs; ++k) b.regs[k] = t[k];
      if (new_handle(in, t)) out.hits.push_back({kFfaSpmcHandle, false});
      out.allowed.push_back(b);
      out.hits.push_back({kFfaSpmcNsTrust, false});
      trust_allowed_ = b;
      trusting_ = true;
    }
    merge_hits(hits_, out);
  }

  void commit(const Scenario& s, size_t i, const Outcome& observed) override {
    const Op& op = s.ops[i];
    switch (op.code) {
      case kOpTxWrite:
      case kOpTxMemDesc:
      case kOpTxConstituents:
        h_.tx_write(layout_, s, op);
        return;
      case kOpEl3Misbehave:
      case kOpEl3Profile:
      case kOpHostCount:
        return;
      case kOpHostFill:
        h_.host_fill(layout_, op);
        return;
      default:
        break;
    }
    if (op.code >= kOpCount) return;
    if (op.code == kOpRxtxMap) {  // HARNESS:TX: whatever the outcome
      h_.mapped(op);
    }
    if (planned_.s != &s || planned_.i != i || !have_ans_) {
      Expectation e;
      expect(s, i, e);
    }
    apply(op, observed);
    planned_ = {};
  }

  // After a violation: an FFA_ERROR the SPMC returned changed nothing (FF-A:
  // a failed call has no effect), so the model keeps its state; a reply of
  // the same function as the model's has the model's effect. Anything else
  // (success where the model refuses) the model cannot represent.
  bool adopt(const Scenario& s, size_t i, const Outcome& observed, std::string* note) override {
    const Op& op = s.ops[i];
    if (op.code == kOpRxtxMap) {
      h_.mapped(op);
    }
    if (planned_.s != &s || planned_.i != i || !have_ans_) {
      *note = "the model has no answer for this op";
      return false;
    }
    planned_ = {};
    const bool sp_op = op.code == kOpSpRetrieve || op.code == kOpSpRelinquish;
    if (refused(op, observed)) {
      if (is_producer(op.code)) h_.handles.push_back(kInvalidHandle);
      *note = "the SPMC refused (FFA_ERROR or SMC_UNK): the model keeps its state (a failed call changes nothing)";
      return true;
    }
    if (sp_op ? ans_->out[0] == observed.regs[0] : fid_of(ans_->out) == fid_of(observed.regs.data())) {
      apply(op, observed);
      *note = "the reply's function is the model's: the model's effect";
      return true;
    }
    *note = "the SPMC succeeded where the model refuses: the model cannot represent its effect";
    return false;
  }

 private:
  void apply(const Op& op, const Outcome& observed) {
    const bool sp_op = op.code == kOpSpRetrieve || op.code == kOpSpRelinquish;
    if (non_ffa_ && !sp_op) {  // SMC_UNK changes nothing
      non_ffa_ = false;
      have_ans_ = false;
      if (is_producer(op.code)) h_.handles.push_back(kInvalidHandle);
      return;
    }
    // The SPMC took the hypervisor's word (SPMC:NS-TRUST): that reply's effect.
    if (!sp_op && trusting_ && trust_allowed_.admits(observed)) std::swap(ans_, trust_ans_);
    trusting_ = false;
    // SPMC:FRAG: the SPMC kept the send the model would end.
    if (!sp_op && keep_send_ && observed.state == keep_pre_) {
      keep_send_ = false;
      have_ans_ = false;
      return;
    }
    keep_send_ = false;
    // An allowed refusal where the model would have succeeded changes nothing.
    if (refused(op, observed) && !is_error(ans_->out)) {
      have_ans_ = false;
      if (is_producer(op.code)) h_.handles.push_back(kInvalidHandle);
      return;
    }
    spmc_->apply(*ans_, sp_op ? std::span<const uint8_t>() : spmc_->tx_window());
    have_ans_ = false;
    if (!is_producer(op.code) && op.code != kOpRaw) return;
    const uint64_t mine = produced_handle(ans_->out), theirs = produced_handle(observed.regs.data());
    if (mine != kInvalidHandle && theirs != kInvalidHandle && mine != theirs) spmc_->rename_handle(mine, theirs);
    if (is_producer(op.code)) h_.handles.push_back(theirs);
  }

  uint64_t handle(uint64_t slot) const { return h_.handle(slot); }

  ProxyProfile layout_;
  HarnessRam h_;  // the RAM and the harness fields (HARNESS:SLOTS, HARNESS:TX)
  std::unique_ptr<Spmc> spmc_, snap_;
  std::unique_ptr<SpmcAnswer> ans_, trust_ans_;
  bool have_ans_ = false;
  bool trusting_ = false;   // expect() listed the SPMC:NS-TRUST reply too
  bool non_ffa_ = false;    // expect() answered SMC_UNK (not an FF-A call)
  bool keep_send_ = false;  // expect() allowed keeping the send its refusal ends (SPMC:FRAG)
  uint64_t keep_pre_ = 0;   // the table digest then
  Allowed trust_allowed_;
  Hits hits_, trust_hits_;
  struct Planned {
    const Scenario* s = nullptr;
    size_t i = 0;
  } planned_;
};

}  // namespace

std::unique_ptr<Model> make_spmc_model(const ProxyProfile& layout) { return std::make_unique<SpmcModel>(layout); }

std::string spmc_profile_name(const ProxyProfile& p) {
  const uint32_t v = p.spmc.version;
  return "spmc-" + std::to_string(p.page_size / 1024) + "k-sp" + std::to_string(p.spmc.n_sps) + "-v" +
         std::to_string(v >> 16) + "." + std::to_string(v & 0xffff) + (p.spmc.reclaim2 ? "-reclaim2" : "");
}

}  // namespace kconform::ffa
