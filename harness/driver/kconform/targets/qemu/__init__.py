"""The QEMU target: the guest_memfd suite inside a real kernel booted in QEMU.

The host packs the scenarios (binary form), builds an initramfs (initramfs.py),
boots the kernel under TCG with emulated SVM (boot.py) and reads the agent's
frames (frames.py) from a second serial port while the first carries the kernel
console. The guest sends observed outcomes only (guest.py); replay.py sends them
to the engine, which replays them through the model and writes verdicts in the
one verdict format.
"""
