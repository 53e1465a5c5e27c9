"""The cgroup model on fixture trees: cgroup v2 memory files as the kernel's cgroup-v2 documentation
writes them (the v2 memory controller cannot be enabled on the machines here, where v1 holds it),
v1 files, the three layouts from mountinfo text, container and pod ids from the paths the runtimes
create, and the probe reading a whole v2 tree into the state and the view."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memtop.linux import cgroupfs
from memtop.probes.cgroups import CgroupsProbe
from memtop.records import Batch
from memtop.records.cgroups import CgroupGone, CgroupPoll, CgroupSample
from memtop.records.reclaim import ReclaimEvent, ReclaimTotals
from memtop.state import State
from memtop.state.cgroups import CgroupsState
from memtop.views import Options, get_view

MiB = 1 << 20

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1 = """\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
"""
V2 = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"


def test_layouts_from_mountinfo() -> None:
    h = cgroupfs.find_layout(HYBRID, read_controllers=False)
    assert h.mode == "hybrid"
    assert h.memory is not None and h.memory.version == 1 and h.memory.mountpoint == "/sys/fs/cgroup/memory"
    assert h.unified is not None and h.unified.mountpoint == "/sys/fs/cgroup/unified"
    assert cgroupfs.find_layout(V1, read_controllers=False).mode == "v1"
    v2 = cgroupfs.find_layout(V2, read_controllers=False)
    assert v2.mode == "v2" and v2.memory is None  # controllers not read: memory not known enabled
    assert cgroupfs.find_layout("", read_controllers=False).mode == "none"
    cpu = next(
        x
        for x in cgroupfs.find_layout(V1, read_controllers=False).hierarchies
        if x.version == 1 and "cpu" in x.controllers
    )
    assert cpu.mountpoint == "/sys/fs/cgroup/cpu,cpuacct" and "cpuacct" in cpu.controllers


#: memtop in a container (contrib/container): the runtime's mount of the container's own cgroup
#: at /sys/fs/cgroup, and the host's hierarchies mounted at /host/sys/fs/cgroup; in the host's
#: cgroup namespace the container's mount root is its own subtree (as mountinfo says here) ...
IN_CONTAINER = """\
105 100 0:32 /libpod_parent/libpod-c1 /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory
110 100 0:38 /libpod_parent/libpod-c1 /sys/fs/cgroup/unified ro,nosuid - cgroup2 cgroup2 rw
117 113 0:32 / /host/sys/fs/cgroup/memory ro,relatime - cgroup cgroup rw,memory
119 113 0:38 / /host/sys/fs/cgroup/unified ro,relatime - cgroup2 cgroup2 rw
"""
#: ... and in a cgroup namespace of its own, roots are relative to it: the host's is above it
IN_CONTAINER_NS = IN_CONTAINER.replace("/libpod_parent/libpod-c1 ", "/ ", 2).replace(
    " / /host", " /../.. /host"
)


@pytest.mark.parametrize("mountinfo", [IN_CONTAINER, IN_CONTAINER_NS], ids=["host-cgroupns", "own-cgroupns"])
def test_in_a_container_the_hosts_hierarchies_are_taken(mountinfo: str) -> None:
    lay = cgroupfs.find_layout(mountinfo, read_controllers=False)
    assert lay.memory is not None and lay.memory.mountpoint == "/host/sys/fs/cgroup/memory"
    assert lay.unified is not None and lay.unified.mountpoint == "/host/sys/fs/cgroup/unified"
    # a cgroup the walk found under the host's mount is that directory
    assert lay.memory.dir("/kubepods/pod1") == "/host/sys/fs/cgroup/memory/kubepods/pod1"


def test_this_machine_layout_is_what_mountinfo_says() -> None:
    lay = cgroupfs.layout()
    mounts = cgroupfs.parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    kinds = {fs for _, _, fs, _ in mounts}
    expect = (
        "hybrid"
        if kinds == {"cgroup", "cgroup2"}
        else "v2"
        if kinds == {"cgroup2"}
        else "v1"
        if kinds
        else "none"
    )
    assert lay.mode == expect
    assert lay.describe().startswith(expect)


def write_v2(d: Path, **files: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (
            d / name.replace("_", ".", 1)
            if name.startswith("memory_") or name.startswith("cgroup_")
            else d / name
        ).write_text(text)


V2_STAT = """anon 41943040
file 20971520
kernel 4194304
kernel_stack 65536
pagetables 131072
sec_pagetables 0
percpu 0
sock 0
vmalloc 0
shmem 1048576
file_mapped 1048576
file_dirty 8192
file_writeback 0
swapcached 0
anon_thp 0
inactive_anon 40000000
active_anon 1943040
inactive_file 10485760
active_file 10485760
unevictable 0
slab_reclaimable 1048576
slab_unreclaimable 1048576
slab 2097152
workingset_refault_anon 12
workingset_refault_file 34
pgscan 1000
pgsteal 900
pgfault 5000
pgmajfault 7
"""


def v2_tree(root: Path) -> Path:
    """A cgroup2 tree as a v2 machine has it (Documentation/admin-guide/cgroup-v2.rst formats)."""
    write_v2(
        root,
        **{
            "cgroup.controllers": "cpu io memory pids\n",
            "cgroup.procs": "1\n",
            "memory.stat": V2_STAT,
            "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=50\n",
        },
    )
    app = root / "system.slice" / "app.service"
    write_v2(
        root / "system.slice",
        **{
            "cgroup.procs": "",
            "memory.current": str(300 * MiB) + "\n",
            "memory.max": "max\n",
            "memory.stat": V2_STAT,
        },
    )
    write_v2(
        app,
        **{
            "cgroup.procs": "4242\n4243\n",
            "memory.current": str(64 * MiB) + "\n",
            "memory.max": str(128 * MiB) + "\n",
            "memory.high": str(96 * MiB) + "\n",
            "memory.low": str(16 * MiB) + "\n",
            "memory.min": "0\n",
            "memory.swap.current": str(MiB) + "\n",
            "memory.swap.max": "max\n",
            "memory.events": "low 0\nhigh 3\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n",
            "memory.stat": V2_STAT,
            "memory.pressure": "some avg10=1.00 avg60=0.50 avg300=0.10 total=123456\nfull avg10=0.50 avg60=0.20 avg300=0.05 total=65432\n",
        },
    )
    docker = root / "system.slice" / ("docker-" + "ab" * 32 + ".scope")
    write_v2(
        docker,
        **{
            "cgroup.procs": "5000\n",
            "memory.current": "1048576\n",
            "memory.max": str(256 * MiB) + "\n",
            "memory.stat": V2_STAT,
            "memory.events": "max 0\noom_kill 0\n",
        },
    )
    return app


def test_v2_files_through_the_model(tmp_path: Path) -> None:
    app = v2_tree(tmp_path)
    r = cgroupfs.read_memory(2, str(app))
    assert r.usage_bytes == 64 * MiB and r.limit_bytes == 128 * MiB
    assert r.high_bytes == 96 * MiB and r.low_bytes == 16 * MiB and r.min_bytes == 0
    assert r.swap_bytes == MiB and r.swap_limit_bytes is None  # "max": no limit
    assert r.events == {"low": 0, "high": 3, "max": 17, "oom": 1, "oom_kill": 1, "oom_group_kill": 0}
    assert r.stat["anon"] == 41943040 and r.stat["slab"] == 2097152 and r.stat["dirty"] == 8192
    assert r.stat["pgscan"] == 1000 and r.stat["refault_file"] == 34
    assert cgroupfs.working_set(r.usage_bytes, r.stat["inactive_file"]) == 64 * MiB - 10485760
    assert cgroupfs.parse_pressure((app / "memory.pressure").read_text()) == (123456, 65432)
    assert cgroupfs.read_procs(str(app)) == (4242, 4243)
    assert cgroupfs.read_memory(2, str(tmp_path / "system.slice")).limit_bytes is None


def test_v1_files_through_the_model(tmp_path: Path) -> None:
    d = tmp_path / "memtop-x"
    d.mkdir()
    files = {
        "memory.usage_in_bytes": str(100 * MiB),
        "memory.limit_in_bytes": str(100 * MiB),
        "memory.soft_limit_in_bytes": "9223372036854771712",
        "memory.memsw.usage_in_bytes": str(180 * MiB),
        "memory.memsw.limit_in_bytes": "9223372036854771712",
        "memory.failcnt": "52000",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        "memory.kmem.usage_in_bytes": str(MiB),
        "memory.stat": "cache 1\nrss 2\ntotal_cache 3145728\ntotal_rss 102760448\ntotal_shmem 0\n"
        "total_inactive_file 524288\ntotal_workingset_refault_anon 40000\ntotal_dirty 0\n",
    }
    for k, v in files.items():
        (d / k).write_text(v + "\n")
    r = cgroupfs.read_memory(1, str(d))
    assert r.usage_bytes == 100 * MiB and r.limit_bytes == 100 * MiB
    assert r.soft_limit_bytes is None and r.swap_limit_bytes is None  # unlimited
    assert r.swap_bytes == 80 * MiB  # memsw.usage - usage
    assert r.events == {"failcnt": 52000, "oom_kill": 2, "under_oom": 0}
    # the hierarchical total_* fields, under the same names as v2's
    assert r.stat == {
        "anon": 102760448,
        "file": 3145728,
        "shmem": 0,
        "inactive_file": 524288,
        "refault_anon": 40000,
        "dirty": 0,
        "kernel": MiB,
    }


def test_reads_never_follow_symlinks_or_block_on_fifos(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("123\n")
    (tmp_path / "memory.current").symlink_to(secret)
    os.mkfifo(tmp_path / "memory.max")
    assert cgroupfs.read_text(str(tmp_path / "memory.current")) is None
    assert cgroupfs.read_text(str(tmp_path / "memory.max")) is None  # would block if opened for read
    assert cgroupfs.read_memory(2, str(tmp_path)).usage_bytes is None


@pytest.mark.parametrize(
    ("path", "runtime", "cid", "pod"),
    [
        ("/system.slice/docker-" + "a1" * 32 + ".scope", "docker", "a1" * 32, ""),
        ("/docker/" + "b2" * 32, "docker", "b2" * 32, ""),
        (
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/"
            "cri-containerd-" + "c3" * 32 + ".scope",
            "containerd",
            "c3" * 32,
            "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
        ),
        (
            "/kubepods/besteffort/pod0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b/" + "d4" * 32,
            "kubernetes",
            "d4" * 32,
            "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
        ),
        (
            "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/crio-"
            + "e5" * 32
            + ".scope",
            "crio",
            "e5" * 32,
            "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
        ),
        (
            "/kubepods/burstable/pod0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b/crio-" + "e5" * 32,
            "crio",
            "e5" * 32,
            "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
        ),
        ("/machine.slice/libpod-" + "f6" * 32 + ".scope", "podman", "f6" * 32, ""),
        ("/libpod_parent/libpod-" + "f6" * 32, "podman", "f6" * 32, ""),
        (
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice",
            "kubernetes",
            "",
            "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
        ),
    ],
)
def test_container_and_pod_from_the_path(path: str, runtime: str, cid: str, pod: str) -> None:
    c = cgroupfs.container_of(path)
    assert c is not None and (c.runtime, c.id, c.pod_uid) == (runtime, cid, pod)


def test_not_a_container() -> None:
    assert cgroupfs.container_of("/system.slice/sshd.service") is None
    assert cgroupfs.container_of("/user.slice/user-1000.slice") is None
    assert cgroupfs.container_of("/system.slice/crio-conmon-" + "e5" * 32 + ".scope") is None
    assert cgroupfs.unit_of("/system.slice/sshd.service") == "sshd.service"
    assert cgroupfs.unit_of("/memtop-test") == ""


def test_names_from_the_runtimes_files(tmp_path: Path) -> None:
    cid = "c3" * 32
    bundle = tmp_path / "run/containerd/io.containerd.runtime.v2.task/k8s.io" / cid
    bundle.mkdir(parents=True)
    (bundle / "config.json").write_text(
        json.dumps(
            {
                "annotations": {
                    "io.kubernetes.cri.container-name": "web",
                    "io.kubernetes.cri.sandbox-name": "shop-7d9",
                    "io.kubernetes.cri.sandbox-namespace": "prod",
                }
            }
        )
    )
    uid = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
    (tmp_path / "var/log/pods" / f"prod_shop-7d9_{uid}").mkdir(parents=True)
    names = cgroupfs.RuntimeNames(str(tmp_path))
    c = names.name(cgroupfs.Container("containerd", cid, uid))
    assert (c.name, c.pod) == ("web", "prod/shop-7d9")
    assert c.short() == "web"
    # a pod known only from kubelet's log directory
    p = names.name(cgroupfs.Container("kubernetes", "", uid))
    assert p.pod == "prod/shop-7d9"
    # docker's own file; a symlinked config is not read
    did = "a1" * 32
    d = tmp_path / "var/lib/docker/containers" / did
    d.mkdir(parents=True)
    (d / "config.v2.json").write_text(json.dumps({"Name": "/db"}))
    assert names.name(cgroupfs.Container("docker", did)).name == "db"
    evil = "b2" * 32
    e = tmp_path / "var/lib/docker/containers" / evil
    e.mkdir(parents=True)
    (e / "config.v2.json").symlink_to(d / "config.v2.json")
    assert names.name(cgroupfs.Container("docker", evil)).name == ""


def v2_probe(tmp_path: Path) -> CgroupsProbe:
    probe = CgroupsProbe()
    root = tmp_path / "cg"
    v2_tree(root)
    h = cgroupfs.Hierarchy(str(root), 2, ("memory",))
    probe.layout = cgroupfs.Layout("v2", (h,), h, h, True)
    return probe


def test_the_probe_reads_a_v2_tree_into_state_and_view(tmp_path: Path) -> None:
    probe = v2_probe(tmp_path)
    state = State(mode="bpf")
    recs = probe.poll()
    paths = {r.path for r in recs if isinstance(r, CgroupSample)}
    app_path, docker_path = "/system.slice/app.service", "/system.slice/docker-" + "ab" * 32 + ".scope"
    assert paths == {"/", "/system.slice", app_path, docker_path}
    assert isinstance(recs[0], type(recs[0])) and isinstance(recs[-1], CgroupPoll)
    state.apply(Batch(1_000_000_000, tuple(recs)))
    st = state.get(CgroupsState)
    assert st.memcg_of(4242) == app_path and st.unified_of(4242) == app_path  # v2: one tree
    # a second read, one second later: PSI and limit hits moved for the app
    app = tmp_path / "cg" / "system.slice" / "app.service"
    (app / "memory.pressure").write_text(
        "some avg10=1.00 avg60=0.50 avg300=0.10 total=373456\nfull avg10=0.50 avg60=0.20 avg300=0.05 total=65432\n"
    )
    (app / "memory.events").write_text("low 0\nhigh 3\nmax 27\noom 1\noom_kill 1\noom_group_kill 0\n")
    recs = probe.poll()
    # only what changed is sent again (the app; its usage did not move, but its PSI did)
    assert {r.path for r in recs if isinstance(r, CgroupSample)} == {app_path}
    state.apply(Batch(2_000_000_000, tuple(recs)))
    doc = get_view("cgroups").document(state, Options(sort="usage_bytes"))
    rows = {r["path"]: r for r in doc["rows"]}
    a = rows[app_path]
    assert a["psi_some_pct"] == pytest.approx(25.0)  # 250 ms of 1 s
    assert a["limit_hits_per_s"] == pytest.approx(10.0)  # events "max" 17 -> 27 in 1 s
    assert a["limit_pct"] == pytest.approx(50.0) and a["limit_bar"].endswith(" 50%")
    assert a["reclaim_episodes"] is None  # the vmscan probe is not measuring: not a zero
    assert a["events"]["oom_kill"] == 1 and a["stat"]["slab"] == 2097152
    d = rows[docker_path]
    assert d["container"]["runtime"] == "docker" and d["container_name"] == "docker:" + "ab" * 6
    # tree order: parents first, siblings by usage (the app's 64 MiB above docker's 1 MiB)
    order = [r["path"] for r in doc["rows"]]
    assert order == ["/", "/system.slice", app_path, docker_path]
    assert [r["depth"] for r in doc["rows"]] == [0, 1, 2, 2]
    # per-cgroup probe figures roll up the tree, once the reclaim probe measures
    from memtop.records import ProbeStatus

    state.apply(Batch(2_100_000_000, (ProbeStatus("vmscan", "attached"),)))
    # a reclaim episode of its process, attributed by pid
    ev = ReclaimEvent(2_200_000_000, 4242, 4242, "app", "memcg", 3_000_000, 10, cgroup_id=0)
    state.apply(Batch(2_300_000_000, (ev,)))
    doc = get_view("cgroups").document(state, Options())
    rows = {r["path"]: r for r in doc["rows"]}
    assert rows[app_path]["reclaim_episodes"] == 1 and rows["/system.slice"]["reclaim_episodes"] == 1
    assert rows["/"]["reclaim_stall_ns"] == 3_000_000 and rows[docker_path]["reclaim_episodes"] == 0
    assert rows[app_path]["reclaim_p99_ns"] == 3_000_000
    # folding and depth, filter with ancestors
    folded = get_view("cgroups").document(state, Options(extra={"collapsed": ["/system.slice"]}))
    assert [r["path"] for r in folded["rows"]] == ["/", "/system.slice"] and folded["rows"][1]["collapsed"]
    shallow = get_view("cgroups").document(state, Options(extra={"depth": 1}))
    assert [r["path"] for r in shallow["rows"]] == ["/", "/system.slice"]
    found = get_view("cgroups").document(state, Options(filter="docker"))
    assert [r["path"] for r in found["rows"]] == ["/", "/system.slice", docker_path]
    # a third read with nothing changed: rates fall to zero without a resend
    state.apply(Batch(3_000_000_000, tuple(probe.poll())))
    a = next(r for r in get_view("cgroups").document(state, Options())["rows"] if r["path"] == app_path)
    assert a["psi_some_pct"] == 0 and a["limit_hits_per_s"] == 0
    # a removed cgroup goes
    for f in (tmp_path / "cg" / "system.slice" / ("docker-" + "ab" * 32 + ".scope")).iterdir():
        f.unlink()
    (tmp_path / "cg" / "system.slice" / ("docker-" + "ab" * 32 + ".scope")).rmdir()
    # (a fixture file stays readable through a held descriptor, a cgroupfs one does not: here the
    # removal shows at the next listing of the tree, within walk_every ticks)
    held = len(probe._held)
    for _ in range(probe.walk_every):
        recs = probe.poll()
        if CgroupGone(docker_path) in recs:
            break
    assert CgroupGone(docker_path) in recs
    assert len(probe._held) < held  # its files are closed
    state.apply(Batch(4_000_000_000, tuple(recs)))
    assert docker_path not in state.get(CgroupsState).rows


def test_processes_and_oom_views_name_the_cgroup(tmp_path: Path) -> None:
    probe = v2_probe(tmp_path)
    state = State(mode="bpf")
    state.apply(Batch(1_000_000_000, tuple(probe.poll())))
    from memtop.records.oom import OomKill
    from memtop.records.processes import ProcSample

    proc = ProcSample(4242, "app", "root", 0, 10 * MiB, MiB, 0, 0, 5, 0)
    kill = OomKill(
        ts_ns=1_500_000_000,
        victim_pid=4242,
        victim_comm="app",
        trigger_pid=4242,
        trigger_comm="app",
        scope="memcg",
        total_vm_bytes=1,
        anon_rss_bytes=1,
        file_rss_bytes=0,
        shmem_rss_bytes=0,
        uid=0,
        oom_score_adj=0,
        memcg="/system.slice",
        memcg_usage_bytes=300 * MiB,
        memcg_limit_bytes=300 * MiB,
        memcg_failcnt=9,
    )
    state.apply(Batch(2_000_000_000, (proc, kill)))
    rows = get_view("processes").document(state, Options())["rows"]
    assert next(r for r in rows if r["pid"] == 4242)["cgroup"] == "/system.slice/app.service"
    ev = get_view("oom").document(state, Options())["events"][0]
    assert ev["cgroup"] == "/system.slice/app.service" and ev["memcg"] == "/system.slice"
    txt = get_view("oom").text(state, Options())
    assert "limit of memcg /system.slice fired" in txt and "usage 300.0M of 300.0M" in txt
    cg = {r["path"]: r for r in get_view("cgroups").document(state, Options())["rows"]}
    assert cg["/system.slice/app.service"]["oom_kills"] == 1
    assert cg["/system.slice"]["oom_limit_kills"] == 1 and cg["/system.slice"]["oom_kills"] == 1
    detail = get_view("cgroups").document(state, Options(extra={"cgroup": "/system.slice"}))["detail"]
    assert detail["oom_kills"][0]["victim_pid"] == 4242


def test_an_episode_before_its_process_was_read_is_attributed_at_the_next_read() -> None:
    state = State(mode="bpf")
    early = ReclaimEvent(1_000_000_000, 777, 777, "new", "memcg", 2_000_000, 5)
    lost = ReclaimEvent(1_000_000_000, 888, 888, "gone", "memcg", 2_000_000, 5)
    state.apply(Batch(1_100_000_000, (early, lost)))
    st = state.get(CgroupsState)
    assert st.unattributed == 0 and not st.probed  # not guessed, not yet given up
    state.apply(Batch(2_000_000_000, (CgroupSample("/box", 2, usage_bytes=1, pids=(777,)), CgroupPoll(1))))
    assert st.probed["/box"].reclaim_events == 1 and st.unattributed == 0
    state.apply(Batch(12_000_000_000, (CgroupPoll(1),)))  # 888 never showed up: given up after 10 s
    assert st.unattributed == 1 and sum(p.reclaim_events for p in st.probed.values()) == 1


def test_each_pid_is_mapped_to_the_cgroup_that_listed_it_last() -> None:
    """The pid maps (the CGROUP column, a kill's or a stall's cgroup) follow each sample's
    members in the order read, in both hierarchies of a v1 machine, whether a sample lists
    members already known there, one new among them, or one another cgroup had."""
    state = State(mode="bpf")
    st = state.get(CgroupsState)
    ts = 1_000_000_000

    def tick(*samples: CgroupSample) -> None:
        nonlocal ts
        ts += 1_000_000_000
        state.apply(Batch(ts, (*samples, CgroupPoll(1))))

    tick(
        CgroupSample("/a", 1, usage_bytes=1, pids=(1, 2, 3), unified_pids=(1, 2, 3)),
        CgroupSample("/b", 1, usage_bytes=1, pids=(4,), unified_pids=(4,)),
    )
    assert dict(st.pid_memcg) == {1: "/a", 2: "/a", 3: "/a", 4: "/b"}
    tick(CgroupSample("/a", 1, usage_bytes=2, pids=(1, 2, 3, 5), unified_pids=(1, 2, 3)))  # 5 came
    assert st.pid_memcg[5] == "/a" and list(st.pid_memcg)[-1] == 5 and 5 not in st.pid_unified
    tick(CgroupSample("/b", 1, usage_bytes=2, pids=(4, 2), unified_pids=(4, 2)))  # 2 moved to /b
    assert st.pid_memcg[2] == "/b" and st.pid_unified[2] == "/b" and list(st.pid_memcg)[-1] == 2
    # /a read again before its members were (the same list): the last to list 2 has it
    tick(CgroupSample("/a", 1, usage_bytes=3, pids=(1, 2, 3, 5), unified_pids=(1, 2, 3)))
    assert st.pid_memcg[2] == "/a" and st.pid_unified[2] == "/a"
    tick(CgroupSample("/a", 1, usage_bytes=4, pids=(1, 2, 3, 5), unified_pids=(1, 2, 3)))  # all known
    assert list(st.pid_memcg) == [1, 3, 4, 5, 2] and dict(st.pid_unified) == {
        1: "/a",
        2: "/a",
        3: "/a",
        4: "/b",
    }


def _totals(*pids: tuple[int, int, int, int], hist: tuple[tuple[int, int, int], ...] = ()) -> ReclaimTotals:
    """ReclaimTotals of memcg reclaim: (pid, events, total_ns, max_ns) and (pid, bucket, count)."""
    return ReclaimTotals(
        histogram=(),
        pids=tuple((pid, "hog", "memcg", n, tot, mx, n) for pid, n, tot, mx in pids),
        pid_hist=tuple((pid, "memcg", b, c) for pid, b, c in hist),
    )


def test_cgroup_reclaim_from_what_each_process_totals_grew_by() -> None:
    """The event log is rate-limited: a cgroup's episodes, stall, max and p99 come from its
    processes' in-kernel totals and histograms, whatever the log carried (never twice)."""
    from memtop.records import ProbeStatus

    state = State(mode="bpf")
    box = CgroupSample("/box", 1, usage_bytes=1, pids=(7,))
    state.apply(Batch(1_000_000_000, (box, CgroupPoll(1), ProbeStatus("vmscan", "attached"))))

    def row() -> dict[str, Any]:
        return next(r for r in get_view("cgroups").document(state, Options())["rows"] if r["path"] == "/box")

    logged = ReclaimEvent(1_500_000_000, 7, 7, "hog", "memcg", 300, 1)  # one of the ten, logged
    state.apply(Batch(2_000_000_000, (logged, _totals((7, 10, 1000, 300), hist=((7, 6, 8), (7, 8, 2))))))
    r = row()
    assert (r["reclaim_episodes"], r["reclaim_stall_ns"], r["reclaim_max_ns"]) == (10, 1000, 300)
    assert r["reclaim_p99_ns"] == 300  # bucket 8 (256..511 ns), at most the longest episode
    # a tick later: five more, all short; the max stays the one seen
    state.apply(Batch(3_000_000_000, (_totals((7, 15, 1100, 300), hist=((7, 6, 13), (7, 8, 2))),)))
    r = row()
    assert (r["reclaim_episodes"], r["reclaim_stall_ns"], r["reclaim_max_ns"]) == (15, 1100, 300)
    assert r["reclaim_p99_ns"] == 300  # 2 of 15 above bucket 6: the 99th percentile is in bucket 8
    # evicted from the kernel's LRU map, counting again from zero: all three are new
    state.apply(Batch(4_000_000_000, (_totals((7, 3, 60, 20), hist=((7, 4, 3),)),)))
    assert row()["reclaim_episodes"] == 18 and row()["reclaim_stall_ns"] == 1160
    # a process not (yet) in any cgroup: waits, then is counted unattributed, never guessed
    state.apply(Batch(5_000_000_000, (_totals((7, 3, 60, 20), (9, 4, 40, 10), hist=((7, 4, 3),)),)))
    st = state.get(CgroupsState)
    assert st.unattributed == 0 and row()["reclaim_episodes"] == 18
    state.apply(Batch(16_000_000_000, (CgroupPoll(1),)))
    assert st.unattributed == 4 and row()["reclaim_episodes"] == 18


