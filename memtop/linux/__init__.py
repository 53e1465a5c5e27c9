"""Linux access: bcc (only through ``bcc_compat``), kernel headers and BTF, tracefs, kernel
symbols, the kernel's accounting files (``kernelfs``), cgroups (``cgroupfs``, with the bounded,
non-blocking file reader) and writing files safely (``files``). No records, no state."""
