// kconform-gen: writes the Z3 edge cases of every ABI function (constraints
// in gmem_constraints.cc and ffa_constraints.cc) as scenario files.
//
//   kconform-gen --out DIR [--abi gmem|ffa|all] [--gmem-page N] [--ffa-page N]... [--check]
//
// Writes DIR/<abi>/<function>.kcs; the same input always gives the same
// bytes. --check writes nothing and exits 1 if any file differs from what
// would be written. Prints one JSON line per function and a summary line.
// Exit status: 0 ok, 1 --check found a difference, 2 usage or I/O error.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/gen/constraints.h"
#include "harness/gen/generate.h"

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "kconform-gen: %s\nusage: kconform-gen --out DIR [--abi gmem|ffa|all] [--gmem-page N] "
               "[--ffa-page N]... [--check]\n",
               why);
  return 2;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kconform::gen;
  std::string out, abi = "all";
  bool check = false;
  GenConfig cfg;
  std::vector<uint64_t> ffa_pages;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--out") {
      const char* v = value();
      if (!v) return usage("--out needs a folder");
      out = v;
    } else if (a == "--abi") {
      const char* v = value();
      if (!v) return usage("--abi needs gmem, ffa or all");
      abi = v;
    } else if (a == "--gmem-page") {
      const char* v = value();
      if (!v) return usage("--gmem-page needs a size");
      cfg.gmem_page = std::strtoull(v, nullptr, 0);
    } else if (a == "--ffa-page") {
      const char* v = value();
      if (!v) return usage("--ffa-page needs a size");
      ffa_pages.push_back(std::strtoull(v, nullptr, 0));
    } else if (a == "--check") {
      check = true;
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  if (out.empty()) return usage("--out is required");
  if (abi != "gmem" && abi != "ffa" && abi != "all") return usage("--abi must be gmem, ffa or all");
  if (!ffa_pages.empty()) cfg.ffa_pages = ffa_pages;
  for (uint64_t p : cfg.ffa_pages)
    if (p != 4096 && p != 16384 && p != 65536) return usage("--ffa-page must be 4096, 16384 or 65536");
  if (cfg.gmem_page == 0 || (cfg.gmem_page & (cfg.gmem_page - 1))) return usage("--gmem-page must be a power of 2");

  const auto t0 = std::chrono::steady_clock::now();
  // One Z3 context per ABI: what Z3 answers depends on every term its context
  // holds, so --abi gmem and --abi all must not share one (they wrote different
  // gmem files when they did).
  z3::context gmem_ctx, ffa_ctx;
  Vocab gmem_vocab(gmem_ctx), ffa_vocab(ffa_ctx);
  std::vector<Function> fns;
  if (abi != "ffa")
    for (Function& f : gmem_functions(gmem_vocab, cfg)) fns.push_back(std::move(f));
  if (abi != "gmem")
    for (Function& f : ffa_functions(ffa_vocab, cfg)) fns.push_back(std::move(f));

  int differ = 0;
  size_t total_cases = 0;
  for (const Function& f : fns) {
    const auto f0 = std::chrono::steady_clock::now();
    GenStats st;
    std::vector<Case> cases = generate(f, &st);
    std::string text = format_cases(f, cases, &st);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count();
    std::filesystem::path dir = std::filesystem::path(out) / f.abi;
    std::filesystem::path file = dir / (f.name + ".kcs");
    if (check) {
      if (!std::filesystem::exists(file) || read_file(file) != text) {
        std::fprintf(stderr, "kconform-gen: %s is not what the generator writes (run ./kconform gen)\n",
                     file.c_str());
        differ = 1;
      }
    } else {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      std::ofstream o(file, std::ios::binary | std::ios::trunc);
      o << text;
      if (!o) {
        std::fprintf(stderr, "kconform-gen: cannot write %s\n", file.c_str());
        return 2;
      }
    }
    total_cases += cases.size();
    std::string iso;
    for (const std::string& n : st.not_isolable) iso += (iso.empty() ? "\"" : ",\"") + n + "\"";
    std::string unreachable;
    for (const std::string& n : st.unreachable) unreachable += (unreachable.empty() ? "\"" : ",\"") + n + "\"";
    std::printf("{\"abi\":\"%s\",\"function\":\"%s\",\"file\":\"%s\",\"conditions\":%zu,\"cases\":%zu,"
                "\"queries\":%zu,\"relaxed\":%zu,\"unsat\":%zu,\"duplicates\":%zu,\"seconds\":%.3f,"
                "\"not_isolable\":[%s],\"unreachable\":[%s]}\n",
                f.abi.c_str(), f.name.c_str(), file.c_str(), f.conds.size(), cases.size(), st.queries, st.relaxed,
                st.unsat, st.duplicates, secs, iso.c_str(), unreachable.c_str());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"summary\":true,\"functions\":%zu,\"cases\":%zu,\"seconds\":%.3f,\"z3\":\"%s\"}\n", fns.size(),
              total_cases, secs, Z3_get_full_version());
  return differ;
}
