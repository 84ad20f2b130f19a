"""A group's view, built on every watch event of its pods without the frozen ``__init__``.

We test these aspects:
- property (hypothesis): ``implicit_group`` makes exactly the ``PodGroupInfo`` the dataclass's
  constructor makes for the pod, and ``with_members`` exactly what ``dataclasses.replace``
  makes with the counts, members and priority, for random pods and members;
- the views made that way compare, hash and print as constructed ones do, and stay frozen.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.api import keys, resources
from berth.scheduler.snapshot import ids, podgroups, pods

_NAMES = st.sampled_from(["a", "b", "c", "worker-0", "worker-1"])


@st.composite
def _pod(draw: st.DrawFn) -> pods.PodInfo:
    name = draw(_NAMES)
    phase = draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]))
    raw = {
        "metadata": {
            "name": name,
            "namespace": draw(st.sampled_from(["default", "team"])),
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {keys.QUEUE_LABEL: draw(st.sampled_from(["default", "q1"]))},
            **({"deletionTimestamp": "2026-01-01T00:01:00Z"} if draw(st.booleans()) else {}),
        },
        "spec": {
            "schedulerName": keys.DEFAULT_SCHEDULER_NAME,
            "priority": draw(st.integers(-5, 5)),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            **({"nodeName": "n1"} if draw(st.booleans()) else {}),
            **({"schedulingGates": [{"name": "g"}]} if draw(st.booleans()) else {}),
        },
        "status": {"phase": phase},
    }
    return pods.pod_info(raw)


def _constructed(pod: pods.PodInfo) -> podgroups.PodGroupInfo:
    return podgroups.PodGroupInfo(
        key=pods.implicit_group_key(pod.namespace, name=pod.name),
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        min_member=1,
        min_resources=resources.ResourceList(),
        queue=pod.queue or ids.QueueName(keys.DEFAULT_QUEUE),
        priority_class_name="",
        priority=pod.priority,
        schedule_timeout_seconds=None,
        creation_timestamp=pod.creation_timestamp,
        phase="Pending",
        implicit=True,
    )


@settings(max_examples=200, deadline=None)
@given(pod=_pod(), members=st.lists(_pod(), max_size=6), default_priority=st.integers(-3, 3))
def test_views_are_what_the_dataclass_makes(
    pod: pods.PodInfo, members: list[pods.PodInfo], default_priority: int
) -> None:
    static = podgroups.implicit_group(pod)
    assert static == _constructed(pod)
    assert vars(static) == vars(_constructed(pod))

    view = podgroups.with_members(static, members=members, default_priority=default_priority)
    # Not counted, nor asked for a priority: finished pods, and unplaced ones being deleted.
    live = [m for m in members if not m.terminal and not (m.node_name is None and m.deleting)]
    counted = dataclasses.replace(
        static,
        priority=max((m.priority for m in live), default=default_priority),
        members=tuple(sorted(m.key for m in members)),
        pending=sum(
            1
            for m in members
            if not m.terminal and m.node_name is None and not m.deleting and not m.gated
        ),
        gated=sum(
            1
            for m in members
            if not m.terminal and m.node_name is None and not m.deleting and m.gated
        ),
        placed=sum(1 for m in members if not m.terminal and m.node_name is not None),
        succeeded=sum(1 for m in members if m.phase == "Succeeded"),
        failed=sum(1 for m in members if m.phase == "Failed"),
    )
    assert view == counted
    assert vars(view) == vars(counted)
    assert hash(view) == hash(counted)
    assert repr(view) == repr(counted)


def test_a_view_stays_frozen() -> None:
    raw = {
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c"}]},
    }
    view = podgroups.with_members(
        podgroups.implicit_group(pods.pod_info(raw)), members=[pods.pod_info(raw)]
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.pending = 3  # type: ignore[misc]
