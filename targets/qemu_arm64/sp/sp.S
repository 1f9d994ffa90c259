/*
 * Minimal S-EL1 FF-A secure partition for TF-A's EL3 SPMC (target qemu-arm64;
 * built by harness/driver/kconform/targets/qemu_arm64/partition.py).
 * Runs with the MMU off and touches no memory: it only loops on SMCs.
 *  - boot (primary core): FFA_SECONDARY_EP_REGISTER(secondary), without
 *    which the SPMC runs an uninitialised context when a direct request
 *    arrives on a secondary core (seen: hard lockup of that CPU)
 *  - then, and on every secondary core at CPU_ON: FFA_MSG_WAIT
 *  - FFA_MSG_SEND_DIRECT_REQ (32/64): answer with FFA_MSG_SEND_DIRECT_RESP,
 *    endpoints swapped, x3..x7 echoed back
 *  - anything else: FFA_MSG_WAIT again
 */
	.text
	.global _start
_start:
	movz	w0, #0x0087
	movk	w0, #0xC400, lsl #16	/* FFA_SECONDARY_EP_REGISTER_SMC64 */
	adr	x1, secondary
	smc	#0
secondary:
wait:	movz	w0, #0x006B
	movk	w0, #0x8400, lsl #16	/* FFA_MSG_WAIT (x1..x7 must be zero) */
	mov	x1, xzr
	mov	x2, xzr
	mov	x3, xzr
	mov	x4, xzr
	mov	x5, xzr
	mov	x6, xzr
	mov	x7, xzr
1:	smc	#0
	movz	w9, #0x006F
	movk	w9, #0x8400, lsl #16	/* FFA_MSG_SEND_DIRECT_REQ_SMC32 */
	cmp	x0, x9
	b.eq	2f
	movk	w9, #0xC400, lsl #16	/* FFA_MSG_SEND_DIRECT_REQ_SMC64 */
	cmp	x0, x9
	b.eq	3f
	b	wait
2:	movz	w0, #0x0070
	movk	w0, #0x8400, lsl #16	/* FFA_MSG_SEND_DIRECT_RESP_SMC32 */
	b	4f
3:	movz	w0, #0x0070
	movk	w0, #0xC400, lsl #16	/* FFA_MSG_SEND_DIRECT_RESP_SMC64 */
4:	ror	w1, w1, #16		/* (src << 16 | dst) -> (dst << 16 | src) */
	mov	x2, xzr
	b	1b
