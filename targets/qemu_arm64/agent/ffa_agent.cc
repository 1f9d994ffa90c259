// kconform-ffa-agent: runs FF-A scenarios from the host kernel of Debian's
// arm64 kernel in pKVM protected mode, under QEMU with TF-A's EL3 SPMC
// (targets/qemu_arm64), and sends what each op did (Outcomes with x0..x7, not
// verdicts: the host replays them through the FF-A model) as frames
// (targets/qemu/wire/frame.h).
//
// Its kernel half is our module kcffa (targets/qemu_arm64/module): /dev/kcffa
// issues one SMC with x0..x17 (trapped by pKVM at EL2) and maps one physically
// contiguous buffer that stands for the scenarios' harness RAM
// (models/ffa/scenario_ops.h harness_ram: host pages from phys_base). Every
// address of that range in an address register (by function ID: RXTX_MAP's
// mailboxes, a send's or retrieve's buffer) or in a descriptor's constituents
// is translated to the buffer (pa = buf_pa + addr - phys_base), and a
// translated register echoed back reads as the scenario gave it; an address
// outside it that is RAM of this machine
// (0x40000000..0x80000000, the kernel's own memory) is moved to MMIO space
// (kOutside) so that no scenario shares or lends a page the kernel uses. The
// calls and descriptor bytes come from the model's own builders
// (scenario_ops.h host_regs, tx_bytes, tx_clip, host_mem_len), so both sides
// build the same call from the same op.
//
// The real pKVM and TF-A cannot be reset between scenarios. After each one the
// agent reclaims every handle it produced that is still live and unmaps the
// mailboxes; a scenario runs in this boot only if pKVM's FF-A state is then the
// one the model starts from: nothing called yet, or the version fixed by the
// same FFA_VERSION request as the scenario's first call. Otherwise the agent
// stops (frame "stop": reason "fresh" before the scenario, "taint" after a
// cleanup that failed) and the host boots again from the scenario named.
//
// Reads /proc/cmdline: kconform.port=DEV (frames; default /dev/hvc0),
// kconform.from=N (skip scenarios before N), kconform.caps=BITS (capabilities of the
// kernel the host knows and the guest cannot ask for, kCapReclaim2: its ffa.c
// handles RECLAIM2; added to the page size's). Scenarios: /kconform/scenarios/NNNNNN.kcsb.
// Frames: hello, probe {ok, error?, release, page_size, buf_pa, buf_size,
// phys_base, host_pages}, caps {s, missing} (the scenario needs capabilities this
// kernel lacks), skip {s, why} (it needs what this target cannot do), begin {s, name}, op {s, i, k, v, a, r[8]},
// end {s, cleanup}, stop {s, reason, detail}, done {scenarios, ops, seconds, uptime}.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <termios.h>
#include <unistd.h>
#include <dirent.h>

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
#include "harness/scenario/ffa_abi.h"
#include "models/common/outcome.h"
#include "models/ffa/scenario_ops.h"
#include "targets/qemu/wire/frame.h"
#include "targets/qemu/wire/guest_io.h"
#include "targets/qemu_arm64/module/kcffa_uapi.h"

namespace kconform::qemu_arm64 {
namespace {

using nlohmann::json;
using qemu::cmdline_value;
using qemu::kmsg;
using qemu::open_port;
using qemu::read_file;
using qemu::scenario_files;
using qemu::Sender;
using qemu::uptime;
namespace F = ::kconform::ffa;

constexpr const char* kRoot = "/kconform";
// This machine's RAM (boot.py: virt, -m 1024 from 0x40000000).
constexpr uint64_t kRamBase = 0x40000000, kRamEnd = 0x80000000;
// Where an address of this machine's RAM outside the harness range goes: PCIe
// MMIO space of virt (0x10000000..0x3effffff), not memory, as 0x10000000 in
// the directed corpus.
constexpr uint64_t kOutside = 0x10000000, kOutsideSpan = 0x2e000000;

// The module's device: one SMC, the buffer.
struct Device {
  int fd = -1;
  kcffa_info info{};
  uint8_t* buf = nullptr;
  std::string error;

