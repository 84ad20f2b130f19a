"""The models of docs/architecture.md: defaults, wire names, rules, and how bad input is refused.

We test these aspects:
- defaults of every kind (and that the wire shows them);
- snake_case attributes, camelCase wire names, population by either;
- cross-field rules (ttl/expires, owners, self-parent, limit >= guaranteed) and their messages;
- at least twenty distinct invalid objects across the three kinds, each refused with the field
  path and the rule in the error, through ``manifests.load_documents`` as users meet them;
- models are immutable; ``to_api`` is the one way out.
"""

from __future__ import annotations

import typing

import pydantic
import pytest

from berth.api import (
    durations,
    errors,
    keys,
    manifests,
    meta,
    podgroups,
    queues,
    reservations,
    resources,
)
from tests.api import conftest

Doc = dict[str, typing.Any]


def test_queue_defaults() -> None:
    queue = queues.Queue.model_validate({"metadata": {"name": "q"}})
    assert queue.api_version == keys.API_VERSION
    assert queue.spec.weight == 1
    assert queue.spec.priority == 0
    assert queue.spec.reclaimable is True
    assert queue.spec.state is queues.QueueState.OPEN
    assert queue.spec.parent is None
    assert queue.status is None
    assert queue.to_api()["spec"] == {
        "weight": 1,
        "priority": 0,
        "reclaimable": True,
        "state": "Open",
        "jobOrder": "PriorityFIFO",
        "preemptAcrossQueues": False,
    }


def test_pod_group_defaults() -> None:
    group = podgroups.PodGroup.model_validate({"metadata": {"name": "g"}})
    assert group.spec.min_member == 1
    assert group.spec.queue == keys.DEFAULT_QUEUE
    assert group.spec.schedule_timeout_seconds is None
    status = podgroups.PodGroupStatus()
    assert status.phase is podgroups.PodGroupPhase.PENDING
    assert (status.scheduled, status.running, status.succeeded, status.failed) == (0, 0, 0, 0)


def test_reservation_defaults(bases: dict[str, Doc]) -> None:
    resv = reservations.Reservation.model_validate(bases["Reservation"])
    assert resv.spec.allocate_once is True
    assert resv.spec.unschedulable is False
    assert resv.spec.ttl is None
    assert resv.spec.effective_ttl == durations.Duration.parse("24h")
    assert reservations.ReservationStatus().phase is reservations.ReservationPhase.PENDING


@pytest.mark.parametrize(
    ("spec", "effective"),
    [
        ({"ttl": "90m"}, "1h30m"),
        ({"ttl": "0"}, "0s"),
        ({"expires": "2026-01-02T00:00:00Z"}, None),
        ({}, "24h"),
    ],
    ids=["ttl-given", "never", "expires-given", "neither"],
)
def test_effective_ttl(bases: dict[str, Doc], spec: Doc, effective: str | None) -> None:
    resv = reservations.Reservation.model_validate(
        conftest.merged(bases["Reservation"], {"spec": spec})
    )
    expected = None if effective is None else durations.Duration.parse(effective)
    assert resv.spec.effective_ttl == expected


def test_attributes_are_snake_case_and_wire_is_camel_case(bases: dict[str, Doc]) -> None:
    group = podgroups.PodGroup.model_validate(
        conftest.merged(
            bases["PodGroup"],
            {"spec": {"minResources": {"cpu": "4"}, "scheduleTimeoutSeconds": 60}},
        )
    )
    assert group.spec.min_resources == resources.ResourceList.of(cpu=4000)
    assert group.spec.schedule_timeout_seconds == 60
    wire = group.to_api()["spec"]
    assert wire["minResources"] == {"cpu": "4"}
    assert wire["scheduleTimeoutSeconds"] == 60
    assert "min_resources" not in wire


def test_models_can_be_built_by_attribute_name() -> None:
    spec = podgroups.PodGroupSpec(min_member=3, queue="team-a")
    assert spec.to_api() == {"minMember": 3, "queue": "team-a", "onScheduleTimeout": "Requeue"}


def test_models_are_immutable() -> None:
    spec = queues.QueueSpec(weight=2)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        spec.weight = 3  # type: ignore[misc]
    assert spec.model_copy(update={"weight": 3}).weight == 3


def test_to_api_drops_unset_optionals_and_writes_json_types() -> None:
    condition = meta.Condition(
        type="Scheduled",
        status=meta.ConditionStatus.FALSE,
        reason="NotEnoughPods",
        last_transition_time=meta.parse_timestamp("2026-01-01T00:00:00Z"),
    )
    assert condition.to_api() == {
        "type": "Scheduled",
        "status": "False",
        "reason": "NotEnoughPods",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_status_round_trips(bases: dict[str, Doc]) -> None:
    status = {
        "phase": "Available",
        "nodeName": "node-1",
        "allocatable": {"cpu": "2", "memory": "4Gi"},
        "allocated": {"cpu": "1"},
        "currentOwners": [{"namespace": "ml", "name": "trainer", "uid": "u-1"}],
        "expiresAt": "2026-01-02T00:00:00Z",
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}],
    }
    doc = conftest.merged(bases["Reservation"], {"status": status})
    assert reservations.Reservation.model_validate(doc).to_api()["status"] == status


