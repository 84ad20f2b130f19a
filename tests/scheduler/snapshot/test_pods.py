"""PodInfo: how a pod is parsed and sized.

We test these aspects:
- requests follow Kubernetes: containers summed, the max with each init container, sidecar
  (restartable) init containers running alongside, overhead added, limits standing in for
  missing requests, extended resources kept, ``pods`` counting 1 (1000 milli);
- malformed or negative quantities never raise: the info carries ``invalid``, naming where;
- the pod's Berth keys: group (Berth label, scheduler-plugins label, Volcano annotation), the
  implicit group of one, queue (label, else the group's), reservation; plain pods;
- priority: spec.priority, else the PriorityClass, else the global default;
- the static signature: equal for identical shapes, different when a constraint differs;
- node selector, affinity and tolerations are parsed into frozen values.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import pods as api_pods
from berth.api import resources
from berth.scheduler.snapshot import pods, selectors, taints
from tests.scheduler import builders as b

GI = 2**30 * 1000
MI = 2**20 * 1000


def sized(**fields: typing.Any) -> resources.ResourceList:
    info = pods.pod_info(b.pod("p", **fields))
    assert info.invalid is None
    return info.requests


C = b.container


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"cpu": "100m", "memory": "500Mi"}, {"cpu": 100, "memory": 500 * MI, "pods": 1000}),
        (
            {"containers": [C(requests={"cpu": "1"}), C("b", requests={"cpu": "500m"})]},
            {"cpu": 1500, "pods": 1000},
        ),
        (
            {
                "containers": [C(requests={"cpu": "1", "memory": "1Gi"})],
                "init_containers": [C("init", requests={"cpu": "2", "memory": "512Mi"})],
            },
            {"cpu": 2000, "memory": GI, "pods": 1000},
        ),
        (
            {
                "containers": [C(requests={"cpu": "1"})],
                "init_containers": [
                    C("a", requests={"cpu": "3"}),
                    C("b", requests={"cpu": "4"}),
                ],
            },
            {"cpu": 4000, "pods": 1000},
        ),
        (
            {
                "containers": [C(requests={"cpu": "1"})],
                "init_containers": [
                    C("sidecar", requests={"cpu": "500m"}, restart_policy="Always"),
                    C("setup", requests={"cpu": "2"}),
                ],
            },
            {"cpu": 2500, "pods": 1000},
        ),
        (
            {
                "containers": [C(requests={"cpu": "2"})],
                "init_containers": [
                    C("setup", requests={"cpu": "1"}),
                    C("sidecar", requests={"cpu": "500m"}, restart_policy="Always"),
                ],
            },
            {"cpu": 2500, "pods": 1000},
        ),
        (
            {"containers": [C(requests={"cpu": "1"})], "overhead": {"cpu": "250m"}},
            {"cpu": 1250, "pods": 1000},
        ),
        (
            {"containers": [C(limits={"cpu": "2", "memory": "1Gi"})]},
            {"cpu": 2000, "memory": GI, "pods": 1000},
        ),
        (
            {"containers": [C(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi"})]},
            {"cpu": 1000, "memory": GI, "pods": 1000},
        ),
        ({"cpu": "1", "memory": None, "gpu": 2}, {"cpu": 1000, b.GPU: 2000, "pods": 1000}),
        (
            {"requests": {"example.com/fpga": "1", "ephemeral-storage": "10Gi"}},
            {"example.com/fpga": 1000, "ephemeral-storage": 10 * GI, "pods": 1000},
        ),
        ({"containers": [C()]}, {"pods": 1000}),
    ],
    ids=[
        "one-container",
        "containers-summed",
        "init-container-larger-on-cpu",
        "largest-init-container",
        "sidecar-runs-alongside-later-init",
        "sidecar-adds-to-app-containers",
        "overhead-added",
        "limits-stand-in-for-requests",
        "request-wins-over-limit",
        "extended-gpu",
        "other-extended-and-storage",
        "best-effort-counts-one-pod",
    ],
)
def test_requests_are_sized_like_kubernetes(
    fields: dict[str, typing.Any], expected: dict[str, int]
) -> None:
    assert sized(**fields) == expected


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"cpu": "-1"}, "containers[0] (main) cpu: negative quantity '-1'"),
        ({"cpu": "5parsecs"}, "containers[0] (main) cpu: '5parsecs' is not a quantity"),
        ({"requests": {b.GPU: "1.2.3"}}, f"{b.GPU}: '1.2.3' is not a quantity"),
        (
            {"containers": [C()], "init_containers": [C("init", requests={"memory": "-1Gi"})]},
            "initContainers[0] (init) memory: negative quantity",
        ),
        ({"containers": [C()], "overhead": {"cpu": "x"}}, "overhead cpu: 'x' is not a quantity"),
    ],
    ids=["negative", "malformed", "malformed-extended", "negative-init", "malformed-overhead"],
)
def test_bad_quantities_make_the_pod_invalid_not_an_exception(
    fields: dict[str, typing.Any], fragment: str
) -> None:
    info = pods.pod_info(b.pod("bad", **fields))
    assert info.invalid is not None
    assert info.invalid.startswith("invalid resource request: ")
    assert fragment in info.invalid
    assert info.requests == {"pods": 1000}


@pytest.mark.parametrize(
    ("fields", "group", "queue"),
    [
        ({"group": "train"}, "default/train", None),
        ({"labels": {"scheduling.x-k8s.io/pod-group": "pg"}}, "default/pg", None),
        ({"annotations": {"scheduling.k8s.io/group-name": "vc"}}, "default/vc", None),
        ({"queue": "research"}, "default/pod:p", "research"),
        ({"group": "train", "queue": "research"}, "default/train", "research"),
        ({}, None, None),
    ],
    ids=[
        "berth-label",
        "scheduler-plugins-label",
        "volcano-annotation",
        "queue-only",
        "both",
        "plain",
    ],
)
def test_group_and_queue_keys(
    fields: dict[str, typing.Any], group: str | None, queue: str | None
) -> None:
    info = pods.pod_info(b.pod("p", **fields))
    assert info.pod_group == group
    assert info.queue == queue
    assert info.plain is (group is None and queue is None)


def test_queue_falls_back_to_the_group_queue_but_the_label_wins() -> None:
    grouped = pods.pod_info(b.pod("p", group="g"), group_queue="batch")
    labelled = pods.pod_info(b.pod("p", group="g", queue="mine"), group_queue="batch")
    assert grouped.queue == "batch"
    assert labelled.queue == "mine"
    assert pods.resolve(grouped, priority_classes={}, group_queue="other").queue == "other"


def test_reservation_is_keyed_in_the_pod_namespace() -> None:
    info = pods.pod_info(b.pod("p", namespace="team", reservation="r1"))
    assert info.reservation == "team/r1"


@pytest.mark.parametrize(
    ("fields", "classes", "default", "expected"),
    [
        ({"priority": 7, "priority_class": "high"}, {"high": 1000}, 0, 7),
        ({"priority_class": "high"}, {"high": 1000}, 0, 1000),
        ({"priority_class": "missing"}, {"high": 1000}, 5, 5),
        ({}, {"high": 1000}, 5, 5),
        ({}, {}, 0, 0),
    ],
    ids=["spec-wins", "class-value", "unknown-class-default", "global-default", "zero"],
)
def test_priority_resolution(
    fields: dict[str, typing.Any], classes: dict[str, int], default: int, expected: int
) -> None:
    info = pods.pod_info(b.pod("p", **fields), priority_classes=classes, default_priority=default)
    assert info.priority == expected


def test_identical_shapes_share_a_signature_and_constraints_split_it() -> None:
    base = {"node_selector": {"zone": "a"}, "tolerations": [b.toleration("gpu")]}
    one = pods.pod_info(b.pod("one", **base))
    two = pods.pod_info(b.pod("two", cpu="3", **base))
    other = pods.pod_info(b.pod("three", node_selector={"zone": "b"}))
    assert one.signature == two.signature
    assert hash(one.signature) == hash(two.signature)
    assert one.signature != other.signature


def test_constraints_are_parsed_into_frozen_values() -> None:
    info = pods.pod_info(
        b.pod(
            "p",
            node_selector={"zone": "a", "arch": "arm64"},
            affinity=b.affinity(
                required=[[b.expr("gpu", "Exists")]],
                preferred=[(10, [b.expr("tier", "In", "fast")])],
            ),
            tolerations=[b.toleration("dedicated", "infer", effect="NoSchedule")],
        )
    )
    assert info.node_selector == (
        selectors.Requirement("arch", "In", ("arm64",)),
        selectors.Requirement("zone", "In", ("a",)),
    )
    assert info.required_affinity == (
        selectors.SelectorTerm(expressions=(selectors.Requirement("gpu", "Exists"),)),
    )
    assert info.preferred_affinity == (
        selectors.PreferredTerm(
            weight=10,
            term=selectors.SelectorTerm(
                expressions=(selectors.Requirement("tier", "In", ("fast",)),)
            ),
        ),
    )
    assert info.tolerations == (
        taints.Toleration(key="dedicated", operator="Equal", value="infer", effect="NoSchedule"),
    )


def test_phase_gates_deletion_and_reserve_flags() -> None:
    assert pods.pod_info(b.pod("p", node="n1")).node_name == "n1"
    assert pods.pod_info(b.pod("p", phase="Succeeded", node="n1")).terminal
    assert pods.pod_info(b.pod("p", gates=["x"])).gated
    assert pods.pod_info(b.pod("p", deleting=True)).deleting
    # Only Berth makes reserve pods (in memory, from a Reservation): the annotation a user
    # can write makes none (issue 20; tests/scheduler/reservations for the real ones).
    claimed = b.pod("r", annotations={pods.RESERVE_POD_ANNOTATION: "true"})
    assert not pods.pod_info(claimed).reserve
    assert not pods.pod_info(b.pod("p")).reserve


def test_a_berth_model_is_accepted_like_its_dict() -> None:
    raw = b.pod("p", cpu="2", memory="1Gi", node_selector={"zone": "a"})
    model = api_pods.Pod.model_validate(raw)
    from_model = pods.pod_info(model)
    from_dict = pods.pod_info(raw)
    assert from_model.requests == from_dict.requests
    assert from_model.node_selector == from_dict.node_selector
