// Replay: judging outcomes recorded elsewhere (a kernel in QEMU). The model
// runs here, the recorded outcomes are the outcome source of the one step
// (step.h, through run_scenarios), and the verdicts go out in the one verdict
// format, tagged with the recording target's identity. ("judge" is the
// oracle's word; the subcommand was called judge before and still answers to it.)
//
//   kconform-runner pack --out-dir DIR FILE...
//       writes each scenario of FILE... in binary form as DIR/NNNNNN.kcsb,
//       NNNNNN its position in the list ("s" in the observations)
//   kconform-runner replay --observations OBS [--out FILE] FILE...
//       (alias: judge) FILE... the same list given to pack. OBS is JSON lines:
//         {"type":"identity","target","release","seconds"?,"profile":{write_abi, page_size,
//          supported_flags[2], vm_types, user_memory2, gmem_on_vm_type[2]},
//          "caps":[[name, value]...], "cap_bits"}
//         {"type":"scenario","s":N,"ops":[[kind, value, aux, contents?], ...]}  per scenario run;
//          contents: the pages re-read after that op, in the text form of
//          models/common/contents.h (the content oracle judges them here)
//         {"type":"unsupported","s":N,"missing":BITS}  the recording target found
//          it lacks capabilities BITS the scenario needs (the identity's cap_bits
//          must say the same: a disagreement is an error);
//         {"type":"unsupported","s":N,"why":TEXT}  the recording target cannot run
//          it for another reason (targets/qemu_arm64: el3_misbehave, sp_* ops, ...);
//          both are written `unsupported` (the latter with "note": TEXT), as every
//          target's run writes a scenario that needs capabilities its identity lacks.
//       A scenario with fewer recorded ops than it has (the guest died in it,
//       or frames were lost) is judged up to its last recorded op; one without a
//       record is left out (the driver accounts for both: a crash in flight, or
//       QEMU.NO-RECORD, targets/qemu/replay.py no_record()).
//       A scenario with `repeat N` has its N runs' outcomes one after the
//       other in "ops"; the runs recorded in full are judged.
//       FF-A (a real machine's host, targets/qemu_arm64): the identity record
//       has "abi":"ffa" and "ffa":{page_size, phys_base, host_pages, mbox_pages,
//       desc_buf_bytes, version, real_el3, reclaim2, spmc:{version, sp_ids[],
//       reclaim2, donate, one_send_in_flight, max_fnum?}} (the model's ProxyProfile; the
//       target's state is hidden: ProxyProfile::state_hidden) instead of "profile",
//       and each op is [kind, value, aux, [x0..x7]].
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/runner/replay.h"
#include "harness/runner/group.h"
#include "harness/runner/runner.h"
#include "harness/scenario/codec.h"
#include "models/ffa/model.h"
#include "models/gmem/model.h"

namespace kconform {
namespace {

constexpr int kExitClean = 0, kExitViolations = 1, kExitError = 2;

constexpr const char* kPackUsage = "usage: kconform-runner pack --out-dir DIR FILE...";
constexpr const char* kReplayUsage =
    "usage: kconform-runner replay --observations FILE [--out FILE] SCENARIO-FILE...";

int fail(const std::string& msg) {
  std::fprintf(stderr, "kconform-runner: %s\n", msg.c_str());
  return kExitError;
}

// One recorded op: its outcome and, if the target re-read pages after it, those.
struct RecordedOp {
  Outcome outcome;
  bool has_contents = false;
  Contents contents;
};

// The outcome source of replay: the recorded outcome of each op; the scenario
// pointer says which.
class ReplayTarget : public Target {
 public:
  ReplayTarget(TargetIdentity id, std::map<const Scenario*, std::vector<RecordedOp>> recorded,
               std::map<const Scenario*, std::string> why)
      : id_(std::move(id)), recorded_(std::move(recorded)), why_(std::move(why)) {}
  const TargetIdentity& identity() const override { return id_; }
  std::string unsupported(const Scenario& s) const override {
    auto it = why_.find(&s);
    return it == why_.end() ? "" : it->second;
  }
  // A scenario with `repeat N` was recorded N times over, one run after the other.
  void begin(const Scenario& s) override {
    current_ = &recorded_.at(&s);
    base_ = begun_[&s]++ * s.ops.size();
  }
  Outcome exec(const Scenario&, size_t i) override { return current_->at(base_ + i).outcome; }
  bool observe(const Scenario&, size_t i, Contents* out) override {
    const RecordedOp& r = current_->at(base_ + i);
    if (!r.has_contents) return false;
    *out = r.contents;
    return true;
  }
  void end() override { current_ = nullptr; }

