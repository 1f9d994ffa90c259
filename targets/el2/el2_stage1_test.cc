// The hypervisor's view of memory (README "ffa.c's view of memory"): the
// kernel code sees a host page only while it is shared with the hypervisor,
// the hypervisor's own pages always, and inaccessible guards around both; the
// harness's view (el2_phys_mem) is the same memory, all of it; a fault in the
// hypervisor's view is described by the region it missed. The end-to-end
// tests (real ffa.c paths that fault, as crash findings) are
// stage1/check_stage1.py's (ctest el2_4k.Stage1Planted, el2_<N>k.Stage1Corpus).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "targets/el2/el2_handler.h"

namespace kconform::el2 {
namespace {

constexpr uint64_t kRxtxMap64 = 0xc4000066, kRxtxUnmap = 0x84000067, kVersion = 0x84000063, kSuccess32 = 0x84000061;

// Whether the process may read the byte at p, asked of the kernel (write(2)
// from an address it cannot read fails with EFAULT): no signal taken.
bool Readable(const void* p) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const bool ok = write(fds[1], p, 1) == 1;
  close(fds[0]);
  close(fds[1]);
  return ok;
}

// Whether it may write it: the byte read, then written back unchanged by
// read(2) from a pipe (EFAULT if not writable).
bool Writable(void* p) {
  if (!Readable(p)) return false;
  int fds[2];
  if (pipe(fds) != 0) return false;
  uint8_t b = *static_cast<volatile uint8_t*>(p);
  const bool ok = write(fds[1], &b, 1) == 1 && read(fds[0], p, 1) == 1;
  close(fds[0]);
  close(fds[1]);
  return ok;
}

uint64_t Call(std::initializer_list<uint64_t> args) {
  uint64_t in[kNumRegs] = {}, out[kNumRegs] = {};
  size_t i = 0;
  for (uint64_t a : args) in[i++] = a;
  el2_host_call(in, out);
  EXPECT_EQ(el2_last_status(), CallStatus::kOk);
  return out[0];
}

class El2HypView : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(el2_init(&err)) << err;
    ps_ = el2_build_info().page_size;
    hyp_end_ = el2_hyp_tx_pa() + el2_build_info().ffa_proxy_pages * ps_;
    host_end_ = el2_hyp_tx_pa();
  }
  uint64_t Map(uint64_t tx_page, uint64_t rx_page) {
    return Call({kRxtxMap64, el2_host_page_pa(tx_page), el2_host_page_pa(rx_page), ps_ / 4096});
  }
  // Host pages [0, n) the hypervisor's view maps, by probing each.
  std::vector<uint64_t> MappedHostPages() const {
    std::vector<uint64_t> out;
    for (uint64_t i = 0; el2_host_page_pa(i) < host_end_; ++i) {
      const uint8_t* p = el2_hyp_va(el2_host_page_pa(i));
      EXPECT_EQ(Readable(p), Readable(p + ps_ - 1)) << "page " << i;
      EXPECT_EQ(Readable(p), el2_hyp_maps(el2_host_page_pa(i))) << "page " << i;
      if (Readable(p)) out.push_back(i);
    }
    return out;
  }
  std::string Describe(const void* p, int access) const {
    char buf[512];
    if (!el2_describe_fault(reinterpret_cast<uintptr_t>(p), access, buf, sizeof buf)) return "(none)";
    return buf;
  }
  uint64_t ps_ = 0, hyp_end_ = 0, host_end_ = 0;
};

// The hypervisor's pages are mapped, nothing around them is; no host page is
// mapped after init; the harness sees all of the RAM.
TEST_F(El2HypView, AfterInitOnlyTheHypervisorsPagesAreMapped) {
  EXPECT_TRUE(MappedHostPages().empty());
  for (uint64_t pa = el2_hyp_tx_pa(); pa < hyp_end_; pa += ps_) {
    EXPECT_TRUE(Writable(el2_hyp_va(pa))) << std::hex << pa;
    EXPECT_TRUE(Writable(el2_hyp_va(pa) + ps_ - 1)) << std::hex << pa;
  }
  EXPECT_FALSE(Readable(el2_hyp_va(el2_hyp_tx_pa()) - 1));        // before the TX mailbox
  EXPECT_FALSE(Readable(el2_hyp_va(hyp_end_ - 1) + 1));            // past the descriptor buffer
  EXPECT_FALSE(Readable(el2_hyp_va(hyp_end_ - 1) + (1ull << 32)));  // any u32 offset past it
  EXPECT_FALSE(Readable(el2_hyp_va(host_end_ - 1) + 1));           // past the host RAM
  EXPECT_FALSE(Readable(el2_hyp_va(el2_phys_base()) - 1));         // below it
  const std::span<uint8_t> ram = el2_phys_mem();
  for (size_t off = 0; off < ram.size(); off += ps_) EXPECT_TRUE(Writable(ram.data() + off)) << off;
}

