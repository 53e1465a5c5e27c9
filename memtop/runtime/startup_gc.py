"""Python's cyclic garbage collector while the app starts.

Between imports and the first frame with 1,000 processes, the collector ran hundreds of times
(measured with gc.callbacks; figures in docs/performance.md), two of them full passes over every object Textual,
Rich and BCC had just created: objects that live as long as the app and that reference counting
frees anyway when they do not. So the collector is held from the start of the app until its
first frame is on screen; then one full collection clears whatever cycles start-up left, and the
survivors are frozen (gc.freeze) so later full passes skip them. The price is bounded: a frozen
object that later becomes part of an unreachable cycle (a start-up widget removed much later) is
never collected; only what existed at the first frame can be lost that way, once.
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """Stop automatic collection until :func:`release` (no-op when it is already off)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release() -> None:
    """Collect once, freeze the survivors, collect automatically again. Idempotent."""
    global _held
    if _held:
        _held = False
        gc.collect()
        gc.freeze()
        gc.enable()
