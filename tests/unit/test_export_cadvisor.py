"""The exporter beside cAdvisor and node_exporter: every ``container_*`` and ``node_*`` name and
type is theirs, as their expositions show them (a cAdvisor query finds memtop's series), and the
``container_*`` series carry cAdvisor's labels (``container``, ``pod``, ``namespace``, ``image``)
derived from kubelet's and the runtimes' cgroup paths and the runtimes' own files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_export_metrics import generate_latest_of, state_at_end

from memtop.export.families import Metric
from memtop.export.metrics import Accumulators, Options, families
from memtop.linux import cgroupfs
from memtop.records import Batch, ProbeStatus
from memtop.records.cgroups import CgroupSample
from memtop.records.oom import OomKill
from memtop.state import State

#: name in the exposition -> its TYPE there, as cAdvisor (metrics/prometheus.go) and node_exporter
#: (collector/pressure_linux.go) expose them. cAdvisor's failcnt is a counter without ``_total``,
#: which prometheus_client cannot write as a counter: memtop's is untyped under the same name.
REFERENCE = {
    "container_memory_usage_bytes": "gauge",
    "container_memory_working_set_bytes": "gauge",
    "container_memory_swap": "gauge",
    "container_memory_cache": "gauge",
    "container_memory_rss": "gauge",
    "container_memory_kernel_usage": "gauge",
    "container_spec_memory_limit_bytes": "gauge",
    "container_memory_failcnt": "untyped",
    "container_oom_events_total": "counter",
    "container_pressure_memory_waiting_seconds_total": "counter",
    "container_pressure_memory_stalled_seconds_total": "counter",
    "node_pressure_memory_waiting_seconds_total": "counter",
    "node_pressure_memory_stalled_seconds_total": "counter",
}
CADVISOR_LABELS = {"id", "name", "container", "pod", "namespace", "image"}
UID = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"


def exposition(fams: list[Metric]) -> tuple[dict[str, str], dict[str, list[dict[str, str]]]]:
    """The TYPE of each name and the label sets of each sample name, from the text format."""
    text = generate_latest_of(fams)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    samples: dict[str, list[dict[str, str]]] = {}
    for name, labels in re.findall(r"^([a-z_]+)(?:\{(.*)\})? \S+$", text, re.M):
        samples.setdefault(name, []).append(dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels)))
    return types, samples


def test_container_and_node_names_and_types_are_cadvisors_and_node_exporters() -> None:
    types, samples = exposition(list(families(state_at_end(), Options(), Accumulators())))
    foreign = {n for n in samples if n.startswith(("container_", "node_"))}
    assert "container_memory_failcnt" in foreign  # the recording's memcg hit its limit
    assert "container_memory_failcnt_total" not in foreign
    for name in sorted(foreign):
        assert name in REFERENCE, f"{name}: not a name cAdvisor or node_exporter exposes"
        assert types.get(name) == REFERENCE[name], (name, types.get(name))
    for name in foreign - {n for n in foreign if n.startswith("node_")}:
        for labels in samples[name]:
            # a label whose value is empty is left out (the same series to Prometheus)
            assert {"id", "name"} <= set(labels) <= CADVISOR_LABELS, (name, labels)
            assert all(v for k, v in labels.items() if k not in ("id", "name")), (name, labels)


def runtime_files(root: Path) -> dict[str, str]:
    """The files kubelet and the runtimes leave, for one container of each layout; returns the ids."""
    ids = {k: k[0] * 64 for k in ("a", "b", "c", "d", "e")}
    # containerd under kubelet: the task bundle's OCI config, with the CRI annotations
    bundle = root / "run/containerd/io.containerd.runtime.v2.task/k8s.io" / ids["a"]
    bundle.mkdir(parents=True)
    (bundle / "config.json").write_text(
        json.dumps(
            {
                "annotations": {
                    "io.kubernetes.cri.container-name": "web",
                    "io.kubernetes.cri.sandbox-name": "shop-7d9",
                    "io.kubernetes.cri.sandbox-namespace": "prod",
                    "io.kubernetes.cri.image-name": "registry.example/shop:1.2",
                }
            }
        )
    )
    # CRI-O: its userdata config, with CRI-O's annotations
    crio = root / "run/containers/storage/overlay-containers" / ids["b"] / "userdata"
    crio.mkdir(parents=True)
    (crio / "config.json").write_text(
        json.dumps(
            {
                "annotations": {
                    "io.kubernetes.container.name": "worker",
                    "io.kubernetes.pod.name": "batch-x1",
                    "io.kubernetes.pod.namespace": "jobs",
                    "io.kubernetes.cri-o.ImageName": "registry.example/batch:7",
                }
            }
        )
    )
    # podman: its OCI config has no name; containers/storage's index has it and the image
    store = root / "var/lib/containers/storage/overlay-containers"
    store.mkdir(parents=True)
    meta = {"image-name": "localhost/tiny:1", "name": "tiny-one"}
    (store / "containers.json").write_text(
        json.dumps([{"id": ids["c"], "names": ["tiny-one"], "metadata": json.dumps(meta)}])
    )
    # docker
    d = root / "var/lib/docker/containers" / ids["d"]
    d.mkdir(parents=True)
    (d / "config.v2.json").write_text(json.dumps({"Name": "/db", "Config": {"Image": "postgres:16"}}))
    # kubelet's log directory names a pod whose container's files are not readable (ids["e"])
    (root / "var/log/pods" / f"prod_shop-7d9_{UID}").mkdir(parents=True)
    return ids


def sample_of(path: str, names: cgroupfs.RuntimeNames) -> CgroupSample:
    """A cgroup's sample, with its container as the cgroups probe derives it."""
    c = cgroupfs.container_of(path)
    if c is not None:
        c = names.name(c)
    return CgroupSample(
        path=path,
        version=1,
        usage_bytes=1 << 20,
        events=(("failcnt", 3), ("oom_kill", 1)),
        container=(c.runtime, c.id, c.pod_uid, c.name, c.pod) if c else None,
        image=c.image if c else "",
    )