  bool open_it() {
    fd = open("/dev/kcffa", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      error = std::string("/dev/kcffa: ") + std::strerror(errno) + " (module kcffa not loaded?)";
      return false;
    }
    if (ioctl(fd, KCFFA_INFO, &info) != 0) {
      error = std::string("KCFFA_INFO: ") + std::strerror(errno);
      return false;
    }
    void* m = mmap(nullptr, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      error = std::string("mmap /dev/kcffa: ") + std::strerror(errno);
      return false;
    }
    buf = static_cast<uint8_t*>(m);
    return true;
  }
  // x0..x7 in (x8..x17 zero), x0..x7 out.
  bool smc(const uint64_t in[8], uint64_t out[8]) {
    kcffa_regs r{};
    for (int k = 0; k < 8; ++k) r.x[k] = in[k];
    if (ioctl(fd, KCFFA_SMC, &r) != 0) return false;
    for (int k = 0; k < 8; ++k) out[k] = r.x[k];
    return true;
  }
};

class Agent {
 public:
  Agent(Device& dev, Sender& out) : dev_(dev), out_(out) {
    F::harness_ram(dev.info.page_size, &layout_);
    layout_.page_size = dev.info.page_size;
    host_bytes_ = layout_.host_pages * layout_.page_size;
  }
  bool fits() const { return host_bytes_ <= dev_.info.size; }
  const F::ProxyProfile& layout() const { return layout_; }

  // Scenario address -> this machine's physical address.
  uint64_t to_real(uint64_t a) const {
    if (a >= layout_.phys_base && a - layout_.phys_base < host_bytes_) return dev_.info.pa + (a - layout_.phys_base);
    if (a >= kRamBase && a < kRamEnd) return kOutside + (a - kRamBase) % kOutsideSpan;
    return a;
  }

  // Whether pKVM's FF-A state is the one the model starts s from (see the top).
  bool fresh_for(const Scenario& s) const {
    if (!touched_) return true;
    for (const Op& op : s.ops) {
      if (is_harness(op.code)) continue;
      return have_version_ && op.code == F::kOpVersion && op.args[0] == version_req_;
    }
    return true;  // no host call at all
  }

  // Runs one scenario; ops are sent as they complete. False: the cleanup
  // after it failed (*why says how): the next scenario needs a fresh boot.
  bool run(uint64_t s, const Scenario& sc, size_t* ops, std::string* why) {
    bool clean = true;
    for (uint32_t rep = 0; rep < sc.repeat; ++rep) {
      begin();
      for (size_t i = 0; i < sc.ops.size(); ++i) {
        uint64_t r[8] = {};
        Outcome o = exec(sc, sc.ops[i], r);
        json regs = json::array();
        for (int k = 0; k < 8; ++k) regs.push_back(r[k]);
        out_.send({{"t", "op"}, {"s", s}, {"i", i}, {"k", static_cast<int>(o.kind)}, {"v", o.value},
                   {"a", o.aux}, {"r", regs}});
        ++*ops;
      }
      if (!cleanup(why)) clean = false;
    }
    return clean;
  }

  static bool is_harness(uint8_t code) {
    switch (code) {
      case F::kOpTxWrite:
      case F::kOpTxMemDesc:
      case F::kOpTxConstituents:
      case F::kOpEl3Misbehave:
      case F::kOpEl3Profile:
      case F::kOpHostFill:
      case F::kOpHostCount:
      case F::kOpSpRetrieve:
      case F::kOpSpRelinquish:
        return true;
      default:
        return false;
    }
  }

  // Why this target cannot run s (empty: it can).
  std::string unsupported(const Scenario& s) const {
    if (s.abi != Abi::kFfa) return "not an FF-A scenario";
    for (const Op& op : s.ops) {
      // A constituent that starts in harness RAM and runs past its end names, in the
      // model, the hypervisor's pages after it; here it names what follows the
      // module's buffer, which is the host's own memory.
      const size_t blob = op.code == F::kOpTxMemDesc ? op.args[9] : op.code == F::kOpTxConstituents ? op.args[1] : SIZE_MAX;
      if (blob < s.blobs.size())
        for (const F::Constituent& c : F::ranges_of(s.blobs[blob], 0))
          if (c.address >= layout_.phys_base && c.address - layout_.phys_base < host_bytes_ &&
              c.pages * F::kFfaPage > host_bytes_ - (c.address - layout_.phys_base))
            return "a constituent runs past the harness RAM into the model's hypervisor pages "
                   "(here: the host memory after the agent's buffer)";
      if (op.thread != 0) return "concurrent groups: the agent runs one call at a time";
      if (op.code == F::kOpEl3Misbehave) return "el3_misbehave: a real TF-A takes no injected fault";
      if (op.code == F::kOpEl3Profile) return "el3_profile: a real TF-A is what it is";
      if (op.code == F::kOpSpRetrieve || op.code == F::kOpSpRelinquish)
        return "sp_retrieve/sp_relinquish: our secure partition does not retrieve memory";
      if (op.code >= F::kOpCount) return "unknown op code " + std::to_string(op.code);
    }
    return {};
  }

