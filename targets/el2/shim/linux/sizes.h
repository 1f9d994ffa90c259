/* Stands in for <linux/sizes.h>. */
#ifndef KC_LINUX_SIZES_H
#define KC_LINUX_SIZES_H
#define SZ_4K 0x00001000
#define SZ_16K 0x00004000
#define SZ_64K 0x00010000
#endif
