/* The translation unit of the tree's unmodified ffa.c (path KC_TREE_FFA_C).
 * Its statics go into sections of their own, so the harness can copy the
 * handler's whole state out and back (kc_el2_ffa_state_save/load). */
#ifndef KC_TREE_FFA_C
#error "KC_TREE_FFA_C must name the tree's arch/arm64/kvm/hyp/nvhe/ffa.c"
#endif

#pragma clang section bss = "kc_ffa_bss" data = "kc_ffa_data"
#include KC_TREE_FFA_C
#pragma clang section bss = "" data = ""
