"""Foundation: state and probes import without Textual at run time (import-linter checks the
imports themselves: pyproject.toml), headers discovery, doctor, CLI errors (records round-trip:
test_record_codec.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, memtop_cmd, wait_until


def test_state_and_probes_import_without_textual() -> None:
    code = (
        "import sys, pkgutil, importlib, memtop.state, memtop.views, memtop.probes, memtop.records\n"
        "for m in pkgutil.walk_packages(memtop.probes.__path__, 'memtop.probes.'): importlib.import_module(m.name)\n"
        "memtop.state.State(); memtop.views.views()\n"
        "assert 'textual' not in sys.modules, [m for m in sys.modules if m.startswith('textual')]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def _headers_tree(root: Path, version: str, common_name: str) -> None:
    arch = root / f"linux-headers-{version}"
    common = root / common_name
    (arch / "include" / "generated").mkdir(parents=True)
    (arch / "include" / "generated" / "autoconf.h").write_text("#define CONFIG_X 1\n")
    (arch / "arch" / "x86" / "include" / "generated").mkdir(parents=True)
    (common / "include" / "linux").mkdir(parents=True)
    (common / "include" / "linux" / "kconfig.h").write_text("/* common */\n")
    (common / "arch" / "x86" / "include" / "asm").mkdir(parents=True)
    (common / "Makefile").write_text("common\n")
    (arch / "Makefile").write_text("arch\n")


def test_headers_standin_merges_split_debian_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memtop.linux import headers

    monkeypatch.setenv("MEMTOP_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "src"
    _headers_tree(src, "6.1.0-9-amd64", "linux-headers-6.1.0-9-common")
    _headers_tree(src, "5.10.0-1-amd64", "linux-headers-5.10.0-1-common")
    info = headers.find_headers("6.18.0-test", src_root=src, modules_root=tmp_path / "modules")
    assert info.kind == "standin" and info.version == "6.1.0-9-amd64"  # the newest
    merged = Path(info.path)
    assert (merged / "include" / "linux" / "kconfig.h").read_text() == "/* common */\n"
    assert (merged / "include" / "generated" / "autoconf.h").exists()
    assert (merged / "Makefile").read_text() == "arch\n"  # arch wins over common
    assert "stand-in" in info.summary
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)  # restored to the real value afterwards
    headers.apply(info)
    assert os.environ["BCC_KERNEL_SOURCE"] == info.path


def test_headers_ubuntu_layout_and_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memtop.linux import headers

    monkeypatch.setenv("MEMTOP_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "src"
    _headers_tree(src, "5.15.0-91-generic", "linux-headers-5.15.0-91")
    info = headers.find_headers("5.15.0-91-generic", src_root=src, modules_root=tmp_path / "m")
    assert info.kind == "exact" and (Path(info.path) / "include" / "linux" / "kconfig.h").exists()
    mods = tmp_path / "m2" / "5.15.0-91-generic" / "build" / "include"
    mods.mkdir(parents=True)
    info = headers.find_headers("5.15.0-91-generic", src_root=src, modules_root=tmp_path / "m2")
    assert info.kind == "exact" and info.path.endswith("build")


def test_headers_missing_names_the_package(tmp_path: Path) -> None:
    from memtop.linux import headers

    info = headers.find_headers("6.18.0-test", src_root=tmp_path / "none", modules_root=tmp_path / "none")
    assert info.kind == "missing"
    assert "linux-headers-" in info.hint and "apt-get install" in info.hint


def test_doctor_json_reports_every_probe_tracepoint() -> None:
    from memtop.probes.registry import all_probe_classes

    proc = subprocess.run(memtop_cmd() + ["doctor", "--json"], capture_output=True, text=True, timeout=60)
    doc = json.loads(proc.stdout)
    names = {c["name"] for c in doc["checks"]}
    for cls in all_probe_classes():
        for tp in cls.tracepoints:
            assert f"tracepoint {tp}" in names
    for key in (
        "privileges",
        "tracefs",
        "BTF",
        "kprobes",
        "fentry",
        "uprobes",
        "perf events",
        "headers",
        "bcc",
        "swap",
        "cgroup",
        "PSI",
    ):
        assert key in names
    for c in doc["checks"]:
        if not c["ok"] and c["required"]:
            assert c["hint"], f"failing check {c['name']} has no hint"
    assert proc.returncode == (0 if doc["ok"] else 1)
    text = subprocess.run(memtop_cmd() + ["doctor"], capture_output=True, text=True, timeout=60).stdout
    assert "headers" in text


@pytest.mark.parametrize(
    "args, needle",
    [
        (["snapshot", "--pane", "nope", "--output", "/tmp/x.json"], "unknown pane"),
        (["--pid", "999999999"], "no process with pid"),
        (["--pid", "2"], "kernel thread"),
        (["--interval", "-1"], "positive"),
        (["snapshot", "--pane", "processes", "--output", "/tmp/x", "--after", "abc"], "not a number"),
        (["snapshot", "--pane", "processes", "--output", "/", "--force"], "directory"),
    ],
)
def test_cli_bad_input_is_one_clear_line_and_exit_2(args: list[str], needle: str) -> None:
    proc = subprocess.run(memtop_cmd() + args, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_pid_of_a_zombie_says_it_exited_not_kernel_thread() -> None:
    """A zombie has no memory fields in its status, as a kernel thread has: it exited."""

    child = subprocess.Popen([sys.executable, "-c", ""])  # not waited for: a zombie once it exits
    try:
        status = Path(f"/proc/{child.pid}/status")
        wait_until(lambda: "\nState:\tZ" in status.read_text(), "the child a zombie")
        proc = subprocess.run(
            memtop_cmd() + ["--pid", str(child.pid)], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2, proc.stderr
        assert f"pid {child.pid} has exited" in proc.stderr and "kernel thread" not in proc.stderr
    finally:
        child.wait()


def test_doctor_says_info_not_warn_for_what_memtop_does_not_need(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36, item 7: kprobes and fentry are absent here and memtop needs neither, yet doctor
    said [warn]: a new user took it for a problem to fix."""
    from memtop.headless import doctor

    monkeypatch.setattr(doctor, "_kprobes_available", lambda: False)
    monkeypatch.setattr(doctor, "_fentry_available", lambda: False)
    text, _ = doctor.report()
    lines = {line[7:].split()[0]: line[:6] for line in text.splitlines() if line.startswith("[")}
    assert lines["kprobes"] == "[info]" and lines["fentry"] == "[info]"
    assert "[warn] kprobes" not in text
    checks = {c["name"]: c for c in json.loads(doctor.report(as_json=True)[0])["checks"]}
    assert checks["kprobes"]["needed"] is False and checks["privileges"]["needed"] is True
