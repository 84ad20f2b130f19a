"""Scenario table for topology-aware gangs and roles inside a gang (default-profile cycles).

- a gang requiring a rack lands in one rack (the tightest that fits), or waits with a reason
  naming the level; preferred falls back to spanning racks;
- roles gate the gang: it runs only when every sub-group reaches its minimum, and the reason
  names the role short of it;
- topology and roles together: workers in one rack, the launcher anywhere; a role preferring
  a rack that no rack holds whole keeps to the first worker's rack while it has room (inside
  the gang's zone when the gang requires one), where packing alone would spread it;
- bad input names the field on the bad PodGroup while a good one runs;
- every waiting group's reason carries the code of its obstacle (what the PodGroup's
  ``Scheduled`` condition shows): ``TopologyUnsatisfiable``, ``TopologyLevelUnknown``,
  ``TopologyDomainTooSmall``, ``SubGroupBelowMinimum``, ``SubGroupMatchesNoPod``,
  ``SubGroupsOverlap``;
- property: a gang requiring a rack never spans two racks.
"""

from __future__ import annotations

import dataclasses
import typing

import hypothesis
import hypothesis.strategies as st
import pytest

from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]
RACK = "topology.berth.io/rack"
ZONE = "topology.kubernetes.io/zone"


@dataclasses.dataclass(frozen=True)
class Scenario:
    id: str
    objects: list[Obj]
    bound: dict[str, str]  # every binding of the cycle: pod name -> node
    groups: dict[str, str] = dataclasses.field(default_factory=dict)  # group -> exact reason
    codes: dict[str, str] = dataclasses.field(default_factory=dict)  # group -> reason code


def gpu_node(name: str, rack: str, zone: str = "z1") -> Obj:
    return b.node(name, cpu="64", memory="512Gi", gpu=8, labels={RACK: rack, ZONE: zone})


def cpu_node(name: str) -> Obj:
    return b.node(name, cpu="16", memory="64Gi")


def busy(node: str, gpus: int) -> Obj:
    return b.pod(f"busy-{node}", node=node, cpu="1", memory="1Gi", gpu=gpus)


def group(
    name: str,
    min_member: int,
    *,
    topology: Obj | None = None,
    roles: list[Obj] | None = None,
    created: float | None = None,
) -> Obj:
    obj = b.pod_group(name, min_member=min_member, created=created)
    if topology is not None:
        obj["spec"]["topology"] = topology
    if roles is not None:
        obj["spec"]["subGroups"] = roles
    return obj


def role(name: str, min_member: int, *, topology: Obj | None = None) -> Obj:
    out: Obj = {"name": name, "minMember": min_member, "selector": {"matchLabels": {"role": name}}}
    if topology is not None:
        out["topology"] = topology
    return out


def members(
    name: str, count: int, *, gpu: int = 8, role_name: str | None = None, start: int = 0
) -> list[Obj]:
    labels = {"role": role_name} if role_name else None
    return [
        b.pod(
            f"{name}-{i}",
            group=name,
            cpu="1",
            memory="1Gi",
            gpu=gpu or None,
            labels=labels,
            created=b.EPOCH - 100 + i,
        )
        for i in range(start, start + count)
    ]


# r1: a1 and a2 half used (8 GPUs free in all); r2: b1 with 2 used, b2 empty (14 free).
RACKS = [
    gpu_node("a1", "r1"),
    gpu_node("a2", "r1"),
    gpu_node("b1", "r2"),
    gpu_node("b2", "r2"),
    busy("a1", 4),
    busy("a2", 4),
    busy("b1", 2),
]
# Two racks of two nodes, one busy node in each: no rack has two whole nodes.
HALF_BUSY = [
    gpu_node("a1", "r1"),
    gpu_node("a2", "r1"),
    gpu_node("b1", "r2"),
    gpu_node("b2", "r2"),
    busy("a1", 1),
    busy("b1", 1),
]

# r1: a1 with 6 GPUs used, a2 empty (10 free); r2: b1 with 7 used, b2 with 4, b3 empty (13 free).
SPREAD_OUT = [
    gpu_node("a1", "r1"),
    gpu_node("a2", "r1"),
    gpu_node("b1", "r2"),
    gpu_node("b2", "r2"),
    gpu_node("b3", "r2"),
    busy("a1", 6),
    busy("b1", 7),
    busy("b2", 4),
]