def test_held_files_follow_the_open_file_limit_as_it_is_raised(tmp_path: Path) -> None:
    """The held files are a quarter of the soft open-file limit, read again when it moves: made
    under a service's low limit and raised after (as the /proc reader raises it when it loads),
    they hold more; past the limit a file is still read, opened for the read."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1024:
        pytest.skip(f"the soft open-file limit is {soft}: nothing to raise it back to")
    files = []
    for i in range(80):
        f = tmp_path / f"memory.usage_in_bytes.{i}"
        f.write_text(f"{i}\n")
        files.append(str(f))
    held: cgroupfs.HeldFiles | None = None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        held = cgroupfs.HeldFiles()
        assert held.max_open == 64
        assert [held.read(f) for f in files[:70]] == [f"{i}\n" for i in range(70)]
        assert len(held) == 64  # the 6 past the limit read all the same, not held
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert held.read(files[70]) == "70\n"
        assert held.max_open == min(2048, soft // 4) and len(held) == 65
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if held is not None:
            held.close()


def test_a_cgroup_read_in_full_every_tick_has_those_files_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cgroup whose usage moved twice within ``full_every`` ticks is read in full at each tick
    it moves: its limit, events and memory.stat files are then held open and re-read with
    pread, not opened at every such tick, and what they say is what each tick's sample says;
    once it stops moving they are closed within ``full_every`` ticks."""
    probe = v2_probe(tmp_path)
    probe.full_every = 6
    app = tmp_path / "cg" / "system.slice" / "app.service"
    app_path = "/system.slice/app.service"
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if str(path).startswith(str(app) + "/"):
            opened.append(os.path.basename(str(path)))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", counting_open)

    def grow(mib: int) -> CgroupSample:
        # written in place, as the kernel's files change (a held descriptor reads the new text)
        (app / "memory.current").write_text(f"{mib * MiB}\n")
        (app / "memory.stat").write_text(V2_STAT.replace("anon 41943040", f"anon {(mib - 20) * MiB}"))
        (app / "memory.events").write_text(
            f"low 0\nhigh {mib}\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n"
        )
        return next(r for r in probe.poll() if isinstance(r, CgroupSample) and r.path == app_path)

    probe.poll()
    grow(65)  # its first move: read with the files opened for the read
    assert "memory.stat" in opened and "memory.max" in opened
    probe.poll()  # a tick it holds still
    opened.clear()
    grow(66)  # moved again within full_every ticks: held from now on
    assert "memory.stat" in opened
    opened.clear()
    for mib in (67, 68, 69, 70):
        s = grow(mib)
        assert s.usage_bytes == mib * MiB and dict(s.stat)["anon"] == (mib - 20) * MiB
        assert dict(s.events)["high"] == mib
        probe.poll()  # every other tick
    assert opened == [], "a cgroup read in full at every move opened its files again"
    assert any(p.startswith(str(app)) for p in probe._full_held._fds)  # noqa: SLF001
    for _ in range(probe.full_every + 1):  # quiet again: a full read once in full_every ticks
        probe.poll()
    assert not any(p.startswith(str(app)) for p in probe._full_held._fds)  # noqa: SLF001
    probe.close()
    assert len(probe._full_held) == 0  # noqa: SLF001


