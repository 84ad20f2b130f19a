"""Admission's reading of pods that are none of its business (``Admission.observe_pod``).

The informer tells admission every pod it sees, in scheduler mode too; a pod with no scheduling
gate and no ``admitted-node`` marker, that admission does not know (held when last seen, with a
pending allocation, to be sent back), is left after a cheap look (``unmarked_key``) instead of
a full reading. We test these aspects:

- hypothesis: for any pod and any admission state around it, ``observe_pod`` answers and
  changes admission's state exactly as the full reading does;
- a pod of Berth's own scheduler, unbound or bound, is not read in full, and is not kept for
  admission; a gated pod, one with the marker, and one admission held before are.
"""

from __future__ import annotations

import typing
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth.api import core, keys
from berth.kube.admission import admission
from berth.kube.admission import admission_states as states
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks, wakeups

NAMES = ("a", "b")
NAMESPACES = (None, "default", "team")
KEYS = tuple(f"{ns or 'default'}/{name}" for ns in NAMESPACES[1:] for name in NAMES)
KNOWN: core.Pod = {"metadata": {"name": "known-before"}}  # what admission kept earlier


class _Source:
    def snapshot(self) -> typing.Any:
        raise AssertionError("observe_pod takes no snapshot")


class _Sink:
    def apply(self, result: typing.Any) -> None:
        raise AssertionError("observe_pod applies nothing")

    def pod_removed(self, key: str) -> None:
        raise AssertionError("observe_pod removes nothing")


def _maybe(values: st.SearchStrategy[typing.Any]) -> st.SearchStrategy[typing.Any]:
    return st.one_of(st.just(None), values)


@st.composite
def pods(draw: st.DrawFn) -> core.Pod:
    """Pods as the informer delivers them, every field admission reads drawn from the values
    that change what it means (absent, empty, Berth's, someone else's)."""
    metadata: dict[str, typing.Any] = {"name": draw(st.sampled_from(NAMES))}
    optional: dict[str, st.SearchStrategy[typing.Any]] = {
        "namespace": st.sampled_from(NAMESPACES),
        "uid": st.sampled_from(("", "u1", "u2")),
        "deletionTimestamp": st.just("2026-01-01T00:00:00Z"),
        "ownerReferences": st.just([{"kind": "Job", "name": "j", "controller": True}]),
        "labels": st.dictionaries(
            st.sampled_from((keys.QUEUE_LABEL, keys.POD_GROUP_LABEL, keys.ADMISSION_LABEL)),
            st.sampled_from(("", "team-a", "disabled")),
        ),
        "annotations": st.dictionaries(
            st.sampled_from((keys.ADMITTED_NODE_ANNOTATION, keys.ADMITTED_AT_ANNOTATION)),
            st.sampled_from(("", "n1", "2026-01-01T00:00:00Z")),
        ),
    }
    spec: dict[str, typing.Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    spec_optional: dict[str, st.SearchStrategy[typing.Any]] = {
        "schedulerName": st.sampled_from((keys.DEFAULT_SCHEDULER_NAME, "default-scheduler")),
        "nodeName": st.sampled_from(("", "n1", "n2")),
        "schedulingGates": st.lists(
            st.sampled_from(({"name": keys.ADMISSION_GATE}, {"name": "example.com/other"})),
            max_size=2,
        ),
    }
    status: dict[str, typing.Any] = {}
    status_optional: dict[str, st.SearchStrategy[typing.Any]] = {
        "phase": st.sampled_from(("Pending", "Running", "Succeeded")),
        "conditions": st.just(
            [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        ),
    }
    for target, fields in ((metadata, optional), (spec, spec_optional), (status, status_optional)):
        for field, values in fields.items():
            value = draw(_maybe(values))
            if value is not None:
                target[field] = value
    return {"metadata": metadata, "spec": spec, "status": status}


@st.composite
def admissions(draw: st.DrawFn) -> dict[str, typing.Any]:
    """What admission may know of the pods' keys before it sees one of them again."""
    subsets = st.sets(st.sampled_from(KEYS))
    return {
        "gated": draw(subsets),
        "due": draw(subsets),
        "recreating": draw(subsets),
        "objects": draw(subsets),
        "bad": draw(subsets),
        "pinned": draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(("u1", "u2")))),
        "allocated": draw(
            st.dictionaries(
                st.sampled_from(KEYS),
                st.tuples(st.sampled_from(("", "u1", "u2")), st.sampled_from(("n1", "n2"))),
            )
        ),
    }


