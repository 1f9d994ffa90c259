/* Stands in for <linux/uuid.h>: only the type, which FF-A structs embed. */
#ifndef KC_LINUX_UUID_H
#define KC_LINUX_UUID_H
#include <linux/types.h>
#define UUID_SIZE 16
typedef struct {
	__u8 b[UUID_SIZE];
} uuid_t;
#define UUID_INIT(a, b, c, d0, d1, d2, d3, d4, d5, d6, d7)                \
	((uuid_t){ { ((a) >> 24) & 0xff, ((a) >> 16) & 0xff, ((a) >> 8) & 0xff, \
		     (a) & 0xff, ((b) >> 8) & 0xff, (b) & 0xff, ((c) >> 8) & 0xff, \
		     (c) & 0xff, (d0), (d1), (d2), (d3), (d4), (d5), (d6), (d7) } })
#endif
