"""Seeking in the replay TUI goes through the app's checkpoints (save_state/restore_state): `←`,
`[` and G land on exactly the state a straight replay gives, applying few batches."""

from __future__ import annotations

from pathlib import Path

from support.ui import tick_until

from memtop.state import State
from memtop.stream.replay import Recording, ReplaySource
from memtop.ui.app import MemtopApp
from memtop.views import Options, views

PRESSURE = Path(__file__).resolve().parent.parent / "data" / "pressure.jsonl.gz"


def docs(state: State) -> dict[str, object]:
    return {name: cls().document(state, Options()) for name, cls in views().items() if name != "process"}


async def test_seeks_restore_checkpoints(tmp_path: Path) -> None:
    rec = Recording.load(PRESSURE)
    src = ReplaySource(rec, speed=1000, checkpoint_every=4)
    app = MemtopApp(src, interval_s=0.25, snapshot_dir=str(tmp_path))
    async with app.run_test(size=(160, 40)) as pilot:
        # at ×1000 a few ticks play it through
        await tick_until(app, pilot, lambda: src.at_end, "the replay at its end")
        assert src.at_end and len(src.checkpoints) == len(rec.index) // 4
        for key, back in (("left", 2), ("left", 3), ("left_square_bracket", None)):
            await pilot.press(key)
            i = src.applied - 1
            assert back is None or i == len(rec.index) - back
            assert src.last_seek_applied <= 4
            assert docs(app.state) == docs(rec.state_at(rec.index[i]))
