/* Stands in for <asm/kvm_host.h>: only the host CPU context that the trap
 * handler passes in (x0-x30 as the host left them at the SMC) and the PSCI
 * configuration hyp_ffa_init() reads. The real header is most of KVM/arm64. */
#ifndef KC_ASM_KVM_HOST_H
#define KC_ASM_KVM_HOST_H
#include <linux/types.h>

struct kvm_vcpu; /* named in prototypes of the tree's nvhe/trap_handler.h */

struct user_pt_regs {
	u64 regs[31];
	u64 sp;
	u64 pc;
	u64 pstate;
};

struct kvm_cpu_context {
	struct user_pt_regs regs;
};

/* <asm/kvm_hyp.h>: filled in by the host before pKVM initialises. */
struct kvm_host_psci_config {
	u32 version;
	u32 smccc_version;
};
extern struct kvm_host_psci_config kvm_host_psci_config;

#endif
