"""The pod store's views: pending pods by group, and snapshots that later changes never reach."""

from __future__ import annotations

import pytest

from berth.scheduler.snapshot import cowmaps
from tests.scheduler import builders as b


def _keys(pods: object) -> list[str]:
    return [p.key for p in pods]  # type: ignore[attr-defined]


def test_the_pending_index_holds_groups_by_key_and_plain_pods_under_none() -> None:
    live = b.cache_of(
        b.node("n1"),
        b.pod_group("train", min_member=2),
        b.pod("w-1", group="train"),
        b.pod("w-0", group="train"),
        b.pod("solo", queue="default"),  # a queue alone: a group of one
    )
    index = live.snapshot(b.EPOCH).pending_index
    assert index is not None
    assert None not in index  # no plain pods: no entry for them
    with pytest.raises(KeyError):
        index[None]
    assert list(index) == ["default/pod:solo", "default/train"]
    assert _keys(index["default/train"]) == ["default/w-0", "default/w-1"]

    live.add_pod(b.pod("plain-b"))
    live.add_pod(b.pod("plain-a"))
    index = live.snapshot(b.EPOCH).pending_index
    assert index is not None
    assert list(index) == [None, "default/pod:solo", "default/train"]  # plain pods first
    assert _keys(index[None]) == ["default/plain-a", "default/plain-b"]
    assert len(index) == 3


def test_a_snapshots_waiting_pods_stay_as_they_were_taken() -> None:
    live = b.cache_of(b.node("n1"), b.pod_group("train", min_member=2), b.pod("a"), b.pod("b"))
    live.add_pod(b.pod("w-0", group="train"))
    first = live.snapshot(b.EPOCH)
    unread = sorted(p.key for p in cowmaps.in_any_order(first.pending))

    live.add_pod(b.pod("c"))
    live.add_pod(b.pod("w-1", group="train"))
    live.remove_pod("default/a")
    live.assume_pod("default/b", node="n1")
    second = live.snapshot(b.EPOCH + 1)

    # Read only now: the first snapshot still shows what waited when it was taken.
    assert sorted(p.key for p in cowmaps.in_any_order(first.pending)) == unread
    assert _keys(first.pending) == ["default/a", "default/b", "default/w-0"]
    assert first.pending_index is not None
    assert _keys(first.pending_index[None]) == ["default/a", "default/b"]
    assert _keys(first.pending_index["default/train"]) == ["default/w-0"]
    assert _keys(second.pending) == ["default/c", "default/w-0", "default/w-1"]
    assert second.pending_index is not None
    assert _keys(second.pending_index[None]) == ["default/c"]
    assert _keys(second.pending_index["default/train"]) == ["default/w-0", "default/w-1"]
    assert second.pending_changed == frozenset({None, "default/train"})
