// Tests of the EL2 target: the real ffa.c initialises, negotiates a version,
// shares the host mailboxes through the page tracker, rolls back a failed
// MEM_SHARE, and its state snapshots and restores.
#include "targets/el2/el2_handler.h"

#include <gtest/gtest.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace kconform::el2 {
namespace {

struct Regs {
  uint64_t r[kNumRegs] = {};
};

Regs Call(std::initializer_list<uint64_t> args) {
  Regs in, out;
  size_t i = 0;
  for (uint64_t a : args) in.r[i++] = a;
  EXPECT_TRUE(el2_host_call(in.r, out.r)) << "x0=" << std::hex << in.r[0];
  EXPECT_EQ(el2_last_status(), CallStatus::kOk);
  EXPECT_EQ(el2_locks_held(), 0);
  return out;
}

uint32_t Ffa4kPagesPerHostPage() { return el2_build_info().page_size / 4096; }

class El2 : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(el2_init(&err)) << err;
  }
  // FFA_VERSION(1.2) from the host; the handler answers what it negotiated.
  uint32_t Negotiate() {
    Regs out = Call({ffa::kVersion, ffa::Version(1, 2)});
    return static_cast<uint32_t>(out.r[0]);
  }
  // FFA_RXTX_MAP of host pages 0 (TX) and 1 (RX).
  Regs MapMailboxes() {
    return Call({ffa::kRxtxMap64, el2_host_page_pa(0), el2_host_page_pa(1),
                 el2_build_info().page_size / 4096});
  }
};

TEST_F(El2, InitAsksEl3ForItsVersion) {
  const auto& calls = el2_default_el3().calls;
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls[0].in[0], ffa::kVersion);
  EXPECT_EQ(calls[0].in[1] >> 16, 1u);  // a 1.x version
  EXPECT_GT(el2_snapshot_bytes(), 0u);
}

TEST_F(El2, CallsBeforeVersionNegotiationAreRejected) {
  Regs out = Call({ffa::kFeatures, ffa::kRxtxMap64});
  EXPECT_EQ(out.r[0], ffa::kError);
  EXPECT_EQ(static_cast<int32_t>(out.r[2]), ffa::kInvalidParameters);
}

TEST_F(El2, HostVersionIsNegotiated) {
  const uint32_t v = Negotiate();
  EXPECT_EQ(v >> 16, 1u);
  EXPECT_GE(v & 0xffff, 1u);  // 6.12 negotiates 1.1, 7.x 1.2
  EXPECT_LE(v & 0xffff, 2u);
}

TEST_F(El2, NonFfaSmcIsNotHandled) {
  Regs in, out;
  in.r[0] = 0x84000000;  // PSCI_VERSION
  EXPECT_FALSE(el2_host_call(in.r, out.r));
}

// Host calls enter through the tree's handle_host_smc(): every tree masks the
// SMCCC v1.3 SVE hint (bit 16) Linux sets on its calls, so a hinted
// FFA_VERSION is negotiated as the plain one (ffa.c alone answers
// INVALID_PARAMETERS to 0x84010063).
TEST_F(El2, SveHintedCallIsDispatchedAsThePlainCall) {
  Regs out = Call({ffa::kVersion | (1u << 16), ffa::Version(1, 2)});
  EXPECT_EQ(out.r[0] >> 16, 1u) << std::hex << out.r[0];
  const Regs mapped = Call({ffa::kRxtxMap64 | (1u << 16), el2_host_page_pa(0), el2_host_page_pa(1),
                            el2_build_info().page_size / 4096});
  EXPECT_EQ(mapped.r[0], ffa::kSuccess32);
  EXPECT_EQ(MapMailboxes().r[0], ffa::kError);  // already mapped: the hinted call took effect
}

TEST_F(El2, RxtxMapSharesAndPinsHostMailboxes) {
  Negotiate();
  Regs out = MapMailboxes();
  EXPECT_EQ(out.r[0], ffa::kSuccess32);
  for (uint64_t i : {0, 1}) {
    EXPECT_EQ(el2_tracker().View(el2_host_page_pa(i)), PageView::kSharedWithHyp);
    EXPECT_EQ(el2_tracker().Page(el2_host_page_pa(i))->refcount, 1);
  }
  EXPECT_EQ(el2_default_el3().mapped_tx, el2_hyp_tx_pa());
  EXPECT_EQ(el2_default_el3().mapped_rx, el2_hyp_rx_pa());
  // A second map is refused: the host already has mailboxes.
  out = MapMailboxes();
  EXPECT_EQ(out.r[0], ffa::kError);
}