 private:
  TargetIdentity id_;
  std::map<const Scenario*, std::vector<RecordedOp>> recorded_;
  std::map<const Scenario*, std::string> why_;  // what the recording target said it cannot run
  std::map<const Scenario*, size_t> begun_;
  const std::vector<RecordedOp>* current_ = nullptr;
  size_t base_ = 0;
};

struct ReplayArgs {
  std::string observations, out, out_dir;
  std::vector<std::string> files;
  bool help = false;
};

bool parse(int argc, char** argv, ReplayArgs* a, std::string* error) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      a->help = true;
      continue;
    }
    std::string* dst = arg == "--observations" ? &a->observations
                       : arg == "--out"        ? &a->out
                       : arg == "--out-dir"    ? &a->out_dir
                                               : nullptr;
    if (dst) {
      if (i + 1 >= argc) {
        *error = "flag " + arg + " needs a value";
        return false;
      }
      *dst = argv[++i];
    } else if (arg.rfind("--", 0) == 0) {
      *error = "unknown flag " + arg;
      return false;
    } else {
      a->files.push_back(arg);
    }
  }
  return true;
}

bool read_identity(const nlohmann::json& r, TargetIdentity* id, gmem::Profile* p) {
  id->target = r.at("target").get<std::string>();
  id->release = r.at("release").get<std::string>();
  const auto& pr = r.at("profile");
  p->write_abi = pr.at("write_abi").get<bool>();
  p->page_size = pr.at("page_size").get<uint64_t>();
  for (int t = 0; t < 2; ++t) {
    p->supported_flags[t] = pr.at("supported_flags").at(t).get<uint64_t>();
    p->gmem_on_vm_type[t] = pr.at("gmem_on_vm_type").at(t).get<bool>();
  }
  p->vm_types = pr.at("vm_types").get<uint64_t>();
  p->user_memory2 = pr.at("user_memory2").get<bool>();
  id->profile = p->name();
  for (const auto& c : r.at("caps")) id->caps.emplace_back(c.at(0).get<std::string>(), c.at(1).get<uint64_t>());
  id->cap_bits = r.at("cap_bits").get<uint32_t>();
  return true;
}

