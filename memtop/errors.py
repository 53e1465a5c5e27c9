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
