/* Wraps the tree's own <linux/arm-smccc.h> (copied into the build directory
 * at configure time and found by #include_next): function-ID encoding,
 * struct arm_smccc_1_2_regs and ARM_SMCCC_VERSION_* come from the tree.
 * What cannot run on x86-64 is replaced here: the SMCCC v1.1 conduit is
 * inline asm ("smc #0" on x0-x7), so arm_smccc_1_1_smc() (what older
 * trees' ffa.c calls, e.g. 6.12) is routed to the same emulated
 * EL3 as arm_smccc_1_2_smc(), returning x0-x3 as SMCCC v1.1 does. */
#ifndef KC_LINUX_ARM_SMCCC_WRAPPER_H
#define KC_LINUX_ARM_SMCCC_WRAPPER_H

#include_next <linux/arm-smccc.h>

void kc_smccc_1_1_smc(unsigned long a0, unsigned long a1, unsigned long a2,
		      unsigned long a3, unsigned long a4, unsigned long a5,
		      unsigned long a6, unsigned long a7, struct arm_smccc_res *res);

#undef arm_smccc_1_1_smc
#define arm_smccc_1_1_smc(...) kc_smccc_1_1_smc(__VA_ARGS__)
#undef arm_smccc_1_1_hvc
#define arm_smccc_1_1_hvc(...) kc_smccc_1_1_smc(__VA_ARGS__)

#endif