// The FF-A model's profile from an identity record's "ffa" object; every field is needed.
ffa::ProxyProfile read_ffa_profile(const nlohmann::json& r, TargetIdentity* id) {
  id->target = r.at("target").get<std::string>();
  id->release = r.at("release").get<std::string>();
  const auto& f = r.at("ffa");
  auto field = [&f](const char* name) {
    if (!f.contains(name)) throw std::runtime_error(std::string("field 'ffa.") + name + "' is missing");
    return f.at(name).get<uint64_t>();
  };
  ffa::ProxyProfile p;
  p.page_size = field("page_size");
  if (p.page_size != 4096 && p.page_size != 16384 && p.page_size != 65536)
    throw std::runtime_error("field 'ffa.page_size': " + std::to_string(p.page_size) + " is not 4096, 16384 or 65536");
  p.phys_base = field("phys_base");
  p.host_pages = field("host_pages");
  if (p.host_pages == 0 || p.host_pages > ffa::kMaxHostPages)
    throw std::runtime_error("field 'ffa.host_pages': " + std::to_string(p.host_pages) + " is not in 1.." +
                             std::to_string(ffa::kMaxHostPages));
  p.mbox_pages = field("mbox_pages");
  p.desc_buf_bytes = field("desc_buf_bytes");
  p.version = static_cast<uint32_t>(field("version"));
  p.real_el3 = field("real_el3") != 0;
  p.reclaim2 = field("reclaim2") != 0;
  // The SPMC behind the proxy as it is configured (the el2 target's RealEl3Profile).
  if (!f.contains("spmc")) throw std::runtime_error("field 'ffa.spmc' is missing");
  const auto& sp = f.at("spmc");
  auto spmc_field = [&sp](const char* name) {
    if (!sp.contains(name)) throw std::runtime_error(std::string("field 'ffa.spmc.") + name + "' is missing");
    return sp.at(name);
  };
  p.spmc.version = spmc_field("version").get<uint32_t>();
  const auto& ids = spmc_field("sp_ids");
  if (!ids.is_array() || ids.empty() || ids.size() > ffa::kMaxSps)
    throw std::runtime_error("field 'ffa.spmc.sp_ids': not an array of 1.." + std::to_string(ffa::kMaxSps) + " ids");
  p.spmc.n_sps = static_cast<uint32_t>(ids.size());
  for (uint32_t k = 0; k < ffa::kMaxSps; ++k) p.spmc.sp_ids[k] = k < ids.size() ? ids.at(k).get<uint16_t>() : 0;
  p.spmc.reclaim2 = spmc_field("reclaim2").get<bool>();
  p.spmc.donate = spmc_field("donate").get<bool>();
  p.spmc.one_send_in_flight = spmc_field("one_send_in_flight").get<bool>();
  if (sp.contains("max_fnum")) {  // SPMC:ROUTED (default: all of FF-A's numbers)
    const uint64_t m = sp.at("max_fnum").get<uint64_t>();
    if (m < 0x60 || m > 0xff) throw std::runtime_error("field 'ffa.spmc.max_fnum': " + std::to_string(m) +
                                                        " is not an FF-A function number (0x60-0xff)");
    p.spmc.max_fnum = static_cast<uint32_t>(m);
  }
  p.state_hidden = true;
  id->profile = ffa::profile_name(p);
  for (const auto& c : r.at("caps")) id->caps.emplace_back(c.at(0).get<std::string>(), c.at(1).get<uint64_t>());
  id->cap_bits = r.at("cap_bits").get<uint32_t>();
  return p;
}

// An op's [kind, value, aux, ...]: the outcome without what follows.
RecordedOp read_op_head(const nlohmann::json& o, size_t index) {
  int kind = o.at(0).get<int>();
  if (kind < 0 || kind > static_cast<int>(Outcome::Kind::kSignal))
    throw std::runtime_error("ops[" + std::to_string(index) + "]: outcome kind " + std::to_string(kind) +
                             " is not known");
  RecordedOp out;
  out.outcome.kind = static_cast<Outcome::Kind>(kind);
  out.outcome.value = o.at(1).get<int64_t>();
  out.outcome.aux = o.at(2).get<uint64_t>();
  return out;
}

// An FF-A op: [kind, value, aux, [x0..x7]] (the registers the host saw).
RecordedOp read_ffa_op(const nlohmann::json& o, size_t index) {
  RecordedOp out = read_op_head(o, index);
  if (o.size() > 3) {
    const auto& r = o.at(3);
    if (!r.is_array() || r.size() != 8)
      throw std::runtime_error("ops[" + std::to_string(index) + "][3] (registers): not an array of 8");
    for (size_t k = 0; k < 8; ++k) out.outcome.regs[k] = r.at(k).get<uint64_t>();
  }
  return out;
}

RecordedOp read_op(const nlohmann::json& o, uint64_t page_size, size_t index) {
  RecordedOp out = read_op_head(o, index);
  if (o.size() > 3) {
    std::string error;
    if (!decode_contents(o.at(3).get<std::string>(), page_size, &out.contents, &error))
      throw std::runtime_error("ops[" + std::to_string(index) + "][3] (contents): " + error);
    out.has_contents = true;
  }
  return out;
}

