"""The DaemonSet of contrib/kubernetes as podman options: the container test (tests/kernel/
test_container.py) and bench/container_cost.py run memtop's image with exactly what the
DaemonSet's pod spec gives it, read from the manifest, so that the two cannot drift."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "contrib" / "kubernetes"
#: the node name the downward API would give
NODE = "memtop-test-node"
#: podman's own options: the runtime (crun refuses hybrid cgroups) and this machine's hard limits,
#: below podman's defaults, which runc cannot raise; not the DaemonSet's business
PODMAN = ["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]


def manifests() -> list[dict[str, Any]]:
    """Every object of contrib/kubernetes/*.yaml, as kubectl parses them (offline: --local)."""
    files = sorted(KUBE.glob("*.yaml"))
    assert files
    args = [a for f in files for a in ("-f", str(f))]
    out = subprocess.run(
        ["kubectl", "annotate", "--local", "-o", "json", *args, "memtop.test/parsed=yes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    docs, text, dec = [], out.stdout.strip(), json.JSONDecoder()
    while text:
        doc, end = dec.raw_decode(text)
        docs.append(doc)
        text = text[end:].strip()
    return docs


def daemonset() -> dict[str, Any]:
    (ds,) = [d for d in manifests() if d["kind"] == "DaemonSet"]
    return ds


def pod_options(ds: dict[str, Any], empty_dir: Path) -> list[str]:
    """The podman options that give a container what the DaemonSet's pod spec gives it."""
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    sc = c["securityContext"]
    opts = ["--pid=host"] if pod.get("hostPID") else []
    # the cgroup namespace: a pod's own on cgroup v2 nodes (memtop takes the host's hierarchies
    # from the mount above its namespace's root, memtop.linux.cgroupfs.find_layout)
    opts += ["--cgroupns=private"]
    opts += ["--cap-drop=ALL", *(f"--cap-add={cap}" for cap in sc["capabilities"]["add"])]
    if sc.get("seccompProfile", {}).get("type") == "Unconfined":
        opts += ["--security-opt", "seccomp=unconfined"]
    if sc.get("readOnlyRootFilesystem"):
        opts += ["--read-only"]
    for env in c.get("env", []):
        if "value" in env:
            opts += ["-e", f"{env['name']}={env['value']}"]
        elif env["valueFrom"].get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            opts += ["-e", f"{env['name']}={NODE}"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for m in c["volumeMounts"]:
        v = volumes[m["name"]]
        ro = ":ro" if m.get("readOnly") else ""
        if "emptyDir" in v:
            opts += ["--tmpfs", f"{m['mountPath']}:rw,size=64m"]
            continue
        host = v["hostPath"]["path"]
        kind = v["hostPath"].get("type", "")
        if kind == "CharDevice":
            opts += ["--device", f"{host}:{m['mountPath']}:r" if ro else f"{host}:{m['mountPath']}"]
            continue
        if not os.path.exists(host):
            # what the kubelet creates for DirectoryOrCreate: an empty directory (not on the host)
            assert kind == "DirectoryOrCreate", (host, kind)
            host = str(empty_dir)
        opts += ["-v", f"{host}:{m['mountPath']}{ro}"]
    return opts
