// Framework calls through the proxy (SPEC.md "Framework calls"):
// FFA_VERSION (VERSION:FORMAT, VERSION:NEGOTIATE, PKVM:VERSION), FFA_FEATURES
// (FEATURES:CONSISTENT), FFA_ID_GET (PKVM:ID), FFA_PARTITION_INFO_GET
// (PARTINFO:COUNT, MBOX:RX-BUSY), and the calls the proxy refuses
// (PKVM:UNSUPPORTED, R2:OPTIONAL).
#include "models/ffa/proxy_ops.h"
#include "models/ffa/reclaim2_abi.h"

namespace kconform::ffa {
namespace {

// NOT_SUPPORTED in w0 (FFA_VERSION answers no FFA_ERROR frame): as a W
// register, or sign-extended to x0.
constexpr uint64_t kNotSupportedW0 = static_cast<uint32_t>(kNotSupported);
constexpr uint64_t kNotSupportedX0 = ~0ull;
constexpr uint32_t kVersionMbz = 1u << 31;  // FFA_VERSION w1 bit 31

// The answer x0 = v, nothing else defined.
void answer_x0(Plan& p, RuleId r, uint64_t v, bool unchanged) {
  uint64_t regs[kCallRegs] = {v};
  p.exact(r, regs, kX0, unchanged);
}

// NOT_SUPPORTED in w0, either width, the state unchanged.
void answer_not_supported(Plan& p, RuleId r) {
  answer_x0(p, r, kNotSupportedW0, true);
  answer_x0(p, r, kNotSupportedX0, true);
}

}  // namespace

void expect_version(const World& w, const CallArgs& a, Plan& p) {
  const uint32_t req = a.w1();
  const ProxyProfile& prof = *w.profile;
  // The version the proxy offers: its own and the SPMC's, whichever is lower.
  const uint32_t mine = version_minor(prof.version) < version_minor(prof.spmc.version)
                            ? version_minor(prof.version)
                            : version_minor(prof.spmc.version);
  // VERSION:FORMAT: bit 31 MBZ.
  if (req & kVersionMbz) {
    answer_not_supported(p, kFfaVersionBit31);
    p.hits.add(kFfaVersionBit31, true);
    return;
  }
  p.hits.pass(kFfaVersionBit31);
  // VERSION:NEGOTIATE: another major: NOT_SUPPORTED or the callee's version.
  if (version_major(req) != 1) {
    answer_not_supported(p, kFfaVersionNegotiate);
    answer_x0(p, kFfaVersionNegotiate, version(1, mine), true);
    return;
  }
  const uint32_t minor = version_minor(req);
  // PKVM:VERSION: the host may not go below the version already negotiated.
  if (w.proxy.version_fixed && minor < version_minor(w.proxy.host_version)) {
    p.hits.add(kFfaVersionDowngrade, true);
    answer_not_supported(p, kFfaVersionDowngrade);
    return;
  }
  p.hits.pass(kFfaVersionDowngrade);
  // The proxy's version, or the caller's lower minor.
  answer_x0(p, kFfaVersionNegotiate, version(1, mine), false);
  if (minor < mine) answer_x0(p, kFfaVersionNegotiate, version(1, minor), false);
  // The first successful call fixes the host's version, and the proxy tells EL3.
  if (!w.proxy.version_fixed) {
    const uint32_t fixed = version(1, minor < mine ? minor : mine);
    p.fix_version(fixed);
    uint64_t out[kNumRegs];
    p.relay(Relay::call({kFnVersion, fixed}), out, nullptr);
  }
}

bool proxy_refuses(const ProxyProfile& p, uint32_t fid) {
  switch (fid) {
    case kFnMemDonate32: case kFnMemDonate64: case kFnMemRetrieveReq32: case kFnMemRetrieveReq64:
    case kFnMemRetrieveResp: case kFnMemRelinquish: case kFnMemOpPause: case kFnMemOpResume:
    case kFnMemFragRx: case kFnMemPermGet32: case kFnMemPermSet32: case kFnRxAcquire:
    case kFnMemPermGet32 | kSmc64Bit: case kFnMemPermSet32 | kSmc64Bit:
      return true;
    default:
      return fid == kReclaim2.fid && !p.reclaim2;
  }
}

void expect_features(const World& w, const CallArgs& a, Plan& p) {
  // What the proxy refuses it must not advertise.
  if (proxy_refuses(*w.profile, a.w1())) {
    p.error(kFfaFeaturesConsistent, kNotSupported);
    p.hits.pass(kFfaFeaturesConsistent);
    return;
  }
  // A relayed call: the SPMC may lack it.
  p.error(kFfaFeaturesConsistent, kNotSupported);
  p.success(kFfaFeaturesConsistent, kX0, 0, 0, true);
}

void expect_id_get(const World&, const CallArgs&, Plan& p) {
  p.success(kFfaIdGet, kX0 | kX2, kHostId, 0, true);
}

// FFA_PARTITION_INFO_GET v1.0 descriptor size (v1.0 does not report it in w3).
constexpr uint64_t kPartInfoSizeV10 = 8;

void expect_partition_info(const World& w, const CallArgs& a, Plan& p) {
  const SpmcConfig& c = w.spmc.config();
  const uint32_t want[4] = {a.w1(), a.w2(), a.w3(), a.w4()};
  const uint32_t flags = a.w5();
  const bool count_only = flags & kPartitionInfoCountOnly;
  // PARTINFO:COUNT: the nil UUID matches every partition.
  const bool nil = (want[0] | want[1] | want[2] | want[3]) == 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < c.n_sps; ++i) {
    uint32_t u[4];
    sp_uuid(c.sp_ids[i], u);
    if (nil || (want[0] == u[0] && want[1] == u[1] && want[2] == u[2] && want[3] == u[3])) ++n;
  }
  if ((flags & ~kPartitionInfoCountOnly) || n == 0) {
    p.hits.broke(kFfaPartitionInfo, "flags %#x, %u partitions match", flags, n);
    p.fail(kFfaPartitionInfo, {kInvalidParameters});
  }
  // MBOX:RX-BUSY: the descriptors go to RX, which the host must not own.
  if (!count_only) {
    if (!w.proxy.mbox.mapped) {
      p.hits.broke(kFfaMboxRxBusy, "no RX buffer");
      p.fail(kFfaMboxRxBusy, {kDenied, kInvalidParameters, kBusy});
    } else if (w.proxy.mbox.rx_held) {
      p.hits.broke(kFfaMboxRxBusy, "the host owns RX");
      p.fail(kFfaMboxRxBusy, {kBusy});
    } else {
      p.hits.pass(kFfaMboxRxBusy);
    }
  }
  if (p.failed) return;
  const Fault armed = w.spmc.armed();
  if (!count_only && (armed == Fault::kPartCount || armed == Fault::kPartSize)) {
    // HARNESS:EL3 PART_COUNT / PART_SIZE: EL3's reply lies about what its RX
    // holds (PKVM:DISTRUST). The proxy copies count x size bytes into the
    // host's RX: more than the mailbox must end in an error, nothing copied;
    // a lie that fits may be relayed as EL3 said, or refused.
    uint64_t out[kNumRegs];
    p.relay(Relay::call({a.fid(), a.w1(), a.w2(), a.w3(), a.w4(), a.w5()}), out, nullptr);
    const uint64_t count = w32(out[2]);
    const uint64_t size = w.proxy.host_version >= kVersion11 ? w32(out[3]) : kPartInfoSizeV10;
    const uint64_t bytes = count * size, mbox = w.profile->mbox_bytes();
    p.hits.add(kFfaProxyEl3Fault, bytes > mbox);
    p.hits.note("EL3 reports %llu partitions of %llu bytes, %llu bytes for a %llu-byte mailbox",
                static_cast<unsigned long long>(count), static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(mbox));
    p.any_error(kFfaProxyEl3Fault, false);
    if (bytes > mbox) return;
    p.fork();
    p.mailbox().rx_held = true;
    p.success(kFfaProxyEl3Fault, kX0 | kX2, count);
    return;
  }
  if (!count_only) p.mailbox().rx_held = true;
  p.success(kFfaPartitionInfo, kX0 | kX2, n);
}

}  // namespace kconform::ffa
