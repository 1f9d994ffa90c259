// kconform-bench[-el2-<page size>]: Google Benchmark of the differential
// loop (model + target + judge + verdict stream, runner.h run_scenarios) over
// the directed suite and the Z3 cases of one target's ABI. One iteration runs
// every scenario once; items/s is scenarios per second on one core.
//
//   KCONFORM_BENCH_CORPUS  colon-separated scenario folders and .kcs files
//                          (default: the ABI's corpora/<abi> and corpora/z3/<abi>)
#include <benchmark/benchmark.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "harness/runner/linearize.h"
#include "harness/runner/runner.h"
#include "harness/scenario/codec.h"
#include "harness/scenario/gmem_abi.h"
#include "models/gmem/model.h"
#include "harness/runner/target_registry.h"
#ifdef KC_BENCH_EL2
#include "harness/runner/target_el2.h"
#endif
#ifdef KC_BENCH_SPMC
#include "harness/runner/target_spmc.h"
#endif

namespace {

using namespace kconform;

// The .kcs files to time; false (with why) for an entry of
// KCONFORM_BENCH_CORPUS that does not exist.
bool corpus_files(const std::string& abi, std::vector<std::string>* files, std::string* error) {
  std::vector<std::string> dirs;
  const char* env = std::getenv("KCONFORM_BENCH_CORPUS");
  if (env) {
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');) dirs.push_back(d);
  } else {
    dirs = {std::string(KC_REPO_DIR) + "/corpora/" + abi, std::string(KC_REPO_DIR) + "/corpora/z3/" + abi};
  }
  for (const std::string& d : dirs) {
    if (!std::filesystem::exists(d)) {
      if (!env) continue;  // an ABI without Z3 cases
      *error = "KCONFORM_BENCH_CORPUS: " + d + ": no such file or folder";
      return false;
    }
    if (std::filesystem::is_regular_file(d)) {
      files->push_back(d);
      continue;
    }
    for (const auto& e : std::filesystem::recursive_directory_iterator(d))
      if (e.path().extension() == ".kcs") files->push_back(e.path().string());
  }
  std::sort(files->begin(), files->end());
  return true;
}

void run_family(benchmark::State& state, const TargetFamily& family, const std::string& abi) {
  OpenTarget t;
  std::string error;
  if (!family.open(&t, &error)) {
    state.SkipWithError(("target cannot run: " + error).c_str());
    return;
  }
  std::vector<LoadedScenario> all, runnable;
  std::vector<std::string> files;
  if (!corpus_files(abi, &files, &error) || !load_all(files, &all, &error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  // Only what this target runs (a scenario it lacks a capability for costs nothing).
  std::FILE* sink = std::fopen("/dev/null", "w");
  // In-process code under test may loop for ever or crash on a scenario (stock
  // ffa.c on corpora/ffa/el3_reclaim.kcs's *-stall cases, CRASH.HANG, and
  // frag1-huge, a SEGV: findings that `run` reports through its watchdog and
  // crash marker): each scenario is tried once in a child first, and one that
  // does not end cleanly within 5 s is left out of the timing ("crashed" counter).
  size_t hung = 0;
  for (LoadedScenario& ls : all) {
    if (ls.scenario.requires_caps & ~t.target->identity().cap_bits) continue;
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(5);
      std::vector<LoadedScenario> one{ls};
      VerdictWriter w(sink);
      run_scenarios(one, *t.model, *t.target, w, t.invariants);
      _exit(0);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      ++hung;
      continue;
    }
    runnable.push_back(std::move(ls));
  }
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
  state.counters["crashed"] = static_cast<double>(hung);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
}

#if defined(KC_BENCH_EL2)
void BM_El2Differential(benchmark::State& state) { run_family(state, el2::el2_target_family(), "ffa"); }
BENCHMARK(BM_El2Differential)->Unit(benchmark::kMillisecond)->UseRealTime();
#ifdef KC_HAVE_TFA
// The same ffa.c with TF-A's EL3 SPMC behind it (`run --target el2 --el3 tf-a`).
void BM_El2TfaDifferential(benchmark::State& state) { run_family(state, el2::el2_tfa_target_family(), "ffa"); }
BENCHMARK(BM_El2TfaDifferential)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
#elif defined(KC_BENCH_SPMC)
// TF-A's EL3 SPMC called straight from the Normal world (4K scenarios), judged
// by the SPMC-side model.
void BM_SpmcDifferential(benchmark::State& state) { run_family(state, spmc::spmc_target_family(4096), "ffa"); }
BENCHMARK(BM_SpmcDifferential)->Unit(benchmark::kMillisecond)->UseRealTime();
#else
void BM_HostGmemScenarios(benchmark::State& state) { run_family(state, host_target_family(), "gmem"); }
BENCHMARK(BM_HostGmemScenarios)->Unit(benchmark::kMillisecond)->UseRealTime();

// The linearizability checker (harness/runner/linearize.h) alone, on a
// history no interleaving explains, so every iteration searches the whole
// space: three threads, two of two 3-page pwrites and one of two punches, on
// a 4-page file, then a load whose byte no write stores. items/s: complete
// interleavings of the group reached per second (each then judged against the
// ops after it); "states_per_s": search states visited.
void BM_LinearizeSearch(benchmark::State& state) {
  std::vector<Scenario> parsed;
  std::string error;
  const char* text =
      "kconform-scenario 2\nabi gmem\nname bench/linearize\ncreate_vm\n"
      "create_gmem vm=0 size=0x4000 flags=MMAP|INIT_SHARED|WRITE\nmmap gmem=0 offset=0 len=0x4000\n"
      "@1 pwrite gmem=0 offset=0 len=0x3000 pattern=3\n@1 pwrite gmem=0 offset=0x1000 len=0x3000 pattern=4\n"
      "@2 pwrite gmem=0 offset=0 len=0x3000 pattern=5\n@2 pwrite gmem=0 offset=0x1000 len=0x3000 pattern=6\n"
      "@3 fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x2000\n"
      "@3 fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0x2000 len=0x2000\n"
      "load map=0 offset=0 len=1\n";
  if (!parse_text(text, "bench", &parsed, &error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  const Scenario& s = parsed[0];
  gmem::Profile p;
  p.write_abi = true;
  p.supported_flags[0] = p.supported_flags[1] = gmem::kFlagMmap | gmem::kFlagInitShared | gmem::kFlagWrite;
  p.user_memory2 = true;
  p.gmem_on_vm_type[0] = true;
  std::unique_ptr<Model> model = gmem::make_model(p);
  auto* cm = dynamic_cast<ConcurrentModel*>(model.get());
  std::vector<Outcome> observed(7, Outcome::ok(0x3000));
  observed[4] = observed[5] = Outcome::ok(0);
  observed[6] = Outcome::ok(0, 0x1234);  // a digest no byte has
  std::vector<StepResult> results;
  uint64_t interleavings = 0, nodes = 0;
  for (auto _ : state) {
    model->begin(s);
    for (size_t i = 0; i < 3; ++i) model->commit(s, i, Outcome::ok(0));
    LinearizeStats st;
    bool ok = linearize(*cm, s, 3, s.ops.size(), observed, &results, &st);
    if (ok || st.budget_exhausted) {
      state.SkipWithError("the bench history must be searched in full and fail");
      return;
    }
    interleavings += st.interleavings;
    nodes += st.nodes;
  }
  state.SetItemsProcessed(static_cast<int64_t>(interleavings));
  state.counters["interleavings_per_search"] =
      static_cast<double>(interleavings) / static_cast<double>(state.iterations());
  state.counters["states_per_s"] = benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LinearizeSearch)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
