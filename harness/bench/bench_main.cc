// kconform-bench[-el2-<page size>]: Google Benchmark of the differential
// loop (model + target + judge + verdict stream, runner.h run_scenarios) over
// the directed suite and the Z3 cases of one target's ABI. One iteration runs
// every scenario once; items/s is scenarios per second on one core.
//
//   KCONFORM_BENCH_CORPUS  colon-separated scenario folders (default: the
//                          ABI's corpora/<abi> and corpora/z3/<abi>)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "harness/runner/runner.h"
#include "harness/runner/target_registry.h"
#ifdef KC_BENCH_EL2
#include "harness/runner/target_el2.h"
#endif

namespace {

using namespace kconform;

std::vector<std::string> corpus_files(const std::string& abi) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("KCONFORM_BENCH_CORPUS")) {
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');) dirs.push_back(d);
  } else {
    dirs = {std::string(KC_REPO_DIR) + "/corpora/" + abi, std::string(KC_REPO_DIR) + "/corpora/z3/" + abi};
  }
  std::vector<std::string> files;
  for (const std::string& d : dirs) {
    if (!std::filesystem::exists(d)) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(d))
      if (e.path().extension() == ".kcs") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void run_family(benchmark::State& state, const TargetFamily& family, const std::string& abi) {
  OpenTarget t;
  std::string error;
  if (!family.open(&t, &error)) {
    state.SkipWithError(("target cannot run: " + error).c_str());
    return;
  }
  std::vector<LoadedScenario> all, runnable;
  if (!load_all(corpus_files(abi), &all, &error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  // Only what this target runs (a scenario it lacks a capability for costs nothing).
  for (LoadedScenario& ls : all)
    if (!(ls.scenario.requires_caps & ~t.target->identity().cap_bits)) runnable.push_back(std::move(ls));
  std::FILE* sink = std::fopen("/dev/null", "w");
  size_t ops = 0;
  for (auto _ : state) {
    VerdictWriter writer(sink);
    RunStats st = run_scenarios(runnable, *t.model, *t.target, writer, t.invariants);
    ops += st.ops;
    benchmark::DoNotOptimize(st);
  }
  std::fclose(sink);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * runnable.size()));
  state.counters["scenarios"] = static_cast<double>(runnable.size());
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
}

#ifdef KC_BENCH_EL2
void BM_El2Differential(benchmark::State& state) { run_family(state, el2::el2_target_family(), "ffa"); }
BENCHMARK(BM_El2Differential)->Unit(benchmark::kMillisecond)->UseRealTime();
#else
void BM_HostGmemScenarios(benchmark::State& state) { run_family(state, host_target_family(), "gmem"); }
BENCHMARK(BM_HostGmemScenarios)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
