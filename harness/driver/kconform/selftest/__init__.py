"""The suite's self-tests: the mutant kill matrices of our own reference
implementations (RECLAIM2 at EL2, guest_memfd write() in QEMU), the fuzzer's time
to find a mutant, and RECLAIM2's SMC cost."""
