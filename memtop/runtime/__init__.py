"""The process around the app: standard fds, the terminal, the log and the exit deadline
(``lifecycle``), the collector while starting or a probe builds in bulk (``startup_gc``), the
ready file for scripts (``ready``) and where ``bpf/`` and ``styles/`` are (``resources``)."""
