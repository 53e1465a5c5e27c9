"""Keys on the leaks pane that belong to the whole app: Space plays and pauses a replay there as on
every other pane (Textual's Tree binds Space to open a node, and a focused widget's binding wins)."""

from __future__ import annotations

from pathlib import Path

from support.ui import settle
from textual.widgets import Tree

from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp

PRESSURE = Path(__file__).resolve().parent.parent / "data" / "pressure.jsonl.gz"


async def test_space_pauses_a_replay_on_the_leaks_tree(tmp_path: Path) -> None:
    src = ReplaySource(Recording.load(PRESSURE), speed=1, at_s=10.0)
    app = MemtopApp(src, interval_s=0.25, snapshot_dir=str(tmp_path), snapshot_format="json")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("6")
        await settle(pilot)
        tree = app.query_one("#leaks-tree", Tree)
        assert app.focused is tree
        assert not src.playing
        await pilot.press("space")
        assert src.playing
        await pilot.press("space")
        assert not src.playing
        # Enter still opens and closes a node of the tree
        if tree.cursor_node is not None and tree.cursor_node.allow_expand:
            was = tree.cursor_node.is_expanded
            await pilot.press("enter")
            assert tree.cursor_node.is_expanded != was
