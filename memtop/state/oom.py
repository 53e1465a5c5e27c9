"""OOM kills: a bounded log that outlives the victims, and notices the app shows on any screen."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from memtop.records import Batch
from memtop.records.oom import OomKill
from memtop.state.base import Severity, SubState

if TYPE_CHECKING:
    from memtop.state import State

LOG_LEN = 1000


class OomState(SubState):
    key = "oom"

    def __init__(self) -> None:
        self.kills: deque[OomKill] = deque(maxlen=LOG_LEN)
        self.total = 0
        #: kills the kernel log held when memtop started (not counted in ``total``)
        self.before_start = 0
        self._unnoticed: list[OomKill] = []

    def apply(self, batch: Batch, state: State) -> None:
        for rec in batch.records:
            if isinstance(rec, OomKill):
                self.kills.appendleft(rec)  # the log's history comes oldest first, before any live kill
                if rec.source == "kmsg":  # happened before memtop started: not news, no notice
                    self.before_start += 1
                    continue
                self.total += 1
                self._unnoticed.append(rec)
        del self._unnoticed[:-20]  # a storm of kills: the latest 20 notices are enough

    def pop_notices(self) -> list[tuple[str, Severity]]:
        """(plain text, severity) for each kill not yet announced; the app shows them on any
        screen. The text holds traced-system strings: it must be shown without markup."""
        out: list[tuple[str, Severity]] = []
        for k in self._unnoticed:
            scope = {"memcg": f"memcg {k.memcg}".rstrip(), "global": "system-wide"}.get(k.scope, k.scope)
            out.append(
                (
                    f"OOM kill ({scope}): {k.victim_comm} [{k.victim_pid}] "
                    f"anon {k.anon_rss_bytes >> 20} MiB, triggered by {k.trigger_comm} [{k.trigger_pid}]",
                    "error",
                )
            )
        self._unnoticed = []
        return out
