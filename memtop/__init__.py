"""memtop: a live terminal view of Linux memory behaviour."""

__version__ = "0.1.0"

import logging as _logging

# Library-style logging: nothing reaches the terminal under the TUI unless the user configures it
# (problems a user can act on are shown in the panes' status lines instead).
_logging.getLogger("memtop").addHandler(_logging.NullHandler())
