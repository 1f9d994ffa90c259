/* OP-TEE as the borrower, for the harness: what OP-TEE itself does with a
 * cookie the Normal world passes in a call (core/arch/arm/kernel/msg_param.c
 * and thread_spmc.c's OPTEE_FFA_UNREGISTER_SHM path):
 * mobj_ffa_get_by_cookie() then mobj_inc_map()/mobj_get_va() to use it,
 * mobj_dec_map()/mobj_put() to let go. Compiled with the tree's headers; it
 * holds no state of its own (the mobj pointers live in the harness's slots,
 * which are restored with the snapshot's sections). */
#include <mm/mobj.h>
#include <string.h>
#include "kc_optee_hooks.h"

struct borrow { uint64_t cookie; struct mobj **out; int rc; };

static void do_borrow(void *p)
{
	struct borrow *b = p;
	struct mobj *m = mobj_ffa_get_by_cookie(b->cookie, 0);

	b->rc = -1;
	if (!m)
		return;
	if (mobj_inc_map(m)) {
		mobj_put(m);
		return;
	}
	*b->out = m;
	b->rc = 0;
}

int kc_optee_borrow(uint64_t cookie, void **mobj)
{
	struct borrow b = { .cookie = cookie, .out = (struct mobj **)mobj };

	if (kc_optee_guarded(do_borrow, &b))
		return -2;
	return b.rc;
}

void *kc_optee_borrow_va(void *mobj, size_t offset)
{
	return mobj_get_va(mobj, offset, 1);
}

static void do_unborrow(void *p)
{
	struct mobj *m = p;

	mobj_dec_map(m);
	mobj_put(m);
}

int kc_optee_unborrow(void *mobj)
{
	return kc_optee_guarded(do_unborrow, mobj) ? -2 : 0;
}
