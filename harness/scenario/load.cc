// Shared validation and reading scenario files of either encoding.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "harness/scenario/abi.h"
#include "harness/scenario/codec.h"

namespace kconform {

bool validate(const Scenario& s, std::string* error) {
  auto fail = [&](size_t i, const char* op, const char* field, const std::string& msg) {
    *error = "op " + std::to_string(i) + " (" + op + ") field '" + field + "': " + msg;
    return false;
  };
  if (s.version < kScenarioVersionPlain || s.version > kScenarioVersion) {
    *error = "version " + std::to_string(s.version) + " is not supported (this build reads 1 to " +
             std::to_string(kScenarioVersion) + ")";
    return false;
  }
  if (s.repeat < 1 || s.repeat > kMaxRepeat) {
    *error = "field 'repeat': " + std::to_string(s.repeat) + " is out of range 1.." +
             std::to_string(kMaxRepeat);
    return false;
  }
  if (s.version < 2 && s.repeat != 1) {
    *error = "field 'repeat': needs scenario version 2";
    return false;
  }
  if (s.abi != Abi::kGmem && s.abi != Abi::kFfa) {
    *error = "abi " + std::to_string(static_cast<int>(s.abi)) + " is not known";
    return false;
  }
  if (s.name.empty() || s.name.size() > kMaxNameBytes) {
    *error = "field 'name': must be 1 to " + std::to_string(kMaxNameBytes) + " characters";
    return false;
  }
  for (char c : s.name) {
    if (c <= ' ' || c > '~' || c == '#') {
      *error = "field 'name': only printable characters other than space and '#'";
      return false;
    }
  }
  if (s.ops.size() > kMaxOps) {
    *error = "more than " + std::to_string(kMaxOps) + " ops";
    return false;
  }
  const AbiSpec& abi = abi_spec(s.abi);
  if (s.requires_caps >> abi.capabilities.size()) {
    *error = "requires: unknown capability bits";
    return false;
  }
  std::vector<uint64_t> produced(abi.resources.size(), 0);
  uint64_t next_blob = 0;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.code >= abi.ops.size()) {
      *error = "op " + std::to_string(i) + ": unknown op code " + std::to_string(op.code);
      return false;
    }
    const OpSpec& spec = abi.ops[op.code];
    for (size_t a = 0; a < kMaxArgs; ++a) {
      if (a >= spec.args.size()) {
        if (op.args[a] != 0) return fail(i, spec.name, "-", "argument beyond the op's list is set");
        continue;
      }
      const ArgSpec& arg = spec.args[a];
      if (arg.kind == ArgKind::kSlot && op.args[a] >= produced[arg.resource]) {
        return fail(i, spec.name, arg.name,
                    "refers to " + std::string(abi.resources[arg.resource]) + " #" +
                        std::to_string(op.args[a]) + " but only " +
                        std::to_string(produced[arg.resource]) + " created before it");
      }
      if (arg.kind == ArgKind::kBytes) {
        if (op.args[a] != next_blob || next_blob >= s.blobs.size())
          return fail(i, spec.name, arg.name, "byte string out of order or missing");
        if (s.blobs[next_blob].size() > kMaxBlobBytes)
          return fail(i, spec.name, arg.name, "byte string larger than 1 MiB");
        ++next_blob;
      }
    }
    if (op.thread != 0) {
      if (s.version < 2) return fail(i, spec.name, "thread", "needs scenario version 2");
      if (op.thread > kMaxThreads)
        return fail(i, spec.name, "thread",
                    std::to_string(op.thread) + " is out of range 1.." + std::to_string(kMaxThreads));
      if (spec.produces >= 0)
        return fail(i, spec.name, "thread",
                    std::string(spec.name) + " creates a " + abi.resources[spec.produces] +
                        " and cannot run in a concurrent group (its slot would depend on timing)");
      // The first op of a group checks the whole group: at least two threads.
      if (i == 0 || s.ops[i - 1].thread == 0) {
        size_t end = group_end(s, i);
        bool two = false;
        for (size_t k = i; k < end; ++k) two = two || s.ops[k].thread != op.thread;
        if (!two)
          return fail(i, spec.name, "thread",
                      "the concurrent group of ops " + std::to_string(i) + ".." + std::to_string(end - 1) +
                          " has only thread " + std::to_string(op.thread) +
                          "; a group needs at least two threads");
      }
    }
    if (spec.produces >= 0) ++produced[spec.produces];
  }
  if (next_blob != s.blobs.size()) {
    *error = "byte strings that no op refers to";
    return false;
  }
  return true;
}

bool load_scenario_file(const std::string& path, std::vector<Scenario>* out, std::string* error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *error = path + ": cannot open: is a folder, not a scenario file";
    return false;
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    *error = path + ": cannot open: " + (e ? std::strerror(e) : "unknown error");
    return false;
  }
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.empty()) {
    *error = path + (S_ISREG(st.st_mode) ? ": empty file, not a scenario"
                                         : ": not a regular file and nothing could be read from it");
    return false;
  }
  if (data.size() >= 4 && data.compare(0, 4, kBinaryMagic, 4) == 0) {
    Scenario s;
    std::string why;
    if (!decode_binary({reinterpret_cast<const uint8_t*>(data.data()), data.size()}, &s, &why)) {
      *error = path + ": " + why;
      return false;
    }
    out->push_back(std::move(s));
    return true;
  }
  return parse_text(data, path, out, error);
}

}  // namespace kconform
