/* kconform's conf.h for OP-TEE OS built as an S-EL1 SPMC (targets/optee).
 *
 * Our own file, not OP-TEE's generated one. OP-TEE's make writes conf.h from its
 * mk files; these are the values its make gives for
 *   make PLATFORM=vexpress-fvp CFG_ARM64_core=y CFG_CORE_SEL1_SPMC=y
 * (OP-TEE 4.10.0), restricted to the CFG_ names that appear in a file the target
 * compiles or includes (41 of them; every other CFG_ is unset here, which is
 * IS_ENABLED()'s "n", the same as in the generated file for the names that
 * matter: no CFG_SECURE_PARTITION, no CFG_NS_VIRTUALIZATION, no
 * CFG_CORE_DYN_PROTMEM, no CFG_CORE_EL3_SPMC). Facts of the configuration. */
#ifndef KC_OPTEE_CONF_H
#define KC_OPTEE_CONF_H

/* the platform: plat-vexpress, flavour fvp (platform_config.h) */
#define PLATFORM_FLAVOR fvp
#define PLATFORM_FLAVOR_fvp 1
#define PLATFORM_vexpress 1

/* the configuration under test: FF-A, the SPMC at S-EL1, dynamic NS shared memory */
#define CFG_CORE_FFA 1
#define CFG_CORE_SEL1_SPMC 1
#define CFG_CORE_DYN_SHM 1
#define CFG_CORE_RESERVED_SHM 1
#define CFG_CORE_ASYNC_NOTIF 1
#define CFG_WITH_ARM_TRUSTED_FW 1
#define CFG_OPTEE_REVISION_MAJOR 4
#define CFG_OPTEE_REVISION_MINOR 10

/* memory: heap, TZDRAM, the reserved SHM, address sizes */
#define CFG_CORE_HEAP_SIZE 65536
#define CFG_TZDRAM_START 0x06000000
#define CFG_TZDRAM_SIZE 0x02000000
#define CFG_SHMEM_START 0x83000000
#define CFG_SHMEM_SIZE 0x00200000
#define CFG_CORE_TZSRAM_EMUL_SIZE 458752
#define CFG_CORE_LARGE_PHYS_ADDR 1
#define CFG_LPAE_ADDR_SPACE_BITS 32
#define CFG_WITH_LPAE 1
#define CFG_CORE_ASLR 1
#define CFG_CORE_RWDATA_NOEXEC 1
#define CFG_CORE_UNMAP_CORE_AT_EL0 1
#define CFG_DYN_CONFIG 1
#define CFG_MAX_CACHE_LINE_SHIFT 6

/* cores and threads */
#define CFG_TEE_CORE_NB_CORE 8
#define CFG_NUM_THREADS 2
#define CFG_STACK_THREAD_EXTRA 0
#define CFG_STACK_TMP_EXTRA 0
#define CFG_WITH_STACK_CANARIES 1
#define CFG_CORE_HAS_GENERIC_TIMER 1
#define CFG_CORE_WORKAROUND_SPECTRE_BP_SEC 1
#define CFG_SM_NO_CYCLE_COUNTING 1
#define CFG_WITH_VFP 1

/* debug build: assertions, traces, statistics */
#define CFG_TEE_CORE_DEBUG 1
#define CFG_FAULT_MITIGATION 1
#define CFG_MSG_LONG_PREFIX_MASK 0x1a
#define CFG_UNWIND 1
#define CFG_WITH_STATS 1
#define CFG_TA_BGET_TEST 1

/* the rest of a default build (reached only through headers) */
#define CFG_DT 1
#define CFG_REE_FS 1
#define CFG_RPMB_ANNOUNCE_PROBE_CAP 1
#define CFG_WITH_USER_TA 1

#endif