int help(const char* usage) {
  std::printf("%s\n", usage);
  return kExitClean;
}

// Parses a subcommand's flags and loads its scenario files. False: *rc is
// what the subcommand returns (usage printed, or the error).
bool parse_and_load(int argc, char** argv, const char* usage, std::string ReplayArgs::*required, ReplayArgs* a,
                    std::vector<LoadedScenario>* all, int* rc) {
  std::string error;
  if (!parse(argc, argv, a, &error)) {
    *rc = fail(error);
  } else if (a->help) {
    *rc = help(usage);
  } else if ((a->*required).empty() || a->files.empty()) {
    *rc = fail(usage);
  } else if (!load_all(a->files, all, &error)) {
    *rc = fail(error);
  } else {
    return true;
  }
  return false;
}

int cmd_pack(int argc, char** argv) {
  ReplayArgs a;
  std::vector<LoadedScenario> all;
  if (int rc; !parse_and_load(argc, argv, kPackUsage, &ReplayArgs::out_dir, &a, &all, &rc)) return rc;
  if (std::string error; !scale_repeats(scenario_ptrs(all), &error)) return fail(error);
  for (size_t n = 0; n < all.size(); ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "/%06zu.kcsb", n);
    std::string path = a.out_dir + name;
    struct stat st;
    if (stat(path.c_str(), &st) == 0) return fail(path + " exists; not overwriting it");
    std::vector<uint8_t> bytes = encode_binary(all[n].scenario);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) return fail("cannot write " + path);
  }
  std::printf("%zu\n", all.size());
  return kExitClean;
}

