// Why a GoogleTest may skip: the reason's first words, which `kconform test`
// reads back from ctest's JUnit file (harness/driver/kconform/core/skips.py
// holds the same prefixes). Under KCONFORM_CI=1 a skip whose reason starts with
// none of these fails CI: only what the machine cannot change is accepted.
//
//   if (!host.target && host.no_device) GTEST_SKIP() << KC_SKIP_NO_KVM << host.error;
//
// (HostOpen::no_device: /dev/kvm absent or not ours to open. A /dev/kvm that
// opens but will not probe is a failure, never this skip.)
#pragma once

// The machine has no usable /dev/kvm (many CI runners): the host target cannot run.
#define KC_SKIP_NO_KVM "no /dev/kvm: "
// The running kernel lacks a capability or behaves otherwise (not our choice).
#define KC_SKIP_KERNEL "not for this kernel: "
