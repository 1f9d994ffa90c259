// Host stage-2 page state for the EL2 target: what __pkvm_host_{share,unshare}_
// {hyp,ffa} and hyp_{pin,unpin}_shared_mem do to each host PAGE_SIZE page.
// Our own model of 7.3's nvhe/mem_protect.c (see page_tracker.cc); it logs
// every call so a test can see what the handler asked of stage-2.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kconform::el2 {

// As pkvm_page_state, seen from one side.
enum class HostState : uint8_t { kOwned, kSharedOwned, kNoPage };
enum class HypState : uint8_t { kNoPage, kSharedBorrowed, kOwned };

struct PageState {
  HostState host = HostState::kOwned;
  HypState hyp = HypState::kNoPage;
  uint16_t refcount = 0;  // hyp pins
  bool operator==(const PageState&) const = default;
};

// The summary the brief's tests speak in.
enum class PageView : uint8_t {
  kHostOwned,       // host owns it, nobody else sees it
  kSharedWithFfa,   // host SHARED_OWNED, hyp has no view: lent/shared via FF-A
  kSharedWithHyp,   // host SHARED_OWNED, hyp SHARED_BORROWED (e.g. a host mailbox)
  kHypOwned,        // hyp's own page (its mailboxes, descriptor buffer)
  kNotMemory,       // outside physical memory
};
const char* PageViewName(PageView v);

struct Stage2Call {
  enum class Kind : uint8_t { kShareHyp, kUnshareHyp, kShareFfa, kUnshareFfa, kPin, kUnpin };
  Kind kind;
  uint64_t a = 0;  // pfn, or phys start for pin/unpin
  uint64_t b = 0;  // nr_pages, or phys end for pin/unpin
  int ret = 0;
  bool operator==(const Stage2Call&) const = default;
  std::string ToString() const;
};

class PageTracker {
 public:
  // Memory is [base, base + (host_pages + hyp_pages) << page_shift); the
  // last hyp_pages pages belong to the hypervisor. ipa_bits bounds pfns
  // (pfn_range_is_valid: kvm_phys_shift of the host MMU).
  PageTracker(uint64_t base, uint64_t host_pages, uint64_t hyp_pages, unsigned page_shift,
              unsigned ipa_bits = 48);

  int ShareHyp(uint64_t pfn);
  int UnshareHyp(uint64_t pfn);
  int ShareFfa(uint64_t pfn, uint64_t nr_pages);
  int UnshareFfa(uint64_t pfn, uint64_t nr_pages);
  int Pin(uint64_t phys_from, uint64_t phys_to);
  int Unpin(uint64_t phys_from, uint64_t phys_to);  // non-zero: unbalanced (BUG_ON)

  PageView View(uint64_t phys) const;
  static PageView ViewOf(const PageState& s) {
    if (s.host == HostState::kNoPage) return PageView::kHypOwned;
    if (s.host == HostState::kOwned) return PageView::kHostOwned;
    return s.hyp == HypState::kSharedBorrowed ? PageView::kSharedWithHyp : PageView::kSharedWithFfa;
  }
  const PageState* Page(uint64_t phys) const;  // nullptr outside memory
  uint64_t base() const { return base_; }
  uint64_t size() const { return pages_.size() << shift_; }
  const std::vector<Stage2Call>& log() const { return log_; }
  const std::vector<PageState>& pages() const { return pages_; }
  void ClearLog() { log_.clear(); }

  // ViewOf(pages()[i]) for every page, kept up to date by every change (the
  // FF-A state digest reads the host pages' views from here without a pass).
  const std::vector<uint8_t>& views() const { return views_; }
  // The pages changed since BeginOp(), each with its view before the first
  // change (an undo log of views: invariant I1 of ffa_target.cc reads it).
  struct Changed {
    uint32_t page;
    uint8_t view_before;
  };
  void BeginOp() {
    op_changed_.clear();
    if (++op_epoch_ == 0) {  // wrapped: no stale stamp may match
      std::fill(op_stamp_.begin(), op_stamp_.end(), 0u);
      op_epoch_ = 1;
    }
  }
  const std::vector<Changed>& ChangedThisOp() const { return op_changed_; }
  // Makes this tracker equal to snap (a copy of it made earlier, before this
  // tracker's changes since) by copying back only the pages changed since the
  // last RestoreFrom, and the log.
  void RestoreFrom(const PageTracker& snap);

  // Equal pages and log (the change bookkeeping is not state).
  bool operator==(const PageTracker& o) const {
    return base_ == o.base_ && shift_ == o.shift_ && ipa_bits_ == o.ipa_bits_ && pages_ == o.pages_ && log_ == o.log_;
  }

 private:
  int CheckRangeAllowedMemory(uint64_t start, uint64_t end) const;
  int CheckHost(uint64_t phys, uint64_t size, HostState want) const;
  int CheckHyp(uint64_t phys, uint64_t size, HypState want) const;
  // Every change of a page goes through Set (views, undo and dirty lists).
  const PageState& At(uint64_t phys) const { return pages_[(phys - base_) >> shift_]; }
  void Set(uint64_t phys, const PageState& st);
  int Log(Stage2Call::Kind k, uint64_t a, uint64_t b, int ret);

  uint64_t base_;
  unsigned shift_;
  unsigned ipa_bits_;
  std::vector<PageState> pages_;
  std::vector<Stage2Call> log_;
  std::vector<uint8_t> views_;
  // Pages changed since the last RestoreFrom (dirty_[i] set, listed once).
  std::vector<uint8_t> dirty_;
  std::vector<uint32_t> dirty_list_;
  // Pages changed since BeginOp (op_stamp_[i] == op_epoch_).
  std::vector<uint32_t> op_stamp_;
  uint32_t op_epoch_ = 1;
  std::vector<Changed> op_changed_;
};

}  // namespace kconform::el2
