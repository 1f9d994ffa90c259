/* OP-TEE's thread_spmc.c, unmodified, with its statics in snapshot sections
 * (as targets/spmc/tfa_unit.c does for TF-A). Exposes its static initcall. */
#pragma clang section bss="kc_optee_bss" data="kc_optee_data"
#include "core/arch/arm/kernel/thread_spmc.c"  /* from the tree root (-I) */
#pragma clang section bss="" data=""
TEE_Result kc_optee_spmc_init(void);
TEE_Result kc_optee_spmc_init(void) { return spmc_init(); }
