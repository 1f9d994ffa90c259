// The fuzz runner, shared by every engine (libFuzzer, AFL++) and every
// target: decode one input, bound it, and run it op by op through the one
// step (harness/runner/step.h) that `run` and `replay` use, so one input is
// judged and blamed the same way everywhere. Findings never stop the fuzzer
// (Mode::kRecord, what `kconform fuzz` runs: KCONFORM_FUZZ_FINDINGS below):
// each is recorded under its signature in a FindingStore (stored once,
// counted every time; a baselined one only counted) and the input goes on.
// Only a crash of the process goes through the engine's crash path. Without
// KCONFORM_FUZZ_FINDINGS (the mutant bench, a bare engine run) an op the
// baseline does not know (as `run` would not baseline it:
// KCONFORM_FUZZ_BASELINE below) ends the process with one SUMMARY line naming
// its blamed rules (StepResult::blamed). Either way the input goes on past a
// known finding, as in `run`: judged while the model knows the state
// (also after a broken invariant alone), unchecked but invariant-checked after
// a model violation. An input `run` would report unsupported is not run.
// Every rule side an op reaches (StepResult::expected.hits) is a coverage
// feature for the engine (rule_features.h) and, with a FindingStore, counted.
// Nothing here knows an ABI: what bounds an input comes from the ABI tables
// (harness/scenario/abi.h, EngineHints and OpSpec::bytes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "harness/fuzz/mutator.h"
#include "harness/runner/step.h"
#include "harness/runner/target_registry.h"
#include "models/common/rules.h"

namespace kconform::fuzz {

// Environment of a fuzz process:
//   KCONFORM_FUZZ_BASELINE     (set by `kconform fuzz`) the baseline entries of
//                              ci/known-findings.json that apply to this target
//                              build (target and release already matched), one
//                              "<rule ID>\t<scenario pattern>" per line; the
//                              pattern has only `*` and `?` wildcards. An op is
//                              known when every rule it violated (the verdict's
//                              `violated`, as `run` records findings) has an
//                              entry whose pattern matches the scenario's name:
//                              exactly when `run` would baseline it.
//   KCONFORM_FUZZ_KNOWN_RULES  comma-separated rule IDs: an op is known when all
//                              its blamed rules are among them, in any scenario
//                              (the mutant bench's background; `kconform fuzz`
//                              sets it empty)
//   KCONFORM_FUZZ_KNOWN_LOG    file to append "KNOWN <rules> <op call>" lines to (first per rule set)
//   KCONFORM_FUZZ_FINDINGS     (set by `kconform fuzz`) a folder: findings are recorded
//                              there (FindingStore) and never stop the process
//   KCONFORM_FUZZ_NO_RULE_FEATURES  1: rule sides are not coverage features (rule_features.h)
//   KCONFORM_FUZZ_REARM        1: a stored finding whose .kcsb is taken away while
//                              the process runs is stored again at its next
//                              occurrence (FindingStore::rearm_removed; the mutant
//                              bench sets it: it moves away the findings it does not
//                              count, a seed's input or one the unmutated code shares,
//                              so the signature's next input is judged too)
inline constexpr const char* kEnvBaseline = "KCONFORM_FUZZ_BASELINE";
inline constexpr const char* kEnvFindings = "KCONFORM_FUZZ_FINDINGS";
inline constexpr const char* kEnvKnownRules = "KCONFORM_FUZZ_KNOWN_RULES";
inline constexpr const char* kEnvKnownLog = "KCONFORM_FUZZ_KNOWN_LOG";
inline constexpr const char* kEnvRearm = "KCONFORM_FUZZ_REARM";

// Whether text matches a pattern whose only wildcards are `*` (any run of
// characters, `/` too) and `?` (one character): Python's fnmatchcase on
// such patterns, which is what the driver's baseline uses.
bool glob_match(const std::string& pattern, const std::string& text);

struct FuzzConfig {
  Abi abi = Abi::kGmem;
  Limits limits;
  // Inputs with an op that would materialise more than this many bytes (but
  // not more than the ABI's refusal limit, EngineHints::refused_bytes_above)
  // are skipped, for speed.
  uint64_t max_op_bytes = 1u << 20;
  // At most this many creations of the ABI's costly resource (a VM).
  size_t max_costly = 2;
};

// The config of a fuzz target of an ABI (limits from its table).
FuzzConfig fuzz_config_for(Abi abi);

// One op that a step blamed rules for.
struct Finding {
  size_t op = 0;
  std::vector<RuleId> blamed;  // StepResult::blamed
  std::string rules;           // their IDs, comma-separated: the finding's name
  bool known = false;          // baselined (KCONFORM_FUZZ_BASELINE) or background (KCONFORM_FUZZ_KNOWN_RULES)
  std::string detail;          // observed, expected, the model's and invariants' notes
};

// A finding's signature: its blamed rule IDs, the kind of its op and the target
// build, "FFA.A,FFA.B mem_reclaim el2 debian-7.3.4-4k". Findings with one
// signature are one finding, however many inputs reach it.
std::string signature(const Scenario& s, const Finding& f, const TargetIdentity& id);

// Where findings are recorded without stopping the fuzzer, in a folder that
// several processes (libFuzzer's fork jobs, AFL++ instances, restarts) share:
//   <stem>.kcsb   the input as the engine gave it (binary scenario format)
//   <stem>.kcs    the same scenario in the text format, after a comment header
//                 naming the signature, the op and a replay command
//   <stem>.jsonl  its verdict records (oracles/verdict_json.h: the target record,
//                 then the finding op's record)
//   <stem>.log    the log line
// with stem violation-<rules, '+'-joined>-<op kind>-<16 hex of FNV-1a(signature)>.
// The first occurrence of a signature that is not known is stored; the .kcsb is
// claimed with link(2), so across processes it is stored once and never
// overwritten. Every occurrence (stored, duplicate or known) is counted:
// .counts/<pid>.tsv holds this process's counts, "execs\t<n>" then one
// "<count>\t<new|known>\t<stem or ->\t<signature>" line per signature and
// known-ness (counts()), then one "side\t<rule ID>\t<allowed|forbidden>" line
// per rule side the model evaluated in this process (reached(): every
// StepResult::expected.hits, findings or not), rewritten
// (atomically) at most once a second, by flush() and at exit.
class FindingStore {
 public:
  explicit FindingStore(std::string dir);
  ~FindingStore();
  FindingStore(const FindingStore&) = delete;
  FindingStore& operator=(const FindingStore&) = delete;

