"""The shipped dashboard and alert rules as a test reads them: every PromQL expression, and the
metrics each takes a rate of."""

from __future__ import annotations

import json
import re

from support.paths import ROOT


def dashboard_expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every target of the shipped Grafana dashboard and every shipped
    alerting rule, as written (Grafana's variables left in)."""
    dash = json.loads((ROOT / "contrib/grafana/memtop-dashboard.json").read_text())
    out = [
        (f"panel {p['id']} {p['title']!r}", t["expr"]) for p in dash["panels"] for t in p.get("targets", [])
    ]
    rules = (ROOT / "contrib/prometheus/memtop-alerts.yml").read_text()
    for name, expr in re.findall(r"- alert: (\S+)\n(?:\s+#.*\n)*\s+expr: (\|\n(?:\s{10}.*\n)+|.*\n)", rules):
        out.append((f"rule {name}", expr.removeprefix("|").strip()))
    return out


def rated_metrics(expr: str) -> set[str]:
    """Metric names inside rate(), irate(), increase() or resets(): each must be a counter."""
    return set(re.findall(r"(?:rate|irate|increase|resets)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", expr))
