"""The TUI's input thread sleeps until a key comes (memtop.ui.textual_compat.run_input_loop):
Textual's own loop woke every 0.1 s to time out a lone Escape. Keys still arrive, a lone Escape
is still a key after the parser's delay (the one wait with a timeout), and setting the driver's
exit event ends the loop at once (term_compat.WakingEvent writes to the pipe it waits on)."""

from __future__ import annotations

import os
import selectors
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from support.waits import BOUND_S, wait_until
from textual import events
from textual.message import Message

from memtop.ui.term_compat import WakingEvent
from memtop.ui.textual_compat import run_input_loop


class RecordingSelector(selectors.SelectSelector):
    """Records the timeout of every wait."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.timeouts.append(timeout)
        return super().select(timeout)


@dataclass
class FakeDriver:
    """What the loop uses of Textual's Linux driver."""

    fileno: int
    exit_event: WakingEvent
    _debug: bool = False
    got: list[Message] = field(default_factory=list)

    def process_message(self, message: Message) -> None:
        self.got.append(message)

    def keys(self) -> list[str]:
        return [m.key for m in self.got if isinstance(m, events.Key)]


@pytest.fixture
def loop() -> Iterator[tuple[FakeDriver, RecordingSelector, int, threading.Thread]]:
    term_r, term_w = os.pipe()
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    driver = FakeDriver(term_r, WakingEvent(wake_w))
    sel = RecordingSelector()
    thread = threading.Thread(target=run_input_loop, args=(driver, wake_r, sel), daemon=True)
    thread.start()
    try:
        yield driver, sel, term_w, thread
    finally:
        driver.exit_event.set()
        thread.join(BOUND_S)
        for fd in (term_r, term_w, wake_r, wake_w):
            os.close(fd)


def test_the_input_thread_waits_without_a_timeout_while_no_key_is_pending(
    loop: tuple[FakeDriver, RecordingSelector, int, threading.Thread],
) -> None:
    driver, sel, term_w, _ = loop
    wait_until(lambda: sel.timeouts, "the loop's first wait")
    assert sel.timeouts[0] is None  # idle: asleep until the terminal or the exit wakes it
    os.write(term_w, b"a")
    wait_until(lambda: "a" in driver.keys(), "the key a")
    wait_until(lambda: len(sel.timeouts) >= 2, "the wait after the key")
    assert sel.timeouts[-1] is None


def test_a_lone_escape_is_a_key_after_the_parser_s_delay(
    loop: tuple[FakeDriver, RecordingSelector, int, threading.Thread],
) -> None:
    driver, sel, term_w, _ = loop
    wait_until(lambda: sel.timeouts, "the loop's first wait")
    os.write(term_w, b"\x1b")
    wait_until(lambda: "escape" in driver.keys(), "the escape key")
    timed = [t for t in sel.timeouts if t is not None]
    assert timed, "the parser waited for the rest of a sequence without a timeout"
    assert all(0 <= t <= 1.0 for t in timed)
    wait_until(lambda: sel.timeouts[-1] is None, "the wait after the escape")


def test_setting_the_exit_event_ends_the_loop(
    loop: tuple[FakeDriver, RecordingSelector, int, threading.Thread],
) -> None:
    driver, sel, _, thread = loop
    wait_until(lambda: sel.timeouts, "the loop's first wait")
    driver.exit_event.set()
    thread.join(BOUND_S)
    assert not thread.is_alive()
