// kconform-qemu-agent: runs guest_memfd scenarios inside a kernel booted in
// QEMU with the host target's code (targets/host_gmem: inside the guest,
// /dev/kvm is the guest kernel's) and sends what each op did (Outcomes, not
// verdicts: the host runs the model and judges) as frames (frame.h).
//
// Started by the initramfs's /init (targets/qemu/initramfs/init). Reads:
//   /proc/cmdline         kconform.port=/dev/ttyS1 (where frames go; default /dev/console)
//                         kconform.from=N (skip scenarios before N: the host resumes
//                         after a scenario that crashed the guest)
//   /kconform/modules/order + *.ko    modules to load first (KVM where modular)
//   /kconform/scenarios/NNNNNN.kcsb   scenarios in binary form; NNNNNN is the
//                         scenario's position in the host's list (its "s")
// Frames, in order (JSON payloads, field "t" names the kind):
//   hello   {uname, cmdline, uptime}            first thing after start
//   module  {name, ok, errno?}                  one per module
//   probe   {ok, error?, release, profile{...}, caps[[name, v]], cap_bits}
//   begin   {s, name}  op {s, i, k, v, a, c?}  end {s}  per scenario; c: the pages
//                                               re-read after an op that can change data
//                                               and after the last op (models/common/contents.h)
//   skip    {s, missing}                        needs capabilities the kernel lacks
//   bad     {s, error}                          scenario file did not decode
//   done    {scenarios, ops, seconds, uptime}   the last frame
// Each begin is also written to /dev/kmsg ("kconform: begin s=N NAME"), so a
// kernel oops on the console shows which scenario was in flight. At the end
// the agent exits QEMU through isa-debug-exit (port 0xf4) when it is there,
// else powers off; /init powers off if the agent dies.
#include <dirent.h>
#include <fcntl.h>
#include <sys/io.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/scenario/codec.h"
#include "harness/scenario/gmem_abi.h"
#include "models/common/contents.h"
#include "targets/host_gmem/host_target.h"
#include "targets/qemu/wire/frame.h"
#include "targets/qemu/wire/guest_io.h"

