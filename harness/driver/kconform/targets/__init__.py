"""Targets that need more than one engine call: the EL2 handler's per-tree
builds (el2) and kernels booted in QEMU (qemu)."""
