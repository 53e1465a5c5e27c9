"""The shipped memory-kill alerts through a real Prometheus: the distribution's server loads the
rules of contrib/prometheus/memtop-alerts.yml (a copy whose only change is a short ``for:``, so
the test need not wait a minute), scrapes `memtop export` every second while a workload grows
toward its memcg's limit (swap forbidden) and is OOM-killed; Prometheus's /api/v1/alerts must show
`MemoryKillPredicted` firing for that cgroup before the kill, and `MemoryKill` after it, with the
killer and reason the kernel's log gave; the counter agrees with the memcg's own `oom_kill`."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import compile_c, memcg
from support.exporter import get, prometheus, scrape_config
from test_export_prometheus import exporter, query, sees_cgroup, wait_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "contrib" / "prometheus" / "memtop-alerts.yml"
MiB = 1 << 20
WAIT_S = 30.0  # a bound on waits for memtop, Prometheus or the kernel, never the thing asserted


def quick_rules(dest: Path) -> Path:
    """The shipped rules with every ``for:`` at 1 s; nothing else changed (checked)."""
    shipped = RULES.read_text()
    quick = re.sub(r"(?m)^(\s+for: )\S+$", r"\g<1>1s", shipped)
    changed = [(a, b) for a, b in zip(shipped.splitlines(), quick.splitlines(), strict=True) if a != b]
    assert changed and all(a.strip().startswith("for: ") for a, _ in changed), changed
    dest.write_text(quick)
    check = subprocess.run(["promtool", "check", "rules", str(dest)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    return dest


@contextmanager
def prometheus_with_rules(target_port: int) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="memtop-killx-prom-") as tmp:
        rules = quick_rules(Path(tmp) / "rules.yml")
        with prometheus(scrape_config(target_port, rule_files=[rules])) as api:
            yield api


def alerts(api: str, name: str) -> list[dict[str, Any]]:
    doc = json.loads(get(f"{api}/api/v1/alerts")[2])
    assert doc["status"] == "success", doc
    return [a for a in doc["data"]["alerts"] if a["labels"].get("alertname") == name]


def alert_of(api: str, name: str, **labels: str) -> dict[str, Any] | None:
    for a in alerts(api, name):
        if all(a["labels"].get(k) == v for k, v in labels.items()):
            return a
    return None


@pytest.mark.bpf
def test_kill_predicted_then_kill_alerts_fire_in_prometheus() -> None:
    exe = compile_c("grower")
    with exporter() as (_proc, port), prometheus_with_rules(port) as api:
        url = f"http://127.0.0.1:{port}/metrics"
        for probe in ("oom", "kills", "cgroups"):
            wait_for(
                f"the {probe} probe attached",
                lambda p=probe: f'probe="{p}",reason="",state="attached"' in get(url)[2],
            )
        # the rules are loaded and evaluated: the kills rule reads a series that is there (the
        # zero series) and does not fire on it
        wait_for("a first scrape", lambda: bool(query(api, 'memtop_memory_kills_total{job="memtop"}')))
        with memcg(300 * MiB, swap=False) as cg:
            path = "/" + cg.name
            # 10 MiB/s toward 300 MiB: about 30 s to the kill, well under the rule's 5 minutes
            w = subprocess.Popen(
                [str(exe), "1000", "2", "200", "wait"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert w.stdout is not None and w.stdin is not None
                assert w.stdout.readline().startswith("ready")
                cg.add(w.pid)
                sees_cgroup(port, path)
                assert alert_of(api, "MemoryKill", cgroup=path) is None
                w.stdin.write("go\n")
                w.stdin.flush()
                wait_for(
                    "MemoryKillPredicted firing for the memcg",
                    lambda: (
                        (alert_of(api, "MemoryKillPredicted", cgroup=path) or {}).get("state") == "firing"
                    ),
                    timeout_s=WAIT_S,
                )
                predicted = alert_of(api, "MemoryKillPredicted", cgroup=path)
                assert w.poll() is None  # before the kill
                assert w.wait(timeout=60) == -9
            finally:
                w.kill()
                w.wait()
            assert predicted is not None and predicted["labels"]["killer"] == "kernel"
            assert 0 < float(predicted["value"]) < 300
            wait_for(
                "MemoryKill firing for the memcg",
                lambda: (alert_of(api, "MemoryKill", cgroup=path) or {}).get("state") == "firing",
                timeout_s=WAIT_S,
            )
            fired = alert_of(api, "MemoryKill", cgroup=path)
            assert fired is not None
            assert fired["labels"]["killer"] == "kernel" and fired["labels"]["reason"] == "memcg", fired
            # the count Prometheus stored is the memcg's own counter of kills
            oom_kill = next(
                int(line.split()[1])
                for line in (cg.path / "memory.oom_control").read_text().splitlines()
                if line.startswith("oom_kill ")
            )
            (series,) = query(api, f'memtop_memory_kills_total{{cgroup="{path}"}}')
            assert float(series["value"][1]) == oom_kill == 1
        # the zero series never fired
        assert all(a["labels"].get("killer") for a in alerts(api, "MemoryKill"))
