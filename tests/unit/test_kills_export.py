"""Every memory kill and the forecasts, as the exporter serves them, without a kernel: kills by
killer, reason and cgroup (the kernel's by its constraint, a userspace killer's by its rule),
forecasts absent while nothing grows, both gated on their probes measuring; the killers'
thresholds read from their command line and configuration; their reasons parsed from what they
print; the machine's forecast against the first threshold a killer kills at."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_export_cadvisor import exposition

from memtop.export.metrics import Accumulators, Options, cut_depth, families
from memtop.probes import killreasons
from memtop.probes.killreasons import earlyoom_reasons, nohang_reasons, oomd_reasons
from memtop.probes.kills import (
    KillsProbe,
    earlyoom_thresholds,
    nohang_conf_path,
    nohang_thresholds,
    oomd_thresholds,
)
from memtop.probes.oom import parse_kmsg_kill
from memtop.records import Batch, ProbeStatus, Record
from memtop.records.cgroups import CgroupSample
from memtop.records.host import MemInfo
from memtop.records.oom import KillReason, MemoryKillers, OomKill, SignalKill
from memtop.state import State
from memtop.state.oom import OomState
from memtop.views import Options as ViewOptions
from memtop.views import get_view
from memtop.views.oom import at_risk_line, signal_kill_line

MiB = 1 << 20
GiB = 1 << 30
FORECAST = "memtop_memory_exhaustion_forecast_seconds"
KILLS = "memtop_memory_kills_total"


def _apply(state: State, ts_s: float, *recs: Record) -> None:
    state.apply(Batch(int(ts_s * 1e9), recs))


def _kill(ts_s: float, pid: int, scope: str, memcg: str = "", source: str = "bpf") -> OomKill:
    return OomKill(
        ts_ns=int(ts_s * 1e9),
        victim_pid=pid,
        victim_comm="hog",
        trigger_pid=pid,
        trigger_comm="hog",
        scope=scope,
        total_vm_bytes=0,
        anon_rss_bytes=0,
        file_rss_bytes=0,
        shmem_rss_bytes=0,
        uid=0,
        oom_score_adj=0,
        memcg=memcg,
        task_memcg=memcg,
        source=source,
    )


def _sig(ts_s: float, pid: int, killer: str, sig: int = 15) -> SignalKill:
    return SignalKill(
        ts_ns=int(ts_s * 1e9),
        sig=sig,
        victim_pid=pid,
        victim_comm="hog",
        sender_pid=812,
        sender_tid=812,
        sender_comm=killer or "bash",
        killer=killer,
        rss_bytes=300 * MiB,
    )


def _attached(*probes: str) -> tuple[ProbeStatus, ...]:
    return tuple(ProbeStatus(p, "attached") for p in probes)


def _samples(state: State, opts: Options | None = None) -> dict[str, list[dict[str, str]]]:
    return exposition(list(families(state, opts or Options(), Accumulators())))[1]


Labels = tuple[tuple[str, str], ...]


def _values(state: State, name: str) -> dict[Labels, float]:
    out: dict[Labels, float] = {}
    for fam in families(state, Options(), Accumulators()):
        for s in fam.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_kills_by_killer_reason_and_cgroup() -> None:
    state = State(mode="bpf")
    _apply(state, 1, *_attached("oom", "kills"))
    # a kill from the kernel log, before memtop started: history, not counted
    _apply(state, 2, _kill(0.5, 10, "memcg", "/old", source="kmsg"))
    _apply(state, 3, _kill(3, 11, "memcg", "/a/b/c/d"), _kill(3.1, 12, "global"), _kill(3.2, 13, "cpuset"))
    _apply(state, 4, _sig(4, 14, "earlyoom"))
    _apply(state, 5, _sig(5, 15, "", sig=9))  # a shell's kill -9 of a 300 MiB process: not a memory kill
    got = _values(state, KILLS)
    want: dict[Labels, float] = {
        (("cgroup", ""), ("killer", ""), ("reason", "")): 0.0,  # the zero series
        (("cgroup", "/a/b/c"), ("killer", "kernel"), ("reason", "memcg")): 1.0,  # cut at depth 3
        (("cgroup", ""), ("killer", "kernel"), ("reason", "global")): 1.0,
        (("cgroup", ""), ("killer", "kernel"), ("reason", "cpuset")): 1.0,
        (("cgroup", ""), ("killer", "earlyoom"), ("reason", "low_memory")): 1.0,
    }
    assert got == want
    # the userspace kills' series go with the kills probe when it stops measuring, the kernel's stay
    _apply(state, 6, ProbeStatus("kills", "erroring", "poll failed"))
    assert {dict(k)["killer"] for k in _values(state, KILLS)} == {"", "kernel"}
    _apply(state, 7, ProbeStatus("oom", "failed", "no BPF"))
    assert _values(state, KILLS) == {}


def test_a_userspace_killers_reason_reaches_the_row_and_its_rule_the_counter() -> None:
    state = State(mode="bpf")
    _apply(state, 1, *_attached("oom", "kills"))
    _apply(state, 2, KillReason(21, "systemd-oomd", "/x.slice: user.oomd_ooms=1", "pressure"))  # no row yet
    _apply(state, 3, _sig(3, 21, "systemd-oomd", sig=9))
    _apply(state, 4, KillReason(21, "systemd-oomd", "Killed /x.slice due to memory pressure …", "pressure"))
    (row,) = get_view("oom").document(state, ViewOptions())["signal_kills"]
    assert row["reason"] == "Killed /x.slice due to memory pressure …" and row["rule"] == "pressure"
    assert "systemd-oomd said: Killed /x.slice" in signal_kill_line(row)
    # counted when listed, before the journal said why: the rule unknown then
    assert (("cgroup", ""), ("killer", "systemd-oomd"), ("reason", "unknown")) in _values(state, KILLS)


def _meminfo(avail_mib: int, swap_total_mib: int = 0, swap_free_mib: int = 0) -> MemInfo:
    return MemInfo(
        total_bytes=24 * GiB,
        free_bytes=avail_mib * MiB,
        available_bytes=avail_mib * MiB,
        buffers_bytes=0,
        cached_bytes=0,
        swap_total_bytes=swap_total_mib * MiB,
        swap_free_bytes=swap_free_mib * MiB,
    )


def test_forecasts_absent_while_nothing_grows_and_gated_on_their_probes() -> None:
    state = State(mode="bpf")
    _apply(state, 1, *_attached("procfs", "cgroups"))
    for t in range(3):  # a flat machine, a memcg growing 10 MiB/s toward 200 MiB
        cg = CgroupSample(
            path="/grow",
            version=1,
            usage_bytes=(50 + 10 * t) * MiB,
            limit_bytes=200 * MiB,
            swap_bytes=0,
            swap_limit_bytes=0,
        )
        _apply(state, 2 + t, _meminfo(20000), cg)
    got = _values(state, FORECAST)
    want: dict[Labels, float] = {(("cgroup", "/grow"), ("killer", "kernel")): 13.0}
    assert got == want  # 130 MiB left at 10 MiB/s
    _apply(state, 5, ProbeStatus("cgroups", "erroring", "poll failed"))
    assert _values(state, FORECAST) == {}  # never a stale forecast
    # the machine: falling 100 MiB/s, 10 GiB available: 0 at 102.4 s
    state = State(mode="bpf")
    _apply(state, 1, *_attached("procfs", "cgroups"))
    for t in range(3):
        _apply(state, 6 + t, _meminfo(10240 - 100 * t))
    ((labels, v),) = _values(state, FORECAST).items()
    assert dict(labels) == {"cgroup": "", "killer": "kernel"} and v == pytest.approx((10240 - 200) / 100)


def test_machine_forecast_against_the_first_killers_threshold() -> None:
    state = State(mode="bpf")
    _apply(state, 1, *_attached("procfs", "kills"))
    # earlyoom -m 10 -s 100 (no swap here: its swap condition always holds): SIGTERM at 10 % of
    # 24 GiB; systemd-oomd at 90 % used: 10 % free too, but also of swap, which there is none of
    killers = (
        ("earlyoom", 812, 25.0, 100.0, 0, 0, 0.0, "cmdline"),
        ("systemd-oomd", 640, 10.0, 10.0, 0, 0, 60.0, "oomd.conf"),
    )
    _apply(state, 2, MemoryKillers(killers=killers))
    for t in range(3):
        _apply(state, 3 + t, _meminfo(10240 - 100 * t))
    f = state.get(OomState).forecasts[""]
    threshold = 24 * GiB // 4
    assert f.killer == "earlyoom" and f.threshold_bytes == threshold
    assert f.seconds_left == pytest.approx(((10240 - 200) * MiB - threshold) / (100 * MiB))
    (risk,) = get_view("oom").document(state, ViewOptions())["at_risk"]
    assert risk["killer"] == "earlyoom" and risk["threshold_bytes"] == threshold
    assert at_risk_line(risk).startswith("the machine (MemAvailable to earlyoom's 6.0G): 39.0s left")
    ((labels, _),) = _values(state, FORECAST).items()
    assert dict(labels) == {"cgroup": "", "killer": "earlyoom"}
    # the kills probe stopped reading them: the thresholds are no longer forecast against
    _apply(state, 5.5, ProbeStatus("kills", "erroring", "poll failed"))
    assert state.get(OomState).forecasts[""].killer == "kernel"
    _apply(state, 5.6, ProbeStatus("kills", "attached"))
    # a killer whose swap condition is not coming (swap free and not falling) will not kill: the
    # kernel's forecast then
    _apply(state, 6, MemoryKillers(killers=(("earlyoom", 812, 25.0, 10.0, 0, 0, 0.0, "cmdline"),)))
    for t in range(3):
        _apply(state, 7 + t, _meminfo(10240 - 100 * t, swap_total_mib=4096, swap_free_mib=4096))
    assert state.get(OomState).forecasts[""].killer == "kernel"


def test_cut_depth() -> None:
    assert cut_depth("/a/b/c/d", 3) == "/a/b/c"
    assert cut_depth("/a", 3) == "/a"
    assert cut_depth("/a/b", 0) == "/"


def test_earlyoom_and_oomd_thresholds() -> None:
    assert earlyoom_thresholds(["earlyoom"]) == (10.0, 10.0, 0, 0)  # its defaults
    assert earlyoom_thresholds(["earlyoom", "-r", "0", "-m", "12.5,6", "-s", "100", "--prefer", "-m9"]) == (
        12.5,
        100.0,
        0,
        0,
    )
    assert earlyoom_thresholds(["earlyoom", "-m5", "-M", "409600,204800"]) == (5.0, 10.0, 409600, 0)
    assert earlyoom_thresholds(["earlyoom", "-S", "1024"]) == (10.0, 100.0, 0, 1024)
    assert oomd_thresholds([]) == (90.0, 60.0)
    conf = "[OOM]\n# a comment\nSwapUsedLimit=80%\n"
    assert oomd_thresholds([conf, "[OOM]\nDefaultMemoryPressureLimit=500‰\n"]) == (80.0, 50.0)
    assert oomd_thresholds(["[Other]\nSwapUsedLimit=10%\n", "[OOM]\nSwapUsedLimit=lots\n"]) == (90.0, 60.0)


def test_killers_reasons_parsed_from_what_they_print() -> None:
    lines = [
        "mem avail: 23141 of 24105 MiB (96.00%), swap free:    0 of    0 MiB ( 0.00%)",
        "low memory! at or below SIGTERM limits: mem 94.12%, swap 100.00%",
        'sending SIGTERM to process 4242 uid 0 "hog": badness 1000, VmRSS 345 MiB',
        "process exited after 0.1 seconds",
    ]
    (said,) = earlyoom_reasons(lines)
    assert said.victim_pid == 4242 and said.rule == "low_memory"
    assert said.reason.startswith(
        "low memory! at or below SIGTERM limits: mem 94.12%, swap 100.00%; mem avail:"
    )
    (o,) = oomd_reasons(
        [
            "Killed /user.slice/user-1000.slice/app.scope due to memory pressure for /user.slice being "
            "72.31% > 50.00% for > 20s with reclaim activity",
            "Considered 3 cgroups for killing",
        ]
    )
    assert o.cgroup == "/user.slice/user-1000.slice/app.scope" and o.rule == "pressure" and o.victim_pid == 0


def test_journal_read_through_journalctl_json_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """journald does not run on the development machines, so journalctl stands in here, printing
    journal entries in the shape ``journalctl -o json`` gives them (MESSAGE a string, or an array
    of bytes when it is not UTF-8): the killers' lines are kept, others' dropped, and a journalctl
    that does not answer is given up on (its timeout), not waited for."""
    sock = tmp_path / "socket"
    sock.touch()
    monkeypatch.setattr(killreasons, "JOURNAL_SOCKET", str(sock))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    entries = [
        {
            "SYSLOG_IDENTIFIER": "earlyoom",
            "MESSAGE": "low memory! at or below SIGTERM limits: mem 10.00%, swap 10.00%",
        },
        {"_COMM": "sshd", "MESSAGE": "Accepted publickey for root"},
        {
            "SYSLOG_IDENTIFIER": "earlyoom",
            "MESSAGE": list(b'sending SIGTERM to process 42 uid 0 "h\xffg": badness 900'),
        },
        {
            "_COMM": "systemd-oomd",
            "MESSAGE": "Killed /x.slice/y.scope due to memory used (1.0G) / total (2.0G) and swap used (3.0G) / total (3.1G) being more than 90.00%",
        },
        {"_COMM": "earlyoom", "MESSAGE": None},
    ]
    (tmp_path / "out.json").write_text("\n".join(json.dumps(e) for e in entries) + "\nnot json\n")
    journalctl = bindir / "journalctl"
    journalctl.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\ncat {tmp_path}/out.json\n')
    journalctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    lines = killreasons.journal_lines(1000.0, ("earlyoom", "systemd-oomd"))
    assert set(lines) == {"earlyoom", "systemd-oomd"}
    assert lines["earlyoom"][1] == 'sending SIGTERM to process 42 uid 0 "h\\xffg": badness 900'
    args = (tmp_path / "args").read_text().split()
    assert "--since=@1000" in args and "json" in args and args[args.index("-n") + 1] == "2000"
    said = {(s.killer, s.victim_pid, s.cgroup, s.rule) for s in killreasons.reasons(lines)}
    assert said == {("earlyoom", 42, "", "low_memory"), ("systemd-oomd", 0, "/x.slice/y.scope", "swap")}
    # one that never answers: nothing, once its timeout is up
    journalctl.write_text("#!/bin/sh\nexec sleep 60\n")
    assert killreasons.journal_lines(1000.0) == {}
    # no journald: journalctl is not even run
    sock.unlink()
    journalctl.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\n")
    assert killreasons.journal_lines(1000.0) == {} and not (tmp_path / "ran").exists()


def test_the_kernel_logs_constraint_is_the_kills_scope() -> None:
    line = "oom-kill:constraint=CONSTRAINT_{},nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=hog,pid=42,uid=0"
    assert parse_kmsg_kill(line.format("CPUSET")) == (42, "cpuset", "")
    assert parse_kmsg_kill(line.format("MEMORY_POLICY")) == (42, "mempolicy", "")
    assert parse_kmsg_kill(line.format("NONE")) == (42, "global", "")


def test_nohang_reason_from_its_real_output() -> None:
    """nohang 0.2's own output of a kill (captured from the Debian package's nohang in
    test_nohang_is_named_with_its_reason_and_thresholds), as lines and as one journal message."""
    text = (Path(__file__).resolve().parents[1] / "data" / "nohang" / "kill.txt").read_text()
    for lines in (text.splitlines(keepends=True), [text]):
        (said,) = nohang_reasons(lines)
        assert (said.killer, said.victim_pid, said.rule) == ("nohang", 3, "low_memory")
        assert said.reason == (
            "MemAvailable [9340 MiB, 38.7 %] <= soft_threshold_min_mem [9342 MiB, 38.8 %]; "
            "SwapFree [1024 MiB, 100.0 %] <= soft_threshold_min_swap [1024 MiB, - %]"
        )
    psi = [
        "Memory status that requires corrective actions:\n"
        "  MemAvailable [900 MiB, 3.7 %] <= soft_threshold_min_mem [1205 MiB, 5.0 %]\n"
        "  Current PSI metric value (45.2) >= soft_threshold_max_psi (40)\n"
        "  PSI metric value exceeded psi_excess_duration (30s) for 31.2s",
        "  PID:       77, name: hog, state: R (running)",
        "Implementing a corrective action:\n  Sending SIGKILL to the victim",
    ]
    (p,) = nohang_reasons(psi)
    assert p.victim_pid == 77 and p.rule == "pressure" and "psi_excess_duration" in p.reason
    assert nohang_reasons(["  PID: 5, name: x, badness: 9", "Thresholds is not exceeded now"]) == []


def test_nohang_thresholds_from_its_config(tmp_path: Path) -> None:
    assert (
        nohang_conf_path(["/usr/bin/python3", "/usr/sbin/nohang", "--monitor"]) == "/etc/nohang/nohang.conf"
    )
    assert nohang_conf_path(["python3", "nohang", "--monitor", "-c", "/x/n.conf"]) == "/x/n.conf"
    assert nohang_conf_path(["python3", "nohang", "--config=rel.conf", "--monitor"]) == "rel.conf"
    assert nohang_thresholds("") == (5.0, 10.0, 0, 0, 0.0)  # its defaults
    conf = (
        "# a comment: soft_threshold_min_mem = 50 %\n"
        "soft_threshold_min_mem = 1200 M\n"
        "soft_threshold_min_swap  = 25 %\n"
        "hard_threshold_min_mem = 2 %\n"
        "psi_checking_enabled = True\n"
        "soft_threshold_max_psi  = 40\n"
        "@BADNESS_ADJ_RE_NAME 1000 /// ^x$\n"
    )
    assert nohang_thresholds(conf) == (100.0, 25.0, 1200 * 1024, 0, 40.0)
    assert nohang_thresholds(conf.replace("= True", "= False"))[4] == 0.0
    # the files as the kills probe reads them: each line cleaned apart (a file cleaned whole is
    # one escaped line, and every setting in it was lost)
    (tmp_path / "oomd.conf").write_text("[OOM]\nSwapUsedLimit=75%\nDefaultMemoryPressureLimit=40%\n")
    probe = KillsProbe()
    probe.oomd_conf, probe.oomd_dropins = str(tmp_path / "oomd.conf"), (str(tmp_path / "none"),) * 3
    assert oomd_thresholds(probe._oomd_texts()) == (75.0, 40.0)