// The linear map, per region: the offset of a virtual address in a 2 MiB
// block is its physical address's (the kernel code aligns addresses to
// PAGE_SIZE), and the proxy's mailboxes and descriptor buffer are contiguous.
TEST_F(El2HypView, AddressesKeepTheirOffsetInABlock) {
  constexpr uint64_t kBlock = 2 << 20;
  for (uint64_t pa : {el2_phys_base(), el2_host_page_pa(3), el2_hyp_tx_pa(), el2_hyp_rx_pa(), hyp_end_ - 1})
    EXPECT_EQ((reinterpret_cast<uintptr_t>(el2_hyp_va(pa)) - pa) % kBlock, 0u) << std::hex << pa;
  EXPECT_EQ(el2_hyp_va(el2_hyp_rx_pa()) - el2_hyp_va(el2_hyp_tx_pa()),
            static_cast<ptrdiff_t>(el2_hyp_rx_pa() - el2_hyp_tx_pa()));
}

// A host page is mapped exactly while it is shared with the hypervisor: the
// host's mailboxes from RXTX_MAP to RXTX_UNMAP, and not after a restore; the
// two views are the same memory.
TEST_F(El2HypView, HostPagesAreMappedOnlyWhileSharedWithTheHypervisor) {
  const std::vector<uint8_t> fresh = el2_state_bytes();
  ASSERT_EQ(static_cast<uint32_t>(Call({kVersion, 0x10002})), 0x10002u);
  ASSERT_EQ(Map(0, 1), kSuccess32);
  EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{0, 1}));
  EXPECT_TRUE(Writable(el2_hyp_va(el2_host_page_pa(1)) + ps_ - 1));
  // One memory, two views.
  el2_phys(el2_host_page_pa(0) + 5, 1)[0] = 0x5a;
  EXPECT_EQ(el2_hyp_va(el2_host_page_pa(0))[5], 0x5a);
  el2_hyp_va(el2_host_page_pa(1))[7] = 0xa5;
  EXPECT_EQ(el2_phys_mem()[el2_host_page_pa(1) - el2_phys_base() + 7], 0xa5);
  ASSERT_EQ(Call({kRxtxUnmap, 0}), kSuccess32);
  EXPECT_TRUE(MappedHostPages().empty());
  // Mapped elsewhere, then restored: every byte as fresh, and nothing mapped
  // once the kernel code forms an address in host memory again.
  ASSERT_EQ(Map(5, 3), kSuccess32);
  EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{3, 5}));
  el2_restore();
  EXPECT_EQ(el2_state_bytes(), fresh);
  el2_hyp_settle();
  EXPECT_TRUE(MappedHostPages().empty());
}

// A page the restore unshared stays mapped only until the kernel code forms
// an address in host memory: the next FFA_RXTX_MAP's conversion (before it
// touches a mailbox) unmaps it; a mailbox shared again stays mapped.
TEST_F(El2HypView, TheFirstConversionAfterARestoreUnmapsWhatItUnshared) {
  Call({kVersion, 0x10002});
  ASSERT_EQ(Map(4, 5), kSuccess32);
  el2_restore();
  EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{4, 5}));  // stale: the kernel code has no address in them
  Call({kVersion, 0x10002});
  EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{4, 5}));  // (no conversion yet)
  ASSERT_EQ(Map(5, 9), kSuccess32);
  EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{5, 9}));
  el2_restore();
  Call({kVersion, 0x10002});
  // A map refused before any conversion (already mapped? no: a bad page count) unmaps nothing
  // either; the next map that converts does.
  EXPECT_EQ(Call({kRxtxMap64, el2_host_page_pa(2), el2_host_page_pa(3), 0}) & 0xffffffff, 0x84000060u);
  EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{5, 9}));
  ASSERT_EQ(Map(2, 3), kSuccess32);
  EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{2, 3}));
}

// A snapshot with the mailboxes mapped: the restore maps them again after a
// scenario unmapped them and unmaps the ones it mapped.
TEST_F(El2HypView, RestoreMapsWhatTheSnapshotHad) {
  Call({kVersion, 0x10002});
  ASSERT_EQ(Map(2, 4), kSuccess32);
  el2_snapshot();
  const std::vector<uint8_t> snap = el2_state_bytes();
  ASSERT_EQ(Call({kRxtxUnmap, 0}), kSuccess32);
  EXPECT_TRUE(MappedHostPages().empty());  // unmapped during a scenario: at once
  ASSERT_EQ(Map(6, 7), kSuccess32);
  el2_restore();
  EXPECT_EQ(el2_state_bytes(), snap);
  el2_hyp_settle();
  EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{2, 4}));
}

