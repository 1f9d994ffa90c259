/* Stands in for nvhe/arm-smccc.h (7.3+): hyp_smccc_1_2_smc() there is
 * arm_smccc_1_2_smc() between two hyp trace points (trace_hyp_exit/enter);
 * tracing is not behaviour under test, so the wrapper is the plain call. */
#ifndef KC_NVHE_ARM_SMCCC_H
#define KC_NVHE_ARM_SMCCC_H
#include <linux/arm-smccc.h>
#define hyp_smccc_1_1_smc(...) arm_smccc_1_1_smc(__VA_ARGS__)
#define hyp_smccc_1_2_smc(...) arm_smccc_1_2_smc(__VA_ARGS__)
#endif