def test_members_are_read_again_when_the_usage_moved_and_a_task_came_or_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cgroup's members change by a fork, an exit or a move into it. Between walks they are
    read again when its usage moved and /proc/loadavg says a task was created (the last pid
    moved) or exited (the count of tasks moved) since they were last read; a move alone shows
    at the next walk, as it does in a cgroup whose usage holds still."""
    probe = v2_probe(tmp_path)
    probe._real_tree = True  # noqa: SLF001 - the machine's rule, on a fixture tree and loadavg
    loadavg = tmp_path / "loadavg"
    probe._loadavg_path = str(loadavg)  # noqa: SLF001
    app = tmp_path / "cg" / "system.slice" / "app.service"
    app_path = "/system.slice/app.service"
    reads: list[str] = []
    real = cgroupfs.read_procs

    def counted(d: str, held: cgroupfs.HeldFiles | None = None) -> tuple[int, ...]:
        reads.append(d)
        return real(d, held)

    monkeypatch.setattr(cgroupfs, "read_procs", counted)

    def tick(usage_mib: int, tasks: str) -> tuple[int, ...]:
        loadavg.write_text(f"0.00 0.00 0.00 {tasks}\n")
        (app / "memory.current").write_text(f"{usage_mib * MiB}\n")
        reads.clear()
        probe.poll()
        return probe._last[app_path].pids  # noqa: SLF001

    assert probe.walk_every == 5  # polls 1, 5 and 10 are walks: every cgroup's members read
    assert tick(64, "1/100 500") == (4242, 4243)
    (app / "cgroup.procs").write_text("4242\n4243\n4244\n")
    assert tick(65, "1/100 500") == (4242, 4243) and str(app) not in reads  # no task came or went
    assert tick(66, "1/100 501") == (4242, 4243, 4244) and str(app) in reads  # a task created
    (app / "cgroup.procs").write_text("4242\n4244\n")
    assert tick(67, "1/99 501") == (4242, 4244) and str(app) in reads  # a task exited
    assert tick(67, "1/99 501") == (4242, 4244) and str(app) in reads  # poll 5, a walk
    (app / "cgroup.procs").write_text("4242\n4244\n4245\n")
    assert tick(68, "1/99 501") == (4242, 4244) and str(app) not in reads  # moved in, no task came
    assert tick(68, "1/98 501") == (4242, 4244) and str(app) not in reads  # an exit, usage held still
    assert tick(69, "1/98 501") == (4242, 4244, 4245) and str(app) in reads  # that exit, since read
    (app / "cgroup.procs").write_text("4242\n4244\n4245\n4246\n")
    assert tick(70, "1/98 501") == (4242, 4244, 4245) and str(app) not in reads
    assert tick(70, "1/98 501") == (4242, 4244, 4245, 4246) and str(app) in reads  # poll 10, a walk


def test_a_held_file_that_refuses_pread_is_read_as_it_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regular file whose pread fails with ESPIPE (debugfs's simple attributes) is read whole
    by opening it, then and from then on, not held; another error is no text, as before."""
    import errno

    f = tmp_path / "stored_pages"
    f.write_text("42\n")
    real = os.pread
    refusing = {"errno": errno.ESPIPE}

    def pread(fd: int, n: int, off: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}") == str(f):  # the file under test (f, as it is now)
            raise OSError(refusing["errno"], os.strerror(refusing["errno"]))
        return real(fd, n, off)

    monkeypatch.setattr(os, "pread", pread)
    held = cgroupfs.HeldFiles()
    assert held.read(str(f)) == "42\n"
    assert len(held) == 0
    f.write_text("43\n")
    assert held.read(str(f)) == "43\n" and len(held) == 0
    other = tmp_path / "memory.current"
    other.write_text("7\n")
    f = other
    refusing["errno"] = errno.EIO
    assert held.read(str(other)) is None and len(held) == 0
    held.close()


