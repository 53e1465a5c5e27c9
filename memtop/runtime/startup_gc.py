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

#: the collector's thresholds once the TUI runs (Python's are 700, 10, 10). A tick allocates a
#: few thousand containers (records, rows, Textual's strips) that reference counting frees by
#: the next tick; at 700 the youngest generation was collected several times a second and the
#: older ones often enough that the collector was ~6 % of the idle TUI's CPU (gc.callbacks,
#: docs/performance.md). At 50,000 a collection comes every minute or so; what a cycle holds
#: meanwhile is a few MiB at most (RssAnon unchanged side by side).
STEADY_THRESHOLDS = (50_000, 10, 10)


def hold() -> None:
    """Stop automatic collection until :func:`release` (no-op when it is already off)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release(steady: bool = False) -> None:
    """Collect once, freeze the survivors, collect automatically again. Idempotent.
    ``steady``: from now on at :data:`STEADY_THRESHOLDS` (the TUI)."""
    global _held
    if _held:
        _held = False
        gc.collect()
        gc.freeze()
        gc.enable()
    if steady:
        gc.set_threshold(*STEADY_THRESHOLDS)