SCENARIOS = [
    Scenario(
        "without-topology-packing-spans-racks",
        [*RACKS, group("g", 3), *members("g", 3, gpu=4)],
        {"g-0": "a1", "g-1": "a2", "g-2": "b1"},
    ),
    Scenario(
        "required-rack-lands-in-one-rack",
        [*RACKS, group("g", 3, topology={"required": "rack"}), *members("g", 3, gpu=4)],
        {"g-0": "b1", "g-1": "b2", "g-2": "b2"},
    ),
    Scenario(
        "required-rack-picks-the-tightest-rack",
        [
            *(gpu_node(n, "r1") for n in ("a1", "a2")),
            *(gpu_node(n, "r2") for n in ("b1", "b2", "b3")),
            group("g", 2, topology={"required": "rack"}),
            *members("g", 2),
        ],
        {"g-0": "a1", "g-1": "a2"},
    ),
    Scenario(
        "required-rack-waits-while-no-rack-has-room",
        [*HALF_BUSY, group("g", 2, topology={"required": "rack"}), *members("g", 2)],
        {},
        groups={"g": "no rack has room for the gang now (spec.topology.required; 2 racks)"},
        codes={"g": "TopologyUnsatisfiable"},
    ),
    Scenario(
        "preferred-rack-falls-back-to-spanning-racks",
        [*HALF_BUSY, group("g", 2, topology={"preferred": "rack"}), *members("g", 2)],
        {"g-0": "a2", "g-1": "b2"},
    ),
    Scenario(
        "required-rack-larger-than-any-rack",
        [*HALF_BUSY, group("g", 3, topology={"required": "rack"}), *members("g", 3)],
        {},
        groups={
            "g": "spec.topology.required: needs 24 nvidia.com/gpu in one rack, "
            "the largest rack has 16"
        },
        codes={"g": "TopologyDomainTooSmall"},
    ),
    Scenario(
        "unknown-level-waits-while-a-good-gang-runs",
        [
            *HALF_BUSY,
            group("bad", 1, topology={"required": "rak"}),
            *members("bad", 1),
            group("good", 1, topology={"required": "rack"}),
            *members("good", 1),
        ],
        {"good-0": "a2"},
        groups={
            "bad": "spec.topology.required: unknown topology level 'rak' "
            "(levels: zone, block, rack, host)"
        },
        codes={"bad": "TopologyLevelUnknown"},
    ),
    Scenario(
        "a-level-no-node-carries-is-named",
        [cpu_node("c1"), group("g", 1, topology={"required": "rack"}), *members("g", 1, gpu=0)],
        {},
        groups={
            "g": "spec.topology.required: no node has the label topology.berth.io/rack "
            "of topology level rack"
        },
        codes={"g": "TopologyLevelUnknown"},
    ),
    Scenario(
        "roles-gate-the-gang",
        [
            cpu_node("c1"),
            gpu_node("a1", "r1"),
            gpu_node("a2", "r1"),
            gpu_node("a3", "r1"),
            group("job", 1, roles=[role("launcher", 1), role("workers", 4)]),
            *members("job", 1, gpu=0, role_name="launcher"),
            *members("job", 4, role_name="workers", start=1),
        ],
        {},
        groups={
            "job": "waiting for sub-group workers: 3/4; "
            "0/4 nodes fit: 4 Insufficient nvidia.com/gpu"
        },
    ),
    Scenario(
        "roles-run-when-every-role-has-its-minimum",
        [
            cpu_node("c1"),
            gpu_node("a1", "r1"),
            gpu_node("a2", "r1"),
            group("job", 1, roles=[role("launcher", 1), role("workers", 2)]),
            *members("job", 1, gpu=0, role_name="launcher"),
            *members("job", 2, role_name="workers", start=1),
        ],
        {"job-0": "c1", "job-1": "a1", "job-2": "a2"},
    ),
    Scenario(
        "a-role-waits-for-its-pods",
        [
            cpu_node("c1"),
            gpu_node("a1", "r1"),
            gpu_node("a2", "r1"),
            group("job", 1, roles=[role("launcher", 1), role("workers", 2)]),
            *members("job", 1, gpu=0, role_name="launcher"),
            *members("job", 1, role_name="workers", start=1),
        ],
        {},
        groups={"job": "waiting for pods of sub-group workers: 1/2 created"},
        codes={"job": "NotEnoughPods"},
    ),
    Scenario(
        "topology-and-roles-workers-share-a-rack",
        [
            cpu_node("c1"),
            *RACKS,
            group(
                "job",
                4,
                roles=[role("launcher", 1), role("workers", 3, topology={"required": "rack"})],
            ),
            *members("job", 1, gpu=0, role_name="launcher"),
            *members("job", 3, gpu=4, role_name="workers", start=1),
        ],
        # Packing alone would start the workers on a1 (the fullest node) and strand them in
        # r1 (8 GPUs free for 12); their rack is chosen first: r2. The launcher needs no GPU.
        {"job-0": "c1", "job-1": "b1", "job-2": "b2", "job-3": "b2"},
    ),
    Scenario(
        "a-role-preferring-a-rack-keeps-to-one-while-it-has-room",
        [
            cpu_node("c1"),
            *SPREAD_OUT,
            group(
                "job",
                5,
                roles=[role("launcher", 1), role("workers", 4, topology={"preferred": "rack"})],
            ),
            *members("job", 1, gpu=0, role_name="launcher"),
            *members("job", 4, gpu=4, role_name="workers", start=1),
        ],
        # No rack holds the four workers (16 GPUs; r1 has 10 free, r2 13), so they may span
        # racks: packing alone would put them on b2, a2, a2, b3 (two racks, two each). Kept
        # together, the first one's rack takes all it can: b2, b3, b3, then a2.
        {"job-0": "c1", "job-1": "b2", "job-2": "b3", "job-3": "b3", "job-4": "a2"},
    ),
    Scenario(
        "a-role-preferring-a-rack-keeps-to-one-inside-the-gangs-zone",
        [
            b.node("c1", cpu="16", memory="64Gi", labels={ZONE: "z1"}),
            *SPREAD_OUT,
            gpu_node("d1", "r3", zone="z2"),
            busy("d1", 4),
            group(
                "job",
                5,
                topology={"required": "zone"},
                roles=[role("launcher", 1), role("workers", 4, topology={"preferred": "rack"})],
            ),
            *members("job", 1, gpu=0, role_name="launcher"),
            *members("job", 4, gpu=4, role_name="workers", start=1),
        ],
        # The gang needs zone z1 (z2 has 4 GPUs free, on a node packing would like); inside it
        # the workers keep to the first one's rack while it has room, as above.
        {"job-0": "c1", "job-1": "b2", "job-2": "b3", "job-3": "b3", "job-4": "a2"},
    ),
    Scenario(
        "a-role-requiring-a-rack-waits-naming-its-field",
        [
            cpu_node("c1"),
            *HALF_BUSY,
            group(
                "job",
                3,
                roles=[role("launcher", 1), role("workers", 2, topology={"required": "rack"})],
            ),
            *members("job", 1, gpu=0, role_name="launcher"),
            *members("job", 2, role_name="workers", start=1),
        ],
        {},
        groups={
            "job": "no rack has room for sub-group workers now "
            "(spec.subGroups[1].topology.required; 2 racks)"
        },
        codes={"job": "TopologyUnsatisfiable"},
    ),
    Scenario(
        "selector-matching-no-pod-is-named-while-a-good-gang-runs",
        [
            cpu_node("c1"),
            gpu_node("a1", "r1"),
            group("bad", 2, roles=[role("launcher", 1), role("workers", 1)]),
            *members("bad", 2, gpu=0, role_name="launcher"),
            group("good", 1),
            *members("good", 1),
        ],
        {"good-0": "a1"},
        groups={"bad": "spec.subGroups[1].selector: matches none of the group's pods"},
        codes={"bad": "SubGroupMatchesNoPod"},
    ),
    Scenario(
        "overlapping-selectors-are-named",
        [
            cpu_node("c1"),
            group(
                "bad",
                1,
                roles=[
                    role("launcher", 1),
                    {
                        "name": "all",
                        "selector": {"matchExpressions": [{"key": "role", "operator": "Exists"}]},
                    },
                ],
            ),
            *members("bad", 1, gpu=0, role_name="launcher"),
        ],
        {},
        groups={
            "bad": "spec.subGroups[1].selector: pod default/bad-0 also matches "
            "spec.subGroups[0] (launcher); a pod belongs to one sub-group"
        },
        codes={"bad": "SubGroupsOverlap"},
    ),
    Scenario(
        "required-rack-fits-in-no-rack-it-tried",
        # The rack has the room, but its nodes are tainted: the gang is tried there and fits
        # in no rack; the code is the topology's, the last try's reason explains it.
        [
            b.node(
                "a1",
                cpu="64",
                memory="512Gi",
                gpu=8,
                labels={RACK: "r1", ZONE: "z1"},
                taints=[b.taint("dedicated", "infer")],
            ),
            group("g", 1, topology={"required": "rack"}),
            *members("g", 1),
        ],
        {},
        groups={
            "g": "the gang fits in no single rack (spec.topology.required; tried the 1 best); "
            "0/1 nodes fit: 1 untolerated taint {dedicated: infer}"
        },
        codes={"g": "TopologyUnsatisfiable"},
    ),
    Scenario(
        "a-role-below-its-minimum-while-a-member-is-gated",
        # Both workers exist, one still carries a scheduling gate: the launcher and the
        # other worker fit, but the role is short of its minimum.
        [
            cpu_node("c1"),
            gpu_node("a1", "r1"),
            gpu_node("a2", "r1"),
            group("job", 1, roles=[role("launcher", 1), role("workers", 2)]),
            *members("job", 1, gpu=0, role_name="launcher"),
            *members("job", 1, role_name="workers", start=1),
            b.pod(
                "job-2",
                group="job",
                cpu="1",
                memory="1Gi",
                gpu=8,
                labels={"role": "workers"},
                gates=["example.com/wait"],
            ),
        ],
        {},
        groups={"job": "waiting for sub-group workers: 1/2"},
        codes={"job": "SubGroupBelowMinimum"},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    bound, _, groups = harness.cycle(*scenario.objects)
    assert bound == {f"default/{k}": v for k, v in scenario.bound.items()}
    for name, reason in scenario.groups.items():
        assert groups[f"default/{name}"] == reason
    if scenario.codes:
        _, codes = harness.reason_codes(*scenario.objects)
        assert {k: codes[f"default/{k}"] for k in scenario.codes} == scenario.codes


# Property ----------------------------------------------------------------------------------

RACK_OF = {f"n{r}{i}": f"r{r}" for r in range(3) for i in range(3)}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Obj], list[str]]:
    """Three racks of three 8-GPU nodes, some GPUs in use, and gangs requiring a rack."""
    objects: list[Obj] = [gpu_node(name, rack) for name, rack in RACK_OF.items()]
    for name in RACK_OF:
        used = draw(st.integers(0, 8))
        if used:
            objects.append(busy(name, used))
    gangs: list[str] = []
    for g in range(draw(st.integers(1, 4))):
        name = f"g{g}"
        size = draw(st.integers(1, 5))
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        level = draw(st.sampled_from(["required", "preferred"]))
        objects.append(group(name, size, topology={level: "rack"}, created=b.EPOCH - 50 + g))
        objects += members(name, size, gpu=gpus)
        if level == "required":
            gangs.append(name)
    return objects, gangs


EVERY_ACTION = harness.profile_with(actions=("allocate", "backfill", "reclaim", "preempt"))


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(clusters())
def test_a_gang_requiring_a_rack_never_spans_two(case: tuple[list[Obj], list[str]]) -> None:
    objects, required = case
    bound, _, _ = harness.cycle(*objects, profile=EVERY_ACTION)
    for name in required:
        racks = {RACK_OF[node] for pod, node in bound.items() if pod.startswith(f"default/{name}-")}
        assert len(racks) <= 1, (name, bound)
