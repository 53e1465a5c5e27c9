"""Every pane's JSON document and text snapshot, drawn from the recordings the UI snapshots use,
is the same as the pinned copy in tests/data/pinned/: a refactoring of views or of their types
(issue 36: typed documents, one presenter) must not change a byte of what users and scripts read.

A change meant to alter a document updates the pins deliberately:
``MEMTOP_PIN_UPDATE=1 .venv/bin/python -m pytest tests/unit/test_pinned_documents.py``, and the
diff of tests/data/pinned/ goes in the same commit, where a reviewer sees it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.ui import recording

from memtop.headless.snapshots import options_for, render
from memtop.views import get_view, views
from memtop.views.process import SECTIONS

DATA = Path(__file__).resolve().parents[1] / "data"
PINNED = DATA / "pinned"
#: as tests/ui/test_snapshots.py: after the OOM kill, with reclaim and swap-ins going on
AT_S = 30.0
#: the pressure workload, for the drill-in's sections
HOG_PID = 3620
UPDATE = os.environ.get("MEMTOP_PIN_UPDATE") == "1"


#: the options a pane's keys change, besides its defaults: (pane, variant) -> Options.extra
VARIANTS: dict[tuple[str, str], dict[str, str]] = {
    ("processes", "grouped"): {"group": "cgroup"},  # C
    ("processes", "exited-all"): {"exited": "all"},  # E
}


def cases() -> list[tuple[str, str]]:
    """(pane, section or variant): every pane, every section of the drill-in, and the variants."""
    out = [(name, "") for name in views() if name != "process"]
    out += [("process", s) for s in SECTIONS]
    out += list(VARIANTS)
    return out


def rendered(pane: str, section: str, fmt: str) -> str:
    # a pane newer than the pressure recording is pinned from its own, at its end (as its SVGs)
    own = DATA / f"{pane}.jsonl.gz"
    rec = recording(own) if own.exists() else recording()
    at_s = rec.duration_s if own.exists() else AT_S
    state = rec.state_at(rec.ts_at(at_s))
    view = get_view(pane)
    extra = VARIANTS.get((pane, section))
    opts = options_for(view, HOG_PID if pane == "process" else None, "" if extra else section)
    opts.extra.update(extra or {})
    return render(view, state, opts, fmt)


@pytest.mark.parametrize("fmt", ["json", "txt"])
@pytest.mark.parametrize(("pane", "section"), cases())
def test_the_document_is_the_pinned_one(pane: str, section: str, fmt: str) -> None:
    got = rendered(pane, section, fmt)
    path = PINNED / f"{pane}{'-' + section if section else ''}.{fmt}"
    if UPDATE or not path.exists():
        path.write_text(got, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"{path.name} was not pinned: written now, review and commit it")
    assert got == path.read_text(encoding="utf-8")
