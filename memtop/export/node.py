"""The node an exporter runs on: the ``node`` label every series carries (``--node-name``), so one
dashboard and one alert rule serve a whole fleet.

Without ``--node-name``: ``$MEMTOP_NODE_NAME`` (a Kubernetes DaemonSet sets it from the downward
API's ``spec.nodeName``); else, in a container that shares the host's PID namespace but not its
UTS namespace, the host's ``/etc/hostname`` as PID 1 sees it; else this process's host name."""

from __future__ import annotations

import os
import socket

from memtop.export.families import Metric
from memtop.linux.cgroupfs import read_text

#: a host name is at most 64 bytes (HOST_NAME_MAX); a Kubernetes node name at most 253
MAX_NODE_NAME = 253
ENV = "MEMTOP_NODE_NAME"


def _clean(name: str) -> str:
    """A node name as a label value: printable, no surrounding space, bounded."""
    name = "".join(c for c in name.strip() if c.isprintable())
    return name[:MAX_NODE_NAME]


def in_other_uts(proc: str = "/proc") -> bool:
    """Whether this process's UTS namespace (its host name) is not PID 1's: a container that sees
    the host's processes (hostPID) but has a host name of its own."""
    try:
        return os.readlink(os.path.join(proc, "self/ns/uts")) != os.readlink(os.path.join(proc, "1/ns/uts"))
    except OSError:
        return False


def node_name(given: str | None, proc: str = "/proc") -> str:
    """The ``node`` label's value ("" leaves the label out)."""
    if given is not None:
        return _clean(given)
    env = os.environ.get(ENV)
    if env:
        return _clean(env)
    if in_other_uts(proc):
        host = _clean((read_text(os.path.join(proc, "1/root/etc/hostname"), 4096) or "").split("\n", 1)[0])
        if host:
            return host
    return _clean(socket.gethostname())


def with_node(fams: list[Metric], node: str) -> list[Metric]:
    """The families with ``node="<node>"`` first in every sample's labels (none when ``node`` is
    ""): one label for every series of an exporter, as Prometheus' own target labels are. A label
    set shared by several samples (a cgroup's, memtop.export.metrics) stays shared, so the text
    writer still writes it once."""
    if not node:
        return fams
    shared: dict[int, dict[str, str]] = {}
    out = []
    for f in fams:
        g = Metric(f.name, f.documentation, f.type, f.unit)
        samples = []
        for s in f.samples:
            labels = shared.get(id(s.labels))
            if labels is None:
                labels = shared[id(s.labels)] = {"node": node, **s.labels}
            samples.append(s._replace(labels=labels))
        g.samples = samples
        out.append(g)
    return out
