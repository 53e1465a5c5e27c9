"""The page-cache owner's pure parts: which resident pages are sampled, and the CGROUP cell."""

from __future__ import annotations

from memtop.linux.pagecgroup import spread
from memtop.views.pagecache import cgroup_label


def test_the_sample_is_spread_over_the_resident_pages() -> None:
    vec = bytes(1 if i % 10 == 3 else 0 for i in range(1000))
    got = spread(vec, 0, 16)
    assert len(got) == 16 and all(vec[i] == 1 for i in got)
    assert got[0] == 3 and got[-1] >= 900  # from the start to the end, not the first 16
    assert spread(vec, 5000, 4) == [5003, 5253, 5503, 5753]


def test_few_resident_pages_are_sampled_once_each() -> None:
    vec = bytearray(4096)
    vec[4000] = 1
    assert spread(bytes(vec), 0, 16) == [4000]
    assert spread(bytes(4096), 0, 16) == []


def test_a_split_owner_shows_its_share() -> None:
    assert cgroup_label("/a", 16, 16) == "/a"
    assert cgroup_label("/a", 10, 16) == "/a 62% (mixed)"
    assert cgroup_label("", 0, 0) is None
