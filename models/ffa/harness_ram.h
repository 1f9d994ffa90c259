// What both FF-A models (model.cc: the proxy's oracle; spmc_model.cc: the
// SPMC's) keep of a scenario's harness side, the harness ops they judge
// alike, and how both merge a core call's rules into an Expectation (SPEC.md HARNESS:SLOTS, HARNESS:TX, HARNESS:HOST-MEM): the handle
// slots, the host TX window and the last descriptor's length, and the
// modelled RAM the tx_* and host_* ops write, with the pages written marked
// for the per-scenario restore. Header-only, as scenario_ops.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "harness/scenario/ffa_abi.h"
#include "harness/scenario/scenario.h"
#include "models/common/dirty_pages.h"
#include "models/common/outcome.h"
#include "models/ffa/hits.h"
#include "models/ffa/scenario_ops.h"

namespace kconform::ffa {

// The rules a core call evaluated (Hits), merged into out.hits (a rule
// already there keeps one entry, forbidden if either side says so), and its
// note as out.note.
inline void merge_hits(const Hits& h, Expectation& out) {
  for (uint32_t k = 0; k < h.size(); ++k) {
    bool seen = false;
    for (RuleHit& rh : out.hits)
      if (rh.rule == h[k].rule) {
        rh.forbidden |= h[k].forbidden;
        seen = true;
      }
    if (!seen) out.hits.push_back({h[k].rule, h[k].forbidden});
  }
  if (h.text()[0]) out.note = h.text();
}

struct HarnessRam {
  // RAM: layout.ram_bytes() from layout.phys_base, all zero after reset().
  std::vector<uint8_t> mem;
  DirtyPages dirty;  // pages of mem written since the last restore (all zero then)
  // Per scenario.
  std::vector<uint64_t> handles;  // HARNESS:SLOTS
  uint64_t last_desc_len = 0;     // total_len/frag_len "auto"
  uint64_t tx_window = 0;         // HARNESS:TX: the host TX as the last rxtx_map named it
  bool tx_known = false;
  TxWrite tx;  // tx_write's scratch (kept for its capacity)

  // Sizes the RAM for layout, all zero (once).
  void allocate(const ProxyProfile& layout) {
    mem.assign(layout.ram_bytes(), 0);
    dirty.bind(mem.data(), mem.size());
  }
  // A new scenario: the pages written zeroed (unless keep_ram, tests), the rest forgotten.
  void begin(bool keep_ram = false) {
    if (!keep_ram) dirty.zero_marked();
    handles.clear();
    last_desc_len = 0;
    tx_window = 0;
    tx_known = false;
  }

  uint64_t handle(uint64_t slot) const { return slot_handle(handles, slot); }
  void host_regs(const Op& op, uint64_t in[8]) const { ffa::host_regs(op, handles, last_desc_len, in); }
  // HARNESS:TX: an rxtx_map names the window, whatever its outcome.
  void mapped(const Op& op) {
    tx_window = op.args[0];
    tx_known = true;
  }

  // HARNESS:TX: how many bytes a tx_* op writes into the host TX window, and writing them.
  uint64_t tx_length(const ProxyProfile& layout, const Scenario& s, const Op& op) const {
    const TxExtent e = tx_extent(s, op);
    return tx_clip(layout, tx_known, tx_window, e.offset, e.size);
  }
  void tx_write(const ProxyProfile& layout, const Scenario& s, const Op& op) {
    tx_bytes(s, op, &tx);
    const TxWrite& w = tx;
    if (w.is_desc) last_desc_len = w.desc_len;
    const uint64_t len = tx_clip(layout, tx_known, tx_window, w.offset, w.bytes.size());
    if (len == 0) return;  // nothing lands: do not form a pointer out of bounds
    uint8_t* dst = mem.data() + (tx_window - layout.phys_base) + w.offset;
    std::memcpy(dst, w.bytes.data(), len);
    dirty.mark(dst, len);
  }

  // HARNESS:HOST-MEM: host_fill's bytes written, host_count's bytes equal to the value.
  uint64_t host_mem_result(const ProxyProfile& layout, const Op& op) const {
    const uint64_t len = host_mem_len(layout, op.args[0], op.args[1]);
    const uint8_t* m = mem.data() + (len ? op.args[0] - layout.phys_base : 0);
    return op.code == kOpHostFill ? len : count_bytes(m, len, static_cast<uint8_t>(op.args[2]));
  }
  void host_fill(const ProxyProfile& layout, const Op& op) {
    const uint64_t len = host_mem_len(layout, op.args[0], op.args[1]);
    if (!len) return;
    uint8_t* m = mem.data() + (op.args[0] - layout.phys_base);
    std::memset(m, static_cast<uint8_t>(op.args[2]), len);
    dirty.mark(m, len);
  }

  // Every byte of the per-scenario fields (the restore tests).
  void append_bytes(std::vector<uint8_t>& b) const {
    auto put = [&b](const void* p, size_t n) {
      const uint8_t* c = static_cast<const uint8_t*>(p);
      b.insert(b.end(), c, c + n);
    };
    for (uint64_t h : handles) put(&h, sizeof h);
    put(&last_desc_len, sizeof last_desc_len);
    put(&tx_window, sizeof tx_window);
    put(&tx_known, sizeof tx_known);
  }
};

// HARNESS:SLOTS: the ops that name a slot (a fragment, a reclaim, a
// borrower's op) evaluate the rule, on its forbidden side for a slot no send
// filled.
inline void slot_hit(const HarnessRam& h, const Op& op, Expectation& out) {
  if (op.code == kOpMemFragTx || op.code == kOpMemReclaim || op.code == kOpMemReclaim2 || op.code == kOpSpRetrieve ||
      op.code == kOpSpRelinquish)
    out.hits.push_back({kFfaHarnessSlots, h.handle(op.args[0]) == kInvalidHandle});
}

}  // namespace kconform::ffa