def test_cadvisor_labels_from_kubepods_and_runtime_layouts(tmp_path: Path) -> None:
    ids = runtime_files(tmp_path)
    pod_ = UID.replace("-", "_")
    expected = {
        # kubelet, cgroupfs driver: kubepods/<qos>/pod<uid>/<container id>
        f"/kubepods/burstable/pod{UID}/{ids['a']}": (
            "web",
            "web",
            "shop-7d9",
            "prod",
            "registry.example/shop:1.2",
        ),
        # kubelet, systemd driver, containerd
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_}.slice/cri-containerd-{ids['a']}.scope": (
            "web",
            "web",
            "shop-7d9",
            "prod",
            "registry.example/shop:1.2",
        ),
        # kubelet, systemd driver, CRI-O, besteffort
        f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{pod_}.slice/crio-{ids['b']}.scope": (
            "worker",
            "worker",
            "batch-x1",
            "jobs",
            "registry.example/batch:7",
        ),
        # a pod's own cgroup: no container, the pod from kubelet's log directory
        f"/kubepods/besteffort/pod{UID}": ("", "", "shop-7d9", "prod", ""),
        # a container whose runtime files are not readable: its id, its pod from the log directory
        f"/kubepods/pod{UID}/{ids['e']}": (ids["e"], "", "shop-7d9", "prod", ""),
        # podman (cgroupfs manager and systemd manager)
        f"/libpod_parent/libpod-{ids['c']}": ("tiny-one", "tiny-one", "", "", "localhost/tiny:1"),
        f"/machine.slice/libpod-{ids['c']}.scope": ("tiny-one", "tiny-one", "", "", "localhost/tiny:1"),
        # docker
        f"/system.slice/docker-{ids['d']}.scope": ("db", "db", "", "", "postgres:16"),
        # not a container: every label empty, as cAdvisor leaves them
        "/system.slice/sshd.service": ("", "", "", "", ""),
    }
    names = cgroupfs.RuntimeNames(str(tmp_path))
    state = State()
    samples = [sample_of(path, names) for path in expected]
    # the cgroups probe measures: a failing one's families are left out (never stale as current)
    state.apply(Batch(ts_ns=10**9, records=(ProbeStatus("cgroups", "attached"), *samples)))
    state.apply(
        Batch(
            ts_ns=2 * 10**9,
            records=(
                ProbeStatus("oom", "attached"),
                OomKill(
                    ts_ns=2 * 10**9,
                    victim_pid=4242,
                    victim_comm="worker",
                    trigger_pid=4242,
                    trigger_comm="worker",
                    scope="memcg",
                    total_vm_bytes=0,
                    anon_rss_bytes=0,
                    file_rss_bytes=0,
                    shmem_rss_bytes=0,
                    uid=0,
                    oom_score_adj=0,
                    memcg=samples[2].path,
                    task_memcg=samples[2].path,
                ),
            ),
        )
    )
    _, exposed = exposition(list(families(state, Options(cgroup_depth=10), Accumulators())))
    for name in ("container_memory_usage_bytes", "container_memory_failcnt", "container_oom_events_total"):
        got = {
            s["id"]: tuple(s.get(k, "") for k in ("name", "container", "pod", "namespace", "image"))
            for s in exposed[name]
        }
        assert got == expected, name
    # the OOM kill names the container, pod and namespace as the container_* series do
    (kill,) = [k for k in exposed["memtop_oom_kills_total"] if k.get("constraint")]
    assert (kill["container"], kill["pod"], kill["namespace"]) == ("worker", "batch-x1", "jobs")


def test_storage_index_is_bounded_and_not_followed(tmp_path: Path) -> None:
    ids = runtime_files(tmp_path)
    index = tmp_path / "var/lib/containers/storage/overlay-containers/containers.json"
    real = index.with_name("real.json")
    index.rename(real)
    index.symlink_to(real)
    names = cgroupfs.RuntimeNames(str(tmp_path))
    c = names.name(cgroupfs.Container("podman", ids["c"]))
    assert (c.name, c.image) == ("", "")  # a symlinked index is not read
    index.unlink()
    hostile = {"image-name": "evil\x1b]0;owned\x07:1", "name": "x\x1b[2J"}
    index.write_text(json.dumps([{"id": ids["c"], "names": [], "metadata": json.dumps(hostile)}]))
    c = cgroupfs.RuntimeNames(str(tmp_path)).name(cgroupfs.Container("podman", ids["c"]))
    assert "\x1b" not in c.name + c.image and "\x07" not in c.image and c.name.startswith("x")


@pytest.mark.parametrize("garbage", ["{", "[1, 2]", '{"id": 3}', '[{"id": "x", "metadata": "{"}]'])
def test_storage_index_garbage_is_nothing(tmp_path: Path, garbage: str) -> None:
    store = tmp_path / "var/lib/containers/storage/overlay-containers"
    store.mkdir(parents=True)
    (store / "containers.json").write_text(garbage)
    c = cgroupfs.RuntimeNames(str(tmp_path)).name(cgroupfs.Container("podman", "c" * 64))
    assert (c.name, c.image) == ("", "")
