"""memtop: a live terminal view of Linux memory behaviour."""

__version__ = "0.1.0"
