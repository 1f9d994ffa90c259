/* OP-TEE's mobj_ffa.c, unmodified, statics in snapshot sections; exposes its
 * static preinit call and its cookie lists read through its own data structures
 * (kc_optee_table: the SPMC's table of shared objects, for the harness). */
#pragma clang section bss="kc_optee_bss" data="kc_optee_data"
#include "core/arch/arm/mm/mobj_ffa.c"  /* from the tree root (-I) */
#pragma clang section bss="" data=""
#include "kc_optee_hooks.h"

TEE_Result kc_optee_mobj_init(void);
TEE_Result kc_optee_mobj_init(void) { return mapped_shm_init(); }

/* number of objects on the inactive (shared, not used by OP-TEE) list */
unsigned int kc_optee_mobj_inactive_count(void)
{
	struct mobj_ffa *mf = NULL;
	unsigned int n = 0;

	SLIST_FOREACH(mf, &shm_inactive_head, link)
		n++;
	return n;
}

struct walk_out {
	struct kc_optee_obj *out;
	size_t n, max;
	uint64_t *pages;
	size_t np, pages_max;
};

static void walk(struct mobj_ffa_head *head, bool active, struct walk_out *w)
{
	struct mobj_ffa *mf = NULL;

	SLIST_FOREACH(mf, head, link) {
		struct kc_optee_obj o = { .cookie = mf->cookie, .active = active,
					  .registered_by_cookie = mf->registered_by_cookie,
					  .refc = refcount_val(&mf->mobj.refc),
					  .inactive_refs = mf->inactive_refs, .pages_at = w->np };

		if (is_mobj_ffa_shm(&mf->mobj)) {
			struct mobj_ffa_shm *s = to_mobj_ffa_shm(&mf->mobj);
			size_t np = ROUNDUP_DIV(s->page_offset + mf->mobj.size, SMALL_PAGE_SIZE);

			o.ns_shm = true;
			o.page_offset = s->page_offset;
			o.npages = np;
			for (size_t i = 0; i < np; i++, w->np++)
				if (w->np < w->pages_max)
					w->pages[w->np] = s->pages[i];
		}
		if (w->n < w->max)
			w->out[w->n] = o;
		w->n++;
	}
}

size_t kc_optee_table(struct kc_optee_obj *out, size_t max, uint64_t *pages, size_t pages_max,
		      size_t *npages)
{
	struct walk_out w = { .out = out, .max = max, .pages = pages, .pages_max = pages_max };

	walk(&shm_head, true, &w);
	walk(&shm_inactive_head, false, &w);
	if (npages)
		*npages = w.np;
	return w.n;
}
