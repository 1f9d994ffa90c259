// Host stage-2 page-state tracker. The transitions follow 7.3's
// nvhe/mem_protect.c as read there (our code, not a copy):
//   share_hyp:   host OWNED & hyp NOPAGE            -> SHARED_OWNED / SHARED_BORROWED
//   unshare_hyp: host SHARED_OWNED & hyp SHARED_BORROWED & not pinned -> OWNED / NOPAGE
//   share_ffa:   pfn range valid, host OWNED        -> host SHARED_OWNED
//   unshare_ffa: pfn range valid, host SHARED_OWNED -> host OWNED (hyp state not checked)
//   pin:         host SHARED_OWNED & hyp SHARED_BORROWED -> refcount++
//   unpin:       refcount-- (BUG_ON if zero)
// Every range check first goes through check_range_allowed_memory(): the range
// must lie in one memory region or one gap (-EINVAL), and in memory (-EPERM).
#include "targets/el2/page_tracker.h"

#include <cerrno>
#include <cstdio>

namespace kconform::el2 {

const char* PageViewName(PageView v) {
  switch (v) {
    case PageView::kHostOwned: return "host-owned";
    case PageView::kSharedWithFfa: return "shared-with-ffa";
    case PageView::kSharedWithHyp: return "shared-with-hyp";
    case PageView::kHypOwned: return "hyp-owned";
    case PageView::kNotMemory: return "not-memory";
  }
  return "?";
}

std::string Stage2Call::ToString() const {
  static const char* const kNames[] = {"share_hyp", "unshare_hyp", "share_ffa",
                                       "unshare_ffa", "pin_shared_mem", "unpin_shared_mem"};
  char buf[128];
  switch (kind) {
    case Kind::kShareHyp:
    case Kind::kUnshareHyp:
      snprintf(buf, sizeof buf, "%s(pfn=%#llx) = %d", kNames[int(kind)],
               (unsigned long long)a, ret);
      break;
    case Kind::kShareFfa:
    case Kind::kUnshareFfa:
      snprintf(buf, sizeof buf, "%s(pfn=%#llx, nr=%llu) = %d", kNames[int(kind)],
               (unsigned long long)a, (unsigned long long)b, ret);
      break;
    default:
      snprintf(buf, sizeof buf, "%s([%#llx, %#llx)) = %d", kNames[int(kind)],
               (unsigned long long)a, (unsigned long long)b, ret);
  }
  return buf;
}

PageTracker::PageTracker(uint64_t base, uint64_t host_pages, uint64_t hyp_pages,
                         unsigned page_shift, unsigned ipa_bits)
    : base_(base), shift_(page_shift), ipa_bits_(ipa_bits), pages_(host_pages + hyp_pages) {
  for (uint64_t i = host_pages; i < host_pages + hyp_pages; i++)
    pages_[i] = PageState{HostState::kNoPage, HypState::kOwned, 0};
  const size_t n = pages_.size();
  views_.resize(n);
  for (size_t i = 0; i < n; ++i) views_[i] = static_cast<uint8_t>(ViewOf(pages_[i]));
  // Sized once: no allocation while calls run.
  dirty_.assign(n, 0);
  dirty_list_.reserve(n);
  op_stamp_.assign(n, 0);
  op_changed_.reserve(n);
}

void PageTracker::Set(uint64_t phys, const PageState& st) {
  const uint32_t i = static_cast<uint32_t>((phys - base_) >> shift_);
  if (op_stamp_[i] != op_epoch_) {
    op_stamp_[i] = op_epoch_;
    op_changed_.push_back({i, views_[i]});
  }
  if (!dirty_[i]) {
    dirty_[i] = 1;
    dirty_list_.push_back(i);
  }
  pages_[i] = st;
  views_[i] = static_cast<uint8_t>(ViewOf(st));
}

void PageTracker::RestoreFrom(const PageTracker& snap) {
  for (uint32_t i : dirty_list_) {
    pages_[i] = snap.pages_[i];
    views_[i] = snap.views_[i];
    dirty_[i] = 0;
  }
  dirty_list_.clear();
  log_ = snap.log_;
}

int PageTracker::Log(Stage2Call::Kind k, uint64_t a, uint64_t b, int ret) {
  log_.push_back(Stage2Call{k, a, b, ret});
  return ret;
}

// mem_protect.c: find_mem_range() + is_in_mem_range(end - 1), one region.
int PageTracker::CheckRangeAllowedMemory(uint64_t start, uint64_t end) const {
  const uint64_t mem_end = base_ + size();
  uint64_t lo, hi;
  bool in_memory;
  if (start < base_) {
    lo = 0, hi = base_, in_memory = false;
  } else if (start >= mem_end) {
    lo = mem_end, hi = UINT64_MAX, in_memory = false;
  } else {
    lo = base_, hi = mem_end, in_memory = true;
  }
  const uint64_t last = end - 1;  // wraps for end == 0, as in the kernel
  if (!(lo <= last && last < hi)) return -EINVAL;
  if (!in_memory) return -EPERM;
  return 0;
}

int PageTracker::CheckHost(uint64_t phys, uint64_t size, HostState want) const {
  if (int r = CheckRangeAllowedMemory(phys, phys + size)) return r;
  for (uint64_t p = phys; p < phys + size; p += uint64_t{1} << shift_)
    if (pages_[(p - base_) >> shift_].host != want) return -EPERM;
  return 0;
}

// Only called after CheckHost accepted the range.
int PageTracker::CheckHyp(uint64_t phys, uint64_t size, HypState want) const {
  for (uint64_t p = phys; p < phys + size; p += uint64_t{1} << shift_)
    if (pages_[(p - base_) >> shift_].hyp != want) return -EPERM;
  return 0;
}

int PageTracker::ShareHyp(uint64_t pfn) {
  const uint64_t phys = pfn << shift_, size = uint64_t{1} << shift_;
  int r = CheckHost(phys, size, HostState::kOwned);
  if (!r) r = CheckHyp(phys, size, HypState::kNoPage);
  if (!r) Set(phys, PageState{HostState::kSharedOwned, HypState::kSharedBorrowed, At(phys).refcount});
  return Log(Stage2Call::Kind::kShareHyp, pfn, 1, r);
}

int PageTracker::UnshareHyp(uint64_t pfn) {
  const uint64_t phys = pfn << shift_, size = uint64_t{1} << shift_;
  int r = CheckHost(phys, size, HostState::kSharedOwned);
  if (!r) r = CheckHyp(phys, size, HypState::kSharedBorrowed);
  if (!r && At(phys).refcount) r = -EBUSY;
  if (!r) Set(phys, PageState{HostState::kOwned, HypState::kNoPage, 0});
  return Log(Stage2Call::Kind::kUnshareHyp, pfn, 1, r);
}

static bool PfnRangeIsValid(uint64_t pfn, uint64_t nr, unsigned ipa_bits, unsigned shift) {
  const uint64_t limit = uint64_t{1} << (ipa_bits - shift);
  return pfn < limit && (limit - pfn) >= nr;
}

int PageTracker::ShareFfa(uint64_t pfn, uint64_t nr_pages) {
  if (!PfnRangeIsValid(pfn, nr_pages, ipa_bits_, shift_))
    return Log(Stage2Call::Kind::kShareFfa, pfn, nr_pages, -EINVAL);
  const uint64_t phys = pfn << shift_, size = nr_pages << shift_;
  int r = CheckHost(phys, size, HostState::kOwned);
  if (!r)
    for (uint64_t p = phys; p < phys + size; p += uint64_t{1} << shift_)
      Set(p, PageState{HostState::kSharedOwned, At(p).hyp, At(p).refcount});
  return Log(Stage2Call::Kind::kShareFfa, pfn, nr_pages, r);
}

int PageTracker::UnshareFfa(uint64_t pfn, uint64_t nr_pages) {
  if (!PfnRangeIsValid(pfn, nr_pages, ipa_bits_, shift_))
    return Log(Stage2Call::Kind::kUnshareFfa, pfn, nr_pages, -EINVAL);
  const uint64_t phys = pfn << shift_, size = nr_pages << shift_;
  int r = CheckHost(phys, size, HostState::kSharedOwned);
  if (!r)
    for (uint64_t p = phys; p < phys + size; p += uint64_t{1} << shift_)
      Set(p, PageState{HostState::kOwned, At(p).hyp, At(p).refcount});
  return Log(Stage2Call::Kind::kUnshareFfa, pfn, nr_pages, r);
}

int PageTracker::Pin(uint64_t from, uint64_t to) {
  int r = CheckHost(from, to - from, HostState::kSharedOwned);
  if (!r) r = CheckHyp(from, to - from, HypState::kSharedBorrowed);
  if (!r)
    for (uint64_t p = from; p < to; p += uint64_t{1} << shift_)
      Set(p, PageState{At(p).host, At(p).hyp, static_cast<uint16_t>(At(p).refcount + 1)});
  return Log(Stage2Call::Kind::kPin, from, to, r);
}

int PageTracker::Unpin(uint64_t from, uint64_t to) {
  int r = 0;
  for (uint64_t p = from; p < to && !r; p += uint64_t{1} << shift_) {
    const PageState* s = Page(p);
    if (!s || s->refcount == 0) r = -EINVAL;  // BUG_ON(!p->refcount) at EL2
    else Set(p, PageState{s->host, s->hyp, static_cast<uint16_t>(s->refcount - 1)});
  }
  return Log(Stage2Call::Kind::kUnpin, from, to, r);
}

const PageState* PageTracker::Page(uint64_t phys) const {
  if (phys < base_ || phys - base_ >= size()) return nullptr;
  return &pages_[(phys - base_) >> shift_];
}

PageView PageTracker::View(uint64_t phys) const {
  const PageState* s = Page(phys);
  if (!s) return PageView::kNotMemory;
  return ViewOf(*s);
}

}  // namespace kconform::el2
