#!/usr/bin/env python3
"""`make screenshots`: an SVG of every pane and of the drill-in screen, rendered by the real app
from a recording (default tests/data/pressure.jsonl.gz, made by scripts/make_recording.py under
real memory pressure). Panes are discovered from the registry, so new panes get a screenshot
without changes here. Needs no root and no BPF: it is a replay.

``--readme`` instead puts the README's text capture in: the accepted 80×24 snapshot of the
processes pane (tests/ui/test_snapshots.py) as plain text, between the README's capture markers.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import importlib
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memtop.linux import files  # noqa: E402
from memtop.state.processes import ProcessesState  # noqa: E402
from memtop.stream.replay import Recording, ReplaySource  # noqa: E402
from memtop.ui.app import MemtopApp  # noqa: E402
from memtop.ui.panes.base import DrillIn  # noqa: E402
from memtop.ui.screens import DrillScreen  # noqa: E402

SIZE = (160, 46)
README = ROOT / "README.md"
#: the picture the README shows as text (an accepted snapshot: tests/ui/test_snapshots.py)
README_CAPTURE = ROOT / "tests/ui/__snapshots__/test_snapshots/test_pane[processes-80x24].svg"
CAPTURE_BEGIN = "<!-- capture: scripts/screenshots.py --readme writes this block -->"
CAPTURE_END = "<!-- /capture -->"
#: a text run of Rich's SVG export: its x in pixels and the terminal line it is clipped to
_SVG_TEXT = re.compile(
    r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" '
    r'clip-path="url\(#[\w-]*line-(\d+)\)">([^<]*)</text>'
)
#: the width of a cell in Rich's SVG export (0.61 of its 20 px font)
_CELL_PX = 12.2


def svg_text(svg: str) -> str:
    """The characters of a screenshot exported by Textual (Rich's SVG), line by line, without
    colours: what the terminal showed, as text."""
    lines: dict[int, list[str]] = {}
    for x, row, content in _SVG_TEXT.findall(svg):
        col = round(float(x) / _CELL_PX)
        line = lines.setdefault(int(row), [])
        text = html.unescape(content).replace("\xa0", " ")
        if len(line) < col:
            line.extend(" " * (col - len(line)))
        line[col : col + len(text)] = list(text)
    rows = range(max(lines) + 1) if lines else range(0)
    return "\n".join("".join(lines.get(i, [])).rstrip() for i in rows) + "\n"


def readme_with_capture(readme: str, capture: str) -> str:
    """``readme`` with the text between its capture markers replaced by ``capture``, fenced."""
    head, sep, rest = readme.partition(CAPTURE_BEGIN)
    _, sep2, tail = rest.partition(CAPTURE_END)
    if not sep or not sep2:
        raise SystemExit(f"{README}: the capture markers are missing")
    return f"{head}{CAPTURE_BEGIN}\n```text\n{capture}```\n{CAPTURE_END}{tail}"


def pick_pid(rec: Recording, state: Any) -> int | None:
    """The workload named in the header, else the process with the most swap, then RSS."""
    wl = rec.header.get("workloads")
    if isinstance(wl, dict) and isinstance(wl.get("hog"), int):
        return int(wl["hog"])
    rows = state.get(ProcessesState).rows
    if not rows:
        return None
    return int(max(rows, key=lambda pid: (rows[pid].sample.swap_bytes, rows[pid].sample.rss_bytes)))


async def shoot(rec: Recording, outdir: Path, at_s: float) -> list[Path]:
    written: list[Path] = []
    src = ReplaySource(rec, at_s=at_s)
    app = MemtopApp(src, interval_s=1.0)

    def save(name: str, title: str) -> None:
        svg = app.export_screenshot(title=f"memtop {title}")
        written.append(files.write_atomic(outdir / f"{name}.svg", svg, force=True))
        print(outdir / f"{name}.svg")

    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        for name in app.pane_names:
            if own_recording(name) is not None and Path(rec.path) != own_recording(name):
                continue  # drawn from its own recording (shoot_own)
            app.show_pane(name)
            await pilot.pause(0.3)
            app.redraw()
            await pilot.pause(0.3)
            pane = app.active_pane()
            save(name, pane.title if pane is not None else name)
        pid = pick_pid(rec, app.state)
        if pid is not None:
            app.show_pane(app.pane_names[0])
            app.post_message(DrillIn(pid))
            await pilot.pause(1.0)
            screen: Any = app.screen
            if isinstance(screen, DrillScreen):
                app.redraw()
                await pilot.pause(0.3)
                save("process", f"process {pid}")
                # every section of the drill-in screen, when it has them
                sections = getattr(importlib.import_module(type(screen).__module__), "SECTIONS", ())
                if hasattr(screen, "action_section"):
                    for i, sec in enumerate(sections, 1):
                        screen.action_section(i)
                        await pilot.pause(0.3)
                        app.redraw()
                        await pilot.pause(0.3)
                        save(f"process-{sec}", f"process {pid} {sec}")
            else:
                print("no drill-in screen in this build", file=sys.stderr)
    return written


def own_recording(pane: str) -> Path | None:
    """A pane newer than the pressure recording has its own: tests/data/<pane>.jsonl.gz."""
    p = ROOT / "tests/data" / f"{pane}.jsonl.gz"
    return p if p.exists() else None


async def shoot_own(pane: str, outdir: Path) -> list[Path]:
    """``pane`` from its own recording (at its end) and, for the cgroups pane, the drill-in of its
    cgroup nearest its limit."""
    path = own_recording(pane)
    assert path is not None
    rec = Recording.load(path)
    app = MemtopApp(ReplaySource(rec, at_s=rec.duration_s), interval_s=1.0, initial_pane=pane)
    written: list[Path] = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        app.redraw()
        await pilot.pause(0.3)
        written.append(
            files.write_atomic(
                outdir / f"{pane}.svg", app.export_screenshot(title=f"memtop {pane}"), force=True
            )
        )
        if pane == "cgroups":
            from memtop.ui.screens.cgroup import CgroupScreen
            from memtop.views import Options, get_view

            rows = get_view("cgroups").document(app.state, Options())["rows"]
            limited = [r for r in rows if r["limit_pct"] is not None]
            if limited:
                target = max(limited, key=lambda r: r["limit_pct"])["path"]
                app.push_screen(CgroupScreen(target, app.state))
                await pilot.pause(0.5)
                app.redraw()
                await pilot.pause(0.3)
                svg = app.export_screenshot(title=f"memtop cgroup {target}")
                written.append(files.write_atomic(outdir / "cgroup.svg", svg, force=True))
    for w in written:
        print(w)
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recording", nargs="?", default=str(ROOT / "tests/data/pressure.jsonl.gz"))
    ap.add_argument("--output-dir", default=str(ROOT / "screenshots"))
    ap.add_argument("--at", type=float, help="seconds into the recording (default: its end)")
    ap.add_argument("--readme", action="store_true", help="only refresh the README's text capture")
    args = ap.parse_args()
    if args.readme:
        capture = svg_text(README_CAPTURE.read_text())
        README.write_text(readme_with_capture(README.read_text(), capture))
        print(f"{README}: capture from {README_CAPTURE.name}", file=sys.stderr)
        return 0
    rec = Recording.load(args.recording)
    outdir = Path(args.output_dir)
    outdir.mkdir(parents=True, exist_ok=True)
    at = rec.duration_s if args.at is None else args.at
    written = asyncio.run(shoot(rec, outdir, at))
    if Path(args.recording).resolve() == (ROOT / "tests/data/pressure.jsonl.gz").resolve():
        for pane in sorted(
            p.name.removesuffix(".jsonl.gz") for p in (ROOT / "tests/data").glob("*.jsonl.gz")
        ):
            if pane not in ("pressure", "recording-1.0"):
                written += asyncio.run(shoot_own(pane, outdir))
    print(f"{len(written)} screenshots in {outdir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
