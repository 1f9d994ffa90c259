/* Stands in for <asm/kvm_pkvm.h>. What ffa.c uses from it is the tree's own
 * code: KVM_FFA_MBOX_NR_PAGES and hyp_ffa_proxy_pages() (the size of the
 * descriptor buffer) are copied out of the tree's header at configure time
 * into kc_tree/kvm_pkvm_ffa.h, and SG_MAX_SEGMENTS out of the tree's
 * <linux/scatterlist.h> into kc_tree/sg_max_segments.h (see
 * tools/extract_tree.py). The rest of the real header is pKVM VM management. */
#ifndef KC_ASM_KVM_PKVM_H
#define KC_ASM_KVM_PKVM_H
#include <linux/arm_ffa.h>
#include <kc_tree/sg_max_segments.h>
#include <kc_tree/kvm_pkvm_ffa.h>
#endif
