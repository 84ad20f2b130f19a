"""Unparked: the pending pods a session tries, kept across sessions as jobs park and wake.

We test these aspects:
- a cycle after one small change looks only at what changed, not at the parked backlog: the
  pods it tries are those of the groups not parked, in key order;
- a snapshot the tracker did not see (changes it could not follow), a snapshot built by hand
  and a lot that cleared are all handled by walking again;
- property (hypothesis): over any sequence of pods added, placed and removed, groups parked
  and woken, lots cleared and snapshots seen, skipped or built by hand, the pods it gives are
  exactly ``[p for p in pending if p.pod_group not in parked]``.
"""

from __future__ import annotations

import dataclasses

from hypothesis import example, given, settings
from hypothesis import strategies as st

from berth.scheduler.framework import unparked
from berth.scheduler.snapshot import cache, snapshots
from tests.scheduler import builders as b

_GROUPS = ("g1", "g2", "g3", "g4")
_PODS = ("a", "b", "c", "d", "e", "f")


def _simple(snap: snapshots.Snapshot, parked: dict[str, None]) -> list[str]:
    return [p.key for p in snap.pending if p.pod_group not in parked]


class _Model:
    """A cache, a parked lot and the tracker, driven as the scheduler's loop drives them."""

    def __init__(self) -> None:
        self.cache: cache.ClusterCache = b.cache_of(b.node("n1"))
        self.parked: dict[str, None] = {}
        self.touched: set[str] | None = None
        self.tracker = unparked.Unparked()

    def park(self, group: str) -> None:
        self.parked[group] = None
        if self.touched is not None:
            self.touched.add(group)

    def wake(self, group: str) -> None:
        if self.parked.pop(group, False) is None and self.touched is not None:
            self.touched.add(group)

    def clear(self) -> None:
        self.parked.clear()
        self.touched = None
        self.tracker.forget()

    def settle(self) -> None:
        if self.touched is not None:
            self.tracker.settle(self.parked, touched=self.touched)
            self.touched = set()

    def waiting(self, snap: snapshots.Snapshot) -> list[str]:
        found = self.tracker.waiting(snap, self.parked, touched=self.touched)
        self.touched = set()
        return [p.key for p in found]


def test_one_change_after_a_parked_backlog_tries_only_the_unparked() -> None:
    model = _Model()
    for i in range(20):
        model.cache.add_pod(b.pod(f"p{i:02d}", group=f"g{i:02d}"))
    first = model.cache.snapshot(b.EPOCH)
    assert model.waiting(first) == [f"default/p{i:02d}" for i in range(20)]
    for i in range(20):
        model.park(f"default/g{i:02d}")
    model.settle()  # as the lot records the session
    model.cache.add_pod(b.pod("new", group="fresh"))
    model.wake("default/g07")
    assert model.waiting(model.cache.snapshot(b.EPOCH + 1)) == ["default/new", "default/p07"]


def test_unseen_snapshots_hand_built_ones_and_a_cleared_lot_walk_again() -> None:
    model = _Model()
    model.cache.add_pod(b.pod("a", group="g1"))
    model.cache.add_pod(b.pod("b", group="g2"))
    model.waiting(model.cache.snapshot(b.EPOCH))
    model.park("default/g1")
    model.settle()
    model.cache.add_pod(b.pod("c", group="g3"))
    model.cache.snapshot(b.EPOCH + 1)  # taken for someone else: its changes go unseen here
    model.cache.add_pod(b.pod("d", group="g4"))
    snap = model.cache.snapshot(b.EPOCH + 2)
    assert model.waiting(snap) == ["default/b", "default/c", "default/d"]
    assert model.waiting(dataclasses.replace(snap)) == _simple(snap, model.parked)
    model.clear()
    assert model.waiting(model.cache.snapshot(b.EPOCH + 3)) == [
        "default/a",
        "default/b",
        "default/c",
        "default/d",
    ]


_KEYS = (*_GROUPS, "pod:a", "pod:b")
# Weighted as a scheduler sees them: most of a backlog parks, and what starts the walk again
# (a lot cleared, a snapshot unseen or built by hand) is rare, or the tracker's own updates
# would seldom be what a case checks.
_KINDS = ("add",) * 3 + ("place", "remove") + ("park",) * 4 + ("wake",) * 3
_STEPS = ("settle",) * 2 + ("seen",) * 3 + ("rare",)
_ops = st.lists(
    st.sampled_from(_KINDS + _STEPS).flatmap(
        lambda kind: (
            st.tuples(st.just(kind), st.sampled_from(_PODS), st.sampled_from((None, *_GROUPS)))
            if kind == "add"
            else st.tuples(st.just(kind), st.sampled_from(_PODS))
            if kind in ("place", "remove")
            else st.tuples(st.just(kind), st.sampled_from(_KEYS))
            if kind in ("park", "wake")
            else st.tuples(st.sampled_from(("clear", "unseen", "handmade")))
            if kind == "rare"
            else st.just((kind,))
        )
    ),
    min_size=20,
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops=_ops)
# Woken after the lot last told, with another group still parked.
@example(
    ops=[
        ("add", "a", "g1"),
        ("park", "g2"),
        ("seen",),
        ("park", "g1"),
        ("settle",),
        ("wake", "g1"),
        ("seen",),
    ]
)
def test_the_tracker_gives_what_filtering_pending_gives(ops: list[tuple[str, ...]]) -> None:
    model = _Model()
    now = b.EPOCH
    made: dict[str, tuple[str | None, str | None]] = {}  # pod name -> its group, its queue
    for op in ops:
        kind = op[0]
        if kind == "add":
            _, name, group = op
            # A plain pod with a queue makes a group of one (pod:<name>); without, none.
            queue = "q" if group is None and name in ("a", "b") else None
            made[name] = (group, queue)
            model.cache.add_pod(b.pod(name, group=group, queue=queue))
        elif kind == "place":
            if op[1] in made:
                group, queue = made[op[1]]
                model.cache.update_pod(b.pod(op[1], group=group, queue=queue, node="n1"))
        elif kind == "remove":
            made.pop(op[1], None)
            model.cache.remove_pod(f"default/{op[1]}")
        elif kind == "park":
            model.park(f"default/{op[1]}")
        elif kind == "wake":
            model.wake(f"default/{op[1]}")
        elif kind == "settle":
            model.settle()
        elif kind == "clear":
            model.clear()
        else:
            now += 1
            snap = model.cache.snapshot(now)
            if kind == "unseen":
                continue
            if kind == "handmade":
                snap = dataclasses.replace(snap)
            assert model.waiting(snap) == _simple(snap, model.parked)
