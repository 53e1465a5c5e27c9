"""Every pane's JSON document of a state, and where two such sets differ."""

from __future__ import annotations

import json
from typing import Any

from memtop.core.errors import MemtopError
from memtop.state import State
from memtop.views import Options, views


def documents(state: State, *pids: int | None) -> dict[str, Any]:
    """Every registered pane's JSON document, as it would be written (JSON round trip): for the
    whole system and for each of ``pids`` (the drill-in needs one; other panes narrow to it). The
    ``source`` field says live or replay by design, so it is left out of the comparison."""
    out: dict[str, Any] = {}
    for name, cls in views().items():
        for pid in (None, *pids):
            try:
                doc = cls().document(state, Options(pid=pid))
            except MemtopError:
                continue  # e.g. the drill-in without a pid
            doc = json.loads(json.dumps(doc))
            doc.pop("source", None)
            out[name if pid is None else f"{name}@{pid}"] = doc
    return out


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two documents differ (paths), for a readable failure."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'replay' if k in a else 'live'}")
            else:
                out += differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]
