"""memtop export in its container image (contrib/container), run the way the DaemonSet runs it
(contrib/kubernetes): the image is built here from a debian:bookworm-slim base made with
mmdebstrap (no registry is reachable), and run by podman (runc: crun refuses this machine's hybrid
cgroups) with the DaemonSet's capabilities, mounts, environment and host PID namespace, read from
the manifest itself, so that the two cannot drift. It must see the host as a memtop on the host
does: a host process by its host pid, a host memcg's limit, the same memcg reclaim episodes."""

from __future__ import annotations

import os
import subprocess
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import compile_c, memcg, swapfile
from support.daemonset import NODE, PODMAN, daemonset, manifests, pod_options
from support.exporter import free_port, get, prometheus
from support.procs import proc_status
from test_export_prometheus import exporter, wait_for

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    tag = f"localhost/memtop-test:{uuid.uuid4().hex[:8]}"
    pip = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "pip"
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "container_image.sh"), "--base", tag],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ | {"PIP": str(pip) if pip.exists() else "pip"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    try:
        yield tag
    finally:
        subprocess.run(["podman", "rmi", "-f", tag], capture_output=True, timeout=120)


@contextmanager
def container(tag: str, *args: str) -> Iterator[tuple[str, int, str]]:
    """(name, port on the host's loopback, id) of the image run as the DaemonSet runs it, with
    the DaemonSet's own arguments and then ``args``."""
    name = f"memtop-ctr-{uuid.uuid4().hex[:8]}"
    port = free_port()
    ds = daemonset()
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    with tempfile.TemporaryDirectory(prefix="memtop-ctr-") as empty:
        run = subprocess.run(
            [
                "podman",
                "run",
                "-d",
                *PODMAN,
                "--name",
                name,
                *pod_options(ds, Path(empty)),
                "-p",
                f"127.0.0.1:{port}:9479",
                tag,
                *c["args"],
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        try:
            wait_for(
                "memtop in the container serving with its probes attached",
                lambda: (
                    'probe="vmscan",reason="",state="attached"' in get(f"http://127.0.0.1:{port}/metrics")[2]
                ),
                timeout_s=120,
            )
            yield name, port, run.stdout.strip()
        except BaseException:
            logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True, timeout=60)
            print("container log:", logs.stdout, logs.stderr)
            raise
        finally:
            subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, timeout=120)


def samples(port: int) -> list[tuple[str, dict[str, str], float]]:
    text = get(f"http://127.0.0.1:{port}/metrics")[2]
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def one(port: int, name: str, **labels: str) -> float | None:
    got = [v for n, lab, v in samples(port) if n == name and all(lab.get(k) == x for k, x in labels.items())]
    assert len(got) <= 1, (name, labels, got)
    return got[0] if got else None


def test_the_image_sees_the_host_as_the_host_exporter_does(image: str) -> None:
    hold, hog_exe = compile_c("hold"), compile_c("reclaim_hog")
    extra = ("--interval", "1", "--pid-labels", "--topk", "50")
    with ExitStack() as stack:
        stack.enter_context(swapfile())
        cg = stack.enter_context(memcg(100 * MiB))
        path = "/" + cg.name
        _, host_port = stack.enter_context(exporter(*extra))
        name, port, cid = stack.enter_context(container(image, *extra))
        holder = subprocess.Popen([str(hold), "200"], stdout=subprocess.PIPE, text=True)
        stack.callback(holder.wait)
        stack.callback(holder.kill)
        assert holder.stdout is not None and holder.stdout.readline().startswith("held")

        # a host process, by the pid the host gives it, and its RSS as the kernel says
        def rss() -> float | None:
            return one(port, "memtop_process_rss_bytes", pid=str(holder.pid))

        wait_for("the host process in the container's /metrics", lambda: rss() is not None)
        vmrss = int(proc_status(holder.pid)["VmRSS"].split()[0]) * 1024
        assert abs((rss() or 0) - vmrss) <= 0.02 * vmrss, (rss(), vmrss)
        # every series says which node it is from (the downward API's node name)
        assert all(lab.get("node") == NODE for _, lab, _ in samples(port))

        # a host memcg, by its host path, with its exact limit
        def limit() -> float | None:
            return one(port, "container_spec_memory_limit_bytes", id=path)

        wait_for("the host memcg in the container's /metrics", lambda: limit() is not None)
        assert limit() == 100 * MiB

        # the container's own cgroup, named as podman names it
        own = [lab for n, lab, _ in samples(port) if n == "container_memory_usage_bytes" and cid in lab["id"]]
        assert own and own[0]["name"] == name, own

        # the same memcg reclaim episodes as the exporter on the host
        wait_for(
            "the host exporter to see the memcg",
            lambda: one(host_port, "container_spec_memory_limit_bytes", id=path),
        )
        q = ("memtop_reclaim_latency_seconds_count", {"kind": "memcg"})
        before = (one(host_port, q[0], **q[1]), one(port, q[0], **q[1]))
        hog = subprocess.Popen(
            ["sh", "-c", f"echo $$ > {cg.path}/cgroup.procs && exec {hog_exe} 300 2 0 1 0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        stack.callback(hog.wait)
        stack.callback(hog.kill)
        assert hog.stdout is not None and hog.stdin is not None
        assert hog.stdout.readline().startswith("ready")
        hog.stdin.write("go\n")
        hog.stdin.flush()
        assert hog.stdout.readline().strip() == "done"

        def episodes(p: int) -> float:
            return one(p, "memtop_cgroup_reclaim_episodes_total", id=path) or 0

        def same() -> bool:
            return episodes(port) == episodes(host_port) > 100

        wait_for("the same reclaim episodes of the memcg in both", same)
        assert None not in before
        # the histogram's count: every memcg reclaim episode on the machine since each started
        # (only this workload reclaims in a memcg here), the same growth in both. Each exporter
        # serves its last tick's figures and the two tick apart, and the histogram and the
        # episodes are two probes' figures: equal episodes can be served beside a histogram one
        # tick behind in one of them (3,208 against 3,209 in a loaded CI run). Waited on until
        # both served the same count, which must then cover every episode.
        grown: list[tuple[float, float]] = []

        def same_count() -> bool:
            after = (one(host_port, q[0], **q[1]), one(port, q[0], **q[1]))
            if after[0] is None or after[1] is None:
                return False
            grown.append((after[0] - (before[0] or 0), after[1] - (before[1] or 0)))
            return grown[-1][0] == grown[-1][1]

        wait_for("the same count of memcg reclaim latencies in both", same_count)
        assert grown[-1][0] >= episodes(port), (grown[-1], episodes(port))


def test_the_image_says_what_it_lacks(image: str) -> None:
    """Without the DaemonSet's mounts and capabilities, one line at start names what is missing."""
    out = subprocess.run(
        [
            "podman",
            "run",
            "--rm",
            *PODMAN,
            image,
            "--no-listen",
            "--textfile",
            "/tmp/m.prom",
            "--duration",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lacks = [line for line in out.stderr.splitlines() if line.startswith("memtop: lacking:")]
    assert len(lacks) == 1, out.stderr
    assert "privileges" in lacks[0] or "tracefs" in lacks[0], lacks


def test_the_daemonset_runs_the_image_as_the_test_does() -> None:
    """kubectl parses every manifest; the DaemonSet asks for what the container test used and no
    more: host PID, the listed capabilities only, each host path read-only but tracefs and the
    cache, the node name from the downward API, every node tolerated, a memory limit."""
    docs = manifests()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["DaemonSet", "Namespace", "Service"], kinds
    ds = daemonset()
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert pod["hostPID"] is True and sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(sc["capabilities"]["add"]) == {"BPF", "PERFMON", "SYSLOG", "SYS_RESOURCE"}
    writable = {m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/sys/kernel/tracing", "/var/cache/memtop"}, writable
    env = {e["name"]: e for e in c["env"]}
    assert env["MEMTOP_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["MEMTOP_HOST_ROOT"]["value"] == "/host"
    assert {"operator": "Exists"} in pod["tolerations"]
    assert c["resources"]["limits"]["memory"]
    ann = ds["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == "9479"
    # the podman options of the container test come from this same spec
    opts = pod_options(ds, Path("/nonexistent"))
    assert "--pid=host" in opts and "--cap-drop=ALL" in opts


def test_the_scrape_config_keeps_the_daemonsets_pods_and_names_them(tmp_path: Path) -> None:
    """contrib/kubernetes/prometheus-scrape.yml's relabelling, run by a real Prometheus. Debian's
    Prometheus is built without kubernetes_sd, so the pods come from a file_sd file holding the
    labels kubernetes_sd gives a pod: the DaemonSet's own annotations (read from the manifest) on
    one pod, whose address is the pod's IP with another port; none on a second pod. Every other
    line of the shipped file is used as it is."""
    import json
    import re

    shipped = (ROOT / "contrib" / "kubernetes" / "prometheus-scrape.yml").read_text()
    sd = tmp_path / "pods.json"
    cfg = re.sub(
        r"    kubernetes_sd_configs:\n(?:      .*\n)+",
        f"    file_sd_configs:\n      - files: ['{sd}']\n",
        shipped.replace("scrape_interval: 15s", "scrape_interval: 1s"),
    )
    assert "file_sd_configs" in cfg and "relabel_configs" in cfg
    ann = daemonset()["spec"]["template"]["metadata"]["annotations"]
    with exporter("--node-name", "node-a") as (_, port):

        def pod(name: str, annotations: dict[str, str]) -> dict[str, object]:
            labels = {"__meta_kubernetes_namespace": "memtop", "__meta_kubernetes_pod_name": name}
            for k, v in annotations.items():
                labels["__meta_kubernetes_pod_annotation_" + re.sub(r"[^a-zA-Z0-9_]", "_", k)] = v
            labels["__meta_kubernetes_pod_annotation_prometheus_io_port"] = str(port)  # the pod's port
            return {"targets": ["127.0.0.1:1"], "labels": labels}

        other = {k: v for k, v in ann.items() if k != "prometheus.io/scrape"}
        sd.write_text(json.dumps([pod("memtop-abcde", ann), pod("not-annotated", other)]))
        with prometheus(cfg) as api:

            def targets() -> list[dict[str, object]]:
                doc = json.loads(get(f"{api}/api/v1/targets")[2])
                active: list[dict[str, object]] = doc["data"]["activeTargets"]
                return active

            wait_for("prometheus scraping the pod", lambda: any(t.get("health") == "up" for t in targets()))
            (t,) = targets()  # the pod without the annotation is dropped
            labels = t["labels"]
            assert isinstance(labels, dict)
            assert labels["pod"] == "memtop-abcde" and labels["namespace"] == "memtop"
            assert labels["instance"] == f"127.0.0.1:{port}"
            q = 'memtop_probe_up{job="memtop",pod="memtop-abcde",node="node-a",probe="procfs"}'
            wait_for(
                "memtop's series with its node and the pod",
                lambda: bool(
                    json.loads(get(f"{api}/api/v1/query?query=" + urllib.parse.quote(q))[2])["data"]["result"]
                ),
            )
