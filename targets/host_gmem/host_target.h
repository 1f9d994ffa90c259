// The host target: runs guest_memfd scenarios literally on the running
// kernel through /dev/kvm and reports what each op did. Harness conventions
// (slots, refusals, argument narrowing) are in conventions.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/gmem/profile.h"
#include "harness/scenario/gmem_conventions.h"
#include "targets/host_gmem/file_times.h"
#include "targets/host_gmem/probe.h"
#include "targets/target.h"

namespace kconform::host_gmem {

class HostGmemTarget : public Target {
 public:
  // Takes ownership of kvm_fd (an open /dev/kvm).
  HostGmemTarget(int kvm_fd, ProbeResult probe);
  ~HostGmemTarget() override;
  HostGmemTarget(const HostGmemTarget&) = delete;
  HostGmemTarget& operator=(const HostGmemTarget&) = delete;

  const TargetIdentity& identity() const override { return probe_.identity; }
  const gmem::Profile& profile() const { return probe_.profile; }
  void begin(const Scenario& s) override;
  Outcome exec(const Scenario& s, size_t i) override;
  // Re-reads every page the scenario can read (SPEC.md HARNESS:OBSERVE).
  bool observe(const Scenario& s, size_t i, Contents* out) override;
  // One std::thread per thread number of the group, started together
  // (a barrier), each waiting a seed-chosen spin before each of its ops.
  void exec_group(const Scenario& s, size_t first, size_t last, uint64_t seed, Outcome* out) override;
  void end() override;

 private:
  struct Mapping {
    uint8_t* addr = nullptr;  // null: failed or unmapped
    uint64_t len = 0;         // the len the mmap op asked for (munmap rounds it up)
    uint64_t gmem = 0, offset = 0, prot = 0;  // what it maps (observe())
  };
  struct GmemInfo {  // what observe() needs to know of a gmem slot
    bool created = false;
    uint64_t flags = 0;
  };
  struct Area {  // memory the target owns for a bind
    void* addr;
    size_t len;
  };

  int vm_fd(uint64_t slot) const;
  int gmem_fd(uint64_t slot) const;
  Mapping* map_slot(uint64_t slot);

  Outcome op_create_vm(const uint64_t* a);
  Outcome op_create_gmem(const uint64_t* a);
  Outcome op_close(std::vector<int>& slots, uint64_t slot);
  Outcome op_write(const uint64_t* a, bool positional);
  Outcome op_pwritev(const uint64_t* a);
  Outcome op_read(int fd, bool positional, uint64_t offset, uint64_t len);
  Outcome op_mmap(const uint64_t* a);
  Outcome op_munmap(const uint64_t* a);
  Outcome op_access(const uint64_t* a, bool store);
  Outcome op_fallocate(const uint64_t* a);
  Outcome op_fstat(const uint64_t* a);
  Outcome op_bind(const uint64_t* a);
  Outcome op_unbind(const uint64_t* a);
  Outcome op_times(const uint64_t* a);
  uint64_t bind_backing(uint64_t size);

  int kvm_fd_;
  ProbeResult probe_;
  size_t page_size_;
  void* dummy_page_ = nullptr;  // a valid page address for binds we do not back
  bool gmem_abi_ = true;        // false: the scenario is of another ABI (ENOSYS)
  void observe_file(uint64_t slot, Contents* out);
  void observe_through_maps(uint64_t slot, Contents* out);

  std::vector<int> vms_, gmems_;
  std::vector<GmemInfo> gmem_info_;
  std::vector<Mapping> maps_;
  std::vector<Area> areas_;
  bool track_times_ = false;      // the scenario has a times op: take baselines
  std::vector<FileTimes> times_;  // by gmem slot (times_.size() <= gmems_.size())
};

// The streams a scenario writes (write, pwrite, pwritev, store), as hints for
// the text form of a re-read (models/common/contents.h). write() is hinted at
// offset 0: its pages are found by whole-page displacement.
std::vector<PatternHint> pattern_hints(const Scenario& s);

struct HostOpen {
  std::unique_ptr<Target> target;  // null when error is set
  gmem::Profile profile;
  std::string error;  // why the target cannot run
  // The machine has no /dev/kvm this process may open: open(2) of the device
  // failed with ENOENT, ENODEV or ENXIO (absent: no kvm module, no
  // virtualisation) or EACCES or EPERM (not ours to open). A test may skip
  // then (KC_SKIP_NO_KVM, targets/skip_reasons.h). False for every other
  // failure, a /dev/kvm that opens but will not probe (its API version, no VM
  // it can create) included: that is a failure, not the machine's.
  bool no_device = false;
};

HostOpen open_host_target(const char* dev_path = kKvmDevice);

}  // namespace kconform::host_gmem

// The runner reaches the host target as gmem::open_host_target().
namespace kconform::gmem {
using host_gmem::HostOpen;
using host_gmem::open_host_target;
}  // namespace kconform::gmem
