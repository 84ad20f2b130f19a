"""PlacedGroups: the index of placed groups by queue that the cache keeps for snapshots.

We test these aspects:
- a group joins its queue's entry once a member is placed, and leaves it when none is, when it
  moves to another queue (it moves with it), or when its view is gone;
- a placed group with a limit of its own or a failure mark is also under ``self_limited``, and
  leaves it when it loses both or stops being placed;
- a view taken earlier keeps what it saw, whatever changes afterwards; nothing changed gives
  the same view again;
- a snapshot knows its placed groups from the cache, and one built or replaced without them
  scans its groups once;
- property (hypothesis): after any sequence of batches of changes (as the cache's refreshes
  give them), every view equals a full scan of the groups as they were then.
"""

from __future__ import annotations

import dataclasses
import typing

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.scheduler.snapshot import ids, placedgroups, podgroups
from tests.scheduler import builders as b


def _group(
    name: str,
    *,
    queue: str = "a",
    placed: int = 1,
    limit: int | None = None,
    failure: str | None = None,
) -> podgroups.PodGroupInfo:
    info = podgroups.pod_group_info(b.pod_group(name, queue=queue))
    return dataclasses.replace(
        info, placed=placed, max_execution_seconds=limit, execution_failure=failure
    )


def _plain(index: placedgroups.PlacedGroups) -> dict[str, typing.Any]:
    """The index as plain dicts, to compare (iteration order is no contract)."""
    return {
        "by_queue": {queue: dict(found) for queue, found in index.by_queue.items()},
        "self_limited": dict(index.self_limited),
    }


def test_a_group_is_indexed_while_a_member_is_placed() -> None:
    index = placedgroups.PlacedGroupIndex()
    waiting = _group("g", placed=0)
    index.groups_changed({waiting.key: waiting})
    assert _plain(index.view()) == {"by_queue": {}, "self_limited": {}}
    running = _group("g", placed=2)
    index.groups_changed({running.key: running})
    assert dict(index.view().in_queue("a")) == {"default/g": running}
    assert dict(index.view().in_queue("b")) == {}
    done = _group("g", placed=0)
    index.groups_changed({done.key: done})
    assert _plain(index.view()) == {"by_queue": {}, "self_limited": {}}


def test_a_group_moving_queue_moves_in_the_index() -> None:
    index = placedgroups.PlacedGroupIndex()
    first, other = _group("g", queue="a"), _group("h", queue="a")
    index.groups_changed({first.key: first})
    index.groups_changed({other.key: other})
    moved = _group("g", queue="b")
    index.groups_changed({moved.key: moved})
    assert _plain(index.view())["by_queue"] == {
        "a": {"default/h": other},
        "b": {"default/g": moved},
    }
    index.groups_changed({moved.key: None})
    assert _plain(index.view())["by_queue"] == {"a": {"default/h": other}}


def test_a_limit_of_its_own_or_a_failure_mark_is_self_limited() -> None:
    index = placedgroups.PlacedGroupIndex()
    limited, marked, plain = _group("l", limit=60), _group("m", failure="ran"), _group("p")
    for group in (limited, marked, plain):
        index.groups_changed({group.key: group})
    assert dict(index.view().self_limited) == {"default/l": limited, "default/m": marked}
    unlimited = _group("l")
    index.groups_changed({unlimited.key: unlimited})
    stopped = _group("m", failure="ran", placed=0)
    index.groups_changed({stopped.key: stopped})
    assert dict(index.view().self_limited) == {}
    assert set(index.view().in_queue("a")) == {"default/l", "default/p"}


def test_an_earlier_view_keeps_what_it_saw() -> None:
    index = placedgroups.PlacedGroupIndex()
    group = _group("g", limit=60)
    index.groups_changed({group.key: group})
    before = index.view()
    assert index.view() is before  # nothing changed: the same view
    seen = _plain(before)
    index.groups_changed({group.key: None})
    index.groups_changed({ids.PodGroupKey("default/h"): _group("h", queue="b")})
    assert _plain(before) == seen
    assert index.view() is not before


def test_a_snapshot_knows_its_placed_groups_and_one_replaced_scans_once() -> None:
    cache = b.cache_of(
        b.node("n1"),
        b.queue("a"),
        b.pod("run", queue="a", node="n1"),
        b.pod("wait", queue="a"),
    )
    snap = cache.snapshot(b.EPOCH)
    assert snap.placed_index is not None
    assert list(snap.placed_groups.in_queue("a")) == ["default/pod:run"]
    replaced = dataclasses.replace(snap)
    assert replaced.placed_index is None
    assert _plain(replaced.placed_groups) == _plain(snap.placed_groups)
    assert replaced.placed_groups is replaced.placed_groups  # scanned once


_NAMES = ["g0", "g1", "g2", "g3"]
_changes = st.tuples(
    st.sampled_from(_NAMES),
    st.one_of(
        st.none(),  # the view is gone
        st.fixed_dictionaries(
            {
                "queue": st.sampled_from(["a", "b", "c"]),
                "placed": st.integers(0, 2),
                "limit": st.sampled_from([None, 60]),
                "failure": st.sampled_from([None, "ran past"]),
            }
        ),
    ),
)


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.lists(_changes, max_size=6), min_size=1, max_size=12))
def test_every_view_equals_a_full_scan(
    steps: list[list[tuple[str, dict[str, typing.Any] | None]]],
) -> None:
    index = placedgroups.PlacedGroupIndex()
    groups: dict[str, podgroups.PodGroupInfo] = {}
    taken: list[tuple[placedgroups.PlacedGroups, dict[str, typing.Any]]] = []
    for changes in steps:
        batch: dict[str, podgroups.PodGroupInfo | None] = {}  # one refresh: the last view wins
        for name, fields in changes:
            key = f"default/{name}"
            batch[key] = None if fields is None else _group(name, **fields)
        for key, group in batch.items():
            if group is None:
                groups.pop(key, None)
            else:
                groups[key] = group
        index.groups_changed(batch)
        view = index.view()
        expected = _plain(placedgroups.scan(groups))
        assert _plain(view) == expected
        taken.append((view, expected))
    for view, expected in taken:
        assert _plain(view) == expected  # later changes did not reach it