 private:
  void begin() {
    std::memset(dev_.buf, 0, host_bytes_);  // the model's RAM starts zero
    handles_.clear();
    live_.clear();
    last_desc_len_ = 0;
    tx_window_ = 0;
    tx_known_ = false;
    mapped_ = false;
  }

  // A copy of the scenario's blob of ranges with each address translated.
  std::vector<uint8_t> real_ranges(const std::vector<uint8_t>& blob) const {
    std::vector<uint8_t> b = blob;
    for (size_t o = 0; o + F::kRangeRecordBytes <= b.size(); o += F::kRangeRecordBytes) {
      uint64_t a = 0;
      std::memcpy(&a, b.data() + o, 8);  // little-endian, as ranges_of reads it
      a = to_real(a);
      std::memcpy(b.data() + o, &a, 8);
    }
    return b;
  }

  // A tx_write's bytes (a hand-made descriptor): every little-endian u64 at a
  // 4-byte-aligned position of the TX window whose value is a harness-RAM
  // address is translated, as a constituent's address is (constituents sit at
  // 4-byte-aligned offsets of any descriptor an SPMC parses); nothing else changes.
  void translate_raw(uint64_t offset, std::vector<uint8_t>* bytes) const {
    for (size_t k = (4 - offset % 4) % 4; k + 8 <= bytes->size();) {
      uint64_t v = 0;
      std::memcpy(&v, bytes->data() + k, 8);
      if (v >= layout_.phys_base && v - layout_.phys_base < host_bytes_) {
        v = to_real(v);
        std::memcpy(bytes->data() + k, &v, 8);
        k += 8;
      } else {
        k += 4;
      }
    }
  }

  uint64_t tx_op(const Scenario& s, const Op& op) {
    // The descriptor's constituents at this machine's addresses: the same
    // builder on a copy of the scenario whose ranges blob is translated.
    Scenario real;
    real.blobs = s.blobs;
    if (op.code == F::kOpTxMemDesc && op.args[9] < s.blobs.size())
      real.blobs[op.args[9]] = real_ranges(s.blobs[op.args[9]]);
    if (op.code == F::kOpTxConstituents && op.args[1] < s.blobs.size())
      real.blobs[op.args[1]] = real_ranges(s.blobs[op.args[1]]);
    F::TxWrite w = F::tx_bytes(real, op);
    if (op.code == F::kOpTxWrite) translate_raw(w.offset, &w.bytes);
    if (w.is_desc) last_desc_len_ = w.desc_len;
    const uint64_t len = F::tx_clip(layout_, tx_known_, tx_window_, w.offset, w.bytes.size());
    if (len) std::memcpy(dev_.buf + (tx_window_ - layout_.phys_base) + w.offset, w.bytes.data(), len);
    return len;
  }

