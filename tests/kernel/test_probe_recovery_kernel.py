"""The real cgroups probe made to fail by a real cause that then goes away, scraped over HTTP
(issue 35, items 1 and 2): a memcg named like a docker container whose runtime config (a file the
runtime writes, here under the probe's runtime root) is nested too deeply for the JSON parser. While
that memcg exists every poll of the cgroups probe raises; the exporter must then serve no
``container_*`` series (not the frozen values it served before), ``memtop_probe_up`` 0 and the
time of the last good reading; once the memcg is removed the probe comes back by itself and the
exporter serves fresh values equal to the cgroup's own ``memory.usage_in_bytes``.

The bridge's clock is stepped (its backoff would otherwise take real seconds); cgroupfs, the
probe, the state, the metrics and the HTTP server are the real ones.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import MemCgroup, between, bracket, memcg

from memtop.export.metrics import Options
from memtop.export.server import Exporter, serve
from memtop.linux import cgroupfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.state.cgroups import CgroupsState
from memtop.stream.bridge import Bridge
from memtop.stream.runner import Runner

MiB = 1 << 20
LAYOUT = cgroupfs.layout()
#: a container id of this test's own (64 hex digits), so parallel runs never share one
CID = f"{os.getpid():08x}".rjust(64, "e")

#: a workload that holds what it is told to allocate (MiB per line on stdin), answering "ok"
HOLDER = (
    "import sys\n"
    "held = []\n"
    "for line in sys.stdin:\n"
    "    held.append(b'\\x01' * (int(line) << 20))\n"
    "    print('ok', flush=True)\n"
)


def v1_memory() -> Path:
    if LAYOUT.memory is None or LAYOUT.memory.version != 1:
        pytest.skip("needs the v1 memory controller (this test names its memcgs there)")
    return Path(LAYOUT.memory.mountpoint)


@contextmanager
def holder(cg: MemCgroup) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        cg.add(proc.pid)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def hold(proc: subprocess.Popen[str], mib: int) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{mib}\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "ok"


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return str(r.read().decode())


def usage_served(text: str, path: str) -> float | None:
    for line in text.splitlines():
        if line.startswith("container_memory_usage_bytes{") and f'id="{path}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def probe_up(text: str, probe: str) -> float:
    m = re.search(rf'^memtop_probe_up\{{probe="{probe}",[^}}]*\}} (\S+)$', text, re.M)
    assert m is not None, f"no memtop_probe_up for {probe}"
    return float(m.group(1))


def test_cgroups_probe_fails_on_a_real_cause_and_the_exporter_never_serves_it_stale(tmp_path: Path) -> None:
    mount = v1_memory()
    runtime = tmp_path / "runtime"
    probe = CgroupsProbe(runtime_root=str(runtime))
    bridge = Bridge([probe])
    now = [1000.0]
    bridge.clock = lambda: now[0]
    runner = Runner(bridge)
    server = serve(("127.0.0.1", 0), Exporter(runner, Options(cgroup_depth=8)))
    port = server.port
    hostile = mount / f"memtop-recover-{os.getpid()}" / f"docker-{CID}.scope"

    def tick() -> None:
        """One poll of the bridge, as the Runner's tick makes it, one (stepped) second later."""
        now[0] += 1.0
        bridge.publish(bridge.poll_sync(force=True))

    try:
        asyncio.run(runner.start())
        with memcg(512 * MiB) as cg, holder(cg) as proc:
            path = "/" + cg.name
            usage_file = cg.path / "memory.usage_in_bytes"

            def kernel() -> int:
                return int(usage_file.read_text())

            def served_now() -> float | None:
                """memtop's figure as a scrape serves it right after a poll."""
                tick()
                return usage_served(scrape(port), path)

            hold(proc, 32)
            for _ in range(30):  # a new cgroup is found within a walk (every 5 polls)
                tick()
                if path in runner.state.get(CgroupsState).rows:
                    break
            before, served, after = bracket(kernel, served_now)
            assert served is not None and between(served, before, after), (before, served, after)
            assert probe_up(scrape(port), "cgroups") == 1.0

            # the cause: a container cgroup whose runtime config the JSON parser cannot take
            cfg = runtime / "var/lib/docker/containers" / CID / "config.v2.json"
            cfg.parent.mkdir(parents=True)
            cfg.write_text("[" * 200_000)
            hostile.mkdir(parents=True)
            for _ in range(30):  # a new cgroup is found within a walk (every 5 polls)
                tick()
                if runner.state.statuses["cgroups"].state == "erroring":
                    break
            st = runner.state.statuses["cgroups"]
            assert st.state == "erroring", st
            assert probe in bridge._attached

            # the kernel moves on while the probe cannot read: nothing it served is served now
            hold(proc, 64)
            failing = []
            for _ in range(3):
                tick()
                failing.append(scrape(port))
            for text in failing:
                assert "container_memory_usage_bytes{" not in text
                assert not re.search(r"^container_\w+\{", text, re.M)
                assert probe_up(text, "cgroups") == 0.0
                assert re.search(
                    r'^memtop_probe_last_success_timestamp_seconds\{probe="cgroups"\} ', text, re.M
                )
            assert re.search(r'memtop_probe_up\{probe="cgroups",reason="input nested too deeply', failing[-1])

            # the cause goes: the probe comes back by itself, with the kernel's figures of now
            hostile.rmdir()
            for _ in range(130):  # the backoff is at most 60 (stepped) seconds
                tick()
                if runner.state.statuses["cgroups"].state == "attached":
                    break
            st = runner.state.statuses["cgroups"]
            assert st.state == "attached" and st.message.startswith("recovered after"), st
            before, served, after = bracket(kernel, served_now)
            assert served is not None and between(served, before, after), (before, served, after)
            assert served >= 64 * MiB  # the new allocation, not the value frozen before the failure
            assert probe_up(scrape(port), "cgroups") == 1.0
    finally:
        server.close()
        bridge.close()
        if hostile.exists():
            hostile.rmdir()
        if hostile.parent.exists():
            hostile.parent.rmdir()