def nothing_known() -> dict[str, typing.Any]:
    """Admission knows none of the keys."""
    return {k: set() for k in ("gated", "due", "recreating", "objects", "bad")} | {
        "pinned": {},
        "allocated": {},
    }


def admission_knowing(known: dict[str, typing.Any]) -> admission.Admission:
    cache = cluster_cache.ClusterCache()
    made = admission.Admission(
        typing.cast(typing.Any, None),  # observe_pod sends nothing itself: it queues
        cache=cache,
        source=_Source(),
        sink=_Sink(),
        clock=clocks.VirtualClock(),
    )
    made._gated.update(known["gated"])
    made._due.update({key: (1.0, "u1", "n1") for key in known["due"]})
    made._recreating.update({key: wakeups.Wakeup() for key in known["recreating"]})
    made._objects.update({key: KNOWN for key in known["objects"]})
    made._ungating.bad.update(known["bad"])
    made._pinned.update(known["pinned"])
    for key, (uid, node) in known["allocated"].items():
        made.allocations.adopt(key, uid=uid, node=node, since=1.0)
    return made


def state(made: admission.Admission) -> dict[str, object]:
    """Everything ``observe_pod`` may change, directly or through its helpers."""
    return {
        "gated": set(made._gated),
        "due": dict(made._due),
        "recreating": set(made._recreating),
        "objects": {key: id(obj) for key, obj in made._objects.items()},
        "bad": set(made._ungating.bad),
        "pinned": dict(made._pinned),
        "allocations": {key: vars(a).copy() for key, a in made.allocations.items()},
        "jobs": made._jobs.qsize(),
        "counters": (made.gate_bypasses, made.forged_markers, made.rejected, made.sent_back),
        "through_gate": made.through_gate,
    }


def observe(made: admission.Admission, pod: core.Pod) -> object:
    try:
        return made.observe_pod(pod)
    except Exception as exc:  # the full reading's failures must be the shortcut's too
        return type(exc)


def read_in_full(made: admission.Admission, pod: core.Pod) -> object:
    with mock.patch.object(states, "unmarked_key", return_value=None):
        return observe(made, pod)


@given(pod=pods(), known=admissions())
def test_the_shortcut_answers_and_changes_what_the_full_reading_does(
    pod: core.Pod, known: dict[str, typing.Any]
) -> None:
    quick, full = admission_knowing(known), admission_knowing(known)
    assert observe(quick, pod) == read_in_full(full, pod)
    assert state(quick) == state(full)


def stream_pod(**spec: object) -> core.Pod:
    """The pod the e2e bench streams (scheduler mode): Berth's scheduler, no gate, no marker."""
    return {
        "metadata": {"name": "e2e-000001", "namespace": "default", "uid": "u1"},
        "spec": {"schedulerName": keys.DEFAULT_SCHEDULER_NAME, "containers": [], **spec},
        "status": {"phase": "Pending"},
    }


@pytest.mark.parametrize("spec", [{}, {"nodeName": "n1"}], ids=["unbound", "bound"])
def test_a_pod_of_berths_own_scheduler_is_not_read_in_full(spec: dict[str, str]) -> None:
    made = admission_knowing(nothing_known())
    with mock.patch.object(states.Observation, "of", side_effect=AssertionError("read")):
        assert made.observe_pod(stream_pod(**spec)) is False
    assert state(made) == state(admission_knowing(nothing_known()))


@pytest.mark.parametrize(
    ("pod", "known"),
    [
        (stream_pod(schedulingGates=[{"name": keys.ADMISSION_GATE}]), nothing_known()),
        (
            {
                **stream_pod(),
                "metadata": {
                    "name": "e2e-000001",
                    "namespace": "default",
                    "annotations": {keys.ADMITTED_NODE_ANNOTATION: "n1"},
                },
            },
            nothing_known(),
        ),
        (stream_pod(), nothing_known() | {"gated": {"default/e2e-000001"}}),
    ],
    ids=["gated", "admitted-marker", "held-before"],
)
def test_a_pod_admission_may_own_is_read_in_full(
    pod: core.Pod, known: dict[str, typing.Any]
) -> None:
    made = admission_knowing(known)
    with mock.patch.object(states.Observation, "of", wraps=states.Observation.of) as reading:
        made.observe_pod(pod)
    assert reading.called
