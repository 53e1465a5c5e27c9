"""The shared base every layer may use: typed errors with hints (``errors``), numbers for people
(``fmt``), untrusted text made safe to show (``text``) and what tracing allocations costs a
program (``leakcost``). Pure Python; nothing here imports another part of memtop."""