// Writes a one-constituent memory transaction descriptor (FF-A v1.1+ layout,
// DEN0077A 10.11: 48-byte header, 32-byte EMAD, 16-byte composite) for host
// page `page` into the host TX buffer; returns its length.
uint32_t WriteShareDescriptor(uint64_t page) {
  uint8_t* tx = el2_phys(el2_host_page_pa(0), 112);
  std::memset(tx, 0, 112);
  auto put = [&](size_t off, auto v) { std::memcpy(tx + off, &v, sizeof v); };
  put(0, uint16_t{0});      // sender: the host
  put(24, uint32_t{32});    // ep_mem_size
  put(28, uint32_t{1});     // ep_count
  put(32, uint32_t{48});    // ep_mem_offset
  put(48, uint16_t{0x8001});  // receiver
  put(50, uint8_t{0x2});    // RW
  put(52, uint32_t{80});    // composite_off
  put(80, Ffa4kPagesPerHostPage());  // total_pg_cnt
  put(84, uint32_t{1});     // addr_range_cnt
  put(96, el2_host_page_pa(page));
  put(104, Ffa4kPagesPerHostPage());
  return 112;
}

TEST_F(El2, MemShareRefusedByEl3RollsBackStage2) {
  Negotiate();
  MapMailboxes();
  el2_tracker().ClearLog();
  const uint32_t len = WriteShareDescriptor(5);
  Regs out = Call({ffa::kMemShare64, len, len, 0, 0});
  EXPECT_EQ(out.r[0], ffa::kError);  // the default EL3 does not support MEM_SHARE
  const auto& log = el2_tracker().log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].kind, Stage2Call::Kind::kShareFfa);
  EXPECT_EQ(log[0].ret, 0);
  EXPECT_EQ(log[1].kind, Stage2Call::Kind::kUnshareFfa);
  EXPECT_EQ(log[1].ret, 0);
  EXPECT_EQ(el2_tracker().View(el2_host_page_pa(5)), PageView::kHostOwned);
}

TEST_F(El2, MemShareAcceptedByEl3LeavesPageShared) {
  Negotiate();
  MapMailboxes();
  el2_set_el3([](const uint64_t in[kNumRegs], uint64_t out[kNumRegs]) {
    std::memset(out, 0, kNumRegs * 8);
    out[0] = ffa::kSuccess32;
    if (static_cast<uint32_t>(in[0]) == static_cast<uint32_t>(ffa::kMemShare64)) out[2] = 0x1234;
  });
  const uint32_t len = WriteShareDescriptor(7);
  Regs out = Call({ffa::kMemShare64, len, len, 0, 0});
  EXPECT_EQ(out.r[0], ffa::kSuccess32);
  EXPECT_EQ(out.r[2], 0x1234u);
  EXPECT_EQ(el2_tracker().View(el2_host_page_pa(7)), PageView::kSharedWithFfa);
  el2_set_el3(nullptr);
}

// FFA_MEM_RECLAIM2 at EL2, in whichever tree this build compiled: whether
// ffa.c names FFA_MEM_RECLAIM2 (BuildInfo::handles_reclaim2, read from the
// tree's text by extract_tree.py) decides what it must do.
// Quirk of a tree without a handler (stock): documents behaviour, not a
// requirement. Its function number lies in the FF-A range but a handler that
// does not know it lets it through to EL3 untouched (ffa_call_supported()
// defaults to true), so EL3 can reclaim pages the host stage-2 still marks
// shared. A tree with a handler (reclaim2-reference.patch) handles it at EL2:
// a call of no descriptor (count 0, no TX buffer mapped either) is refused
// there with INVALID_PARAMETERS (FFA.R2.COUNT). Both leave
// FFA_FEATURES(RECLAIM2) to EL3 (the patch too: reclaim2_test.cc
// FeaturesIsEl3sAnswer).
TEST_F(El2, QuirkReclaim2IsPassedThroughToEl3UnlessTheTreeHandlesIt) {
  Negotiate();
  Regs in, out;
  in.r[0] = ffa::kMemReclaim2;
  if (el2_build_info().handles_reclaim2) {
    EXPECT_TRUE(el2_host_call(in.r, out.r));
    EXPECT_EQ(out.r[0], ffa::kError);
    EXPECT_EQ(static_cast<int32_t>(out.r[2]), ffa::kInvalidParameters);
  } else {
    EXPECT_FALSE(el2_host_call(in.r, out.r));
  }
  in = Regs{};
  in.r[0] = ffa::kFeatures;
  in.r[1] = ffa::kMemReclaim2;
  EXPECT_FALSE(el2_host_call(in.r, out.r));  // FFA_FEATURES(RECLAIM2) is EL3's answer
}

TEST_F(El2, SnapshotRestoresHandlerState) {
  Negotiate();
  el2_snapshot();
  const std::vector<uint8_t> before = el2_ffa_state();
  const PageTracker tracker_before = el2_tracker();

  // Mutate: map the mailboxes (host_buffers.tx/rx set, pages shared and pinned).
  ASSERT_EQ(MapMailboxes().r[0], ffa::kSuccess32);
  EXPECT_NE(el2_ffa_state(), before);
  EXPECT_FALSE(el2_tracker() == tracker_before);

  el2_restore();
  EXPECT_EQ(el2_ffa_state(), before);
  EXPECT_TRUE(el2_tracker() == tracker_before);
  EXPECT_EQ(el2_tracker().View(el2_host_page_pa(0)), PageView::kHostOwned);
  // Behaviourally too: the map that was refused as a duplicate works again.
  EXPECT_EQ(MapMailboxes().r[0], ffa::kSuccess32);
}

