"""memtop's own symbol reader (memtop.probes.elfsyms) and its helper process
(memtop.probes.symbols), checked against binutils (nm, addr2line, objcopy) and the kernel (a
process's own memory). The files a traced process brings may be crafted: no FIFO or device is
ever opened, and a helper that does not answer is killed in time (issue 19, item 4)."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import WORKLOADS, WaitTimeout, code_byte, function_address, wait_until

from memtop.probes import elfsyms, symbols


def build(tmp: Path, name: str, *flags: str) -> Path:
    src = WORKLOADS / name
    out = tmp / src.stem
    compiler = "g++" if src.suffix == ".cc" else "gcc"
    subprocess.run(
        [compiler, "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-o", str(out), str(src), *flags],
        check=True,
    )
    return out


class Target:
    """A running symtarget: the addresses it printed, where its executable is mapped."""

    def __init__(self, exe: Path) -> None:
        self.exe = exe
        self.proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.addrs = [int(w, 16) for w in self.proc.stdout.readline().split()[:-1]]
        self.pid = self.proc.pid
        maps = Path(f"/proc/{self.pid}/maps").read_text().splitlines()
        first = next(m for m in maps if m.split()[-1] == str(exe) and int(m.split()[2], 16) == 0)
        self.base = int(first.split("-")[0], 16)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def run() -> Iterator[Callable[[Path], Target]]:
    started: list[Target] = []

    def start(exe: Path) -> Target:
        started.append(Target(exe))
        return started[-1]

    yield start
    for t in started:
        t.stop()


def addr2line(exe: Path, vaddr: int) -> str:
    out = subprocess.run(["addr2line", "-e", str(exe), f"0x{vaddr:x}"], capture_output=True, text=True).stdout
    file, _, line = out.split(" (discriminator")[0].strip().rpartition(":")
    return f"{os.path.basename(file)}:{line}"


def nm_functions(path: Path, dynamic: bool = False) -> dict[str, int]:
    out = subprocess.run(
        ["nm", "--defined-only", *(["-D"] if dynamic else []), str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [ln.split() for ln in out.splitlines()]
    return {p[2].split("@")[0]: int(p[0], 16) for p in rows if len(p) == 3 and p[1] in "Tti"}


class FifoWatch:
    """Fails if anyone opens ``path`` (a FIFO) for reading while it runs: opening it for writing
    without blocking succeeds only while a reader has it open (a reader blocked in open() too)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                assert exc.errno == errno.ENXIO, exc
            else:
                self.opened = True
                os.close(fd)  # lets a blocked reader go
            time.sleep(0.005)

    def stop(self) -> bool:
        self._stop.set()
        self._thread.join()
        return self.opened


def test_open_regular_takes_regular_files_only_and_never_blocks(tmp_path: Path) -> None:
    regular = tmp_path / "file"
    regular.write_bytes(b"\x7fELF")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "to-fifo").symlink_to(fifo)
    (tmp_path / "to-file").symlink_to(regular)
    results: dict[str, bool] = {}

    def probe() -> None:  # a FIFO without a writer blocks a plain open() for good
        for name in ("file", "fifo", "to-fifo", "to-file"):
            fd = elfsyms.open_regular(str(tmp_path / name))
            results[name] = fd is not None
            if fd is not None:
                os.close(fd)
        for path in ("/dev/null", str(tmp_path), "/dev/tty0"):
            results[path] = elfsyms.open_regular(path) is not None

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout=10)
    assert not t.is_alive(), "open_regular blocked"
    assert results == {
        "file": True,
        "fifo": False,
        "to-fifo": False,
        "to-file": True,
        "/dev/null": False,
        str(tmp_path): False,
        "/dev/tty0": False,
    }


