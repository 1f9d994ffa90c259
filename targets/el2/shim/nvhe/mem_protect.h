/* Stands in for nvhe/mem_protect.h: the host stage-2 ownership transitions
 * ffa.c makes. At EL2 they edit page tables; here they are implemented by
 * the harness's page-state tracker (page_tracker.cc) through kc_el2_glue.c. */
#ifndef KC_NVHE_MEM_PROTECT_H
#define KC_NVHE_MEM_PROTECT_H
#include <linux/types.h>
#include <nvhe/memory.h>
#include <nvhe/spinlock.h>

int __pkvm_host_share_hyp(u64 pfn);
int __pkvm_host_unshare_hyp(u64 pfn);
int __pkvm_host_share_ffa(u64 pfn, u64 nr_pages);
int __pkvm_host_unshare_ffa(u64 pfn, u64 nr_pages);
int hyp_pin_shared_mem(void *from, void *to);
void hyp_unpin_shared_mem(void *from, void *to);
#endif
