"""Every UI test runs with local time in UTC and the app's timer off (the test ticks the app with
``drive``). The fixtures and the helpers to drive the app and wait on it (``drive``, ``settle``,
``wait_until``, ``tick_until``, ``replay_app``, the pressure recording read once) are typed in
tests/support/ui.py; docs/development.md ("Waiting in tests") says how to wait. This file only
brings the fixtures in: mypy checks them there (two modules named conftest cannot both be)."""

from support.ui import ticks_by_test, utc

__all__ = ["ticks_by_test", "utc"]
