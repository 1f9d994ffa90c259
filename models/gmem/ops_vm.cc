// VMs and memslots: KVM_CREATE_VM, close() of a VM, and
// KVM_SET_USER_MEMORY_REGION2 binding guest_memfd ranges (SPEC.md VM:*, BIND:*).
#include <cerrno>

#include "models/gmem/guards.h"
#include "models/gmem/ops.h"

namespace kconform::gmem {
namespace {

// Op arguments (gmem_abi.h).
struct BindArgs {
  uint64_t vm, gpa, size, gmem, gmem_offset;
  uint32_t slot, flags;  // __u32 fields of the struct (SPEC.md HARNESS:NARROW)
};
BindArgs bind_args(const Op& op) {
  return {op.args[0],          op.args[2], op.args[3], op.args[4], op.args[5],
          low_u32(op.args[1]), low_u32(op.args[6])};
}

constexpr uint32_t kKnownMemFlags = kMemLogDirtyPages | kMemReadonly | kMemGuestMemfd;
constexpr uint32_t kMaxSlotIdAlwaysValid = 509;           // SPEC.md BIND:SLOT-ID
constexpr uint64_t kGpaLimitAlwaysValid = 1ull << 52;     // SPEC.md BIND:GPA (ours)
constexpr uint64_t kSlotSizeAlwaysValid = 1ull << 43;     // SPEC.md BIND:GPA (ours)

bool vm_type_exists(const Profile& p, uint64_t type) {
  return type < 64 && (p.vm_types >> type & 1);
}

// Deleting a slot (memory_size 0): SPEC.md BIND:DELETE.
void expect_delete(const Vm& vm, uint32_t slot, Guards& g) {
  // Deleting an existing slot succeeds; deleting a missing one may fail.
  if (vm.slots.count(slot)) {
    g.pass(kGmemBindDelete);
  } else {
    g.may_fail(kGmemBindDelete, {EINVAL});
  }
  if (!g.failed()) g.allow(Allowed::ok(kGmemBindDelete));
}

// GPA-space and guest_memfd-range overlap with every slot but `slot` itself.
void check_overlap(const State& st, uint64_t vm_slot, const BindArgs& a, Guards& g) {
  const Vm& vm = st.vms[vm_slot];
  bool gmem = a.flags & kMemGuestMemfd;
  bool gpa_overlap = false;
  for (const auto& [id, other] : vm.slots) {
    if (id == a.slot) continue;
    // Slots may not overlap in GPA space within one address space.
    if ((id >> 16) == (a.slot >> 16) && ranges_overlap(a.gpa, a.size, other.gpa, other.size)) {
      g.fail(kGmemBindOverlap, {EEXIST}, "GPA [%#llx,+%#llx) overlaps slot %u",
             (unsigned long long)a.gpa, (unsigned long long)a.size, id);
      gpa_overlap = true;
      break;
    }
  }
  if (!gpa_overlap) g.pass(kGmemBindOverlap);
  if (!gmem) return;
  for (size_t v = 0; v < st.vms.size(); ++v) {
    for (const auto& [id, other] : st.vms[v].slots) {
      if (v == vm_slot && id == a.slot) continue;
      if (!other.gmem || other.file != a.gmem) continue;
      // Bound guest_memfd ranges must not overlap (EEXIST pinned only for SW_PROTECTED).
      if (ranges_overlap(a.gmem_offset, a.size, other.offset, other.size)) {
        if (vm.type == kVmSwProtected) {
          g.fail(kGmemBindGmemOverlap, {EEXIST}, "gmem range [%#llx,+%#llx) overlaps slot %u",
                 (unsigned long long)a.gmem_offset, (unsigned long long)a.size, id);
        } else {
          g.fail(kGmemBindGmemOverlap, {EEXIST, EINVAL}, "gmem range [%#llx,+%#llx) overlaps slot %u",
                 (unsigned long long)a.gmem_offset, (unsigned long long)a.size, id);
        }
        return;
      }
    }
  }
  g.pass(kGmemBindGmemOverlap);
}

// The guest_memfd named by a KVM_MEM_GUEST_MEMFD memslot: SPEC.md BIND:FD..RANGE.
void check_gmem_binding(const State& st, const BindArgs& a, Guards& g) {
  const GmemFile* file = st.live_file(a.gmem);
  // The guest_memfd must be a live guest_memfd.
  if (!file) {
    g.fail(kGmemBindFd, {EINVAL, EBADF}, "gmem slot %llu is not open",
           (unsigned long long)a.gmem);
  } else {
    g.pass(kGmemBindFd);
    // It must have been created on this VM.
    if (file->vm != a.vm) {
      g.fail(kGmemBindOtherVm, {EINVAL}, "gmem of vm %llu bound on vm %llu",
             (unsigned long long)file->vm, (unsigned long long)a.vm);
    } else {
      g.pass(kGmemBindOtherVm);
    }
  }
  // guest_memfd_offset must be page-aligned.
  if (!aligned(a.gmem_offset, st.page())) {
    g.fail(kGmemBindOffsetAlign, {EINVAL}, "gmem_offset %#llx not page-aligned",
           (unsigned long long)a.gmem_offset);
  } else {
    g.pass(kGmemBindOffsetAlign);
  }
  if (!file) return;
  // [offset, offset+size) must not overflow and must lie inside the file.
  uint64_t end;
  if (__builtin_add_overflow(a.gmem_offset, a.size, &end) || end > file->size) {
    g.fail(kGmemBindRange, {EINVAL}, "gmem range [%#llx,+%#llx) beyond size %#llx",
           (unsigned long long)a.gmem_offset, (unsigned long long)a.size,
           (unsigned long long)file->size);
  } else {
    g.pass(kGmemBindRange);
  }
}

}  // namespace

// KVM_CREATE_VM.
void expect_create_vm(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  uint64_t type = op.args[0];
  // The type must be one KVM_CAP_VM_TYPES reports.
  if (!vm_type_exists(st.profile, type)) {
    g.fail(kGmemVmType, {EINVAL}, "VM type %llu not in KVM_CAP_VM_TYPES %#llx",
           (unsigned long long)type, (unsigned long long)st.profile.vm_types);
    return;
  }
  // Types beyond the profile's two are outside the model: they may fail too.
  if (type >= 2) {
    g.may_fail(kGmemVmType, {EINVAL});
  } else {
    g.pass(kGmemVmType);
  }
  g.allow(produced(kGmemVmType));
}

void commit_create_vm(State& st, const Op& op, const Outcome& observed) {
  Vm vm;
  vm.open = observed.kind == Outcome::Kind::kOk;
  vm.type = op.args[0];
  st.vms.push_back(vm);
}

// close() of a VM fd.
void expect_close_vm(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  // The VM fd must be live.
  if (!st.live_vm(op.args[0])) {
    g.fail(kGmemFdBadf, {EBADF}, "vm slot %llu is not open", (unsigned long long)op.args[0]);
    return;
  }
  g.pass(kGmemFdBadf);
  g.allow(Allowed::ok(kGmemVmClose));
}

void commit_close_vm(State& st, const Op& op, const Outcome& observed) {
  Vm* vm = st.vm_at(op.args[0]);
  if (vm && observed.kind == Outcome::Kind::kOk) vm->open = false;
}

// KVM_SET_USER_MEMORY_REGION2.
void expect_bind(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  BindArgs a = bind_args(op);
  // The VM fd must be live (checked before the ioctl is dispatched).
  const Vm* vm = st.live_vm(a.vm);
  if (!vm) {
    g.fail(kGmemFdBadf, {EBADF}, "vm slot %llu is not open", (unsigned long long)a.vm);
    return;
  }
  g.pass(kGmemFdBadf);
  // The ioctl exists only with KVM_CAP_USER_MEMORY2.
  if (!st.profile.user_memory2) {
    g.fail(kGmemBindNoIoctl, {ENOTTY, EINVAL}, "no KVM_CAP_USER_MEMORY2");
    return;
  }
  g.pass(kGmemBindNoIoctl);
  // Flags must be known, and GUEST_MEMFD excludes LOG_DIRTY_PAGES and READONLY.
  if (a.flags & ~kKnownMemFlags) {
    g.fail(kGmemBindFlags, {EINVAL}, "unknown memslot flags %#x", a.flags & ~kKnownMemFlags);
  } else if ((a.flags & kMemGuestMemfd) && (a.flags & (kMemLogDirtyPages | kMemReadonly))) {
    g.fail(kGmemBindFlags, {EINVAL}, "GUEST_MEMFD with flags %#x", a.flags);
  } else {
    g.pass(kGmemBindFlags);
  }
  // memory_size 0 deletes the slot. The standard checks of the other fields
  // may still run first (SPEC.md BIND:DELETE): unaligned fields may fail.
  if (a.size == 0) {
    if (!aligned(a.gpa, st.page())) g.may_fail(kGmemBindGpa, {EINVAL});
    if ((a.flags & kMemGuestMemfd) && !aligned(a.gmem_offset, st.page()))
      g.may_fail(kGmemBindOffsetAlign, {EINVAL});
    expect_delete(*vm, a.slot, g);
    return;
  }
  // Slot ids the profile cannot vouch for may fail.
  if ((a.slot & 0xffff) >= kMaxSlotIdAlwaysValid || (a.slot >> 16) != 0) {
    g.may_fail(kGmemBindSlotId, {EINVAL});
  } else {
    g.pass(kGmemBindSlotId);
  }
  // guest_phys_addr and memory_size must be page-aligned; the GPA range must not wrap.
  uint64_t gpa_end;
  if (!aligned(a.gpa, st.page()) || !aligned(a.size, st.page())) {
    g.fail(kGmemBindGpa, {EINVAL}, "gpa %#llx / size %#llx not page-aligned",
           (unsigned long long)a.gpa, (unsigned long long)a.size);
  } else if (__builtin_add_overflow(a.gpa, a.size, &gpa_end)) {
    g.fail(kGmemBindGpa, {EINVAL}, "GPA range [%#llx,+%#llx) wraps",
           (unsigned long long)a.gpa, (unsigned long long)a.size);
  } else if (gpa_end > kGpaLimitAlwaysValid || a.size > kSlotSizeAlwaysValid) {
    g.may_fail(kGmemBindGpa, {EINVAL});
  } else {
    g.pass(kGmemBindGpa);
  }
  bool gmem = a.flags & kMemGuestMemfd;
  if (gmem) {
    check_gmem_binding(st, a, g);
  } else {
    // A memslot without GUEST_MEMFD is outside the model.
    g.may_fail(kGmemBindPlain, {EINVAL, EFAULT});
  }
  // An existing slot may not be resized; other changes are undocumented.
  RuleId success_rule = gmem ? kGmemBindOk : kGmemBindPlain;
  auto existing = vm->slots.find(a.slot);
  if (existing != vm->slots.end()) {
    if (existing->second.size != a.size) {
      g.fail(kGmemBindModify, {EINVAL}, "slot %u resized %#llx -> %#llx", a.slot,
             (unsigned long long)existing->second.size, (unsigned long long)a.size);
    } else {
      g.may_fail(kGmemBindModify, {EINVAL, EEXIST});
      success_rule = kGmemBindModify;
    }
  }
  // Ranges must not overlap other slots (GPA) or other bindings (guest_memfd).
  check_overlap(st, a.vm, a, g);
  if (!g.failed()) g.allow(Allowed::ok(success_rule));
}

void commit_bind(State& st, const Op& op, const Outcome& observed) {
  if (observed.kind != Outcome::Kind::kOk) return;
  BindArgs a = bind_args(op);
  Vm* vm = st.vm_at(a.vm);
  if (!vm) return;
  if (a.size == 0) {
    vm->slots.erase(a.slot);
    return;
  }
  Memslot slot;
  slot.gpa = a.gpa;
  slot.size = a.size;
  slot.flags = a.flags;
  slot.gmem = a.flags & kMemGuestMemfd;
  slot.file = a.gmem;
  slot.offset = a.gmem_offset;
  vm->slots[a.slot] = slot;
}

// KVM_SET_USER_MEMORY_REGION2 with memory_size 0.
void expect_unbind(const State& st, const Op& op, Expectation& out) {
  Guards g(out);
  const Vm* vm = st.live_vm(op.args[0]);
  // The VM fd must be live.
  if (!vm) {
    g.fail(kGmemFdBadf, {EBADF}, "vm slot %llu is not open", (unsigned long long)op.args[0]);
    return;
  }
  g.pass(kGmemFdBadf);
  // The ioctl exists only with KVM_CAP_USER_MEMORY2.
  if (!st.profile.user_memory2) {
    g.fail(kGmemBindNoIoctl, {ENOTTY, EINVAL}, "no KVM_CAP_USER_MEMORY2");
    return;
  }
  g.pass(kGmemBindNoIoctl);
  expect_delete(*vm, low_u32(op.args[1]), g);
}

void commit_unbind(State& st, const Op& op, const Outcome& observed) {
  Vm* vm = st.vm_at(op.args[0]);
  if (vm && observed.kind == Outcome::Kind::kOk) vm->slots.erase(low_u32(op.args[1]));
}

}  // namespace kconform::gmem