  // Counts f (a finding at op f.op of s, r its step) and stores it if it is the
  // first of its signature and not known. input: the engine's bytes (empty: s
  // encoded). Returns the stem just stored, or "" (a duplicate or known).
  std::string record(const Scenario& s, const Finding& f, const StepResult& r, const TargetIdentity& id,
                     std::span<const uint8_t> input);
  void executed();
  // executed() calls rearm_removed() at most once a second. With rearm on
  // (KCONFORM_FUZZ_REARM), a signature this process stored, or found stored, whose
  // .kcsb is no longer there is then stored again at its next occurrence; off, it
  // does nothing.
  void set_rearm(bool on) { rearm_ = on; }
  void rearm_removed();
  // Notes that an op was on this side of rule (a RuleHit).
  void reached(RuleId rule, bool forbidden);
  void flush();

  struct Count {
    std::string stem;  // where it is stored; "" when known, rearmed, or not stored (a write failed)
    bool known = false;
    uint64_t count = 0;
    bool rearmed = false;  // its .kcsb was taken away: the next occurrence is stored
  };
  // By (signature, known): whether an occurrence is known depends on its
  // scenario's name (the baseline's patterns), so one signature can be met
  // known (a seed) and not (a mutated input); the latter is stored.
  using Key = std::pair<std::string, bool>;
  const std::map<Key, Count>& counts() const { return counts_; }
  uint64_t executions() const { return execs_; }
  // The rule sides reached: (rule, forbidden), ascending.
  std::set<std::pair<RuleId, bool>> sides() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::map<Key, Count> counts_;
  // A flag per rule side reached, at 2 * rule + forbidden: looked up on every hit
  // of every op, so an array, not a set.
  std::array<uint8_t, 2 * kRuleCount> side_seen_{};
  uint64_t execs_ = 0;
  int64_t last_flush_ns_ = 0;
  bool dirty_ = false;
  bool rearm_ = false;
};

class FuzzRunner {
 public:
  enum class Mode {
    kAbortOnFinding,  // an unknown finding prints SUMMARY and aborts (the fuzz targets)
    kCollect,         // findings are only returned (tests)
    kRecord,          // every finding goes to a FindingStore and the input goes on
  };
  // Opens the target family; exits with status 2 and a message if it cannot run.
  FuzzRunner(const TargetFamily& family, const FuzzConfig& cfg, Mode mode = Mode::kAbortOnFinding);
  // Runs on an opened target (its model and invariants).
  FuzzRunner(OpenTarget opened, const FuzzConfig& cfg, Mode mode);

  // 0: ran; -1: the input is not one this runner runs (libFuzzer: do not add to the
  // corpus): it does not decode, is not bounded(), or requires a capability the
  // target lacks (which `run` reports unsupported).
  int run(const uint8_t* data, size_t size);
  // Whether run() runs a decoded input: the config's ABI, at most
  // limits.max_ops ops, max_costly costly resources, and no op over max_op_bytes
  // that the ABI's targets would not refuse anyway.
  bool bounded(const Scenario& s) const;
  // Runs s (unbounded) op by op through step() and returns every finding, in
  // op order. Mode::kAbortOnFinding: the first unknown one ends the process.
  std::vector<Finding> run_scenario(const Scenario& s);

  const FuzzConfig& config() const { return cfg_; }
  // Mode::kRecord into dir (the constructor does this with kAbortOnFinding
  // when KCONFORM_FUZZ_FINDINGS is set).
  void record_to(const std::string& dir);
  FindingStore* store() { return store_.get(); }

 private:
  void report(const Scenario& s, const Finding& f, const StepResult& r);
  // Whether run would baseline rule `id` violated in a scenario of this name.
  bool baselined(const std::string& id, const std::string& scenario) const;

  FuzzConfig cfg_;
  Mode mode_;
  OpenTarget t_;
  std::set<std::string> known_;
  std::vector<std::pair<std::string, std::string>> baseline_;  // (rule ID, scenario pattern)
  std::set<std::string> known_seen_;
  bool rule_features_ = true;  // rule sides as coverage features (rule_features.h)
  std::string known_log_;
  std::unique_ptr<FindingStore> store_;
  std::span<const uint8_t> input_;  // the engine's bytes of the input being run
};

}  // namespace kconform::fuzz
