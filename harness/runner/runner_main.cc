// The kconform-runner command line (runner_main.h), shared by every runner
// executable; each links its target families (target_registry.h).
//
//   kconform-runner run [--target NAME] [--fault SPEC] [--out FILE] [--from N] [--watchdog SECONDS] FILE...
//   kconform-runner probe [--target NAME]
//   kconform-runner rules
//   kconform-runner ops
//   kconform-runner targets
//   kconform-runner faults [--fault SPEC]
//   kconform-runner convert --to text|binary [--out-dir DIR] FILE...
//   kconform-runner check FILE...
//
// `run --from N` skips the first N scenarios of the load order (the driver
// resumes there after a crash: crash_marker.h). `--watchdog SECONDS` ends the
// run with a "hang" marker when one op stays in flight longer (0: no
// watchdog; default: the target family's, 5 s for el2).
//
// Exit status: 0 clean, 1 violations found, 2 the runner could not run,
// 3 a sanitizer report during a run, 4 the watchdog saw an op hang
// (crash_marker.h; a signal kills the process with that signal after the
// same marker).
#include "harness/runner/runner_main.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/runner/crash_marker.h"
#include "harness/runner/group.h"
#include "harness/runner/runner.h"
#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"
#include "models/common/rules.h"
#include "targets/faulty/faulty_target.h"

namespace kconform {

namespace {

constexpr int kExitClean = 0, kExitViolations = 1, kExitError = 2;

// An error message on stderr, every non-printable byte but a newline escaped as \xNN:
// a NUL in a scenario file's token must not cut the message short.
void report_error(const std::string& error) {
  std::string out;
  for (unsigned char c : error) {
    if (c == '\n' || (c >= 0x20 && c < 0x7f) || c >= 0x80) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  std::fprintf(stderr, "kconform-runner: %s\n", out.c_str());
}

std::span<const TargetFamily* const> g_families;

int usage(const char* why) {
  std::fprintf(stderr,
               "kconform-runner: %s\n"
               "usage: kconform-runner run [--target NAME] [--fault SPEC] [--out FILE] [--from N] [--watchdog SECONDS] FILE...\n"
               "       kconform-runner probe [--target NAME] | rules | ops | targets | faults [--fault SPEC]\n"
               "       kconform-runner convert --to text|binary [--out-dir DIR] FILE...\n"
               "       kconform-runner check FILE...\n"
               "targets (the first is the default):\n",
               why);
  for (const TargetFamily* f : g_families) std::fprintf(stderr, "  %-6s %s\n", f->name, f->summary);
  return kExitError;
}

struct Args {
  std::string command, target, fault, out, to, out_dir, from, watchdog;
  std::vector<std::string> files;
};

bool parse_args(int argc, char** argv, Args* a, std::string* error) {
  if (argc < 2) {
    *error = "no command";
    return false;
  }
  a->command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= argc) {
        *error = "flag " + arg + " needs a value";
        return false;
      }
      *dst = argv[++i];
      return true;
    };
    if (arg == "--target") {
      if (!value(&a->target)) return false;
    } else if (arg == "--fault") {
      if (!value(&a->fault)) return false;
    } else if (arg == "--out") {
      if (!value(&a->out)) return false;
    } else if (arg == "--from") {
      if (!value(&a->from)) return false;
    } else if (arg == "--watchdog") {
      if (!value(&a->watchdog)) return false;
    } else if (arg == "--to") {
      if (!value(&a->to)) return false;
    } else if (arg == "--out-dir") {
      if (!value(&a->out_dir)) return false;
    } else if (arg.rfind("--", 0) == 0) {
      *error = "unknown flag " + arg;
      return false;
    } else {
      a->files.push_back(arg);
    }
  }
  return true;
}

bool open_target(const Args& a, OpenTarget* out, std::string* error) {
  return open_target(g_families, a.target, a.fault, out, error);
}

int cmd_rules() {
  for (const RuleInfo& r : all_rules().subspan(1)) {
    std::puts(nlohmann::json{{"id", r.id}, {"abi", r.abi}, {"summary", r.summary}, {"citation", r.citation}}
                  .dump()
                  .c_str());
  }
  return kExitClean;
}

