"""The arm64 stack in QEMU (issue 17): TF-A's BL1/BL2/BL31 with the SPMD and its EL3
SPMC plus our own secure partition (firmware.py, partition.py), Debian's arm64 kernel
in pKVM protected mode (sources/debian_kernels.py, arch arm64), an initramfs that
loads the FF-A driver (initramfs.py), one boot under qemu-system-aarch64 (boot.py)
and what its serial console says about the stack (console.py).
"""
