/* One translation unit of the OP-TEE tree, unmodified (path KC_OPTEE_C): its
 * statics go into the snapshot sections kc_optee_bss/kc_optee_data, as
 * targets/spmc/tfa_unit.c does for TF-A. CMakeLists.txt compiles it once per
 * tree source that needs no extra entry point (the SPMC, mobj_ffa and the heap
 * have units of their own: kc_optee_*_unit.c). */
#ifndef KC_OPTEE_C
#error "KC_OPTEE_C must name a source file of the OP-TEE tree"
#endif
#pragma clang section bss = "kc_optee_bss" data = "kc_optee_data"
#include KC_OPTEE_C
#pragma clang section bss = "" data = ""
