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

#ifdef KC_TFA_SHMEM_WALKER
/* Compiled into spmc_shared_mem.c's unit only: the SPMC's transaction table
 * read through its own data structures and helpers (spmc_shmem_obj_get_next,
 * _get_emad, _get_comp_mrd are static there), for the harness's state check
 * (kc_spmc_hooks.h: kc_spmc_table). No state of its own. */
#include "kc_spmc_hooks.h"

size_t kc_spmc_table(struct kc_spmc_tx *out, size_t max)
{
	size_t offset = 0, n = 0;
	struct spmc_shmem_obj *obj;

	while ((obj = spmc_shmem_obj_get_next(&spmc_shmem_obj_state, &offset)) != NULL) {
		struct kc_spmc_tx t = {0};

		t.handle = obj->desc.handle;
		t.complete = obj->desc_filled == obj->desc_size;
		t.received = (uint32_t)obj->desc_filled;
		t.total_len = (uint32_t)obj->desc_size;
		t.type = (obj->desc.flags & FFA_MTD_FLAG_TYPE_MASK) >> 3;
		t.sender = obj->desc.sender_id;
		t.tag = obj->desc.tag;
		t.in_use = (uint32_t)obj->in_use;
		if (t.complete) {
			/* A complete object holds the v1.1 layout (a v1.0 sender's is
			 * converted when it completes). */
			struct ffa_comp_mrd *comp = spmc_shmem_obj_get_comp_mrd(obj, MAKE_FFA_VERSION(1, 1));

			t.n_receivers = obj->desc.emad_count;
			for (uint32_t i = 0; i < obj->desc.emad_count && i < KC_SPMC_MAX_RECEIVERS; i++) {
				size_t size;
				struct ffa_emad_v1_0 *e = spmc_shmem_obj_get_emad(&obj->desc, i,
										  MAKE_FFA_VERSION(1, 1), &size);

				t.receivers[i] = e->mapd.endpoint_id;
				t.perms[i] = e->mapd.memory_access_permissions;
			}
			if (comp != NULL) {
				t.total_pages = comp->total_page_count;
				t.n_ranges = comp->address_range_count;
				t.ranges = comp->address_range_array;
			}
		}
		if (n < max)
			out[n] = t;
		n++;
	}
	return n;
}
#endif
