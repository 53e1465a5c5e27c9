"""The node label (memtop export --node-name): which name, and on every series."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from memtop.export.families import GaugeMetricFamily
from memtop.export.node import ENV, node_name, with_node


def test_given_then_the_environment_then_the_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "node-7")
    assert node_name("given") == "given"
    assert node_name("") == ""  # --node-name '': no label
    assert node_name(None) == "node-7"  # the DaemonSet's downward API
    monkeypatch.delenv(ENV)
    assert node_name(None) == socket.gethostname()  # on the host, its own name


def test_a_container_of_its_own_takes_pid_1s_host_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A /proc where PID 1's UTS namespace is not ours (hostPID, a host name of its own)."""
    monkeypatch.delenv(ENV, raising=False)
    proc = tmp_path / "proc"
    (proc / "self/ns").mkdir(parents=True)
    (proc / "1/ns").mkdir(parents=True)
    (proc / "1/root/etc").mkdir(parents=True)
    (proc / "self/ns/uts").symlink_to("uts:[4026531838]")
    (proc / "1/ns/uts").symlink_to("uts:[4026531999]")
    # an untrusted file: one line, printable, bounded
    (proc / "1/root/etc/hostname").write_text("worker-3\x1b[31m\nignored\n")
    assert node_name(None, str(proc)) == "worker-3[31m"
    (proc / "1/root/etc/hostname").write_text("")
    assert node_name(None, str(proc)) == socket.gethostname()


def test_every_sample_carries_it() -> None:
    g = GaugeMetricFamily("m", "help", labels=["a"])
    g.add_metric(["x"], 1.0)
    (out,) = with_node([g], "n1")
    assert [s.labels for s in out.samples] == [{"node": "n1", "a": "x"}]
    assert with_node([g], "") == [g]