  Outcome exec(const Scenario& s, const Op& op, uint64_t r[8]) {
    switch (op.code) {
      case F::kOpTxWrite:
      case F::kOpTxMemDesc:
      case F::kOpTxConstituents:
        return Outcome::ok(static_cast<int64_t>(tx_op(s, op)));
      case F::kOpHostFill:
      case F::kOpHostCount: {
        const uint64_t len = F::host_mem_len(layout_, op.args[0], op.args[1]);
        uint8_t* m = len ? dev_.buf + (op.args[0] - layout_.phys_base) : nullptr;
        const uint8_t v = static_cast<uint8_t>(op.args[2]);
        if (m && op.code == F::kOpHostFill) std::memset(m, v, len);
        return Outcome::ok(static_cast<int64_t>(!m ? 0 : op.code == F::kOpHostFill ? len : F::count_bytes(m, len, v)));
      }
      default:
        break;
    }
    uint64_t in[8];
    F::host_regs(op, handles_, last_desc_len_, in);
    // Addresses, by what the call's registers are (a raw call's too, by its function
    // ID): the mailboxes of FFA_RXTX_MAP, the buffer of a send or a retrieve request.
    // Nothing else is touched: a handle or a size may well look like an address.
    const uint64_t scen[8] = {in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]};
    bool moved[8] = {};
    auto move = [&](int k) {
      if (in[k] == 0) return;
      in[k] = to_real(in[k]);
      moved[k] = in[k] != scen[k];
    };
    // The SVE hint does not change the call (SMCCC:HINT).
    const uint32_t fid = static_cast<uint32_t>(F::without_hint(in[0])) & ~F::kSmc64Bit;
    if (fid == (F::kFnRxtxMap64 & ~F::kSmc64Bit)) {
      move(1);
      move(2);
    } else if (fid == (F::kFnMemShare64 & ~F::kSmc64Bit) || fid == (F::kFnMemLend64 & ~F::kSmc64Bit) ||
               fid == (F::kFnMemDonate64 & ~F::kSmc64Bit) || fid == (F::kFnMemRetrieveReq64 & ~F::kSmc64Bit)) {
      move(3);
    }
    touched_ = true;
    if (op.code == F::kOpVersion && !have_version_) {
      have_version_ = true;
      version_req_ = op.args[0];
    }
    if (!dev_.smc(in, r)) return Outcome::err(errno);
    // An untouched register echoed back (SMC_UNK leaves x1..x7 as they were) reads
    // as the scenario gave it.
    for (int k = 1; k < 8; ++k)
      if (moved[k] && r[k] == in[k]) r[k] = scen[k];
    Outcome o = Outcome::ok(0);
    for (int k = 0; k < 8; ++k) o.regs[k] = r[k];
    const bool ok = F::fid_of(r) == F::kFnSuccess32 || r[0] == F::kFnSuccess64;
    if (op.code == F::kOpRxtxMap) {
      tx_window_ = op.args[0];
      tx_known_ = true;
      if (ok) mapped_ = true;
    }
    if (op.code == F::kOpRxtxUnmap && ok) mapped_ = false;
    if (F::is_producer(op.code)) {
      const uint64_t h = F::produced_handle(r);
      handles_.push_back(h);
      if (h != F::kInvalidHandle) live_.push_back(h);
    }
    if ((op.code == F::kOpMemReclaim || op.code == F::kOpMemReclaim2) && ok) {
      const uint64_t h = F::handle_of(in[1], in[2]);
      live_.erase(std::remove(live_.begin(), live_.end(), h), live_.end());
    }
    return o;
  }

  // Reclaims what is still live and unmaps the mailboxes. False (and why):
  // something the next scenario would see is left behind.
  bool cleanup(std::string* why) {
    bool clean = true;
    for (uint64_t h : live_) {
      uint64_t in[8] = {F::kFnMemReclaim, F::handle_lo(h), F::handle_hi(h), 0, 0, 0, 0, 0}, r[8] = {};
      if (!dev_.smc(in, r) || F::fid_of(r) != F::kFnSuccess32) {
        char b[96];
        std::snprintf(b, sizeof b, "handle %#llx not reclaimable (x0=%#llx x2=%lld); ",
                      static_cast<unsigned long long>(h), static_cast<unsigned long long>(r[0]),
                      static_cast<long long>(static_cast<int32_t>(r[2])));
        *why += b;
        clean = false;
      }
    }
    live_.clear();
    uint64_t in[8] = {F::kFnRxtxUnmap, 0, 0, 0, 0, 0, 0, 0}, r[8] = {};
    const bool unmapped = dev_.smc(in, r) && F::fid_of(r) == F::kFnSuccess32;
    if (mapped_ && !unmapped) {
      *why += "the mailboxes stayed mapped; ";
      clean = false;
    }
    mapped_ = false;
    return clean;
  }

