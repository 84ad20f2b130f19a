"""Pod fields: scheduler mode never ignores a constraint it does not implement; sizing.

We test these aspects:

- a pod using a field no enabled plugin implements (inline CSI and in-tree disks) waits, its
  reason naming the field and pointing to admission mode; the rest of the cycle goes on;
- a pod Berth does not bind itself (admission mode: kube-scheduler binds it) is not refused;
- a profile without a constraint plugin refuses that plugin's field instead of ignoring it;
- malformed constraints make the pod wait with a reason naming the field;
- pod-level resources (``spec.resources``) size the pod;
- best-effort containers count kube-scheduler's non-zero defaults in scoring.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.plugins import node_resources_fit
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]

CLAIM = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}
CSI = {"volumes": [{"name": "d", "csi": {"driver": "x"}}]}
PVC = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (CSI, "spec.volumes[].csi"),
        (
            {"volumes": [{"name": "d", "gcePersistentDisk": {"pdName": "x"}}]},
            "spec.volumes[] in-tree disk",
        ),
    ],
)
def test_unimplemented_field_waits_with_reason_naming_it(spec: Obj, field: str) -> None:
    bound, reasons, _ = harness.cycle(b.node("n1"), b.pod("refused", spec=spec), b.pod("plain"))
    assert bound == {"default/plain": "n1"}
    assert field in reasons["default/refused"]
    assert "admission mode" in reasons["default/refused"]


def test_admission_mode_pod_is_not_refused() -> None:
    framework = harness.scheduler(clock=clocks.VirtualClock(b.EPOCH)).framework
    ours = harness.info(spec=CSI)
    admitted = harness.info(spec=CSI, scheduler="default-scheduler", queue="q")
    assert framework.refusal(ours) is not None
    assert framework.refusal(admitted) is None


@pytest.mark.parametrize(
    ("without", "spec", "field"),
    [
        ("VolumeBinding", PVC, "spec.volumes[].persistentVolumeClaim"),
        ("DynamicResources", CLAIM, "spec.resourceClaims"),
        ("NodePorts", {"containers": [{"name": "c", "ports": [{"hostPort": 80}]}]}, "hostPort"),
        (
            "PodTopologySpread",
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "spec.topologySpreadConstraints",
        ),
        (
            "InterPodAffinity",
            {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "zone", "labelSelector": {}}
                        ]
                    }
                }
            },
            "spec.affinity.podAntiAffinity",
        ),
    ],
)
def test_profile_without_the_plugin_refuses_its_field(without: str, spec: Obj, field: str) -> None:
    _, reasons, _ = harness.cycle(
        b.node("n1"), b.pod("p", spec=spec), profile=harness.profile_with(without=(without,))
    )
    assert field in reasons["default/p"]
    assert "does not implement" in reasons["default/p"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 70000}]}]},
            "invalid spec.containers[0].ports[0].hostPort: 70000 is not between 1 and 65535",
        ),
        (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "invalid spec.topologySpreadConstraints[0].maxSkew: 0 is not an integer of at least 1",
        ),
        (
            {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "topologyKey": "zone",
                                "labelSelector": {
                                    "matchExpressions": [{"key": "app", "operator": "Gt"}]
                                },
                            }
                        ]
                    }
                }
            },
            "invalid spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
            ".labelSelector.matchExpressions[0]: operator 'Gt' is not In, NotIn, Exists or"
            " DoesNotExist",
        ),
    ],
)
def test_malformed_constraint_waits_naming_the_field(spec: Obj, field: str) -> None:
    bound, reasons, _ = harness.cycle(b.node("n1"), b.pod("bad", spec=spec), b.pod("good"))
    assert bound == {"default/good": "n1"}
    assert reasons["default/bad"] == field


def test_pod_level_resources_size_the_pod() -> None:
    """``spec.resources`` replaces the containers' cpu and memory (kube-scheduler's sizing)."""
    pod_level = {"resources": {"requests": {"cpu": "3"}, "limits": {"memory": "1Gi"}}}
    info = harness.info(spec=pod_level, cpu="100m", memory="100Mi")
    assert info.requests["cpu"] == 3000
    assert info.requests["memory"] == 1024**3 * 1000
    bound, reasons, _ = harness.cycle(b.node("small", cpu="2"), b.pod("p", spec=pod_level))
    assert bound == {}
    assert reasons["default/p"] == "0/1 nodes fit: 1 Insufficient cpu"
    bound, _, _ = harness.cycle(b.node("big", cpu="4"), b.pod("p", spec=pod_level))
    assert bound == {"default/p": "big"}


def test_best_effort_pods_score_with_non_zero_defaults() -> None:
    """A container requesting no cpu/memory counts 100m/200Mi in scoring (not in fitting)."""
    best_effort = harness.info(cpu=None, memory=None)
    assert best_effort.requests == {"pods": 1000}
    assert best_effort.score_requests == {
        "pods": 1000,
        "cpu": 100,
        "memory": 200 * 1024**2 * 1000,
    }
    nodes = harness.snapshot(b.node("n", cpu="1", memory="2000Mi")).nodes
    plugin = node_resources_fit.NodeResourcesFitScoring(
        node_resources_fit.NodeResourcesFitArgs.model_validate(
            {"scoringStrategy": {"type": "LeastAllocated"}}
        )
    )
    # cpu (1000 - 100) / 1000 = 90, memory (2000 - 200) / 2000 = 90
    assert harness.scores(plugin, best_effort, nodes) == {"n": 90}
    sized = harness.info(cpu="100m", memory="200Mi")
    assert sized.score_requests is sized.requests