int cmd_ops() {
  for (const AbiSpec* spec : all_abis()) {
    const AbiSpec& abi = *spec;
    for (const OpSpec& op : abi.ops) {
      nlohmann::json args = nlohmann::json::array();
      for (const ArgSpec& arg : op.args) args.push_back(arg.name);
      std::puts(nlohmann::json{{"abi", abi.name}, {"op", op.name}, {"args", args}, {"doc", op.doc}}
                    .dump()
                    .c_str());
    }
  }
  return kExitClean;
}

int cmd_targets() {
  for (const TargetFamily* f : g_families)
    std::puts(nlohmann::json{{"target", f->name}, {"summary", f->summary}}.dump().c_str());
  return kExitClean;
}

// Every --fault KIND:OP that applies, per ABI (targets/faulty: the self-test's
// matrix); with --fault SPEC, whether SPEC applies to each ABI and why not
// (exit 2 if it does not parse).
int cmd_faults(const Args& a) {
  if (a.fault.empty()) {
    for (const AbiSpec* abi : all_abis())
      for (const std::string& f : applicable_faults(*abi))
        std::puts(nlohmann::json{{"abi", abi->name}, {"fault", f}}.dump().c_str());
    return kExitClean;
  }
  std::string error;
  std::optional<FaultSpec> spec = parse_fault_spec(a.fault, &error);
  if (!spec) {
    report_error("flag --fault: " + error);
    return kExitError;
  }
  for (const AbiSpec* abi : all_abis()) {
    error.clear();
    const bool applies = fault_applies(*spec, *abi, &error);
    std::puts(nlohmann::json{{"abi", abi->name}, {"fault", spec->text}, {"applies", applies}, {"why", error}}
                  .dump()
                  .c_str());
  }
  return kExitClean;
}

int cmd_probe(const Args& a) {
  OpenTarget t;
  std::string error;
  if (!open_target(a, &t, &error)) {
    report_error(error);
    return kExitError;
  }
  VerdictWriter(stdout).target(t.target->identity());
  return kExitClean;
}

int cmd_check(const Args& a) {
  std::vector<LoadedScenario> all;
  std::string error;
  if (!load_all(a.files, &all, &error)) {
    report_error(error);
    return kExitError;
  }
  std::printf("%zu scenarios OK\n", all.size());
  return kExitClean;
}

std::string file_stem_for(const Scenario& s) {
  std::string out;
  for (char c : s.name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '.';
  return out;
}

int cmd_convert(const Args& a) {
  if (a.to != "text" && a.to != "binary") return usage("convert needs --to text or --to binary");
  std::vector<LoadedScenario> all;
  std::string error;
  if (!load_all(a.files, &all, &error)) {
    report_error(error);
    return kExitError;
  }
  for (const LoadedScenario& ls : all) {
    if (a.to == "text") {
      std::fputs(format_text(ls.scenario).c_str(), stdout);
      continue;
    }
    if (a.out_dir.empty()) return usage("convert --to binary needs --out-dir");
    std::string path = a.out_dir + "/" + file_stem_for(ls.scenario) + ".kcsb";
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      std::fprintf(stderr, "kconform-runner: %s exists; not overwriting it\n", path.c_str());
      return kExitError;
    }
    std::vector<uint8_t> bytes = encode_binary(ls.scenario);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      std::fprintf(stderr, "kconform-runner: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
      return kExitError;
    }
  }
  return kExitClean;
}

// A flag's value as a non-negative number (integer if `integer`); false and
// *error naming the flag otherwise.
bool number_flag(const char* flag, const std::string& text, bool integer, double* out, std::string* error) {
  char* end = nullptr;
  errno = 0;
  const double v = text.empty() ? -1 : std::strtod(text.c_str(), &end);
  if (text.empty() || errno || *end || !(v >= 0) || v > 1e9 || (integer && v != static_cast<double>(static_cast<uint64_t>(v)))) {
    *error = std::string("flag ") + flag + ": '" + text + "' is not a non-negative " + (integer ? "integer" : "number");
    return false;
  }
  *out = v;
  return true;
}

