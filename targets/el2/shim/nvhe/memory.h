/* Stands in for nvhe/memory.h: the hyp's linear map. "Physical memory" is a
 * host buffer (kc_el2_phys); a physical address maps to the hyp VA by a fixed
 * offset, as __hyp_va()/__hyp_pa() do at EL2. Pure arithmetic, no checks:
 * ffa.c only converts addresses the stage-2 checks have accepted. */
#ifndef KC_NVHE_MEMORY_H
#define KC_NVHE_MEMORY_H
#include <linux/types.h>

#define __kc_hyp_va(phys) ((void *)((uintptr_t)(phys) - kc_el2_phys.physvirt_offset))
#define __kc_hyp_pa(virt) ((phys_addr_t)((uintptr_t)(virt) + kc_el2_phys.physvirt_offset))

#define hyp_phys_to_virt(phys) __kc_hyp_va(phys)
#define hyp_virt_to_phys(virt) __kc_hyp_pa(virt)
#define hyp_phys_to_pfn(phys) ((phys) >> PAGE_SHIFT)
#define hyp_pfn_to_phys(pfn) ((phys_addr_t)((pfn) << PAGE_SHIFT))
#define hyp_virt_to_pfn(virt) hyp_phys_to_pfn(__kc_hyp_pa(virt))
#endif