def test_held_files_dropped_by_directory(tmp_path: Path) -> None:
    """A cgroup gone closes its own held files, and only those (found by its directory)."""
    held = cgroupfs.HeldFiles()
    dirs = [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "ab"]
    for d in dirs:
        d.mkdir()
        for name in ("memory.current", "memory.pressure"):
            (d / name).write_text("1\n")
            assert held.read(str(d / name)) == "1\n"
    assert len(held) == 6
    held.drop_under(str(dirs[0]))
    assert len(held) == 4
    held.drop_under(str(dirs[0]))  # nothing held there any more
    held.drop(str(dirs[1] / "memory.current"))
    assert len(held) == 3
    held.drop_under(str(dirs[1]))
    assert len(held) == 2
    (dirs[2] / "memory.current").write_text("2\n")
    assert held.read(str(dirs[2] / "memory.current")) == "2\n"  # still held, read anew
    held.close()
    assert len(held) == 0


V1_STAT_TEXT = "".join(
    f"{name} {i * 4096}\n"
    for i, name in enumerate(
        ["cache", "rss", "rss_huge", "shmem", "mapped_file", "dirty", "writeback", "pgfault"]
        + ["hierarchical_memory_limit", "total_cache", "total_rss", "total_shmem", "total_dirty"]
        + ["total_writeback", "total_mapped_file", "total_pgfault", "total_pgmajfault"]
        + ["total_inactive_anon", "total_active_anon", "total_inactive_file", "total_active_file"]
    )
)


