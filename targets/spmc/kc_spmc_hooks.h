/* The plain-C boundary between TF-A's EL3 SPMC compiled for the host (the
 * tree's sources, the shims, kc_spmc_glue.c) and the C++ harness, as
 * targets/el2/kc_el2_hooks.h is for ffa.c. Plain C types only, so C++ never
 * includes a TF-A header. */
#ifndef KC_SPMC_HOOKS_H
#define KC_SPMC_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KC_SPMC_NREGS 8 /* x0-x7 of an SMC into the SPMC and of its answer */

enum kc_spmc_status {
	KC_SPMC_OK = 0,
	KC_SPMC_FATAL = 1, /* panic(), a failed assert() or a deadlock ended the call */
};

enum kc_spmc_origin {
	KC_SPMC_FROM_NS = 0, /* the normal world, through the SPMD */
	KC_SPMC_FROM_SP = 1, /* the secure partition (secure_origin) */
};

/* The one secure partition the SPMC is booted with: its FF-A manifest is
 * written from these by kc_spmc_init() with the tree's libfdt. */
struct kc_spmc_config {
	uint16_t sp_id;          /* "id" (bit 15 set: a secure endpoint) */
	uint32_t sp_ffa_version; /* "ffa-version", e.g. 0x10001 for v1.1 */
	uint32_t sp_uuid[4];     /* "uuid" */
};

/* Knobs the harness sets; not part of the SPMC's state. */
struct kc_spmc_knobs {
	int plat_begin_ret;   /* plat_spmc_shmem_begin() result (0: FVP's) */
	int plat_reclaim_ret; /* plat_spmc_shmem_reclaim() result (0: FVP's) */
	int log_verbose;      /* print TF-A's log lines on stdout */
};
extern struct kc_spmc_knobs kc_spmc_knobs;

/* What the stand-ins saw; snapshotted with the SPMC's state. */
struct kc_spmc_counters {
	int32_t locks_held;   /* spinlocks currently held */
	uint32_t log_lines;   /* tf_log() calls: ERROR/WARN/NOTICE/INFO lines */
	uint32_t fatal;       /* panics, failed asserts, deadlocks */
	uint32_t spmd_calls;  /* calls the SPMC sent to the SPMD (the other world) */
	/* spmc_smc_handler() returned something other than its handle. Expected
	 * of FFA_MEM_RECLAIM and FFA_MEM_RELINQUISH on a host: their handlers
	 * return int, so SMC_RET's pointer is truncated; BL31 ignores the value
	 * (runtime_exceptions.S: blr x15, then el3_exit), so it is harmless. */
	uint32_t bad_return;
	/* SMCs BL31 would not have handed to the SPMC (answered SMC_UNK). */
	uint32_t unrouted;
};
extern struct kc_spmc_counters kc_spmc_counters;

/* Writes the SP's manifest and runs the tree's spmc_setup(): 0 or its error;
 * KC_SPMC_FATAL + 1000 if it panicked. Call once per process. */
int kc_spmc_init(const struct kc_spmc_config *cfg);

/* One SMC into spmc_smc_handler(): in[0..7] are x0-x7 of the caller's saved
 * context (a cpu_context_t); out[0..7] are that context's x0-x7 afterwards:
 * what SMC_RETn wrote, the caller's own values in the registers it did not
 * write (ERET restores the saved context). Returns KC_SPMC_OK or KC_SPMC_FATAL. */
int kc_spmc_smc(int origin, const uint64_t in[KC_SPMC_NREGS], uint64_t out[KC_SPMC_NREGS]);
/* Before that, BL31's own routing (SPMC:ROUTED): an ID it would not hand to
 * the SPMC (not a fast standard-service call, reserved bits set, or outside
 * the tree's is_ffa_fid(): TF-A 2.12.1 takes function numbers 0x60-0x8E) is
 * answered SMC_UNK in x0, x1-x7 as passed, without entering the SPMC. */

/* The tree's FFA_FNUM_MAX_VALUE: the highest FF-A function number BL31 routes
 * to the SPMC (the model's SpmcConfig::max_fnum). */
uint32_t kc_spmc_ffa_fnum_max(void);

/* Ends the call in flight as BL31 ends one that took a synchronous external
 * abort at EL3 (panic: KC_SPMC_FATAL). For the harness's SIGSEGV handler when
 * the SPMC touched an address with no memory behind it; it does not return. */
void kc_spmc_external_abort(void);

/* Snapshots. The state is: every static of the tree's SPMC sources (the
 * kc_spmc_bss/kc_spmc_data sections), the glue's own (kc_spmc_glue_*), and
 * the shared-memory datastore. A snapshot holds the sections and the
 * datastore's used prefix (up to its last non-zero byte, which covers
 * spmc_shmem_obj_state.allocated); loading one zeroes the rest of the
 * datastore, so it is exact. */
size_t kc_spmc_snapshot_size(void);                 /* bytes a save needs now */
size_t kc_spmc_snapshot_save(void *dst, size_t cap); /* bytes written, 0 if cap is short */
void kc_spmc_snapshot_load(const void *src, size_t n);

/* For exact-restore tests: the raw pieces. */
enum kc_spmc_piece {
	KC_SPMC_PIECE_TREE = 1,      /* the tree's statics */
	KC_SPMC_PIECE_GLUE = 2,      /* the glue's statics */
	KC_SPMC_PIECE_DATASTORE = 4, /* the datastore */
};
/* Copies a piece's current bytes to dst (NULL: only the size). */
size_t kc_spmc_piece_bytes(int piece, void *dst);
/* Pieces kc_spmc_snapshot_load() leaves alone (a test shows each is needed). */
extern int kc_spmc_restore_skip;

/* One transaction of the SPMC's table, as its own structures hold it. */
#define KC_SPMC_MAX_RECEIVERS 4
struct kc_spmc_tx {
	uint64_t handle;
	uint8_t complete;      /* every fragment received */
	uint8_t type;          /* desc.flags transaction type: 1 share, 2 lend (0: none recorded) */
	uint32_t received;     /* bytes of the descriptor received (desc_filled) */
	uint32_t total_len;    /* bytes it has (desc_size; a v1.0 sender's is converted to v1.1 on completion) */
	uint16_t sender;
	uint64_t tag;
	uint32_t in_use;       /* retrievals not yet relinquished */
	/* Complete transactions only: */
	uint32_t n_receivers;  /* endpoint count (the first KC_SPMC_MAX_RECEIVERS are below) */
	uint16_t receivers[KC_SPMC_MAX_RECEIVERS];
	uint8_t perms[KC_SPMC_MAX_RECEIVERS];
	uint32_t total_pages;
	uint32_t n_ranges;
	const void *ranges;    /* n_ranges constituents in FF-A's layout: u64 address, u32 pages, u32 reserved */
};
/* Fills out[0, min(n, max)) with the live transactions in table order and
 * returns n, their number (call again with more room if n > max). The
 * pointers stay valid until the next call into the SPMC. */
size_t kc_spmc_table(struct kc_spmc_tx *out, size_t max);

/* spmc_shmem_obj_state.allocated: bytes of the datastore in use. */
size_t kc_spmc_shmem_allocated(void);

#ifdef __cplusplus
}
#endif
#endif
