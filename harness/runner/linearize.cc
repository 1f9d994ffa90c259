// The interleaving search of linearize.h.
#include "harness/runner/linearize.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "harness/scenario/abi.h"
#include "oracles/oracle.h"

namespace kconform {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

// One move of an interleaving: step `step` (1-based) of op `op`; steps == 1
// for an op that is one step.
struct Move {
  size_t op, step;
  bool multi;
};

class Search {
 public:
  Search(const Scenario& s, size_t first, size_t end, std::span<const Outcome> observed, uint64_t budget,
         LinearizeStats& stats)
      : s_(s), first_(first), gend_(group_end(s, first)), end_(end), observed_(observed), budget_(budget),
        stats_(stats), exp_(end - first), placed_(end - first, false) {
    for (size_t i = first_; i < gend_; ++i) {
      uint8_t t = s.ops[i].thread;
      auto it = std::find(thread_ids_.begin(), thread_ids_.end(), t);
      if (it == thread_ids_.end()) {
        thread_ids_.push_back(t);
        threads_.emplace_back();
        it = thread_ids_.end() - 1;
      }
      threads_[it - thread_ids_.begin()].push_back(i);
    }
    pos_.assign(threads_.size(), 0);
    left_.assign(threads_.size(), 0);
    step_.assign(threads_.size(), 0);
  }

  bool run(ConcurrentModel& m) { return dfs(m); }

  // The closest interleaving found (when run() failed).
  struct Best {
    size_t placed = 0;
    bool set = false;
    std::vector<Move> path;
    std::vector<Expectation> exp;
    std::vector<bool> placed_ops;
    std::vector<size_t> failed;  // ops tried at the dead end, their expectations in exp
  };
  const Best& best() const { return best_; }
  const std::vector<Expectation>& expectations() const { return exp_; }
  std::string describe(const std::vector<Move>& path) const {
    std::string out;
    for (const Move& mv : path) {
      if (!out.empty()) out += ' ';
      out += std::to_string(mv.op);
      if (mv.multi) out += "[" + std::to_string(mv.step) + "]";
    }
    return out.empty() ? "(none)" : out;
  }

 private:
  size_t k(size_t op) const { return op - first_; }

  uint64_t key(const ConcurrentModel& m) const {
    uint64_t h = m.state_digest();
    for (size_t t = 0; t < threads_.size(); ++t) h = mix(mix(h, pos_[t]), left_[t]);
    return h;
  }

  void dead_end(const std::vector<size_t>& failed) {
    if (best_.set && placed_count_ <= best_.placed) return;
    best_.set = true;
    best_.placed = placed_count_;
    best_.path = path_;
    best_.exp = exp_;
    best_.placed_ops = placed_;
    best_.failed = failed;
  }

  // All group ops placed: the main-sequence ops after the group, in order.
  bool tail(ConcurrentModel& m) {
    ++stats_.interleavings;
    size_t placed_before = placed_count_;
    std::vector<size_t> tail_placed;
    bool ok = true;
    for (size_t i = gend_; i < end_; ++i) {
      m.expect(s_, i, exp_[k(i)]);
      if (judge(exp_[k(i)], observed_[k(i)]).kind != VerdictKind::kPass) {
        dead_end({i});
        ok = false;
        break;
      }
      m.commit(s_, i, observed_[k(i)]);
      placed_[k(i)] = true;
      tail_placed.push_back(i);
      ++placed_count_;
    }
    if (ok) return true;
    for (size_t i : tail_placed) placed_[k(i)] = false;
    placed_count_ = placed_before;
    return false;
  }

  bool dfs(ConcurrentModel& m) {
    if (stats_.nodes >= budget_) {
      stats_.budget_exhausted = true;
      return false;
    }
    ++stats_.nodes;
    if (!seen_.insert(key(m)).second) return false;
    bool all_done = true;
    for (size_t t = 0; t < threads_.size(); ++t)
      all_done = all_done && pos_[t] == threads_[t].size() && left_[t] == 0;
    if (all_done) return tail(m);

    std::unique_ptr<ConcurrentModel> snapshot = m.clone();
    bool dirty = false;
    std::vector<size_t> failed;
    for (size_t t = 0; t < threads_.size(); ++t) {
      if (left_[t] > 0) {  // the next step of the op this thread has in flight
        size_t op = threads_[t][pos_[t] - 1];
        if (dirty) m.assign(*snapshot);
        dirty = true;
        size_t was = left_[t];
        left_[t] = m.commit_more(s_, op);
        path_.push_back({op, ++step_[t], true});
        if (left_[t] == 0) placed_[k(op)] = true, ++placed_count_;
        if (dfs(m)) return true;
        if (left_[t] == 0) placed_[k(op)] = false, --placed_count_;
        path_.pop_back();
        --step_[t];
        left_[t] = was;
        continue;
      }
      if (pos_[t] == threads_[t].size()) continue;
      size_t op = threads_[t][pos_[t]];
      if (dirty) m.assign(*snapshot);
      dirty = false;
      if (!m.may_begin(s_, op)) continue;  // excluded until an op in flight finishes
      m.expect(s_, op, exp_[k(op)]);
      if (judge(exp_[k(op)], observed_[k(op)]).kind != VerdictKind::kPass) {
        failed.push_back(op);
        continue;
      }
      dirty = true;
      size_t left = m.commit_begin(s_, op, observed_[k(op)]);
      ++pos_[t];
      left_[t] = left;
      step_[t] = 1;
      path_.push_back({op, 1, left > 0});
      if (left == 0) placed_[k(op)] = true, ++placed_count_;
      if (dfs(m)) return true;
      if (left == 0) placed_[k(op)] = false, --placed_count_;
      path_.pop_back();
      step_[t] = 0;
      left_[t] = 0;
      --pos_[t];
    }
    if (!failed.empty()) dead_end(failed);
    return false;
  }