def test_limit_may_leave_out_resources_guaranteed_names() -> None:
    spec = queues.QueueSpec.model_validate(
        {"guaranteed": {"cpu": "8", "memory": "1Gi"}, "limit": {"cpu": "8"}}
    )
    assert spec.limit == resources.ResourceList.of(cpu=8000)


def test_limit_is_compared_exactly_across_units() -> None:
    # 1Gi is 1024Mi: a limit of 1000Mi is below it even though "1000" > "1".
    with pytest.raises(pydantic.ValidationError, match="memory"):
        queues.QueueSpec.model_validate(
            {"guaranteed": {"memory": "1Gi"}, "limit": {"memory": "1000Mi"}}
        )


# Invalid objects ------------------------------------------------------------------------


def _affinity(requirement: Doc) -> Doc:
    return {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "c"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [requirement]}]
                            }
                        }
                    },
                }
            }
        }
    }


_AFFINITY_PATH = (
    "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0]"
)

INVALID: list[tuple[str, str, Doc, str, str]] = [
    # (id, kind, patch, field path, fragment of the message)
    (
        "queue-weight-zero",
        "Queue",
        {"spec": {"weight": 0}},
        "spec.weight",
        "greater than or equal to 1",
    ),
    (
        "queue-weight-too-big",
        "Queue",
        {"spec": {"weight": 65536}},
        "spec.weight",
        "less than or equal to 65535",
    ),
    (
        "queue-weight-not-int",
        "Queue",
        {"spec": {"weight": "heavy"}},
        "spec.weight",
        "valid integer",
    ),
    (
        "queue-state-unknown",
        "Queue",
        {"spec": {"state": "Half"}},
        "spec.state",
        "'Open' or 'Closed'",
    ),
    (
        "queue-negative-guarantee",
        "Queue",
        {"spec": {"guaranteed": {"cpu": "-1"}}},
        "spec.guaranteed",
        "at least 0 and at most 128Ti",
    ),
    (
        "queue-malformed-quantity",
        "Queue",
        {"spec": {"guaranteed": {"memory": "5parsecs"}}},
        "spec.guaranteed",
        "'5parsecs'",
    ),
    (
        "queue-guarantee-not-mapping",
        "Queue",
        {"spec": {"guaranteed": ["cpu"]}},
        "spec.guaranteed",
        "mapping",
    ),
    (
        "queue-limit-below-guarantee",
        "Queue",
        {"spec": {"limit": {"cpu": "4"}}},
        "spec.limit",
        "at least guaranteed",
    ),
    ("queue-own-parent", "Queue", {"spec": {"parent": "team-a"}}, "spec", "own parent"),
    ("queue-unknown-spec-key", "Queue", {"spec": {"wieght": 2}}, "spec.wieght", "Extra inputs"),
    (
        "queue-reclaimable-not-bool",
        "Queue",
        {"spec": {"reclaimable": "maybe"}},
        "spec.reclaimable",
        "valid boolean",
    ),
    (
        "queue-priority-fractional",
        "Queue",
        {"apiVersion": "scheduling.berth.io/v1alpha1", "spec": {"priority": 1.5}},
        "spec.priority",
        "integer",
    ),
    (
        "group-min-member-zero",
        "PodGroup",
        {"spec": {"minMember": 0}},
        "spec.minMember",
        "greater than or equal to 1",
    ),
    (
        "group-min-member-not-int",
        "PodGroup",
        {"spec": {"minMember": "four"}},
        "spec.minMember",
        "valid integer",
    ),
    (
        "group-negative-min-resources",
        "PodGroup",
        {"spec": {"minResources": {"memory": "-1Gi"}}},
        "spec.minResources",
        "at least 0 and at most 128Ti",
    ),
    (
        "group-timeout-zero",
        "PodGroup",
        {"spec": {"scheduleTimeoutSeconds": 0}},
        "spec.scheduleTimeoutSeconds",
        "greater than or equal to 1",
    ),
    (
        "group-unknown-phase",
        "PodGroup",
        {"status": {"phase": "Done"}},
        "status.phase",
        "'Pending', 'Inqueue'",
    ),
    (
        "group-condition-status",
        "PodGroup",
        {"status": {"conditions": [{"type": "Scheduled", "status": "Yes"}]}},
        "status.conditions[0].status",
        "'True', 'False' or 'Unknown'",
    ),
    (
        "group-condition-time",
        "PodGroup",
        {
            "status": {
                "conditions": [
                    {"type": "Scheduled", "status": "True", "lastTransitionTime": "yesterday"}
                ]
            }
        },
        "status.conditions[0].lastTransitionTime",
        "RFC 3339",
    ),
    (
        "group-naive-time",
        "PodGroup",
        {"metadata": {"creationTimestamp": "2026-01-01T00:00:00"}},
        "metadata.creationTimestamp",
        "offset",
    ),
    ("group-unknown-top-level-key", "PodGroup", {"specs": {}}, "specs", "Extra inputs"),
    (
        "group-negative-count",
        "PodGroup",
        {"status": {"running": -1}},
        "status.running",
        "greater than or equal to 0",
    ),
    (
        "resv-ttl-and-expires",
        "Reservation",
        {"spec": {"ttl": "1h", "expires": "2026-01-02T00:00:00Z"}},
        "spec.expires",
        "ttl or expires, not both",
    ),
    (
        "resv-empty-owners",
        "Reservation",
        {"spec": {"owners": []}},
        "spec.owners",
        "at least 1 item",
    ),
    (
        "resv-owner-two-ways",
        "Reservation",
        {
            "spec": {
                "owners": [{"object": {"name": "p"}, "controller": {"kind": "Job", "name": "j"}}]
            }
        },
        "spec.owners[0]",
        "exactly one",
    ),
    (
        "resv-owner-no-way",
        "Reservation",
        {"spec": {"owners": [{}]}},
        "spec.owners[0]",
        "exactly one",
    ),
    ("resv-negative-ttl", "Reservation", {"spec": {"ttl": "-1h"}}, "spec.ttl", "negative"),
    ("resv-malformed-ttl", "Reservation", {"spec": {"ttl": "1 hour"}}, "spec.ttl", "'1 hour'"),
    (
        "resv-malformed-expires",
        "Reservation",
        {"spec": {"expires": "tomorrow"}},
        "spec.expires",
        "RFC 3339",
    ),
    (
        "resv-no-containers",
        "Reservation",
        {"spec": {"template": {"spec": {"containers": []}}}},
        "spec.template.spec.containers",
        "at least 1 item",
    ),
    (
        "resv-negative-request",
        "Reservation",
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "-500m"}}}]
                    }
                }
            }
        },
        "spec.template.spec.containers[0].resources.requests",
        "at least 0 and at most 128Ti",
    ),
    (
        "resv-unknown-operator",
        "Reservation",
        _affinity({"key": "zone", "operator": "Near", "values": ["a"]}),
        _AFFINITY_PATH + ".operator",
        "'In', 'NotIn'",
    ),
    (
        "resv-in-without-values",
        "Reservation",
        _affinity({"key": "zone", "operator": "In"}),
        _AFFINITY_PATH,
        "non-empty",
    ),
    (
        "resv-exists-with-values",
        "Reservation",
        _affinity({"key": "zone", "operator": "Exists", "values": ["a"]}),
        _AFFINITY_PATH,
        "must be empty",
    ),
    (
        "resv-gt-not-integer",
        "Reservation",
        _affinity({"key": "gpus", "operator": "Gt", "values": ["many"]}),
        _AFFINITY_PATH,
        "one integer",
    ),
    (
        "resv-selector-exists-with-values",
        "Reservation",
        {
            "spec": {
                "owners": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "app", "operator": "Exists", "values": ["x"]}
                            ]
                        }
                    }
                ]
            }
        },
        "spec.owners[0].labelSelector.matchExpressions[0]",
        "must be empty",
    ),
    (
        "resv-unknown-phase",
        "Reservation",
        {"status": {"phase": "Gone"}},
        "status.phase",
        "'Pending', 'Available'",
    ),
    (
        "resv-allocate-once-not-bool",
        "Reservation",
        {"spec": {"allocateOnce": "yes please"}},
        "spec.allocateOnce",
        "valid boolean",
    ),
    (
        "resv-unknown-spec-key",
        "Reservation",
        {"spec": {"ttlSeconds": 60}},
        "spec.ttlSeconds",
        "Extra inputs",
    ),
    (
        "resv-toleration-effect",
        "Reservation",
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "c"}],
                        "tolerations": [{"key": "k", "effect": "Sometimes"}],
                    }
                }
            }
        },
        "spec.template.spec.tolerations[0].effect",
        "'NoSchedule'",
    ),
    (
        "resv-missing-template",
        "Reservation",
        {"spec": {"template": ...}},
        "spec.template",
        "Field required",
    ),
]


def test_there_are_at_least_twenty_distinct_invalid_cases() -> None:
    assert len({case[0] for case in INVALID}) == len(INVALID) >= 20
    assert {case[1] for case in INVALID} == {"Queue", "PodGroup", "Reservation"}


@pytest.mark.parametrize(
    ("kind", "patch", "path", "fragment"),
    [case[1:] for case in INVALID],
    ids=[case[0] for case in INVALID],
)
def test_invalid_objects_are_refused_with_field_path_and_rule(
    bases: dict[str, Doc], kind: str, patch: Doc, path: str, fragment: str
) -> None:
    document = conftest.merged(bases[kind], patch)
    with pytest.raises(errors.ManifestError) as info:
        manifests.load_documents([document])
    problems = info.value.problems
    assert [m for p, m in problems if p == path and fragment in m], problems
    assert "Traceback" not in str(info.value)
    assert f"{path}: " in str(info.value)


def test_the_base_documents_are_valid(bases: dict[str, Doc]) -> None:
    loaded = manifests.load_documents(bases.values())
    assert [type(m) for m in loaded] == [queues.Queue, podgroups.PodGroup, reservations.Reservation]