  Device& dev_;
  Sender& out_;
  F::ProxyProfile layout_;
  uint64_t host_bytes_ = 0;
  // This boot.
  bool touched_ = false, have_version_ = false;
  uint64_t version_req_ = 0;
  // This run of a scenario.
  std::vector<uint64_t> handles_, live_;
  uint64_t last_desc_len_ = 0, tx_window_ = 0;
  bool tx_known_ = false, mapped_ = false;
};

int run() {
  std::string cmdline = read_file("/proc/cmdline");
  int fd = open_port(cmdline, "/dev/hvc0");
  if (fd < 0) return 2;
  Sender out(fd);
  struct utsname u;
  uname(&u);
  out.send({{"t", "hello"},
            {"uname", {{"release", u.release}, {"version", u.version}, {"machine", u.machine}}},
            {"cmdline", cmdline.substr(0, cmdline.find('\n'))},
            {"uptime", uptime()}});
  Device dev;
  size_t scenarios = 0, ops = 0;
  auto start = std::chrono::steady_clock::now();
  bool ok = dev.open_it();
  json probe{{"t", "probe"}, {"ok", ok}, {"release", u.release}};
  if (!ok) {
    probe["error"] = dev.error;
    out.send(probe);
  } else {
    Agent agent(dev, out);
    probe["page_size"] = dev.info.page_size;
    probe["buf_pa"] = dev.info.pa;
    probe["buf_size"] = dev.info.size;
    probe["phys_base"] = agent.layout().phys_base;
    probe["host_pages"] = agent.layout().host_pages;
    if (!agent.fits()) {
      probe["ok"] = false;
      probe["error"] = "the module's buffer (" + std::to_string(dev.info.size) + " bytes) is smaller than the harness RAM";
      out.send(probe);
      ok = false;
    } else {
      out.send(probe);
    }
    uint64_t from = std::strtoull(cmdline_value(cmdline, "kconform.from", "0").c_str(), nullptr, 10);
    std::string dir = std::string(kRoot) + "/scenarios/";
    for (const std::string& name : ok ? scenario_files(kRoot) : std::vector<std::string>{}) {
      uint64_t s = std::strtoull(name.c_str(), nullptr, 10);
      if (s < from) continue;
      std::string bytes = read_file(dir + name);
      Scenario sc;
      std::string error;
      if (!decode_binary({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, &sc, &error)) {
        out.send({{"t", "bad"}, {"s", s}, {"error", error}});
        continue;
      }
      // Capabilities (the page size; RECLAIM2 when the host says the kernel's ffa.c
      // handles it: not Debian's 7.3): the host's replay reports the scenarios that
      // need more as unsupported, as every target's run does.
      const uint32_t caps = (dev.info.page_size == 4096    ? F::kCapPage4k
                             : dev.info.page_size == 16384 ? F::kCapPage16k
                             : dev.info.page_size == 65536 ? F::kCapPage64k
                                                           : 0) |
                            (static_cast<uint32_t>(std::strtoul(
                                 cmdline_value(cmdline, "kconform.caps", "0").c_str(), nullptr, 0)) &
                             F::kCapReclaim2);
      if (sc.requires_caps & ~caps) {
        out.send({{"t", "caps"}, {"s", s}, {"missing", sc.requires_caps & ~caps}});
        continue;
      }
      if (std::string why = agent.unsupported(sc); !why.empty()) {
        out.send({{"t", "skip"}, {"s", s}, {"why", why}});
        continue;
      }
      if (!agent.fresh_for(sc)) {
        out.send({{"t", "stop"}, {"s", s}, {"reason", "fresh"},
                  {"detail", "pKVM's FF-A version was fixed by an earlier scenario"}});
        break;
      }
      ++scenarios;
      kmsg("begin s=" + std::to_string(s) + " " + sc.name);
      out.send({{"t", "begin"}, {"s", s}, {"name", sc.name}});
      std::string why;
      const bool clean = agent.run(s, sc, &ops, &why);
      out.send({{"t", "end"}, {"s", s}});
      if (!clean) {
        out.send({{"t", "stop"}, {"s", s + 1}, {"reason", "taint"}, {"detail", why}});
        break;
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.send({{"t", "done"}, {"scenarios", scenarios}, {"ops", ops}, {"seconds", secs}, {"uptime", uptime()}});
  tcdrain(fd);
  close(fd);
  return 0;
}

}  // namespace
}  // namespace kconform::qemu_arm64

int main() { return kconform::qemu_arm64::run(); }
