"""The stand-in header cache (memtop/linux/headers.py) trusts only what is root's: no symlink followed,
nothing deleted or written outside it, foreign or loose entries rebuilt, 0755 whatever the umask,
and concurrent first starts all get one finished tree."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import ROOT, memtop_cmd

from memtop.linux import headers

VERSION = "6.1.0-9-amd64"
RELEASE = "6.18.0-test"
NOBODY = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def source_tree(root: Path, files: int = 20) -> Path:
    """A split Debian header installation (arch + common) under ``root``; returns ``root``."""
    arch = root / f"linux-headers-{VERSION}"
    common = root / "linux-headers-6.1.0-9-common"
    (arch / "include" / "generated").mkdir(parents=True)
    (arch / "include" / "generated" / "autoconf.h").write_text("#define CONFIG_X 1\n")
    (arch / "Makefile").write_text("arch\n")
    (common / "include" / "linux").mkdir(parents=True)
    (common / "include" / "linux" / "kconfig.h").write_text("/* common */\n")
    (common / "Makefile").write_text("common\n")
    for i in range(files):
        sub = common / "include" / f"d{i % 40}"
        sub.mkdir(exist_ok=True)
        (sub / f"h{i}.h").write_text(f"/* {i} */\n")
    return root


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return source_tree(tmp_path / "src")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("MEMTOP_CACHE_DIR", str(path))
    return path


def find(
    src: Path, tmp_path: Path, build: bool = True, lock_wait_s: float = headers.LOCK_WAIT_S
) -> headers.HeaderInfo:
    return headers.find_headers(
        RELEASE, src_root=src, modules_root=tmp_path / "modules", build=build, lock_wait_s=lock_wait_s
    )


def snapshot(path: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every entry under ``path`` (not following links): (mode, uid, size, link target or text)."""
    out: dict[str, tuple[int, int, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                what = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                what = Path(p).read_text()
            else:
                what = ""
            out[os.path.relpath(p, path)] = (st.st_mode, st.st_uid, st.st_size, what)
    return out


def assert_good_tree(info: headers.HeaderInfo, cache: Path) -> None:
    """``info`` names a finished tree of ours inside ``cache``, made from the sources."""
    tree = Path(info.path)
    assert info.kind == "standin" and not info.note, info
    assert tree == cache / "headers" / VERSION
    for p in (cache, cache / "headers", tree):
        st = os.lstat(p)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o755, p
    assert (tree / headers.MARKER).read_text().startswith(headers.FORMAT + "\n")
    assert (tree / "include" / "linux" / "kconfig.h").read_text() == "/* common */\n"
    assert (tree / "Makefile").read_text() == "arch\n"  # arch wins over common
    assert not (tree / "include" / "linux" / "evil.h").exists()


def test_umask_000_still_makes_0755_directories(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "var" / "cache" / "memtop"  # parents missing too
    monkeypatch.setenv("MEMTOP_CACHE_DIR", str(cache))
    old = os.umask(0)
    try:
        info = find(src, tmp_path)
    finally:
        os.umask(old)
    assert_good_tree(info, cache)
    for d in (tmp_path / "var", tmp_path / "var" / "cache"):
        assert stat.S_IMODE(os.lstat(d).st_mode) == 0o755
    for rel, (mode, uid, _size, _what) in snapshot(cache).items():
        assert uid == os.geteuid(), rel
        if stat.S_ISDIR(mode):
            assert stat.S_IMODE(mode) == 0o755, rel
        elif stat.S_ISREG(mode):
            assert stat.S_IMODE(mode) == 0o644, rel
        else:
            assert stat.S_ISLNK(mode), rel


def test_restrictive_umask_still_makes_0755_directories(src: Path, cache: Path, tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        info = find(src, tmp_path)
    finally:
        os.umask(old)
    assert_good_tree(info, cache)


def victim_dir(tmp_path: Path) -> Path:
    """A directory of another user holding a sentinel and a complete-looking planted tree."""
    victim = tmp_path / "victim"
    planted = victim / VERSION
    (planted / "include" / "linux").mkdir(parents=True)
    (planted / "include" / "linux" / "kconfig.h").write_text("#error planted\n")
    (planted / headers.MARKER).write_text(headers.FORMAT + "\nplanted\n")
    (victim / "sentinel").write_text("keep me\n")
    for p in [victim, *victim.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
    return victim


@needs_root
def test_symlinked_headers_dir_is_neither_followed_nor_deleted_through(
    src: Path, cache: Path, tmp_path: Path
) -> None:
    victim = victim_dir(tmp_path)
    before = snapshot(victim)
    cache.mkdir(mode=0o755)
    (cache / "headers").symlink_to(victim)
    info = find(src, tmp_path)
    assert_good_tree(info, cache)
    assert snapshot(victim) == before  # nothing deleted, written or used there


@needs_root
def test_symlinked_version_entry_is_replaced_not_followed(src: Path, cache: Path, tmp_path: Path) -> None:
    victim = victim_dir(tmp_path)
    before = snapshot(victim)
    (cache / "headers").mkdir(mode=0o755, parents=True)
    (cache / "headers" / VERSION).symlink_to(victim / VERSION)
    info = find(src, tmp_path)
    assert_good_tree(info, cache)
    assert snapshot(victim) == before


@needs_root
def test_symlinked_cache_dir_is_never_used_nor_touched(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = victim_dir(tmp_path)
    (victim / "headers").mkdir()
    os.chown(victim / "headers", NOBODY, NOBODY)
    before = snapshot(victim)
    link = tmp_path / "cache"
    link.symlink_to(victim)
    monkeypatch.setenv("MEMTOP_CACHE_DIR", str(link))
    info = find(src, tmp_path)
    assert info.kind == "standin" and "private" in info.note
    assert not info.path.startswith(str(link)) and not info.path.startswith(str(victim))
    assert (Path(info.path) / "include" / "linux" / "kconfig.h").read_text() == "/* common */\n"
    assert snapshot(victim) == before


def tamper_version_owner(tree: Path) -> None:
    os.chown(tree, NOBODY, NOBODY)


def tamper_version_mode(tree: Path) -> None:
    tree.chmod(0o777)


def tamper_marker_owner(tree: Path) -> None:
    os.chown(tree / headers.MARKER, NOBODY, NOBODY)


def tamper_marker_mode(tree: Path) -> None:
    (tree / headers.MARKER).chmod(0o666)


def tamper_marker_link(tree: Path) -> None:
    real = tree.parent / "marker-elsewhere"
    (tree / headers.MARKER).rename(real)
    (tree / headers.MARKER).symlink_to(real)


def tamper_old_layout(tree: Path) -> None:
    # a tree of memtop before this layout: its directories may be 0777 (made under umask 000)
    (tree / headers.MARKER).write_text("/usr/src/a\n/usr/src/b\n")


def tamper_headers_owner(tree: Path) -> None:
    os.chown(tree.parent, NOBODY, NOBODY)


def tamper_headers_mode(tree: Path) -> None:
    tree.parent.chmod(0o777)


@needs_root
@pytest.mark.parametrize(
    "tamper",
    [
        tamper_version_owner,
        tamper_version_mode,
        tamper_marker_owner,
        tamper_marker_mode,
        tamper_marker_link,
        tamper_old_layout,
        tamper_headers_owner,
        tamper_headers_mode,
    ],
)
def test_an_entry_not_ours_or_writable_by_others_is_rebuilt(
    tamper: Callable[[Path], None], src: Path, cache: Path, tmp_path: Path
) -> None:
    assert_good_tree(find(src, tmp_path), cache)
    tree = cache / "headers" / VERSION
    (tree / "include" / "linux" / "evil.h").write_text("#error planted\n")
    tamper(tree)
    assert_good_tree(find(src, tmp_path), cache)  # evil.h is gone: rebuilt, not used
    assert not [n for n in os.listdir(cache / "headers") if n.startswith((".build-", ".trash-"))]


@needs_root
def test_a_cache_dir_of_ours_that_others_may_write_is_taken_back(
    src: Path, cache: Path, tmp_path: Path
) -> None:
    assert_good_tree(find(src, tmp_path), cache)
    cache.chmod(0o777)
    (cache / "headers").rename(cache / "planted")  # as another user could, while it was 0777
    os.chown(cache / "planted", NOBODY, NOBODY)
    (cache / "headers").symlink_to(cache / "planted")
    assert_good_tree(find(src, tmp_path), cache)


@needs_root
def test_a_cache_dir_of_another_user_is_not_used(src: Path, cache: Path, tmp_path: Path) -> None:
    assert_good_tree(find(src, tmp_path), cache)
    tree = cache / "headers" / VERSION
    (tree / "include" / "linux" / "evil.h").write_text("#error planted\n")
    os.chown(cache, NOBODY, NOBODY)
    before = snapshot(cache)
    info = find(src, tmp_path)
    assert "private" in info.note and not info.path.startswith(str(cache))
    assert not (Path(info.path) / "include" / "linux" / "evil.h").exists()
    assert snapshot(cache) == before


@needs_root
def test_sources_not_root_s_are_not_used(src: Path, cache: Path, tmp_path: Path) -> None:
    bad = src / "linux-headers-6.1.0-9-common" / "include" / "d3" / "h3.h"
    os.chown(bad, NOBODY, NOBODY)
    info = find(src, tmp_path)
    assert info.kind == "missing" and str(bad) in info.hint and "uid 65534" in info.hint
    assert not (cache / "headers" / VERSION).exists()
    os.chown(bad, 0, 0)
    (src / "linux-headers-6.1.0-9-common" / "include" / "d5").chmod(0o777)
    assert find(src, tmp_path).kind == "missing"


@needs_root
def test_a_source_symlink_is_linked_by_target_only_when_the_target_is_root_s(
    src: Path, cache: Path, tmp_path: Path
) -> None:
    common = src / "linux-headers-6.1.0-9-common"
    (common / "include" / "linux" / "same.h").symlink_to("kconfig.h")
    (common / "include" / "linux" / "dangling.h").symlink_to(tmp_path / "not-yet")
    info = find(src, tmp_path)
    tree = Path(info.path)
    assert os.readlink(tree / "include" / "linux" / "same.h") == str(
        common / "include" / "linux" / "kconfig.h"
    )
    assert not os.path.lexists(
        tree / "include" / "linux" / "dangling.h"
    )  # whoever made it later would choose
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.h").write_text("#error planted\n")
    os.chown(elsewhere, NOBODY, NOBODY)
    (common / "include" / "linux" / "x.h").symlink_to(elsewhere / "x.h")
    (cache / "headers" / VERSION / headers.MARKER).write_text("stale\n")  # force a rebuild
    info = find(src, tmp_path)
    assert info.kind == "missing" and str(elsewhere) in info.hint


def test_a_build_never_waits_on_a_lock_others_hold(src: Path, cache: Path, tmp_path: Path) -> None:
    """Anyone who can open the cache directory can flock it: a start then builds privately."""
    cache.mkdir(mode=0o755)
    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        info = find(src, tmp_path, lock_wait_s=0.2)
    finally:
        os.close(fd)
    assert info.kind == "standin" and "private" in info.note and "lock" in info.note
    assert (Path(info.path) / "include" / "linux" / "kconfig.h").read_text() == "/* common */\n"
    assert not (cache / "headers" / VERSION).exists()


def test_looking_only_creates_nothing(src: Path, cache: Path, tmp_path: Path) -> None:
    info = find(src, tmp_path, build=False)
    assert info.kind == "standin" and "not built" in info.note
    assert not cache.exists()
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    info = find(src, tmp_path, build=False)
    assert "writable by others" in info.note and stat.S_IMODE(cache.stat().st_mode) == 0o777
    assert os.listdir(cache) == []


@needs_root
def test_doctor_neither_deletes_nor_writes_through_a_planted_link(tmp_path: Path) -> None:
    """`memtop doctor` on the real headers, its cache's `headers` a link to another user's
    directory holding an unfinished tree of the version it would build."""
    real = headers.find_headers(build=False)
    if real.kind != "standin" or "/headers/" not in real.path:
        pytest.skip(f"needs stand-in headers to merge, not {real.summary}")
    victim = tmp_path / "victim"
    (victim / real.version / "include").mkdir(parents=True)
    (victim / real.version / "include" / "sentinel.h").write_text("keep me\n")
    for p in [victim, *victim.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "headers").symlink_to(victim)
    before, cache_before = snapshot(victim), snapshot(cache)
    env = {**os.environ, "MEMTOP_CACHE_DIR": str(cache)}
    proc = subprocess.run(
        memtop_cmd() + ["doctor", "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    doc = json.loads(proc.stdout)
    (check,) = [c for c in doc["checks"] if c["name"] == "headers"]
    assert check["ok"], check
    assert snapshot(victim) == before and snapshot(cache) == cache_before


GATED_FIND = """
import json, os, sys, time
from pathlib import Path
from memtop.linux import headers
gate = Path(sys.argv[1])
deadline = time.monotonic() + 60
while not gate.exists() and time.monotonic() < deadline:
    time.sleep(0.005)
try:
    info = headers.find_headers(sys.argv[2], src_root=Path(sys.argv[3]), modules_root=Path(sys.argv[4]))
    print(json.dumps({"path": info.path, "note": info.note, "kind": info.kind}))
except Exception as exc:
    print(json.dumps({"error": repr(exc)}))
"""


@contextmanager
def started_together(n: int, args: list[str], gate: Path) -> Iterator[list[subprocess.Popen[str]]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GATED_FIND, str(gate), *args], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(n)
    ]
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_concurrent_first_starts_all_get_one_finished_tree(cache: Path, tmp_path: Path) -> None:
    src = source_tree(tmp_path / "src", files=4000)  # a build long enough for the starts to overlap
    gate = tmp_path / "go"
    with started_together(4, [RELEASE, str(src), str(tmp_path / "modules")], gate) as procs:
        gate.touch()
        results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert results == [{"path": str(cache / "headers" / VERSION), "note": "", "kind": "standin"}] * 4
    tree = cache / "headers" / VERSION
    assert (tree / headers.MARKER).read_text().startswith(headers.FORMAT)
    assert sum(1 for p in tree.rglob("h*.h")) == 4000
    assert os.listdir(cache / "headers") == [VERSION]  # no scratch left behind