  const Scenario& s_;
  size_t first_, gend_, end_;
  std::span<const Outcome> observed_;
  uint64_t budget_;
  LinearizeStats& stats_;
  std::vector<uint8_t> thread_ids_;
  std::vector<std::vector<size_t>> threads_;  // op indices of each thread, in order
  std::vector<size_t> pos_;   // per thread: ops started
  std::vector<size_t> left_;  // per thread: steps left of the op in flight
  std::vector<size_t> step_;  // per thread: steps done of the op in flight
  std::vector<Expectation> exp_;
  std::vector<bool> placed_;
  size_t placed_count_ = 0;
  std::vector<Move> path_;
  std::unordered_set<uint64_t> seen_;
  Best best_;
};

}  // namespace

bool linearize(ConcurrentModel& model, const Scenario& s, size_t first, size_t end,
               std::span<const Outcome> observed, std::vector<StepResult>* results, LinearizeStats* stats,
               uint64_t budget) {
  LinearizeStats local;
  LinearizeStats& st = stats ? *stats : local;
  const size_t n = end - first;
  results->resize(n);
  Search search(s, first, end, observed, budget, st);
  std::unique_ptr<ConcurrentModel> work = model.clone();
  if (search.run(*work)) {
    model.assign(*work);
    for (size_t k = 0; k < n; ++k) {
      StepResult& r = (*results)[k];
      r.expected = search.expectations()[k];
      r.expected.hits.push_back({model.linearizable_rule(), false});  // judged on its allowed side
      r.observed = observed[k];
      r.verdict = Verdict{VerdictKind::kPass, {}};
      r.blamed.clear();
      r.model_knows = true;
    }
    return true;
  }

  // No interleaving explains the observations: report the closest one.
  const auto& best = search.best();
  const RuleId rule = model.linearizable_rule();
  std::string unplaced, unreached;
  for (size_t k = 0; k < n; ++k) {
    if (best.set && best.placed_ops[k]) continue;
    const size_t op = first + k;
    if (!best.set || std::find(best.failed.begin(), best.failed.end(), op) != best.failed.end()) {
      if (!unplaced.empty()) unplaced += ", ";
      unplaced += "op " + std::to_string(op) + " (" + format_op(s, op) + " -> " + to_string(observed[k]) + ")";
    } else {
      unreached += (unreached.empty() ? "" : ", ") + std::to_string(op);
    }
  }
  std::string note = "no interleaving of the concurrent group of ops " + std::to_string(first) + ".." +
                     std::to_string(group_end(s, first) - 1) +
                     (end > group_end(s, first) ? " and the ops after it up to op " + std::to_string(end - 1) : "") +
                     " explains the observed outcomes (" + std::to_string(st.nodes) + " states searched" +
                     (st.budget_exhausted ? ", search budget exhausted" : "") + "); could not place: " + unplaced +
                     (unreached.empty() ? "" : "; not reached: op " + unreached) +
                     "; closest interleaving: " + search.describe(best.path);
  bool knows = true;
  for (size_t k = 0; k < n; ++k) {
    StepResult& r = (*results)[k];
    r.observed = observed[k];
    r.blamed.clear();
    r.expected.clear();
    const size_t op = first + k;
    const bool placed = best.set && best.placed_ops[k];
    const bool failed = best.set && std::find(best.failed.begin(), best.failed.end(), op) != best.failed.end();
    if (placed) {
      r.expected = best.exp[k];
      r.expected.hits.push_back({rule, false});
      r.verdict = Verdict{VerdictKind::kPass, {}};
    } else if (failed || (!best.set && knows)) {
      // What the model allowed where the closest interleaving could not go on:
      // allowed there only if the ops were linearizable, so licensed by the
      // rule (the op's own rules are named in the note).
      std::string allowed_there;
      if (best.set) r.expected = best.exp[k];
      for (Allowed& a : r.expected.allowed) {
        allowed_there += (allowed_there.empty() ? "" : " | ") + to_string(a);
        a.rule = rule;
      }
      r.expected.hits.push_back({rule, true});
      r.expected.note = note + (allowed_there.empty() ? "" : "; op " + std::to_string(op) + " allowed there: " +
                                                                   allowed_there) +
                        (r.expected.note.empty() ? "" : "; model: " + r.expected.note);
      r.verdict = judge(r.expected, observed[k]);
      r.verdict.kind = VerdictKind::kViolation;
      if (r.verdict.violated.empty()) r.verdict.violated.push_back(rule);
      r.blamed.push_back(rule);
      knows = false;
    } else {
      r.verdict = Verdict{VerdictKind::kUnchecked, {}};
      knows = knows && placed;
    }
    r.model_knows = knows;
  }
  // A group whose placed ops all precede the failed ones in scenario order
  // still leaves later ones unchecked; make sure the last result says so.
  results->back().model_knows = false;
  return false;
}

}  // namespace kconform
