/* Stand-in for a platform's <platform_def.h> (e.g. plat/arm/board/fvp/include/platform_def.h):
 * only the constants the EL3 SPMC's headers and sources read. */
#ifndef KC_SPMC_PLATFORM_DEF_H
#define KC_SPMC_PLATFORM_DEF_H
#include <lib/utils_def.h>

#define PLATFORM_CORE_COUNT		U(1)
#define PLAT_MAX_PWR_LVL		U(1)
#define PLAT_MAX_RET_STATE		U(1)
#define PLAT_MAX_OFF_STATE		U(2)
#define PLAT_NUM_PWR_DOMAINS		U(2)
#define CACHE_WRITEBACK_SHIFT		6
#define CACHE_WRITEBACK_GRANULE		(U(1) << CACHE_WRITEBACK_SHIFT)

/* The EL3 SPMC's partitions (SPMC_AT_EL3): FVP's values, but no EL3 logical
 * partition (as plat/qemu: MAX_EL3_LP_DESCS_COUNT 0). A maximum above the
 * number declared makes direct_req_smc_handler() read past the descriptor
 * array (it loops to MAX_EL3_LP_DESCS_COUNT, spmc_main.c:369; every platform
 * of the tree declares exactly its maximum): ASan's global-buffer-overflow. */
#define SECURE_PARTITION_COUNT		1
#define NS_PARTITION_COUNT		1
#define MAX_EL3_LP_DESCS_COUNT		0
#define PLAT_SPMC_SHMEM_DATASTORE_SIZE	(512 * 1024)

/* <plat/common/platform.h> includes drivers/fwu/fwu_metadata.h unconditionally. */
#define NR_OF_FW_BANKS			2
#define NR_OF_IMAGES_IN_FW_BANK		1

/* spmc_main.c validate_secondary_ep(): an SP entry point inside BL31 is refused.
 * A range no host address falls in. */
#define BL31_BASE			ULL(0xfff0000000000000)
#define BL31_LIMIT			ULL(0xfff0000000100000)
#endif
