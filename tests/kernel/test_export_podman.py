"""cAdvisor's labels on a real container: a podman container (runc: crun refuses this machine's
hybrid cgroups) from a local image made here (a static binary as its whole root filesystem; no
registry is reachable), scraped by a real Prometheus and found the way a cAdvisor user finds it,
by ``container`` and ``image``; its usage against the kernel's own memcg file."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import WORKLOADS
from support.exporter import get, prometheus, scrape_config
from test_export_prometheus import exporter, query, wait_for

MiB = 1 << 20
CG1 = Path("/sys/fs/cgroup/memory")


def podman(*args: str) -> str:
    out = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


@contextmanager
def local_image(tag: str) -> Iterator[str]:
    """An image holding only /hold, statically linked, imported from a tarball made here."""
    with tempfile.TemporaryDirectory(prefix="memtop-podman-") as tmp:
        exe = Path(tmp) / "hold"
        subprocess.run(["gcc", "-static", "-O1", "-o", str(exe), str(WORKLOADS / "hold.c")], check=True)
        tar = Path(tmp) / "rootfs.tar"
        with tarfile.open(tar, "w") as t:
            t.add(exe, arcname="hold")
            info = tarfile.TarInfo("tmp")
            info.type, info.mode = tarfile.DIRTYPE, 0o1777
            t.addfile(info, io.BytesIO())
        podman("import", str(tar), tag)
    try:
        yield tag
    finally:
        subprocess.run(["podman", "rmi", "-f", tag], capture_output=True, timeout=120)


@contextmanager
def container(name: str, image: str, mib: int) -> Iterator[int]:
    """A running container holding ``mib`` MiB; its pid on the host."""
    try:
        podman(
            "run",
            "-d",
            "--runtime",
            "runc",
            # this machine's hard limits are below podman's defaults, which runc cannot raise
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            "--name",
            name,
            image,
            "/hold",
            str(mib),
        )
        wait_for("the container to hold its memory", lambda: f"held {mib}" in podman("logs", name))
        yield int(podman("inspect", "-f", "{{.State.Pid}}", name))
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, timeout=120)


def memcg_path(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    raise AssertionError("no memory cgroup")


@pytest.mark.bpf
def test_a_podman_container_carries_cadvisors_labels() -> None:
    if not CG1.is_dir():
        pytest.skip("this test reads the v1 memory controller of a hybrid machine")
    tag = f"localhost/memtop-test-{os.getpid()}-{uuid.uuid4().hex[:6]}:1"
    name = f"memtop-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    with local_image(tag), container(name, tag, 48) as pid:
        path = memcg_path(pid)
        assert "libpod-" in path, path
        cid = podman("inspect", "-f", "{{.Id}}", name)
        assert cid in path
        with exporter() as (_proc, port), prometheus(scrape_config(port)) as api:
            url = f"http://127.0.0.1:{port}/metrics"
            wait_for("memtop to see the container", lambda: f'id="{path}"' in get(url)[2])
            # what a cAdvisor user asks: by container and image, no id in the query
            sel = f'container_memory_usage_bytes{{job="memtop",container="{name}",image="{tag}"}}'
            wait_for("the container's series in Prometheus", lambda: bool(query(api, sel)), timeout_s=30)
            (series,) = query(api, sel)
            labels = series["metric"]
            assert labels["id"] == path and labels["name"] == name
            # not a Kubernetes pod: pod and namespace are empty, which Prometheus stores as absent
            assert "pod" not in labels and "namespace" not in labels
            usage = int((CG1 / path.lstrip("/") / "memory.usage_in_bytes").read_text())
            assert usage >= 48 * MiB
            # the kernel's figure moves a little (the page cache of podman's own files): 5 %
            assert abs(float(series["value"][1]) - usage) <= 0.05 * usage + MiB, (series, usage)
            # the same labels on every container family memtop serves
            text = get(url)[2]
            for family in (
                "container_memory_working_set_bytes",
                "container_memory_failcnt",
                "container_oom_events_total",
            ):
                line = next(
                    x for x in text.splitlines() if x.startswith(family + "{") and f'id="{path}"' in x
                )
                assert f'container="{name}"' in line and f'image="{tag}"' in line, line
