/* Stands in for nvhe/memory.h: the hyp's linear map. "Physical memory" is a
 * host buffer (kc_el2_phys); a physical address maps to the hyp VA by a fixed
 * offset, as __hyp_va()/__hyp_pa() do at EL2: one offset for host RAM and one
 * for the hypervisor's own pages, which lie apart so that inaccessible guards
 * bound them (el2_handler.cc). Arithmetic, no checks: ffa.c only converts
 * addresses the stage-2 checks have accepted; a conversion first maps the
 * host pages just shared with the hypervisor (kc_el2_phys.open_pending). */
#ifndef KC_NVHE_MEMORY_H
#define KC_NVHE_MEMORY_H
#include <linux/types.h>

static inline uintptr_t kc_el2_hyp_va(uint64_t phys)
{
	if (kc_el2_phys.pending)
		kc_el2_phys.open_pending();
	return (uintptr_t)phys - (phys - kc_el2_phys.hyp_pa < kc_el2_phys.hyp_size ?
				  kc_el2_phys.hyp_offset : kc_el2_phys.host_offset);
}

static inline uint64_t kc_el2_hyp_pa(uintptr_t virt)
{
	return virt + (virt - kc_el2_phys.hyp_va < kc_el2_phys.hyp_size ?
		       kc_el2_phys.hyp_offset : kc_el2_phys.host_offset);
}

#define __kc_hyp_va(phys) ((void *)kc_el2_hyp_va((uint64_t)(phys)))
#define __kc_hyp_pa(virt) ((phys_addr_t)kc_el2_hyp_pa((uintptr_t)(virt)))

#define hyp_phys_to_virt(phys) __kc_hyp_va(phys)
#define hyp_virt_to_phys(virt) __kc_hyp_pa(virt)
#define hyp_phys_to_pfn(phys) ((phys) >> PAGE_SHIFT)
#define hyp_pfn_to_phys(pfn) ((phys_addr_t)((pfn) << PAGE_SHIFT))
#define hyp_virt_to_pfn(virt) hyp_phys_to_pfn(__kc_hyp_pa(virt))
#endif
