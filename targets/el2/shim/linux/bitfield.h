/* Stands in for <linux/bitfield.h>: FIELD_GET/FIELD_PREP without the
 * compile-time mask checks of the real header. */
#ifndef KC_LINUX_BITFIELD_H
#define KC_LINUX_BITFIELD_H
#include <linux/bits.h>
#define __kc_bf_shf(mask) __builtin_ctzll(mask)
#define FIELD_PREP(mask, val) \
	((__typeof__(mask))(((__typeof__(mask))(val) << __kc_bf_shf(mask)) & (mask)))
#define FIELD_GET(mask, reg) \
	((__typeof__(mask))(((reg) & (mask)) >> __kc_bf_shf(mask)))
#endif