TEST_F(El2, RestoreUndoesVersionNegotiation) {
  // el2_init snapshots right after hyp_ffa_init, before any host call.
  Negotiate();
  el2_restore();
  Regs out = Call({ffa::kFeatures, ffa::kRxtxMap64});
  EXPECT_EQ(out.r[0], ffa::kError);  // not negotiated any more
}

// Whether the OS page holding p is mapped (mincore).
bool Resident(const uint8_t* p) {
  const uintptr_t os = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char v = 0;
  EXPECT_EQ(mincore(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) / os * os), os, &v), 0);
  return v & 1;
}

// el2_restore copies back the pages it knows a scenario may write (el2_phys,
// host pages shared with the hyp, the hyp's own) and gives every other page
// back to the kernel: a write through no known path (as ffa.c writing a page
// it has no business in) is undone too, and only the known pages stay mapped.
TEST_F(El2, RestoreUndoesWritesThroughAnyPathAndKeepsTheKnownPagesMapped) {
  const std::vector<uint8_t> fresh = el2_state_bytes();
  const size_t ps = el2_build_info().page_size;
  Negotiate();
  ASSERT_EQ(MapMailboxes().r[0], ffa::kSuccess32);  // host pages 0 and 1 shared with the hyp
  uint8_t* known = el2_phys(el2_host_page_pa(5), 10);
  ASSERT_NE(known, nullptr);
  std::memset(known, 0x5a, 10);
  std::span<uint8_t> ram = el2_phys_mem();
  uint8_t* stray[] = {ram.data() + 2 * ps, ram.data() + 6 * ps + 7, ram.data() + 40 * ps + ps - 1,
                      ram.data() + 63 * ps};
  for (uint8_t* p : stray) *p = 0xa5;
  el2_phys(el2_host_page_pa(1), 1)[3] = 0x11;  // the host's RX
  el2_phys(el2_hyp_rx_pa(), 1)[0] = 0x22;      // the hyp's RX
  el2_restore();
  // Mapped or not before anything reads them (a read maps the zero page).
  EXPECT_TRUE(Resident(known));
  EXPECT_TRUE(Resident(ram.data() + ps));
  EXPECT_TRUE(Resident(el2_phys(el2_hyp_rx_pa(), 1)));
  for (uint8_t* p : stray) EXPECT_FALSE(Resident(p)) << "page " << (p - ram.data()) / ps;
  EXPECT_EQ(el2_state_bytes(), fresh);
}

// The RAM's mapping: a virtual address lies at its physical address's offset
// in a 2 MiB block (so el2_restore gives back whole page-table pages), and
// under ASan a byte just before or after the RAM is poisoned: an access past
// it is reported, as for a heap buffer.
TEST(El2RamMapping, BlockOffsetIsThePhysicalOnesAndTheEdgesArePoisonedUnderAsan) {
  std::string err;
  ASSERT_TRUE(el2_init(&err)) << err;
  const std::span<uint8_t> ram = el2_phys_mem();
  EXPECT_EQ((reinterpret_cast<uintptr_t>(ram.data()) - el2_phys_base()) % (uintptr_t{2} << 20), 0u);
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  EXPECT_TRUE(__asan_address_is_poisoned(ram.data() - 1));
  EXPECT_TRUE(__asan_address_is_poisoned(ram.data() + ram.size()));
  EXPECT_FALSE(__asan_address_is_poisoned(ram.data()));
  EXPECT_FALSE(__asan_address_is_poisoned(ram.data() + ram.size() - 1));
#endif
#endif
}

// Past the bound of pages it copies back (a host_fill of many pages), the
// whole zero part is given back: still exact.
TEST(El2RestoreBound, ManyPagesWrittenAreRestoredToo) {
  El2Config c;
  c.host_pages = 512;
  std::string err;
  ASSERT_TRUE(el2_init(c, &err)) << err;
  const std::vector<uint8_t> fresh = el2_state_bytes();
  const size_t ps = el2_build_info().page_size;
  for (size_t n : {size_t{1}, size_t{64}, size_t{65}, size_t{300}}) {
    SCOPED_TRACE(n);
    uint8_t* p = el2_phys(el2_host_page_pa(100), n * ps);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x77, n * ps);
    el2_restore();
    EXPECT_EQ(el2_state_bytes(), fresh);
  }
  ASSERT_TRUE(el2_init(&err)) << err;
}

TEST_F(El2, InitAgainStartsFromScratch) {
  Negotiate();
  MapMailboxes();
  std::string err;
  ASSERT_TRUE(el2_init(&err)) << err;
  Negotiate();
  EXPECT_EQ(MapMailboxes().r[0], ffa::kSuccess32);
}

TEST_F(El2, SmcccBelow12LeavesProxyOff) {
  El2Config c;
  c.smccc_version = 0x10001;  // SMCCC 1.1: hyp_ffa_init returns 0 without asking EL3
  std::string err;
  ASSERT_TRUE(el2_init(c, &err)) << err;
  EXPECT_TRUE(el2_default_el3().calls.empty());
}

}  // namespace
}  // namespace kconform::el2
