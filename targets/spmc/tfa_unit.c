/* One translation unit of the TF-A tree, unmodified (path KC_TFA_C): its
 * statics go into sections of their own, so the harness can copy the SPMC's
 * whole state out and back (kc_spmc_snapshot_save/load), as
 * targets/el2/ffa_unit.c does for ffa.c. CMakeLists.txt compiles this file
 * once per tree source. */
#ifndef KC_TFA_C
#error "KC_TFA_C must name a source file of the TF-A tree"
#endif

#pragma clang section bss = "kc_spmc_bss" data = "kc_spmc_data"
#include KC_TFA_C
#pragma clang section bss = "" data = ""
