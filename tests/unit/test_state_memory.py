"""What the state keeps stays bounded (issue 36, "Performance", RssAnon): the page cache state's
per-file samples are only those its thrashing window can still need, and the window it gives is
the one a deque of every sample (the code before) gave."""

from __future__ import annotations

from collections import OrderedDict, deque
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from memtop.records import Batch
from memtop.records.pagecache import CachedFile, PagecacheActivity
from memtop.state import State
from memtop.state import pagecache as pagecache_state
from memtop.state.pagecache import (
    SAMPLES,
    WINDOW_NS,
    PagecacheState,
    Samples,
    _since,
    dev_ino,
    file_key,
    packed_len,
)

S = 1_000_000_000
Sample = tuple[int, int, int]


def reference_since(history: deque[Sample], now_ns: int) -> tuple[Sample, Sample] | None:
    """The window as the state computed it before, over a deque(maxlen=SAMPLES) of samples."""
    if len(history) < 2:
        return None
    first = history[0]
    for sample in history:
        if sample[0] > now_ns - WINDOW_NS:
            break
        first = sample
    return first, history[-1]


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 40 * S), st.integers(0, 1 << 40), st.integers(0, 1 << 40)), max_size=120
    ),
    later=st.integers(0, 60 * S),
)
def test_samples_give_the_window_a_deque_of_every_sample_gave(steps: list[Sample], later: int) -> None:
    ref: deque[Sample] = deque(maxlen=SAMPLES)
    kept = Samples()
    ts = 0
    for dt, a, b in steps:
        ts += dt  # batches come in time order
        ref.append((ts, a, b))
        kept.append(ts, a, b)
        # a view reads the window at the newest batch's time or later
        for now in (ts, ts + later):
            assert _since(kept, now) == reference_since(ref, now)
    assert len(kept) <= SAMPLES
    assert list(kept)[-2:] == list(ref)[-2:]


def test_a_file_changing_every_tick_keeps_only_the_window() -> None:
    kept = Samples()
    for t in range(600):  # ten minutes of a file changing every second
        kept.append(t * S, t, t)
    # the samples of the last 30 s and the one in force at its start
    assert len(kept) == WINDOW_NS // S + 1
    assert kept[0][0] == (599 - WINDOW_NS // S) * S


def test_values_beyond_int64_are_kept_at_its_bounds() -> None:
    kept = Samples()
    kept.append(1, (1 << 64) - 1, -(1 << 70))
    assert kept[-1] == (1, (1 << 63) - 1, -(1 << 63))


def test_page_cache_state_stays_bounded_under_churn_of_files() -> None:
    """2,000 files counted every second for ten minutes, and 500 listed ones changing: each
    file's samples are those of the window, not every change since memtop started."""
    state = State()
    pc = state.get(PagecacheState)
    files = 2000
    for t in range(1, 601):
        listed = tuple(
            CachedFile(dev=8, ino=i, path=f"/f{i}", size_bytes=1 << 20, cached_bytes=t * 4096 + i)
            for i in range(500)
        )
        activity = PagecacheActivity(
            added=t * files, deleted=t, files=tuple((8, i, t, t // 2) for i in range(files))
        )
        state.apply(Batch(t * S, (*listed, activity)))
    assert len(pc.file_counts) == files
    window_samples = WINDOW_NS // S + 1
    assert max(packed_len(h) for h in pc.file_counts.values()) <= window_samples
    assert max(len(seen.history) for seen in pc.files.values()) <= window_samples
    # and the window over them is what the counts say: 30 s of 2 added, 1 deleted … a second
    seen = pc.files[(8, 7)]
    deleted, back = pc.window(seen, 600 * S)
    assert deleted == (300 - 285) * pc.page_bytes
    assert back == 0  # nothing evicted by cachestat's account


def reference_counts(
    batches: list[tuple[int, list[tuple[int, int, int, int]]]], cap: int
) -> tuple[OrderedDict[tuple[int, int], list[Sample]], dict[tuple[int, int], tuple[int, int]]]:
    """The per-file counts as the state kept them before (an OrderedDict of (dev, ino), the
    least recently counted popped first), and the last reading's deltas."""
    counts: OrderedDict[tuple[int, int], list[Sample]] = OrderedDict()
    delta: dict[tuple[int, int], tuple[int, int]] = {}
    prev_ts = 0
    for n, (ts, files) in enumerate(batches):
        delta = {}
        for dev, ino, a, d in files:
            key = (dev, ino)
            hist = counts.pop(key, None)
            if hist is None:
                hist = [(prev_ts or ts, 0, 0)]
            pa, pd = hist[-1][1], hist[-1][2]
            if a < pa or d < pd:
                pa = pd = 0
            if n:
                delta[key] = (a - pa, d - pd)
            hist.append((ts, a, d))
            counts[key] = hist
            while len(counts) > cap:
                counts.popitem(last=False)
        prev_ts = ts
    return counts, delta


@settings(max_examples=300, deadline=None)
@given(
    readings=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from([0, 8, -1, 1 << 40]),
                st.sampled_from([0, 1, 2, 3, 5, 8, 13, (1 << 64) - 1, 1 << 64, -1]),
                st.integers(0, 50),
                st.integers(0, 50),
            ),
            max_size=12,
        ),
        max_size=12,
    ),
    cap=st.integers(1, 9),
)
def test_file_counts_keep_and_drop_what_an_ordered_dict_did(
    readings: list[list[tuple[int, int, int, int]]], cap: int
) -> None:
    """Keyed by one int, packed, in a dict: the same files, in the same order, with the same
    samples and deltas as the OrderedDict of tuples before, the least recently counted going
    first past the bound (files counted again, dropped and counted again in one reading)."""
    batches = []
    for t, files in enumerate(readings, 1):
        # a map's dump: each file once (the last of its counts)
        once = {(dev, ino): (dev, ino, a, d) for dev, ino, a, d in files}
        batches.append((t * S, sorted(once.values())))
    ref, ref_delta = reference_counts(batches, cap)
    state = State()
    pc = state.get(PagecacheState)
    with patch.object(pagecache_state, "MAX_ACTIVE_FILES", cap):
        for ts, files in batches:
            state.apply(Batch(ts, (PagecacheActivity(added=ts, deleted=0, files=tuple(files)),)))
    assert [dev_ino(k) for k in pc.file_counts] == list(ref)
    for key, hist in pc.file_counts.items():
        kept = Samples()
        kept._data = hist
        want = ref[dev_ino(key)]
        assert list(kept)[-2:] == [
            tuple(max(-(1 << 63), min(v, (1 << 63) - 1)) for v in s) for s in want[-2:]
        ]
    assert {dev_ino(k): v for k, v in pc.file_delta.items()} == ref_delta
    dt = batches[-1][0] - batches[-2][0] if len(batches) > 1 else 0
    if dt:
        assert pc.activity_rates()[0] == {k: (a * 1e9 / dt, d * 1e9 / dt) for k, (a, d) in ref_delta.items()}


@given(dev=st.integers(-(1 << 70), 1 << 70), ino=st.integers(-(1 << 70), 1 << 70))
def test_file_keys_are_one_to_one(dev: int, ino: int) -> None:
    assert dev_ino(file_key(dev, ino)) == (dev, ino)