def test_functions_are_those_nm_lists(tmp_path: Path) -> None:
    exe = build(tmp_path, "symtarget.c")
    opened = elfsyms.open_elf(str(exe))
    assert opened is not None
    fd, image = opened
    try:
        mine = {name.decode(): start for start, _size, name in image.functions()}
        expected = nm_functions(exe)
        assert expected and {n: mine.get(n) for n in expected} == expected
        assert image.has_lines() and image.build_id() is not None
    finally:
        os.close(fd)
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    opened = elfsyms.open_elf(libc)
    assert opened is not None
    try:
        assert opened[1].find_function("malloc") == nm_functions(Path(libc), dynamic=True)["malloc"]
        assert opened[1].find_function("no_such_function") is None
    finally:
        os.close(opened[0])


def test_frames_of_a_live_process_match_nm_and_addr2line(
    tmp_path: Path, run: Callable[[Path], Target]
) -> None:
    t = run(build(tmp_path, "symtarget.c"))
    outer, inner = t.addrs
    nm = nm_functions(t.exe)
    assert (outer - t.base, inner - t.base) == (nm["outer_global"], nm["inner_static"])
    sym = symbols.Symbolizer(t.pid)
    frames = sym.frames([outer + 4, inner + 1, 0x10])
    # the first frame is where the stack was taken; the others are return addresses, whose line
    # is the call's (looked up at the address before)
    assert frames == (
        f"outer_global+0x4 [symtarget] {addr2line(t.exe, nm['outer_global'] + 4)}",
        f"inner_static+0x1 [symtarget] {addr2line(t.exe, nm['inner_static'])}",
        "0x10",
    )
    assert sym.broken == ""
    sym.close()


def test_cxx_names_are_demangled(tmp_path: Path, run: Callable[[Path], Target]) -> None:
    t = run(build(tmp_path, "symtarget_cxx.cc"))
    (frame,) = symbols.Symbolizer(t.pid, lines=False).frames(t.addrs[:1])
    assert frame == "memtop_test::twice(int)+0x0 [symtarget_cxx]"


def stripped_with_debuglink(tmp: Path, name: str) -> Path:
    """symtarget without any symbol table, its symbols and lines in ``name`` beside it."""
    tmp.mkdir()
    exe = build(tmp, "symtarget.c")
    subprocess.run(["objcopy", "--only-keep-debug", exe.name, name], cwd=tmp, check=True)
    subprocess.run(["strip", "--strip-all", exe.name], cwd=tmp, check=True)
    subprocess.run(["objcopy", f"--add-gnu-debuglink={name}", exe.name], cwd=tmp, check=True)
    return exe


def test_debuglink_file_gives_names_and_lines(tmp_path: Path, run: Callable[[Path], Target]) -> None:
    exe = stripped_with_debuglink(tmp_path / "good", "symtarget.debug")
    t = run(exe)
    inner = t.addrs[1]
    debug_nm = nm_functions(exe.with_name("symtarget.debug"))
    assert inner - t.base == debug_nm["inner_static"]
    expected_line = addr2line(exe.with_name("symtarget.debug"), debug_nm["inner_static"])
    assert symbols.Symbolizer(t.pid).frames([inner]) == (f"inner_static+0x0 [symtarget] {expected_line}",)


@pytest.mark.parametrize("debug", ["fifo", "fifo in .debug", "wrong crc"])
def test_a_crafted_debuglink_is_ignored_without_blocking(
    debug: str, tmp_path: Path, run: Callable[[Path], Target]
) -> None:
    """The issue's attack: the debuglink names a FIFO (beside the binary, in .debug/), or a file
    that is not the one linked. The lookup answers (names from the binary alone: none, it is
    stripped), nothing opens the FIFO, and the helper is not timed out."""
    exe = stripped_with_debuglink(tmp_path / "t", "symtarget.debug")
    debug_file = exe.with_name("symtarget.debug")
    fifos = []
    if debug == "wrong crc":
        with debug_file.open("ab") as f:
            f.write(b"\0")
    else:
        debug_file.unlink()
        os.mkfifo(debug_file)
        fifos.append(debug_file)
        if debug == "fifo in .debug":
            (exe.parent / ".debug").mkdir()
            os.mkfifo(exe.parent / ".debug" / "symtarget.debug")
            fifos.append(exe.parent / ".debug" / "symtarget.debug")
    t = run(exe)
    watches = [FifoWatch(f) for f in fifos]
    sym = symbols.Symbolizer(t.pid)
    frames = sym.frames([t.addrs[1]])
    assert not any(w.stop() for w in watches), "a FIFO was opened"
    assert sym.broken == "", sym.broken
    assert frames == (f"0x{t.addrs[1]:x} [symtarget]",)


