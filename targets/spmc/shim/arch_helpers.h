/* Wraps the tree's include/arch/aarch64/arch_helpers.h (#include_next). Its
 * static inline system-register and barrier helpers are aarch64 asm; one that
 * is never called is never emitted and costs nothing. The few that the SPMC
 * calls from code the host compiles are renamed while the tree's header is
 * read (the tree's definitions land under kc_tree_*, unused) and given host
 * bodies here: TLB maintenance and barriers have nothing to act on in a
 * single-threaded host process without an MMU of its own. */
#ifndef KC_SPMC_ARCH_HELPERS_H
#define KC_SPMC_ARCH_HELPERS_H

#define tlbivmalle1 kc_tree_tlbivmalle1
#define dsbish kc_tree_dsbish
#include_next <arch_helpers.h>
#undef tlbivmalle1
#undef dsbish

/* spmc_sp_synchronous_entry(): before entering an SP (never done here). */
static inline void tlbivmalle1(void) { }
static inline void dsbish(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
