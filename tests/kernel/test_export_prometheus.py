"""`memtop export` scraped by a real Prometheus (the distribution's server, every second) while a
300 MiB workload reclaims and swaps in a 100 MiB memcg and another is OOM-killed in a no-swap one;
then Prometheus's HTTP API is asked what it stored. Also: promtool on the exposition and on the
shipped alerting rules, a recording backfilled through promtool, and bad clients (concurrent
scrapes, a client that never sends or never reads, a burst of scrapes) that must not stop it."""

from __future__ import annotations

import json
import math
import re
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import compile_c, dashboard_expressions, memcg, memtop_cmd, rated_metrics, swapfile
from support.exporter import free_port, get, prometheus, scrape_config

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
#: a --max-series no machine's cgroups reach
UNBOUNDED_SERIES = 10_000_000


def wait_for(what: str, ok: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


@contextmanager
def exporter(*extra: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    proc = subprocess.Popen(
        # every series, whatever the machine's size: past the default 10000 (800 cgroups here, a
        # bench leaves 500 with workloads) the budget cut the families built last, the per-cgroup
        # ones, for the cgroups sorted after the others' (/memtop-test-* after /memtop-bench-*);
        # ``extra`` comes after, so a test of the budget still sets its own
        [
            *memtop_cmd(),
            "export",
            "--listen",
            f"127.0.0.1:{port}",
            "--max-series",
            str(UNBOUNDED_SERIES),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # serving at once; the BPF probes attach within seconds
        wait_for(
            "memtop export serving with its probes attached",
            lambda: 'probe="vmscan",reason="",state="attached"' in get(f"http://127.0.0.1:{port}/metrics")[2],
        )
        yield proc, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def query(api: str, expr: str, at: float | None = None) -> list[dict[str, Any]]:
    params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
    _, _, body = get(f"{api}/api/v1/query?" + urllib.parse.urlencode(params))
    doc = json.loads(body)
    assert doc["status"] == "success", doc
    result = doc["data"]["result"]
    assert isinstance(result, list)
    return result


def value(api: str, expr: str, at: float | None = None) -> float:
    res = query(api, expr, at)
    assert len(res) == 1, (expr, res)
    return float(res[0]["value"][1])


def scraped_after(api: str, t: float) -> bool:
    """Prometheus holds a sample of memtop newer than wall-clock ``t``."""
    res = query(api, "timestamp(memtop_exporter_scrapes_total)")
    return bool(res) and float(res[0]["value"][1]) > t


def read_at(port: int, probe: str) -> float:
    """When memtop's ``probe`` last read (its exposition's Unix time; 0 before the first)."""
    text = get(f"http://127.0.0.1:{port}/metrics")[2]
    m = re.search(
        rf'^memtop_probe_last_success_timestamp_seconds{{[^}}]*\bprobe="{probe}"}} (\S+)$', text, re.M
    )
    return float(m.group(1)) if m else 0.0


def majflt(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2 :].split()[9])


@pytest.mark.bpf
def test_prometheus_scrapes_reclaim_swapins_and_an_oom_kill() -> None:
    hog_exe, fill_exe = compile_c("reclaim_hog"), compile_c("swapfill")
    with exporter() as (proc, port), prometheus(scrape_config(port)) as api:
        wait_for("a first scrape", lambda: scraped_after(api, 0))
        with swapfile(), memcg(100 * MiB) as cg:
            path = "/" + cg.name
            hog = subprocess.Popen(
                ["sh", "-c", f"echo $$ > {cg.path}/cgroup.procs && exec {hog_exe} 300 2 0 1 0"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert hog.stdout is not None and hog.stdin is not None
            assert hog.stdout.readline().startswith("ready")
            sees_cgroup(port, path)
            t0 = time.time()
            wait_for("a scrape after t0", lambda: scraped_after(api, t0 + 1))
            t0 = time.time()
            wait_for("a scrape after t0", lambda: scraped_after(api, t0))
            f0 = majflt(hog.pid)
            hog.stdin.write("go\n")
            hog.stdin.flush()
            assert hog.stdout.readline().strip() == "done"
            f1 = majflt(hog.pid)
            # a read of memtop's begun after the workload's last fault, then a scrape after it
            done = time.time()
            wait_for("memtop's swap-in read after the workload", lambda: read_at(port, "swapin") > done)
            first = read_at(port, "swapin")
            wait_for("memtop's next swap-in read", lambda: read_at(port, "swapin") > first)
            t1 = time.time()
            wait_for("a scrape after that read", lambda: scraped_after(api, t1))
            t1 = time.time()
            q = 'memtop_reclaim_latency_seconds_count{kind="memcg"}'
            episodes = value(api, q, t1) - value(api, q, t0)
            mine = value(api, f'memtop_cgroup_reclaim_episodes_total{{id="{path}"}}', t1) - value(
                api, f'memtop_cgroup_reclaim_episodes_total{{id="{path}"}}', t0
            )
            inf = 'memtop_reclaim_latency_seconds_bucket{kind="memcg",le="+Inf"}'
            assert episodes > 100, episodes
            # the kernel's histogram count and memtop's own per-cgroup count of the same episodes
            # (only this workload reclaims in a memcg here), as Prometheus stored them
            assert episodes == mine == value(api, inf, t1) - value(api, inf, t0)
            # swap-ins and file major faults: together the workload's own major faults (its text
            # may be reclaimed in its memcg and read again; a few other processes may fault too)
            swapins = value(api, "memtop_swapins_total", t1) - value(api, "memtop_swapins_total", t0)
            files = value(api, "memtop_file_major_faults_total", t1) - value(
                api, "memtop_file_major_faults_total", t0
            )
            faults = f1 - f0
            assert faults > 1000 and faults <= swapins + files <= 1.05 * faults + 200, (
                swapins,
                files,
                faults,
            )
            assert swapins >= 0.95 * faults, (swapins, files, faults)
            # the cgroup's own figures under cAdvisor's names
            assert value(api, f'container_spec_memory_limit_bytes{{id="{path}"}}', t1) == 100 * MiB
            usage = int((cg.path / "memory.usage_in_bytes").read_text())
            assert (
                abs(value(api, f'container_memory_usage_bytes{{id="{path}"}}') - usage) <= 0.05 * usage + MiB
            )
            hog.kill()
            hog.wait()
        with memcg(100 * MiB, swap=False) as oom_cg:
            w = subprocess.Popen(
                [str(fill_exe), "300"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            assert w.stdout is not None and w.stdin is not None
            assert w.stdout.readline().startswith("ready")
            oom_cg.add(w.pid)
            oom_path = "/" + oom_cg.name
            sees_cgroup(port, oom_path)
            w.stdin.write("go\n")
            w.stdin.flush()
            assert w.wait(timeout=60) == -9
            sel = f'memtop_oom_kills_total{{cgroup="{oom_path}"}}'
            wait_for("the kill in Prometheus", lambda: bool(query(api, sel)), timeout_s=20)
            kill = query(api, sel)[0]
            assert (
                kill["metric"]["oom_cgroup"] == oom_path
                and kill["metric"]["constraint"] == "CONSTRAINT_MEMCG"
            )
            assert float(kill["value"][1]) == 1
        # every panel of the shipped dashboard queries something that is there
        dash = json.loads((ROOT / "contrib" / "grafana" / "memtop-dashboard.json").read_text())
        for panel in dash["panels"]:
            for target in panel.get("targets", []):
                expr = (
                    target["expr"]
                    .replace("$__rate_interval", "1m")
                    .replace("$__range", "1h")
                    .replace("$node", ".*")
                )
                assert query(api, expr), f"dashboard panel {panel['title']!r}: {expr} has no data"
        # the exposition passes promtool's lint
        _, ctype, text = get(f"http://127.0.0.1:{port}/metrics")
        assert ctype.startswith("text/plain")
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout + lint.stderr
        _, ctype, om = get(
            f"http://127.0.0.1:{port}/metrics", accept="application/openmetrics-text; version=1.0.0"
        )
        assert ctype.startswith("application/openmetrics-text") and om.rstrip().endswith("# EOF")
        assert proc.poll() is None


@pytest.mark.bpf
def test_bad_clients_do_not_stop_it() -> None:
    with exporter() as (proc, port):
        url = f"http://127.0.0.1:{port}/metrics"
        rss0 = rss_kib(proc.pid)
        # clients that connect and send nothing, or send a request and never read the answer
        idle = []
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", port))
            idle.append(s)
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            idle.append(s)
        # concurrent scrapes and a burst: as many as it answers in 5 s from 8 threads
        codes: dict[int, int] = {}
        lock = threading.Lock()

        def hammer(deadline: float) -> None:
            while time.monotonic() < deadline:
                try:
                    code = get(url, timeout=15)[0]
                except urllib.error.HTTPError as exc:
                    code = exc.code
                except OSError:
                    code = 0
                with lock:
                    codes[code] = codes.get(code, 0) + 1

        deadline = time.monotonic() + 5
        threads = [threading.Thread(target=hammer, args=(deadline,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for s in idle:
            s.close()
        assert codes.get(200, 0) > 100, codes  # it kept answering
        assert set(codes) <= {200, 503}, codes  # too many at once is a 503, never a hang or a reset
        assert proc.poll() is None
        assert get(url)[0] == 200
        # bounded: a few MiB for the scrapes' garbage, not one buffer per request
        assert rss_kib(proc.pid) - rss0 < 64 * 1024, (rss0, rss_kib(proc.pid))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_rules_and_backfill_pass_promtool(tmp_path: Path) -> None:
    rules = ROOT / "contrib" / "prometheus" / "memtop-alerts.yml"
    check = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    om = tmp_path / "memtop.om"
    subprocess.run(
        [
            *memtop_cmd(),
            "export",
            "--replay",
            str(ROOT / "tests/data/cgroups.jsonl.gz"),
            "--openmetrics",
            str(om),
            "--step",
            "2",
        ],
        check=True,
        capture_output=True,
    )
    assert om.read_text().rstrip().endswith("# EOF")
    blocks = tmp_path / "blocks"
    made = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(blocks)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    # queryable: the memcg's reclaim episodes and its limit, as the recording had them (the dump
    # opens the directory as a database, which wants a WAL directory beside the blocks)
    (blocks / "wal").mkdir(exist_ok=True)
    dump = subprocess.run(
        [
            "promtool",
            "tsdb",
            "dump",
            "--match",
            '{__name__="container_spec_memory_limit_bytes"}',
            str(blocks),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    limits = {float(line.split()[-2]) for line in dump.splitlines() if 'id="/memtop-test-' in line}
    assert 100 * MiB in limits, dump
    dump = subprocess.run(
        [
            "promtool",
            "tsdb",
            "dump",
            "--match",
            '{__name__="memtop_reclaim_latency_seconds_count",kind="memcg"}',
            str(blocks),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    last = [line for line in dump.splitlines() if line.strip()][-1]
    assert float(last.split()[-2]) > 1000, last  # the recording's thousands of memcg reclaims


#: what Grafana's variables stand for in the queries: a rate window of ten 1 s scrapes
GRAFANA = {"$__rate_interval": "10s", "$__range": "1h", "$__interval": "1s", "$node": ".*"}


def grafana(expr: str) -> str:
    for var, val in GRAFANA.items():
        expr = expr.replace(var, val)
    return expr


def numbers(api: str, where: str, expr: str, at: float) -> list[float]:
    """The values of ``expr`` at ``at``: there, and each a finite number."""
    res = query(api, expr, at)
    assert res, f"{where}: {expr} has no data"
    vals = [float(r["value"][1]) for r in res]
    assert all(math.isfinite(v) for v in vals), f"{where}: {expr} = {vals}"
    return vals


#: series a rule reads that are absent by design while nothing happens: a forecast while nothing
#: grows (not 0, not +Inf: tests/kernel/test_kills_prometheus.py sees it and its rule fire)
ABSENT_WHILE_NOTHING_HAPPENS = {"memtop_memory_exhaustion_forecast_seconds"}


def selected_metrics(expr: str) -> set[str]:
    return set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{job=", expr))


def every_panel_and_rule(api: str, at: float, scenario: str) -> dict[str, list[float]]:
    """Every dashboard panel's query is a number (not empty, not NaN) at ``at``; every rule's
    query evaluates and every series it reads is there. The panels' values by where."""
    out = {}
    for where, expr in dashboard_expressions():
        if where.startswith("panel"):
            out[where] = numbers(api, f"{scenario}: {where}", grafana(expr), at)
        else:
            query(api, expr, at)  # evaluates (a rule that does not fire returns nothing)
            for name in selected_metrics(expr) - ABSENT_WHILE_NOTHING_HAPPENS:
                assert query(api, f'count({name}{{job="memtop"}})', at), (
                    f"{scenario}: {where} reads {name}: none"
                )
    return out


def metadata(api: str, name: str) -> list[dict[str, str]]:
    """Prometheus's metadata of the family a sample name belongs to (OpenMetrics, which Prometheus
    asks memtop for, names a counter's family without _total, a histogram's without _bucket)."""
    for family in (name, re.sub(r"_(total|bucket|count|sum)$", "", name)):
        found = json.loads(get(f"{api}/api/v1/metadata?metric={family}")[2])["data"].get(family)
        if found:
            assert isinstance(found, list)
            return found
    return []


def sees_cgroup(port: int, path: str) -> None:
    """Wait for memtop's series of the cgroup ``path``; failing, say what its probes said (a
    cgroups probe that failed on another cgroup of this shared machine sees none)."""
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for(f"memtop to see {path}", lambda: f'id="{path}"' in get(url)[2])
    except AssertionError as exc:
        probes = [line for line in get(url)[2].splitlines() if line.startswith("memtop_probe_up{")]
        raise AssertionError(f"{exc}; {probes}") from None


def wait_scraped(api: str, seconds: float) -> float:
    """Wait until Prometheus holds a scrape ``seconds`` from now; that scrape's time."""
    t = time.time() + seconds
    wait_for(f"a scrape after {seconds} s", lambda: scraped_after(api, t), timeout_s=60 + seconds)
    return float(query(api, "timestamp(memtop_exporter_scrapes_total)")[0]["value"][1])


@pytest.mark.bpf
def test_every_panel_and_rule_is_a_number_with_and_without_kills_and_reclaim() -> None:
    """The shipped dashboard and rules through Prometheus's query API, on a memtop that has seen
    nothing happen (a workload well under its memcg's limit: no memcg reclaim of its own, no OOM
    kill), then on one that has (memcg reclaim with swap-ins, an OOM kill): every panel a number in
    both; OOMKill fires after the kill only; no panel takes a rate of a series that ever fell."""
    fill = compile_c("swapfill")
    hog_exe = compile_c("reclaim_hog")
    with exporter() as (_proc, port), prometheus(scrape_config(port)) as api:
        t_start = wait_scraped(api, 0)
        with memcg(100 * MiB) as quiet_cg:
            w = subprocess.Popen([str(fill), "20"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert w.stdin is not None and w.stdout is not None
            assert w.stdout.readline().startswith("ready")
            quiet_cg.add(w.pid)
            w.stdin.write("go\n")
            w.stdin.flush()
            assert w.stdout.readline().startswith("done")
            quiet_path = "/" + quiet_cg.name
            sees_cgroup(port, quiet_path)
            t_quiet = wait_scraped(api, 12)  # a full rate window of scrapes
            quiet = every_panel_and_rule(api, t_quiet, "no kill, no reclaim of its own")
            # other tests on this machine may OOM-kill meanwhile: the panel is the sum of the kills
            # memtop saw (0 when none, from its zero series), and the zero series never fires
            others = query(api, 'memtop_oom_kills_total{constraint!=""}', t_quiet)
            assert quiet["panel 2 'OOM kills since memtop started'"] == [
                sum(float(r["value"][1]) for r in others)
            ]
            (oom_rule,) = [e for w_, e in dashboard_expressions() if w_ == "rule OOMKill"]
            assert all("constraint" in r["metric"] for r in query(api, oom_rule, t_quiet))
            # the workload's memcg did not reclaim: its own counter is there, at 0
            sel = f'memtop_cgroup_reclaim_episodes_total{{id="{quiet_path}"}}'
            assert value(api, sel, t_quiet) == 0
            w.kill()
            w.wait()
        with swapfile(), memcg(100 * MiB) as cg:
            hog = subprocess.Popen(
                ["sh", "-c", f"echo $$ > {cg.path}/cgroup.procs && exec {hog_exe} 300 2 0 1 0"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert hog.stdout is not None and hog.stdin is not None
            assert hog.stdout.readline().startswith("ready")
            hog.stdin.write("go\n")
            hog.stdin.flush()
            assert hog.stdout.readline().strip() == "done"
            t_reclaimed = wait_scraped(api, 2)
            hog.kill()
            hog.wait()
        with memcg(100 * MiB, swap=False) as oom_cg:
            v = subprocess.Popen([str(fill), "300"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert v.stdout is not None and v.stdin is not None
            assert v.stdout.readline().startswith("ready")
            oom_path = "/" + oom_cg.name
            sees_cgroup(port, oom_path)
            oom_cg.add(v.pid)
            v.stdin.write("go\n")
            v.stdin.flush()
            assert v.wait(timeout=60) == -9
            sel = f'memtop_oom_kills_total{{cgroup="{oom_path}"}}'
            wait_for("the kill in Prometheus", lambda: bool(query(api, sel)), timeout_s=30)
            t_busy = wait_scraped(api, 2)
            busy = every_panel_and_rule(api, t_busy, "after memcg reclaim and an OOM kill")
            assert busy["panel 2 'OOM kills since memtop started'"][0] >= 1
            assert value(api, sel, t_busy) == 1
            fired = query(api, oom_rule, t_busy)
            assert oom_path in [r["metric"].get("cgroup") for r in fired], fired
            assert all("constraint" in r["metric"] for r in fired)
            # the victim's memcg reclaim reached its cgroup's series (it was never listed in a
            # read of cgroup.procs long enough to matter: the kill names its memcg)
            assert value(api, f'memtop_cgroup_reclaim_episodes_total{{id="{oom_path}"}}', t_busy) > 0
        # the memcg reclaim p99 was a real latency while the hog reclaimed
        p99 = query(
            api,
            grafana(next(e for w_, e in dashboard_expressions() if w_.startswith("panel 6 "))),
            t_reclaimed,
        )
        memcg_p99 = [float(r["value"][1]) for r in p99 if r["metric"].get("kind") == "memcg"]
        assert memcg_p99 and 0 < memcg_p99[0] < 10, p99
        # no spike from a falling gauge: every series a panel or rule takes a rate of is a counter
        # (Prometheus's metadata of the scrape) and never went down over the whole run
        t_end = wait_scraped(api, 1)
        span = f"{int(t_end - t_start) + 2}s"
        for where, expr in dashboard_expressions():
            for name in rated_metrics(expr):
                meta = metadata(api, name)
                assert meta, f"{where}: no metadata for {name}"
                assert meta[0]["type"] in ("counter", "histogram", "unknown"), (where, name, meta)
                if meta[0]["type"] == "unknown":
                    assert name == "container_memory_failcnt", (where, name)  # cAdvisor's counter
                fell = query(api, f'max(resets({name}{{job="memtop"}}[{span}]))', t_end)
                assert fell and float(fell[0]["value"][1]) == 0, f"{where}: {name} fell: {fell}"