def test_build_id_debug_file_in_the_process_root(tmp_path: Path) -> None:
    """/usr/lib/debug/.build-id/xx/yyyy.debug, looked up under the process's root."""
    exe = stripped_with_debuglink(tmp_path / "t", "other-name.debug")
    opened = elfsyms.open_elf(str(exe))
    assert opened is not None
    fd, image = opened
    bid = image.build_id()
    assert bid is not None
    where = tmp_path / "root" / "usr/lib/debug/.build-id" / bid[:2] / f"{bid[2:]}.debug"
    where.parent.mkdir(parents=True)
    shutil.copy(exe.with_name("other-name.debug"), where)
    exe.with_name("other-name.debug").unlink()  # only the build-id path can find it now
    mod = elfsyms.load_module(fd, image, "/t/symtarget", str(tmp_path / "root"))
    try:
        vaddr = nm_functions(where)["inner_static"]
        assert mod.lookup(vaddr) == ("inner_static", 0)
        assert mod.lines_fd is not None and mod.lines_fd != fd
    finally:
        mod.close()
    where.unlink()
    os.mkfifo(where)
    opened = elfsyms.open_elf(str(exe))
    assert opened is not None
    mod = elfsyms.load_module(opened[0], opened[1], "/t/symtarget", str(tmp_path / "root"))
    try:
        assert mod.lookup(vaddr) is None and mod.lines_fd is None
    finally:
        mod.close()


def test_minidebuginfo(tmp_path: Path) -> None:
    """Fedora-style MiniDebugInfo: the function symbols, xz-compressed in .gnu_debugdata."""
    exe = build(tmp_path, "symtarget.c")
    funcs = nm_functions(exe)
    (tmp_path / "keep").write_text("\n".join(funcs) + "\n")
    sh = subprocess.run
    sh(["objcopy", "--only-keep-debug", "symtarget", "debug"], cwd=tmp_path, check=True)
    sh(["objcopy", "-S", "--keep-symbols=keep", "debug", "mini"], cwd=tmp_path, check=True)
    sh(["strip", "--strip-all", "symtarget"], cwd=tmp_path, check=True)
    sh(["xz", "mini"], cwd=tmp_path, check=True)
    sh(["objcopy", "--add-section", ".gnu_debugdata=mini.xz", "symtarget"], cwd=tmp_path, check=True)
    opened = elfsyms.open_elf(str(exe))
    assert opened is not None
    assert opened[1].by_name.get(".symtab") is None
    mod = elfsyms.load_module(opened[0], opened[1], str(exe), "/")
    try:
        assert mod.lookup(funcs["inner_static"] + 2) == ("inner_static", 2)
    finally:
        mod.close()


def test_perf_map(tmp_path: Path) -> None:
    pm = tmp_path / "perf-1.map"
    pm.write_text("7f0000001000 40 jitted_fn\n7f0000002000 10 other one\nnot a line\n")
    mod = elfsyms.load_perf_map(str(pm))
    assert mod is not None
    assert mod.lookup(0x7F0000001010) == ("jitted_fn", 0x10)
    assert mod.lookup(0x7F0000002004) == ("other one", 4)
    assert mod.lookup(0x7F0000001040) is None
    pm.unlink()
    os.mkfifo(pm)
    assert elfsyms.load_perf_map(str(pm)) is None


