/* Wraps the tree's include/arch/aarch64/smccc_helpers.h (#include_next): its
 * SMC_RETn / SMC_GET_GP macros are taken as they are. Only smc_helper(), an
 * inline `smc #0` that binds variables to the aarch64 registers x0-x7, cannot
 * be parsed for x86-64 ("unknown register name"); EL3 never calls it (it is
 * the S-EL1/S-EL0 side's SMC). The register bindings are dropped while the
 * header is read; the asm statement itself is never emitted (a host build
 * that called smc_helper() would fail to assemble "smc #0", loudly). */
#ifndef KC_SPMC_SMCCC_HELPERS_H
#define KC_SPMC_SMCCC_HELPERS_H
/* Its own includes first, so that only smccc_helpers.h's text is read
 * with the register bindings dropped (arch_helpers.h keeps its asm). */
#include <stdbool.h>
#include <lib/smccc.h>
#include <context.h>
#include <platform_def.h>
#pragma push_macro("__asm__")
#define __asm__(...)
#include_next <smccc_helpers.h>
#pragma pop_macro("__asm__")
#endif
