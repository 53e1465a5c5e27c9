"""Errors a user can hit. Each carries a hint; ``main()`` catches them once and exits 2."""

from __future__ import annotations


class MemtopError(Exception):
    """A user-facing error: ``message`` says what is wrong, ``hint`` what to do."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}" + (f" (hint: {self.hint})" if self.hint else "")


class NoPrivilege(MemtopError):
    pass


class NoHeaders(MemtopError):
    pass


class NoBcc(MemtopError):
    pass


class ProbeError(MemtopError):
    pass


class PidNotFound(MemtopError):
    pass


class BadRecording(MemtopError):
    pass


class UnsafePath(MemtopError):
    pass


class NoTerminal(MemtopError):
    pass


class WriteFailed(MemtopError):
    """A file could not be written completely (disk full, I/O error, name too long): nothing was
    left at the target, nor a temporary file (unless the message says where the data is)."""


class Interrupted(MemtopError):
    """Ctrl-C (SIGINT) before the work was done: exit 130, as a shell reports a SIGINT death."""

    exit_code = 130
