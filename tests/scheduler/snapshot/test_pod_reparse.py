"""Parsing a pod again from the previous version of it (``pod_info(..., previous=...)``).

We test these aspects:
- property (hypothesis): over random sequences of updates to a pod (its status, its binding,
  its labels and annotations, any part of its spec, its owners, claim statuses, bad
  quantities, values of the wrong type, tuples for lists), parsing from the previous info
  yields exactly the PodInfo a parse from scratch yields, every field and what it derived;
  also when the previous info was since changed by the cache (assumed, resolved, charged) or
  belongs to another pod;
- a status-only update or a binding reuses what was derived; a change to anything the
  scheduler reads from the spec, labels or annotations does not;
- input that is not plain JSON data (a Mapping that is no dict, a str subclass) is parsed in
  full, with the same result;
- ``pods.replace`` makes what ``dataclasses.replace`` makes, and refuses unknown fields.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.api import keys, resources
from berth.scheduler.snapshot import gpushare, ids, pods

Obj = dict[str, typing.Any]

_QUANTITY = st.sampled_from(["100m", "1", "2Gi", "500Mi", 1, 0.5, "-1", "bad", True])
_WORD = st.sampled_from(["a", "b", "default", "hi", ""])
_VALUE = _WORD | st.sampled_from([1, True, None])


def _resources() -> st.SearchStrategy[Obj]:
    names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "example.com/foo"])
    amounts = st.dictionaries(names, _QUANTITY, max_size=2)
    return st.fixed_dictionaries({}, optional={"requests": amounts, "limits": amounts})


_CONTAINER = st.fixed_dictionaries(
    {"name": st.sampled_from(["main", "side"])},
    optional={
        "image": st.sampled_from(["pause", "registry.k8s.io/pause:3.10", "docker.io/x:1"]),
        "resources": _resources(),
        "restartPolicy": st.just("Always"),
        "ports": st.lists(
            st.fixed_dictionaries(
                {"containerPort": st.just(80)}, optional={"hostPort": st.sampled_from([80, 81])}
            ),
            max_size=1,
        ),
    },
)
_TOLERATION = st.fixed_dictionaries(
    {"key": st.sampled_from(["gpu", "node.kubernetes.io/not-ready"])},
    optional={
        "operator": st.sampled_from(["Exists", "Equal"]),
        "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        "value": _WORD,
        "tolerationSeconds": st.just(300),
    },
)
_EXPR = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["zone", "kubernetes.io/hostname"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists"]),
        "values": st.lists(_WORD, max_size=2),
    }
)
_AFFINITY = st.fixed_dictionaries(
    {},
    optional={
        "nodeAffinity": st.fixed_dictionaries(
            {},
            optional={
                "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries(
                    {
                        "nodeSelectorTerms": st.lists(
                            st.fixed_dictionaries(
                                {"matchExpressions": st.lists(_EXPR, max_size=2)}
                            ),
                            max_size=2,
                        )
                    }
                ),
                "preferredDuringSchedulingIgnoredDuringExecution": st.lists(
                    st.fixed_dictionaries(
                        {
                            "weight": st.sampled_from([1, 50, 0]),
                            "preference": st.fixed_dictionaries(
                                {"matchExpressions": st.lists(_EXPR, max_size=1)}
                            ),
                        }
                    ),
                    max_size=2,
                ),
            },
        ),
        "podAntiAffinity": st.fixed_dictionaries(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": st.lists(
                    st.fixed_dictionaries(
                        {
                            "topologyKey": st.sampled_from(["kubernetes.io/hostname", ""]),
                            "labelSelector": st.fixed_dictionaries(
                                {"matchLabels": st.dictionaries(st.just("app"), _WORD, max_size=1)}
                            ),
                        }
                    ),
                    max_size=1,
                )
            }
        ),
    },
)
_SPEC_PARTS: dict[str, st.SearchStrategy[typing.Any]] = {
    "containers": st.lists(_CONTAINER, min_size=1, max_size=2)
    | st.lists(_CONTAINER, min_size=1, max_size=1).map(tuple),
    "initContainers": st.lists(_CONTAINER, max_size=2),
    "overhead": st.dictionaries(st.just("cpu"), _QUANTITY, max_size=1),
    "resources": _resources(),
    "nodeName": st.sampled_from(["n1", "n2", ""]),
    "schedulerName": st.sampled_from(["berth-scheduler", "default-scheduler"]),
    "priority": st.sampled_from([0, 7, True, "5"]),
    "priorityClassName": st.sampled_from(["hi", "missing"]),
    "preemptionPolicy": st.sampled_from(["Never", "PreemptLowerPriority"]),
    "tolerations": st.lists(_TOLERATION, max_size=2),
    "nodeSelector": st.dictionaries(st.sampled_from(["zone", "disk"]), _VALUE, max_size=2),
    "affinity": _AFFINITY,
    "schedulingGates": st.lists(st.fixed_dictionaries({"name": _WORD}), max_size=2),
    "topologySpreadConstraints": st.lists(
        st.fixed_dictionaries(
            {
                "maxSkew": st.sampled_from([1, 0]),
                "topologyKey": st.just("zone"),
                "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
                "labelSelector": st.just({"matchLabels": {"app": "a"}}),
            }
        ),
        max_size=1,
    ),
    "volumes": st.lists(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["data", "scratch"])},
            optional={
                "persistentVolumeClaim": st.fixed_dictionaries({"claimName": _WORD}),
                "ephemeral": st.just({"volumeClaimTemplate": {}}),
            },
        ),
        max_size=2,
    ),
    "resourceClaims": st.lists(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["gpu", "nic"])},
            optional={
                "resourceClaimName": _WORD,
                "resourceClaimTemplateName": st.just("tmpl"),
            },
        ),
        max_size=2,
    ),
    "schedulingGroup": st.fixed_dictionaries({"podGroupName": _WORD}),
}
_LABEL_KEYS = st.sampled_from(
    [
        "app",
        pods.QUEUE_LABEL,
        pods.GROUP_LABEL,
        pods.GROUP_LABEL_INTEROP,
        pods.RESERVATION_LABEL,
        keys.GROUP_BY_OWNER_LABEL,
    ]
)
_ANNOTATION_KEYS = st.sampled_from(
    [
        pods.GROUP_ANNOTATION_INTEROP,
        keys.GROUP_ERROR_ANNOTATION,
        keys.GROUPED_BY_ANNOTATION,
        gpushare.FRACTION_ANNOTATION,
        gpushare.MEMORY_ANNOTATION,
        gpushare.INDEX_ANNOTATION,
        "note",
    ]
)
_META_PARTS: dict[str, st.SearchStrategy[typing.Any]] = {
    "name": st.sampled_from(["p", "q"]),
    "namespace": st.sampled_from(["default", "team"]),
    "uid": st.sampled_from(["u1", "u2"]),
    "resourceVersion": st.sampled_from(["1", "2", "3"]),
    "labels": st.dictionaries(_LABEL_KEYS, _VALUE, max_size=3),
    "annotations": st.dictionaries(
        _ANNOTATION_KEYS, st.sampled_from(["0.5", "1", "2000", "0,1", "x"]), max_size=2
    ),
    "ownerReferences": st.lists(
        st.fixed_dictionaries(
            {"kind": st.just("Job"), "name": _WORD, "uid": st.just("j")},
            optional={"controller": st.booleans()},
        ),
        max_size=1,
    ),
    "creationTimestamp": st.sampled_from(["2026-11-28T10:00:00Z", "2026-11-28T10:00:01Z", "x"]),
    "deletionTimestamp": st.sampled_from(["2026-11-28T11:00:00Z"]),
}
_STATUS_PARTS: dict[str, st.SearchStrategy[typing.Any]] = {
    "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
    "startTime": st.sampled_from(["2026-11-28T10:00:02Z", "2026-11-28T10:00:03Z"]),
    "conditions": st.lists(
        st.fixed_dictionaries({"type": st.sampled_from(["PodScheduled", "Ready"])}), max_size=2
    ),
    "podIP": st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    "resourceClaimStatuses": st.lists(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["gpu", "nic"])},
            optional={"resourceClaimName": st.sampled_from(["p-gpu-x", ""])},
        ),
        max_size=2,
    ),
}
_SECTIONS = {"metadata": _META_PARTS, "spec": _SPEC_PARTS, "status": _STATUS_PARTS}


@st.composite
def _pod(draw: st.DrawFn) -> Obj:
    out: Obj = {"apiVersion": "v1", "kind": "Pod"}
    for section, parts in _SECTIONS.items():
        names = draw(st.sets(st.sampled_from(sorted(parts))))
        out[section] = {name: draw(parts[name]) for name in sorted(names)}
    out["spec"].setdefault("containers", [{"name": "main"}])
    return out


# One update: which parts change (status-only and binding updates most often, as in a watch).
_UPDATE = st.lists(
    st.sampled_from(
        [("status", name) for name in _STATUS_PARTS] * 3
        + [("spec", "nodeName")] * 3
        + [("metadata", "resourceVersion")] * 3
        + [("spec", name) for name in _SPEC_PARTS]
        + [("metadata", name) for name in _META_PARTS]
    ),
    min_size=1,
    max_size=3,
)


@st.composite
def _history(draw: st.DrawFn) -> list[Obj]:
    """A pod and its later versions, each a random update of the one before."""
    versions = [draw(_pod())]
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        source = draw(_pod())
        version = copy.deepcopy(versions[-1])
        for section, part in draw(_UPDATE):
            if part in source[section] and draw(st.booleans()):
                version[section][part] = copy.deepcopy(source[section][part])
            else:
                version[section].pop(part, None)
        versions.append(version)
    return versions


def _everything(info: pods.PodInfo) -> dict[str, typing.Any]:
    """Every field of ``info``, those equality leaves out included (not ``signature``'s
    parts twice: it is derived, and compared as a field)."""
    return {field.name: getattr(info, field.name) for field in dataclasses.fields(info)}


_CLASSES = {"hi": 1000}


def _parse(
    raw: Obj, *, previous: pods.PodInfo | None = None, group_by_owner: bool = False
) -> pods.PodInfo:
    return pods.pod_info(
        raw,
        priority_classes=_CLASSES,
        default_priority=5,
        group_queue="gq",
        group_by_owner=group_by_owner,
        previous=previous,
    )


@settings(max_examples=150, deadline=None)
@given(
    history=_history(),
    group_by_owner=st.lists(st.booleans(), min_size=7, max_size=7),
    changed_by_cache=st.lists(st.booleans(), min_size=7, max_size=7),
)
def test_parsing_from_the_previous_version_equals_parsing_from_scratch(
    history: list[Obj], group_by_owner: list[bool], changed_by_cache: list[bool]
) -> None:
    previous: pods.PodInfo | None = None
    for raw, by_owner, changed in zip(history, group_by_owner, changed_by_cache, strict=False):
        if previous is not None and changed:
            # What the cache does to a stored info: assume it, resolve its queue, charge it.
            previous = pods.replace(
                previous,
                node_name=ids.NodeName("assumed"),
                queue=ids.QueueName("other"),
                pod_group=None,
                priority=-1,
                requests=resources.ResourceList({resources.CPU: 1}),
                scheduler_name="someone",
            )
        full = _parse(raw, group_by_owner=by_owner)
        again = _parse(raw, previous=previous, group_by_owner=by_owner)
        assert _everything(again) == _everything(full)
        previous = again


def test_a_status_update_or_a_binding_reuses_what_was_derived() -> None:
    created = _pod_with(tolerations=[{"key": "gpu", "operator": "Exists"}])
    first = _parse(created)
    running = copy.deepcopy(created)
    running["metadata"]["resourceVersion"] = "2"
    running["spec"]["nodeName"] = "n1"
    running["status"] = {"phase": "Running", "startTime": "2026-11-28T10:00:02Z"}
    second = _parse(running, previous=first)
    assert second.parsed is first.parsed
    assert (second.node_name, second.phase, second.resource_version) == ("n1", "Running", "2")
    assert second.start_time is not None


@pytest.mark.parametrize(
    ("section", "part", "value"),
    [
        ("spec", "tolerations", [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        ("spec", "containers", [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]),
        ("spec", "schedulingGates", []),
        ("metadata", "labels", {pods.QUEUE_LABEL: "b"}),
        ("metadata", "annotations", {pods.GROUP_ANNOTATION_INTEROP: "g"}),
        ("status", "resourceClaimStatuses", [{"name": "gpu", "resourceClaimName": "p-gpu"}]),
        ("metadata", "creationTimestamp", "2026-11-28T10:00:09Z"),
        ("metadata", "ownerReferences", [{"kind": "Job", "name": "j", "uid": "j1"}]),
        ("metadata", "namespace", "team"),
    ],
)
def test_a_change_the_scheduler_reads_is_parsed_again(
    section: str, part: str, value: typing.Any
) -> None:
    created = _pod_with(
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        schedulingGates=[{"name": "wait"}],
        resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}],
    )
    first = _parse(created)
    changed = copy.deepcopy(created)
    changed[section][part] = value
    second = _parse(changed, previous=first)
    assert second.parsed is not first.parsed
    assert _everything(second) == _everything(_parse(changed))
    assert _everything(second) != _everything(_parse(created))


class _View(collections.abc.Mapping[str, typing.Any]):
    """A read-only view of a dict, as some clients hand objects out."""

    def __init__(self, data: Obj) -> None:
        self._data = data

    def __getitem__(self, key: str) -> typing.Any:
        value = self._data[key]
        return _View(value) if isinstance(value, dict) else value

    def __iter__(self) -> typing.Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class _Name(str):
    pass


def test_input_that_is_not_plain_json_is_parsed_in_full() -> None:
    created = _pod_with()
    first = _parse(created)
    tainted = copy.deepcopy(created)
    tainted["metadata"]["labels"] = {"app": _Name("a")}
    for raw in (_View(created), tainted):
        again = pods.pod_info(raw, previous=first, priority_classes=_CLASSES, default_priority=5)
        assert again.parsed is not None and again.parsed.inputs is None
        assert _everything(again) == _everything(
            pods.pod_info(raw, priority_classes=_CLASSES, default_priority=5)
        )


@settings(max_examples=100, deadline=None)
@given(pod=_pod(), node=st.sampled_from([None, "n3"]), queue=st.sampled_from([None, "q"]))
def test_replace_makes_what_dataclasses_replace_makes(
    pod: Obj, node: str | None, queue: str | None
) -> None:
    info = _parse(pod)
    changes = {"node_name": node, "queue": queue, "start_time": 3.0}
    assert _everything(pods.replace(info, **changes)) == _everything(
        dataclasses.replace(info, **changes)
    )


def test_replace_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="nodeName"):
        pods.replace(_parse(_pod_with()), nodeName="n1")


def _pod_with(**spec: typing.Any) -> Obj:
    return {
        "metadata": {
            "name": "p",
            "namespace": "default",
            "uid": "u1",
            "resourceVersion": "1",
            "labels": {"app": "a", pods.QUEUE_LABEL: "a"},
            "creationTimestamp": "2026-11-28T10:00:00Z",
        },
        "spec": {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
            **spec,
        },
        "status": {"phase": "Pending"},
    }