int cmd_run(const Args& a) {
  if (a.files.empty()) return usage("run needs scenario files");
  std::vector<LoadedScenario> all;
  std::string error;
  double from = 0, watchdog = -1;
  if ((!a.from.empty() && !number_flag("--from", a.from, true, &from, &error)) ||
      (!a.watchdog.empty() && !number_flag("--watchdog", a.watchdog, false, &watchdog, &error))) {
    report_error(error);
    return kExitError;
  }
  if (!load_all(a.files, &all, &error) || !scale_repeats(scenario_ptrs(all), &error)) {
    report_error(error);
    return kExitError;
  }
  if (from > static_cast<double>(all.size())) {
    report_error("flag --from: " + a.from + " is past the last of the " + std::to_string(all.size()) + " scenarios");
    return kExitError;
  }
  all.erase(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(from));
  OpenTarget t;
  if (!open_target(a, &t, &error)) {
    report_error(error);
    return kExitError;
  }
  std::FILE* out = stdout;
  if (!a.out.empty() && a.out != "-") {
    out = std::fopen(a.out.c_str(), "wx");  // never overwrite a verdict file
    if (!out) {
      std::fprintf(stderr, "kconform-runner: cannot create %s: %s\n", a.out.c_str(), std::strerror(errno));
      return kExitError;
    }
  }
  VerdictWriter writer(out);
  size_t total_ops = 0;
  for (const LoadedScenario& ls : all) total_ops += ls.scenario.ops.size();
  writer.plan(all.size(), total_ops);
  writer.target(t.target->identity());
  auto start = std::chrono::steady_clock::now();
  install_crash_marker();
  start_watchdog(watchdog >= 0 ? watchdog : t.watchdog_seconds);
  RunStats stats = run_scenarios(all, *t.model, *t.target, writer, t.invariants);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto* faulty = dynamic_cast<const FaultyTarget*>(t.target.get());
  FaultReport fault;
  if (faulty) fault = {faulty->spec().text, faulty->fired(), faulty->scenarios_fired()};
  writer.summary(stats.scenarios, stats.ops, stats.violations, secs, faulty ? &fault : nullptr);
  if (out != stdout) std::fclose(out);
  std::fprintf(stderr, "kconform-runner: %zu scenarios, %zu ops, %zu pass, %zu violations, %zu unsupported, %zu unchecked, %.3f s\n",
               stats.scenarios, stats.ops, stats.pass, stats.violations, stats.unsupported, stats.unchecked, secs);
  if (faulty)
    std::fprintf(stderr, "kconform-runner: fault %s fired %llu times in %llu scenarios\n", fault.spec.c_str(),
                 static_cast<unsigned long long>(fault.fired), static_cast<unsigned long long>(fault.scenarios));
  return stats.violations ? kExitViolations : kExitClean;
}

}  // namespace

bool open_target(std::span<const TargetFamily* const> families, const std::string& name, const std::string& fault,
                 OpenTarget* out, std::string* error) {
  const TargetFamily* family = nullptr;
  for (const TargetFamily* f : families)
    if (name == f->name) family = f;
  if (!family) {
    std::string known;
    for (const TargetFamily* f : families) known += (known.empty() ? "" : ", ") + std::string(f->name);
    *error = "flag --target: unknown target '" + name + "' (known: " + known + ")";
    return false;
  }
  std::optional<FaultSpec> spec;
  std::string why;
  if (!fault.empty() && !(spec = parse_fault_spec(fault, &why))) {
    *error = "flag --fault: " + why;
    return false;
  }
  if (!family->open(out, &why)) {
    *error = "target " + name + ": " + why;
    return false;
  }
  out->watchdog_seconds = family->watchdog_seconds;
  if (spec) {
    // Refused before anything runs: a kind that cannot change this ABI's results.
    const AbiSpec* abi = target_abi(out->target->identity());
    if (!abi || !fault_applies(*spec, *abi, &why)) {
      *error = "flag --fault: " + (abi ? why : "target " + name + " reports no ABI in its profile '" +
                                                   out->target->identity().profile + "'");
      *out = OpenTarget{};
      return false;
    }
    out->target = wrap_faulty(std::move(out->target), *spec);
  }
  return true;
}

int runner_main(int argc, char** argv, std::span<const TargetFamily* const> families) {
  g_families = families;
  Args a;
  std::string error;
  if (!parse_args(argc, argv, &a, &error)) return usage(error.c_str());
  if (a.target.empty() && !families.empty()) a.target = families[0]->name;
  if (a.command == "run") return cmd_run(a);
  if (a.command == "probe") return cmd_probe(a);
  if (a.command == "rules") return cmd_rules();
  if (a.command == "ops") return cmd_ops();
  if (a.command == "targets") return cmd_targets();
  if (a.command == "faults") return cmd_faults(a);
  if (a.command == "convert") return cmd_convert(a);
  if (a.command == "check") return cmd_check(a);
  return usage(("unknown command '" + a.command + "'").c_str());
}

}  // namespace kconform