// Mailboxes mapped at many places (past the pages the view keeps in shared
// memory across restores): each restore is still exact, and the pages still
// map and unmap.
TEST_F(El2HypView, MailboxesAtManyPlacesAreRestoredExactly) {
  const std::vector<uint8_t> fresh = el2_state_bytes();
  for (uint64_t k = 0; k < 20; ++k) {
    SCOPED_TRACE(k);
    Call({kVersion, 0x10002});
    ASSERT_EQ(Map(2 * k, 2 * k + 1), kSuccess32);
    std::memset(el2_phys(el2_host_page_pa(2 * k), ps_), 0x11 + static_cast<int>(k), ps_);
    EXPECT_EQ(el2_hyp_va(el2_host_page_pa(2 * k))[ps_ - 1], 0x11 + k);
    EXPECT_EQ(MappedHostPages(), (std::vector<uint64_t>{2 * k, 2 * k + 1}));
    if (k % 3 == 0) ASSERT_EQ(Call({kRxtxUnmap, 0}), kSuccess32);
    el2_restore();
    EXPECT_EQ(el2_state_bytes(), fresh);
    el2_hyp_settle();
    EXPECT_TRUE(MappedHostPages().empty());
  }
}

// What a fault's description says, per region.
TEST_F(El2HypView, AFaultNamesTheRegionItMissed) {
  Call({kVersion, 0x10002});
  ASSERT_EQ(Map(0, 1), kSuccess32);
  auto has = [](const std::string& text, const std::string& part) {
    return ::testing::AssertionResult(text.find(part) != std::string::npos) << text;
  };
  const uint64_t p2 = el2_host_page_pa(2);
  std::string d = Describe(el2_hyp_va(p2) + 8, 2);
  EXPECT_TRUE(has(d, "EL2 write at 0x"));
  char pa[32];
  std::snprintf(pa, sizeof pa, "%#llx", static_cast<unsigned long long>(p2));
  EXPECT_TRUE(has(d, std::string("host page ") + pa + " not shared with the hypervisor (host-owned)"));
  ASSERT_EQ(el2_tracker().ShareFfa(el2_host_page_pa(3) / ps_, 1), 0);
  EXPECT_TRUE(has(Describe(el2_hyp_va(el2_host_page_pa(3)), 1), "EL2 read at 0x"));
  EXPECT_TRUE(has(Describe(el2_hyp_va(el2_host_page_pa(3)), 1), "not shared with the hypervisor (shared with FF-A)"));
  EXPECT_TRUE(has(Describe(el2_hyp_va(hyp_end_ - 1) + 17, 1), "16 bytes past the end of the proxy's descriptor buffer"));
  EXPECT_TRUE(has(Describe(el2_hyp_va(hyp_end_ - 1) + 1 + 0xfffffff0ull, 0),
                  "EL2 access at 0x"));
  EXPECT_TRUE(has(Describe(el2_hyp_va(hyp_end_ - 1) + 1 + 0xfffffff0ull, 0),
                  "0xfffffff0 bytes past the end of the proxy's descriptor buffer"));
  EXPECT_TRUE(has(Describe(el2_hyp_va(el2_hyp_tx_pa()) - 1, 1), "1 byte before the proxy's TX mailbox"));
  EXPECT_TRUE(has(Describe(el2_hyp_va(host_end_ - 1) + 1, 1), "just past the end of host memory"));
  EXPECT_TRUE(has(Describe(el2_hyp_va(el2_phys_base()) - 4096, 1), "4096 bytes below host memory"));
  int local = 0;
  EXPECT_EQ(Describe(&local, 1), "(none)");  // not the hypervisor's view
  EXPECT_EQ(Describe(el2_phys_mem().data(), 1), "(none)");  // the harness's
}

// An access outside the view is a fault at the instruction (the runner's
// crash marker makes it a finding at the op: check_stage1.py): the process
// dies of SIGSEGV, or under ASan of ASan's SEGV report.
bool DiedOfSegv(int status) {
  return (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}
TEST_F(El2HypView, AnAccessOutsideTheViewFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const uint64_t p = el2_host_page_pa(2);
  const char* report = el2_build_info().sanitized ? "AddressSanitizer: SEGV on unknown address" : "";
  EXPECT_EXIT({ (void)*static_cast<volatile uint8_t*>(el2_hyp_va(p)); }, DiedOfSegv, report);
  EXPECT_EXIT({ *static_cast<volatile uint8_t*>(el2_hyp_va(hyp_end_ - 1) + 1) = 1; }, DiedOfSegv, report);
}

}  // namespace
}  // namespace kconform::el2
