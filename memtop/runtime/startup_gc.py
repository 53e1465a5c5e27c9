"""Python's cyclic garbage collector while the app starts, and while a probe builds in bulk.

Between imports and the first frame with 1,000 processes, the collector ran hundreds of times
(measured with gc.callbacks; figures in docs/performance.md), two of them full passes over every object Textual,
Rich and BCC had just created: objects that live as long as the app and that reference counting
frees anyway when they do not. So the collector is held from the start of the app until its
first frame is on screen; then one full collection clears whatever cycles start-up left, and the
survivors are frozen (gc.freeze) so later full passes skip them. The price is bounded: a frozen
object that later becomes part of an unreachable cycle (a start-up widget removed much later) is
never collected; only what existed at the first frame can be lost that way, once.

:func:`paused` is the same for a bounded bulk build in a worker thread (the page cache probe's
first scan of 110,000 files): objects that form no cycle, that the collector would only walk
(six full passes, a sixth of that scan's CPU). The collector is process-wide: the pause defers
every thread's cycle collection by that long, nothing more; nested and concurrent pauses and the
start-up hold share one count, so the collector comes back on only when the last one ends.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_held = False
#: reentrant: release() collects under it, and a finalizer that collection runs may pause too
_lock = threading.RLock()
#: pauses running now, and whether they turned the collector off (it was on when the first began)
_pauses = 0
_paused_it = False

#: the collector's thresholds once the TUI runs (Python's are 700, 10, 10). A tick allocates a
#: few thousand containers (records, rows, Textual's strips) that reference counting frees by
#: the next tick; at 700 the youngest generation was collected several times a second and the
#: older ones often enough that the collector was ~6 % of the idle TUI's CPU (gc.callbacks,
#: docs/performance.md). At 50,000 a collection comes every minute or so; what a cycle holds
#: meanwhile is a few MiB at most (RssAnon unchanged side by side).
STEADY_THRESHOLDS = (50_000, 10, 10)


def hold() -> None:
    """Stop automatic collection until :func:`release` (no-op when it is already off)."""
    global _held, _paused_it
    with _lock:
        if gc.isenabled() or _paused_it:
            gc.disable()
            _held = True
            _paused_it = False  # the hold's now: the pause's end leaves it off


def release(steady: bool = False) -> None:
    """Collect once, freeze the survivors, collect automatically again. Idempotent.
    ``steady``: from now on at :data:`STEADY_THRESHOLDS` (the TUI)."""
    global _held, _paused_it
    with _lock:
        if _held:
            _held = False
            unpin_slotted_dataclasses()
            gc.collect()
            gc.freeze()
            if _pauses:
                _paused_it = True  # the last pause to end turns it back on
            else:
                gc.enable()
        if steady:
            gc.set_threshold(*STEADY_THRESHOLDS)


def unpin_slotted_dataclasses(prefix: str = "memtop") -> int:
    """Let the collector free the class each ``@dataclass(slots=True)`` replaced: Python 3.11
    builds a new class for the slots, but keeps the first one alive from the new one (its
    ``__weakref__`` descriptor is copied over, and a frozen class's ``__setattr__`` and
    ``__delattr__`` test ``type(self)`` against the first class): ~100 dead classes of memtop's
    records, states and views, ~0.3 MiB (tracemalloc). Here each class defined at the top of an
    imported module under ``prefix`` loses the first one's descriptor (its instances have no
    ``__weakref__`` slot) and its frozen methods test against it, as Python 3.12's do; a no-op
    where there is nothing to mend. Returns how many classes it mended."""
    mended = 0
    for name, module in list(sys.modules.items()):
        if module is None or not (name == prefix or name.startswith(prefix + ".")):
            continue
        for cls in list(vars(module).values()):
            if (
                isinstance(cls, type)
                and cls.__module__ == name
                and "__slots__" in cls.__dict__
                and dataclasses.is_dataclass(cls)
                and _mend(cls)
            ):
                mended += 1
    return mended


def _mend(cls: type) -> bool:
    mended = False
    weakref = cls.__dict__.get("__weakref__")
    if weakref is not None and getattr(weakref, "__objclass__", cls) is not cls:
        delattr(cls, "__weakref__")
        mended = True
    for method in ("__setattr__", "__delattr__"):
        for cell in getattr(cls.__dict__.get(method), "__closure__", None) or ():
            first = cell.cell_contents
            if (
                isinstance(first, type)
                and first is not cls
                and first.__qualname__ == cls.__qualname__
                and first.__module__ == cls.__module__
            ):
                cell.cell_contents = cls
                mended = True
    return mended


@contextmanager
def paused() -> Iterator[None]:
    """No automatic collection while the block runs (for a bulk build of objects without
    cycles); the collector is on again after it if it was on before."""
    global _pauses, _paused_it
    with _lock:
        _pauses += 1
        if _pauses == 1 and gc.isenabled():
            gc.disable()
            _paused_it = True
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _paused_it:
                _paused_it = False
                gc.enable()