namespace kconform::qemu {
namespace {

using nlohmann::json;

constexpr const char* kRoot = "/kconform";

// isa-debug-exit: QEMU exits with status (value << 1) | 1.
void leave_guest() {
  sync();
  if (ioperm(0xf4, 4, 1) == 0) outl(0, 0xf4);
  reboot(RB_POWER_OFF);
}

void load_modules(Sender& out) {
  std::string dir = std::string(kRoot) + "/modules/";
  std::string order = read_file(dir + "order");
  size_t pos = 0;
  while (pos < order.size()) {
    size_t nl = order.find('\n', pos);
    std::string name = order.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? order.size() : nl + 1;
    if (name.empty()) continue;
    int fd = open((dir + name).c_str(), O_RDONLY | O_CLOEXEC);
    int e = 0;
    if (fd < 0 || syscall(SYS_finit_module, fd, "", 0) != 0) e = errno;
    if (fd >= 0) close(fd);
    json r{{"t", "module"}, {"name", name}, {"ok", e == 0 || e == EEXIST}};
    if (e) r["errno"] = errno_name(e);
    out.send(r);
  }
}

json probe_record(const host_gmem::HostOpen& h) {
  if (!h.target) return json{{"t", "probe"}, {"ok", false}, {"error", h.error}};
  const TargetIdentity& id = h.target->identity();
  const gmem::Profile& p = h.profile;
  json caps = json::array();
  for (const auto& [name, value] : id.caps) caps.push_back(json::array({name, value}));
  return json{{"t", "probe"},
              {"ok", true},
              {"release", id.release},
              {"profile_name", id.profile},
              {"profile",
               {{"write_abi", p.write_abi},
                {"page_size", p.page_size},
                {"supported_flags", {p.supported_flags[0], p.supported_flags[1]}},
                {"vm_types", p.vm_types},
                {"user_memory2", p.user_memory2},
                {"gmem_on_vm_type", {p.gmem_on_vm_type[0], p.gmem_on_vm_type[1]}}}},
              {"caps", caps},
              {"cap_bits", id.cap_bits}};
}

int run() {
  std::string cmdline = read_file("/proc/cmdline");
  int fd = open_port(cmdline, "/dev/console");
  if (fd < 0) return 2;
  Sender out(fd);
  struct utsname u;
  uname(&u);
  out.send({{"t", "hello"},
            {"uname", {{"sysname", u.sysname}, {"release", u.release}, {"version", u.version},
                       {"machine", u.machine}}},
            {"cmdline", cmdline.substr(0, cmdline.find('\n'))},
            {"uptime", uptime()}});
  load_modules(out);

  host_gmem::HostOpen h = host_gmem::open_host_target();
  out.send(probe_record(h));
  uint64_t from = std::strtoull(cmdline_value(cmdline, "kconform.from", "0").c_str(), nullptr, 10);
  size_t scenarios = 0, ops = 0;
  auto start = std::chrono::steady_clock::now();
  if (h.target) {
    Target& target = *h.target;
    std::string dir = std::string(kRoot) + "/scenarios/";
    for (const std::string& name : scenario_files(kRoot)) {
      uint64_t s = std::strtoull(name.c_str(), nullptr, 10);
      if (s < from) continue;
      std::string bytes = read_file(dir + name);
      Scenario sc;
      std::string error;
      if (!decode_binary({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, &sc, &error)) {
        out.send({{"t", "bad"}, {"s", s}, {"error", error}});
        continue;
      }
      uint32_t missing = sc.requires_caps & ~target.identity().cap_bits;
      if (missing) {
        out.send({{"t", "skip"}, {"s", s}, {"missing", missing}});
        continue;
      }
      ++scenarios;
      kmsg("begin s=" + std::to_string(s) + " " + sc.name);
      out.send({{"t", "begin"}, {"s", s}, {"name", sc.name}});
      // `repeat N`: N runs, their op frames one after the other (the host's
      // replay serves them run by run); a concurrent group runs through
      // exec_group with the jitter seed the host runner uses (jitter_seed).
      // After an op that can change data, and after the last op, the pages
      // are re-read ("c"); a group's ops are judged together, without.
      const std::vector<PatternHint> hints = host_gmem::pattern_hints(sc);
      Contents seen;
      for (uint32_t rep = 0; rep < sc.repeat; ++rep) {
        target.begin(sc);
        for (size_t i = 0; i < sc.ops.size();) {
          const bool in_group = sc.ops[i].thread != 0;
          size_t end = in_group ? group_end(sc, i) : i + 1;
          std::vector<Outcome> got(end - i);
          if (in_group) {
            target.exec_group(sc, i, end, jitter_seed(sc, rep), got.data());
          } else {
            got[0] = target.exec(sc, i);
          }
          for (const Outcome& o : got) {
            ++ops;
            json rec{{"t", "op"}, {"s", s}, {"i", i}, {"k", static_cast<int>(o.kind)}, {"v", o.value}, {"a", o.aux}};
            const bool reread = !in_group && (i + 1 == sc.ops.size() || gmem::changes_data(sc.ops[i].code));
            if (reread && target.observe(sc, i, &seen))
              rec["c"] = encode_contents(seen, hints, h.profile.page_size);
            out.send(rec);
            ++i;
          }
        }
        target.end();
      }
      out.send({{"t", "end"}, {"s", s}});
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.send({{"t", "done"}, {"scenarios", scenarios}, {"ops", ops}, {"seconds", secs},
            {"uptime", uptime()}});
  tcdrain(fd);
  close(fd);
  if (getpid() != 1 && cmdline.find("kconform.exit=1") != std::string::npos) leave_guest();
  return 0;
}

}  // namespace
}  // namespace kconform::qemu

int main() { return kconform::qemu::run(); }