int cmd_replay(int argc, char** argv) {
  ReplayArgs a;
  std::vector<LoadedScenario> all;
  if (int rc; !parse_and_load(argc, argv, kReplayUsage, &ReplayArgs::observations, &a, &all, &rc)) return rc;

  TargetIdentity id;
  gmem::Profile profile;
  ffa::ProxyProfile ffa_profile;
  bool is_ffa = false;
  bool have_identity = false;
  double seconds = 0;  // how long the recording target ran the scenarios
  std::map<size_t, std::vector<RecordedOp>> by_index;
  std::map<size_t, std::string> why_by_index;            // {"type":"unsupported","why"}
  std::map<size_t, uint32_t> missing_by_index;           // {"type":"unsupported","missing"}
  std::ifstream obs(a.observations);
  if (!obs) return fail("cannot read " + a.observations + ": " + std::strerror(errno));
  std::string line;
  for (size_t lineno = 1; std::getline(obs, line); ++lineno) {
    if (line.empty()) continue;
    std::string where = a.observations + ":" + std::to_string(lineno);
    try {
      auto r = nlohmann::json::parse(line);
      std::string type = r.at("type").get<std::string>();
      if (type == "identity") {
        is_ffa = r.value("abi", std::string("gmem")) == "ffa";
        if (is_ffa) {
          ffa_profile = read_ffa_profile(r, &id);
          have_identity = true;
        } else {
          have_identity = read_identity(r, &id, &profile);
        }
        seconds = r.value("seconds", 0.0);
      } else if (type == "scenario") {
        size_t s = r.at("s").get<size_t>();
        if (s >= all.size())
          return fail(where + ": field 's': " + std::to_string(s) + " but only " +
                      std::to_string(all.size()) + " scenarios were given");
        if (!have_identity) return fail(where + ": a 'scenario' record before the 'identity' record");
        std::vector<RecordedOp> ops;
        for (const auto& o : r.at("ops"))
          ops.push_back(is_ffa ? read_ffa_op(o, ops.size()) : read_op(o, profile.page_size, ops.size()));
        if (ops.size() > all[s].scenario.ops.size() * all[s].scenario.repeat)
          return fail(where + ": more outcomes than scenario " + all[s].scenario.name + " has ops");
        by_index[s] = std::move(ops);
      } else if (type == "unsupported") {
        size_t s = r.at("s").get<size_t>();
        if (s >= all.size())
          return fail(where + ": field 's': " + std::to_string(s) + " but only " +
                      std::to_string(all.size()) + " scenarios were given");
        if (r.contains("missing")) {
          missing_by_index[s] = r.at("missing").get<uint32_t>();
        } else {
          std::string why = r.at("why").get<std::string>();
          why_by_index[s] = why.empty() ? "the recording target cannot run it" : why;
        }
      } else {
        return fail(where + ": field 'type': unknown record type '" + type + "'");
      }
    } catch (const std::exception& e) {
      return fail(where + ": " + e.what());
    }
  }
  if (!have_identity) return fail(a.observations + ": no 'identity' record");
  for (const auto& [s, bits] : missing_by_index)
    if (const uint32_t ours = all[s].scenario.requires_caps & ~id.cap_bits; bits != ours)
      return fail(a.observations + ": scenario " + std::to_string(s) + " (" + all[s].scenario.name +
                  "): the recording target reports capabilities " + std::to_string(bits) +
                  " missing, its identity's cap_bits " + std::to_string(id.cap_bits) + " say " +
                  std::to_string(ours));

  // What the guest ran (unsupported ones too: run_scenarios reports them),
  // cut to the ops it recorded.
  std::vector<LoadedScenario> replayed;
  std::vector<size_t> origin;
  for (size_t s = 0; s < all.size(); ++s) {
    bool unsupported = (all[s].scenario.requires_caps & ~id.cap_bits) || why_by_index.count(s);
    auto it = by_index.find(s);
    if (!unsupported && it == by_index.end()) continue;
    replayed.push_back(all[s]);
    origin.push_back(s);
    if (!unsupported) {  // the runs recorded in full, or the start of the first
      Scenario& sc = replayed.back().scenario;
      size_t n = sc.ops.size(), got = it->second.size();
      if (got < n) sc.ops.resize(got);
      sc.repeat = got < n || n == 0 ? 1 : static_cast<uint32_t>(got / n);
    }
  }
  std::map<const Scenario*, std::vector<RecordedOp>> recorded;
  std::map<const Scenario*, std::string> why;
  for (size_t n = 0; n < replayed.size(); ++n) {
    auto it = by_index.find(origin[n]);
    if (it != by_index.end()) recorded[&replayed[n].scenario] = it->second;
    if (auto w = why_by_index.find(origin[n]); w != why_by_index.end()) why[&replayed[n].scenario] = w->second;
  }
  ReplayTarget target(id, std::move(recorded), std::move(why));
  std::unique_ptr<Model> model = is_ffa ? ffa::make_model(ffa_profile) : gmem::make_model(profile);

  std::FILE* out = stdout;
  if (!a.out.empty() && a.out != "-") {
    out = std::fopen(a.out.c_str(), "wx");  // never overwrite a verdict file
    if (!out) return fail("cannot create " + a.out + ": " + std::strerror(errno));
  }
  VerdictWriter writer(out);
  size_t total_ops = 0;
  for (const LoadedScenario& ls : replayed) total_ops += ls.scenario.ops.size();
  writer.plan(replayed.size(), total_ops);
  writer.target(id);
  RunStats stats = run_scenarios(replayed, *model, target, writer);
  writer.summary(stats.scenarios, stats.ops, stats.violations, seconds);
  if (out != stdout) std::fclose(out);
  std::fprintf(stderr, "kconform-runner: replayed %zu scenarios, %zu ops from %s: %zu pass, %zu violations, "
               "%zu unsupported, %zu unchecked\n",
               stats.scenarios, stats.ops, id.target.c_str(), stats.pass, stats.violations,
               stats.unsupported, stats.unchecked);
  return stats.violations ? kExitViolations : kExitClean;
}

}  // namespace

int replay_main(int argc, char** argv) {
  if (argc < 2) return -1;
  const std::string command = argv[1];
  if (command == "pack") return cmd_pack(argc, argv);
  if (command == "replay" || command == "judge") return cmd_replay(argc, argv);
  return -1;
}

}  // namespace kconform