def test_resolved_functions_are_the_code_the_process_runs(
    tmp_path: Path, run: Callable[[Path], Target]
) -> None:
    """memleak's uprobe targets: the helper's file offset and code are what the kernel shows at
    the function in the process's memory."""
    t = run(build(tmp_path, "symtarget.c"))
    libc = next(
        ln.split()[-1] for ln in Path(f"/proc/{t.pid}/maps").read_text().splitlines() if "libc.so" in ln
    )
    found = symbols.resolve_functions(t.pid, libc, ["malloc", "free", "no_such_function"])
    assert isinstance(found["no_such_function"], str)
    for name in ("malloc", "free"):
        where = found[name]
        assert not isinstance(where, str), where
        path, offset, code, base = where
        assert path == f"/proc/{t.pid}/root{libc}"
        with open(libc, "rb") as f:
            f.seek(offset)
            assert f.read(16) == code[base : base + 16]
        addr = function_address(t.pid, "libc.so", name)
        assert bytes(code_byte(t.pid, addr + i) for i in range(16)) == code[base : base + 16]


HANGING_HELPER = """
import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "600"])
open(sys.argv[1], "w").write(f"{os.getpid()} {child.pid}")
sys.stdin.readline()
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """``pid`` has exited (a zombie counts: it runs no more)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int) -> bool:
    """True once ``pid`` has exited (the helper's kill is awaited, with the bound of every wait)."""
    try:
        wait_until(lambda: gone(pid), f"pid {pid} gone")
    except WaitTimeout:
        return False
    return True


def hanging_helper(tmp_path: Path) -> tuple[symbols.SymbolHelper, Path]:
    """A helper that reads the request and never answers, with a child of its own."""
    pids = tmp_path / "pids"
    return symbols.SymbolHelper([sys.executable, "-c", HANGING_HELPER, str(pids)]), pids


def test_a_helper_that_does_not_answer_is_killed_in_time(tmp_path: Path) -> None:
    helper, pids = hanging_helper(tmp_path)
    with pytest.raises(symbols.SymbolError, match="timed out"):
        helper.call("frames", timeout_s=1.0, pid=1, addrs=[1])
    pid, child = (int(x) for x in pids.read_text().split())
    assert wait_gone(pid) and wait_gone(child), "the helper or its child outlived the timeout"


def test_shutdown_cuts_a_waiting_lookup_short(tmp_path: Path) -> None:
    helper, pids = hanging_helper(tmp_path)
    errors: list[Exception] = []

    def lookup() -> None:
        try:
            helper.call("frames", timeout_s=60, pid=1, addrs=[1])
        except symbols.SymbolError as exc:
            errors.append(exc)

    t = threading.Thread(target=lookup, daemon=True)
    t.start()
    wait_until(pids.exists, "the helper started")
    helper.shutdown()
    t.join(timeout=5)
    assert not t.is_alive(), "shutdown did not end the lookup"
    assert errors
    pid, child = (int(x) for x in pids.read_text().split())
    assert wait_gone(pid) and wait_gone(child)


def test_the_helper_comes_back_after_shutdown(tmp_path: Path, run: Callable[[Path], Target]) -> None:
    t = run(build(tmp_path, "symtarget.c"))
    symbols.shutdown()
    assert symbols.Symbolizer(t.pid, lines=False).frames(t.addrs[:1]) == ("outer_global+0x0 [symtarget]",)


def test_the_helper_dies_with_memtop(tmp_path: Path) -> None:
    """A memtop killed outright (SIGKILL) leaves no helper behind."""
    code = (
        "import os; from memtop.probes import symbols; symbols.HELPER.call('forget', pid=1);"
        "print(open(f'/proc/self/task/{os.getpid()}/children').read(), flush=True); os.kill(os.getpid(), 9)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL
    helpers = [int(p) for p in out.stdout.split()]
    assert len(helpers) == 1 and wait_gone(helpers[0])
