// The guest_memfd reference model: dispatches each op to its checks
// (expect_*, which never change the state) and effects (commit_*).
#include "models/gmem/model.h"

#include <cerrno>

#include "models/concurrent.h"
#include "models/gmem/ops.h"
#include "models/gmem/steps.h"

namespace kconform::gmem {

bool harness_refuses_bytes(uint64_t len, Guards& g) {
  // At most kMaxOpBytes per op (harness convention).
  if (len > kMaxOpBytes) {
    g.fail(kGmemHarnessMaxBytes, {E2BIG}, "%#llx bytes > harness limit %#llx",
           (unsigned long long)len, (unsigned long long)kMaxOpBytes);
    return true;
  }
  g.pass(kGmemHarnessMaxBytes);
  return false;
}

namespace {

struct OpHandlers {
  void (*expect)(const State&, const Op&, Expectation&);
  void (*commit)(State&, const Op&, const Outcome&);
};

// Indexed by OpCode. read and pread share handlers, as do the three writes.
constexpr OpHandlers kHandlers[] = {
    {expect_create_vm, commit_create_vm},      // kCreateVm
    {expect_create_gmem, commit_create_gmem},  // kCreateGmem
    {expect_close, commit_close},              // kClose
    {expect_write, commit_write},              // kWrite
    {expect_write, commit_write},              // kPwrite
    {expect_write, commit_write},              // kPwritev
    {expect_read, commit_read},                // kRead
    {expect_read, commit_read},                // kPread
    {expect_lseek, commit_lseek},              // kLseek
    {expect_mmap, commit_mmap},                // kMmap
    {expect_munmap, commit_munmap},            // kMunmap
    {expect_load, commit_load},                // kLoad
    {expect_store, commit_store},              // kStore
    {expect_fallocate, commit_fallocate},      // kFallocate
    {expect_fstat, commit_fstat},              // kFstat
    {expect_bind, commit_bind},                // kBind
    {expect_unbind, commit_unbind},            // kUnbind
    {expect_close_vm, commit_close_vm},        // kCloseVm
    {expect_times, commit_times},              // kTimes
};
static_assert(sizeof(kHandlers) / sizeof(kHandlers[0]) == kOpCount);

class GmemModel final : public ConcurrentModel {
 public:
  explicit GmemModel(const Profile& profile) : profile_(profile) {}

  void begin(const Scenario&) override {
    state_ = State{profile_, {}, {}, {}};
    inflight_ = {};
  }

  void expect(const Scenario& s, size_t i, Expectation& out) override {
    out.clear();
    const Op& op = s.ops[i];
    // An op code outside the table allows nothing: the scenario is malformed.
    if (op.code >= kOpCount) {
      out.note = "unknown gmem op code " + std::to_string(op.code);
      return;
    }
    kHandlers[op.code].expect(state_, op, out);
  }

  void commit(const Scenario& s, size_t i, const Outcome& observed) override {
    const Op& op = s.ops[i];
    if (op.code >= kOpCount) return;
    state_.op = i;
    mark_times(state_, op, observed);  // before the commit forgets what a memslot bound
    kHandlers[op.code].commit(state_, op, observed);
  }

  // Every outcome is one the state can hold: an fd that opened or not, a
  // count of bytes written, a mapping made or not. The effects the outcome
  // does not show (bytes written by a failed call, pages allocated) are
  // found by the content re-read that follows (Step: check_contents).
  bool adopt(const Scenario& s, size_t i, const Outcome& observed, std::string* note) override {
    const Op& op = s.ops[i];
    if (op.code >= kOpCount) {
      *note = "unknown gmem op code " + std::to_string(op.code);
      return false;
    }
    std::string words = explain_write(state_, op, observed);
    *note = words.empty() ? "the model took " + to_string(observed) + " as what the op did" : words;
    commit(s, i, observed);
    return true;
  }

  bool wants_contents(const Scenario& s, size_t i) const override {
    if (i >= s.ops.size() || s.ops[i].code >= kOpCount) return false;
    return i + 1 == s.ops.size() || gmem::wants_contents(s.ops[i]);
  }

  void check_contents(const Scenario&, size_t, const Contents& seen, ContentCheck* out) override {
    gmem::check_contents(state_, seen, out);
  }

  // Concurrent groups (models/concurrent.h, steps.h).
  std::unique_ptr<ConcurrentModel> clone() const override { return std::make_unique<GmemModel>(*this); }
  void assign(const ConcurrentModel& other) override { *this = static_cast<const GmemModel&>(other); }
  uint64_t state_digest() const override { return inflight_.digest(gmem::state_digest(state_)); }
  size_t commit_begin(const Scenario& s, size_t i, const Outcome& observed) override {
    Plan plan = s.ops[i].code < kOpCount ? plan_steps(state_, s.ops[i], observed) : Plan{};
    if (plan.chunks.empty()) {
      commit(s, i, observed);
      return 0;
    }
    return inflight_.begin(state_, i, std::move(plan));
  }
  size_t commit_more(const Scenario&, size_t i) override { return inflight_.more(state_, i); }
  // A write and a PUNCH_HOLE of the same file exclude each other (CONCURRENT:STEPS).
  bool may_begin(const Scenario& s, size_t i) const override {
    const Op& op = s.ops[i];
    const bool write = op.code == kWrite || op.code == kPwrite || op.code == kPwritev;
    const bool punch = op.code == kFallocate && op.args[1] == (kFallocKeepSize | kFallocPunchHole);
    if (!write && !punch) return true;
    return !inflight_.excludes(op.args[0], punch);
  }
  RuleId linearizable_rule() const override { return kGmemConcurrentLinearizable; }

 private:
  Profile profile_;
  State state_;
  InFlight inflight_;
};

}  // namespace

std::unique_ptr<Model> make_model(const Profile& profile) {
  return std::make_unique<GmemModel>(profile);
}

}  // namespace kconform::gmem
