// The guest_memfd op table: names, argument kinds and defaults, byte counts,
// and what the fuzz engines need (EngineHints).
#include "harness/scenario/gmem_abi.h"

#include "harness/scenario/abi.h"
#include "harness/scenario/gmem_conventions.h"

namespace kconform::gmem {
namespace {

constexpr NamedValue kVmTypes[] = {{"DEFAULT", kVmDefault}, {"SW_PROTECTED", kVmSwProtected}};
constexpr NamedValue kCreateFlags[] = {
    {"MMAP", kFlagMmap}, {"INIT_SHARED", kFlagInitShared}, {"WRITE", kFlagWrite}};
constexpr NamedValue kProt[] = {{"READ", kProtRead}, {"WRITE", kProtWrite}};
constexpr NamedValue kShare[] = {{"SHARED", kMapShared}, {"PRIVATE", kMapPrivate}};
constexpr NamedValue kWhence[] = {
    {"SET", 0}, {"CUR", 1}, {"END", 2}, {"DATA", 3}, {"HOLE", 4}};
constexpr NamedValue kFallocModes[] = {{"KEEP_SIZE", kFallocKeepSize},
                                       {"PUNCH_HOLE", kFallocPunchHole},
                                       {"COLLAPSE_RANGE", kFallocCollapseRange},
                                       {"ZERO_RANGE", kFallocZeroRange},
                                       {"INSERT_RANGE", kFallocInsertRange}};
constexpr NamedValue kMemFlags[] = {{"LOG_DIRTY_PAGES", kMemLogDirtyPages},
                                    {"READONLY", kMemReadonly},
                                    {"GUEST_MEMFD", kMemGuestMemfd}};
constexpr NamedValue kSrcValid[] = {{"all", kSrcAllValid}};

constexpr ArgSpec kVmArg{"vm", ArgKind::kSlot, kVm};
constexpr ArgSpec kGmemArg{"gmem", ArgKind::kSlot, kGmem};
constexpr ArgSpec kMapArg{"map", ArgKind::kSlot, kMap};
constexpr ArgSpec kOffset{"offset", ArgKind::kInt};
constexpr ArgSpec kLen{"len", ArgKind::kInt};
constexpr ArgSpec kPattern{"pattern", ArgKind::kInt, -1, {}, true, 1};
constexpr ArgSpec kSrcValidArg{"src_valid", ArgKind::kEnum, -1, kSrcValid, true, kSrcAllValid};

constexpr ArgSpec kCreateVmArgs[] = {{"type", ArgKind::kEnum, -1, kVmTypes, true, kVmDefault}};
constexpr ArgSpec kCreateGmemArgs[] = {
    kVmArg, {"size", ArgKind::kInt}, {"flags", ArgKind::kFlags, -1, kCreateFlags}};
constexpr ArgSpec kCloseArgs[] = {kGmemArg};
constexpr ArgSpec kWriteArgs[] = {kGmemArg, kLen, kPattern, kSrcValidArg};
constexpr ArgSpec kPwriteArgs[] = {kGmemArg, kOffset, kLen, kPattern, kSrcValidArg};
constexpr ArgSpec kPwritevArgs[] = {
    kGmemArg, kOffset, kLen, {"iovcnt", ArgKind::kInt, -1, {}, true, 2}, kPattern};
constexpr ArgSpec kReadArgs[] = {kGmemArg, kLen};
constexpr ArgSpec kPreadArgs[] = {kGmemArg, kOffset, kLen};
constexpr ArgSpec kLseekArgs[] = {kGmemArg, kOffset, {"whence", ArgKind::kEnum, -1, kWhence}};
constexpr ArgSpec kMmapArgs[] = {kGmemArg,
                                 kOffset,
                                 kLen,
                                 {"prot", ArgKind::kFlags, -1, kProt, true, kProtRead | kProtWrite},
                                 {"share", ArgKind::kEnum, -1, kShare, true, kMapShared}};
constexpr ArgSpec kMunmapArgs[] = {kMapArg};
constexpr ArgSpec kLoadArgs[] = {kMapArg, kOffset, kLen};
constexpr ArgSpec kStoreArgs[] = {kMapArg, kOffset, kLen, kPattern};
constexpr ArgSpec kFallocateArgs[] = {
    kGmemArg, {"mode", ArgKind::kFlags, -1, kFallocModes}, kOffset, kLen};
constexpr ArgSpec kFstatArgs[] = {kGmemArg};
constexpr ArgSpec kBindArgs[] = {kVmArg,
                                 {"slot", ArgKind::kInt},
                                 {"gpa", ArgKind::kInt},
                                 {"size", ArgKind::kInt},
                                 kGmemArg,
                                 {"gmem_offset", ArgKind::kInt},
                                 {"flags", ArgKind::kFlags, -1, kMemFlags, true, kMemGuestMemfd}};
constexpr ArgSpec kUnbindArgs[] = {kVmArg, {"slot", ArgKind::kInt}};
constexpr ArgSpec kCloseVmArgs[] = {kVmArg};
constexpr ArgSpec kTimesArgs[] = {kGmemArg};

constexpr OpSpec kOps[] = {
    {"create_vm", kCreateVmArgs, kVm, "KVM_CREATE_VM of the given type"},
    {"create_gmem", kCreateGmemArgs, kGmem, "KVM_CREATE_GUEST_MEMFD on a VM"},
    {"close", kCloseArgs, -1, "close() the guest_memfd"},
    {"write", kWriteArgs, -1, "write() len pattern bytes at the file position", {.arg = 1}},
    {"pwrite", kPwriteArgs, -1, "pwrite() len pattern bytes at offset", {.arg = 2}},
    {"pwritev", kPwritevArgs, -1, "pwritev() len pattern bytes at offset, in iovcnt segments", {.arg = 2}},
    {"read", kReadArgs, -1, "read() len bytes at the file position", {.arg = 1}},
    {"pread", kPreadArgs, -1, "pread() len bytes at offset", {.arg = 2}},
    {"lseek", kLseekArgs, -1, "lseek()"},
    {"mmap", kMmapArgs, kMap, "mmap() len bytes of the file from offset"},
    {"munmap", kMunmapArgs, -1, "munmap() a mapping"},
    {"load", kLoadArgs, -1, "read len bytes through a mapping (digest, or the signal taken)", {.arg = 2}},
    {"store", kStoreArgs, -1, "write len pattern bytes through a mapping", {.arg = 2}},
    {"fallocate", kFallocateArgs, -1, "fallocate()",
     {.arg = 3, .unless_arg = 1, .unless_mask = kFallocPunchHole}},
    {"fstat", kFstatArgs, -1, "fstat(): st_size"},
    {"bind", kBindArgs, -1, "KVM_SET_USER_MEMORY_REGION2 binding a guest_memfd range"},
    {"unbind", kUnbindArgs, -1, "KVM_SET_USER_MEMORY_REGION2 deleting a slot (size 0)"},
    {"close_vm", kCloseVmArgs, -1, "close() the VM"},
    // The value is a bitmask: kTimesMtimeAdvanced (1) if st_mtim is later than
    // the baseline, kTimesCtimeAdvanced (2) likewise for st_ctim. The baseline
    // is what fstat() reported at the previous `times` on the slot, or right
    // after create_gmem; after taking one the target waits until
    // CLOCK_REALTIME_COARSE is past it, so any later update is visible
    // (gmem_conventions.h, SPEC.md HARNESS:TIMES).
    {"times", kTimesArgs, -1,
     "fstat(): which of mtime (1) and ctime (2) advanced since the previous times or creation"},
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kOpCount);

constexpr const char* kResources[] = {"vm", "gmem", "map"};
constexpr NamedValue kCaps[] = {{"gmem", 0},       {"mmap", 1},         {"init_shared", 2},
                                {"write", 3},      {"user_memory2", 4}, {"sw_protected_vm", 5}};

// guest_memfd sizes, offsets and counts worth trying.
constexpr uint64_t kFuzzValues[] = {0xc0000000, 0x100000, 0x7fffffffffffe000, 1021, 1024, 1025, 509, 510,
                                    0x10000, 0x7ffff000};

// Where the fuzzers start (EngineHints::starters).
constexpr const char* kStarters[] = {
    "create_vm\n"
    "create_gmem vm=0 size=0x4000 flags=MMAP|INIT_SHARED\n"
    "fallocate gmem=0 mode=KEEP_SIZE|PUNCH_HOLE offset=0 len=0x1000\n",
};

constexpr EngineHints kEngine{
    .costly_resource = kVm,               // a VM (KVM_CREATE_VM) each
    .refused_bytes_above = kMaxOpBytes,   // E2BIG (gmem_conventions.h)
    .values = kFuzzValues,
    .starters = kStarters,
    .fuzz_max_ops = 24,
};

}  // namespace

extern const AbiSpec kGmemAbi;
const AbiSpec kGmemAbi{Abi::kGmem, "gmem", kOps, kResources, kCaps, kEngine};

}  // namespace kconform::gmem
