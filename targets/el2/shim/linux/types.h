/* Stands in for <linux/types.h>: the kernel's fixed-width names over <stdint.h>. */
#ifndef KC_LINUX_TYPES_H
#define KC_LINUX_TYPES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;
typedef u8 __u8;
typedef u16 __u16;
typedef u32 __u32;
typedef u64 __u64;
typedef s32 __s32;
typedef s64 __s64;
typedef u64 phys_addr_t;
typedef u64 dma_addr_t;
#endif