def wanted_of(text: str, layouts: cgroupfs.FlatLayouts) -> dict[str, int]:
    return {k: v for k, v in cgroupfs._flat_keyed(text).items() if k in layouts.wanted}  # noqa: SLF001


@pytest.mark.parametrize(
    ("later", "matched"),
    [
        (V1_STAT_TEXT.replace("total_rss 40960", "total_rss 99").replace("rss 4096", "rss 7"), True),
        (V1_STAT_TEXT, True),
        (V1_STAT_TEXT.replace("pgfault 28672", "pgfault x"), True),  # a name not read
        # another layout, or a text _flat_keyed reads otherwise: a line more, one less, a value
        # not digits, a sign, a line split by a vertical tab, a duplicate, no newline at the end
        (V1_STAT_TEXT + "total_rss 5\n", False),
        (V1_STAT_TEXT.replace("rss_huge 8192\n", ""), False),
        (V1_STAT_TEXT.replace("total_rss 40960", "total_rss x"), False),
        (V1_STAT_TEXT.replace("total_rss 40960", "total_rss -4"), False),
        (V1_STAT_TEXT.replace("pgfault 28672", "pgfault 1\x0btotal_rss 3"), False),
        (V1_STAT_TEXT.replace("cache 0", "total_cache 7"), False),
        (V1_STAT_TEXT.rstrip("\n"), False),
    ],
)
def test_memory_stat_by_its_layout_gives_what_a_line_by_line_parse_gives(later: str, matched: bool) -> None:
    """memory.stat read again is matched whole against the layout of a read before (its wanted
    figures the groups); what that match takes gives the figures _flat_keyed gives, and any
    other text is parsed line by line (and makes a layout of its own)."""
    layouts = cgroupfs.FlatLayouts(frozenset(k1 for _, k1 in cgroupfs.STAT_NAMES.values() if k1))
    assert layouts.parse(V1_STAT_TEXT) == wanted_of(V1_STAT_TEXT, layouts)
    (pattern, _names) = layouts._layouts[0]  # noqa: SLF001
    assert (pattern.fullmatch(later) is not None) == matched
    assert layouts.parse(later) == wanted_of(later, layouts)
    assert layouts.parse(V1_STAT_TEXT) == wanted_of(V1_STAT_TEXT, layouts)  # the first layout kept


