/* Stands in for nvhe/spinlock.h: the hyp ticket lock is LSE/LL-SC assembly.
 * The harness runs one host CPU, so a lock only records that it is held; taking
 * a held lock is a deadlock at EL2 and ends the call as a fatal error, and a
 * lock still held when the handler returns is reported by the harness. */
#ifndef KC_NVHE_SPINLOCK_H
#define KC_NVHE_SPINLOCK_H
#include <linux/types.h>

typedef union hyp_spinlock {
	u32 __val;
	struct {
		u16 owner, next;
	};
} hyp_spinlock_t;

#define __HYP_SPIN_LOCK_INITIALIZER { .__val = 0 }
#define __HYP_SPIN_LOCK_UNLOCKED ((hyp_spinlock_t)__HYP_SPIN_LOCK_INITIALIZER)
#define DEFINE_HYP_SPINLOCK(x) hyp_spinlock_t x = __HYP_SPIN_LOCK_UNLOCKED
#define hyp_spin_lock_init(l) do { *(l) = __HYP_SPIN_LOCK_UNLOCKED; } while (0)

static inline void hyp_spin_lock(hyp_spinlock_t *lock)
{
	if (lock->owner != lock->next)
		kc_el2_fatal(__FILE__, __LINE__, "hyp_spin_lock: deadlock, lock already held");
	lock->next++;
	kc_el2_shim.locks_held++;
}

static inline void hyp_spin_unlock(hyp_spinlock_t *lock)
{
	if (lock->owner == lock->next)
		kc_el2_fatal(__FILE__, __LINE__, "hyp_spin_unlock: lock not held");
	lock->owner++;
	kc_el2_shim.locks_held--;
}

static inline bool hyp_spin_is_locked(hyp_spinlock_t *lock)
{
	return lock->owner != lock->next;
}

/* As a CONFIG_NVHE_EL2_DEBUG kernel (BUG on an unheld lock): fatal at EL2.
 * Stock ffa.c never calls it; the suite's RECLAIM2 reference does (MUTANTS.md H3). */
#define hyp_assert_lock_held(l) do { \
	if (!hyp_spin_is_locked(l)) \
		kc_el2_fatal(__FILE__, __LINE__, "hyp_assert_lock_held(" #l "): not held"); \
} while (0)
#endif