def test_memory_stat_layouts_of_two_hierarchies_are_both_kept() -> None:
    layouts = cgroupfs.FlatLayouts(frozenset(k2 for k2, _ in cgroupfs.STAT_NAMES.values() if k2), keep=2)
    other = "anon 5\nfile 6\n"
    for text in (V2_STAT, other, V2_STAT, other):
        assert layouts.parse(text) == wanted_of(text, layouts)
    assert len(layouts._layouts) == 2  # noqa: SLF001
    assert layouts.parse("") == {} and layouts.parse(None) == {}


def test_v1_limits_unlimited_in_memory_stat_are_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v1 memory.stat's hierarchical limits are the lowest of the cgroup's and its ancestors':
    unlimited there, the cgroup's own limit files (which would say as much) are not read;
    limited there, they are, and their own figures are the cgroup's."""
    d = tmp_path / "memtop-x"
    d.mkdir()
    unlimited = "9223372036854771712"
    files = {
        "memory.usage_in_bytes": str(100 * MiB),
        "memory.limit_in_bytes": unlimited,
        "memory.soft_limit_in_bytes": unlimited,
        "memory.memsw.usage_in_bytes": str(100 * MiB),
        "memory.memsw.limit_in_bytes": unlimited,
        "memory.failcnt": "0",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        "memory.kmem.usage_in_bytes": str(MiB),
        "memory.stat": f"rss 2\nhierarchical_memory_limit {unlimited}\n"
        f"hierarchical_memsw_limit {unlimited}\ntotal_rss 2\n",
    }
    for k, v in files.items():
        (d / k).write_text(v + "\n")
    read: list[str] = []
    real = cgroupfs.read_text

    def counted(path: str, *args: Any, **kwargs: Any) -> str | None:
        read.append(os.path.basename(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(cgroupfs, "read_text", counted)
    r = cgroupfs.read_memory(1, str(d))
    assert r.limit_bytes is None and r.swap_limit_bytes is None
    assert "memory.limit_in_bytes" not in read and "memory.memsw.limit_in_bytes" not in read
    assert r.stat == {"anon": 2, "kernel": MiB}  # the limits' lines are not stat figures
    # a parent's limit below (the hierarchical figures limited): the cgroup's own files say
    # its own limits, 200 and 300 MiB, above the parent's 150 and 250
    (d / "memory.limit_in_bytes").write_text(f"{200 * MiB}\n")
    (d / "memory.memsw.limit_in_bytes").write_text(f"{300 * MiB}\n")
    (d / "memory.stat").write_text(
        f"rss 2\nhierarchical_memory_limit {150 * MiB}\nhierarchical_memsw_limit {250 * MiB}\ntotal_rss 2\n"
    )
    read.clear()
    r = cgroupfs.read_memory(1, str(d))
    assert "memory.limit_in_bytes" in read and "memory.memsw.limit_in_bytes" in read
    assert r.limit_bytes == 200 * MiB and r.swap_limit_bytes == 100 * MiB
    # only the memory limit unlimited in the stat: the memsw limit file is still read
    (d / "memory.limit_in_bytes").write_text(unlimited + "\n")
    (d / "memory.stat").write_text(
        f"hierarchical_memory_limit {unlimited}\nhierarchical_memsw_limit {250 * MiB}\n"
    )
    read.clear()
    r = cgroupfs.read_memory(1, str(d))
    assert read.count("memory.memsw.limit_in_bytes") == 1 and "memory.limit_in_bytes" not in read
    assert r.limit_bytes is None and r.swap_limit_bytes is None
