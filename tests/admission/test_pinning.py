"""The pod surgery of admission mode (:mod:`berth.kube.transport.pod_edits`), pure.

We test these aspects:
- pinning ANDs ``matchFields metadata.name In [node]`` into every required term (the pod's own
  affinity still holds), or adds one term; preferred terms and pod affinity are kept;
- pinning twice to the same node adds nothing; unpinning restores the original affinity
  exactly, dropping what pinning created;
- a rejected bare pod's replacement keeps name, labels and spec, loses the pin, the node, the
  admitted annotations and the status, and is gated again.
"""

from __future__ import annotations

import copy
import typing

import pytest

from berth.api import keys
from berth.kube.transport import pod_edits

PIN = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
ZONE = {"key": "zone", "operator": "In", "values": ["a"]}
PREFERRED = [{"weight": 1, "preference": {"matchExpressions": [ZONE]}}]


def _required(*terms: dict[str, typing.Any]) -> dict[str, typing.Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


@pytest.mark.parametrize(
    ("affinity", "pinned"),
    [
        (None, _required({"matchFields": [PIN]})),
        ({}, _required({"matchFields": [PIN]})),
        (
            _required(
                {"matchExpressions": [ZONE]},
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
            ),
            _required(
                {"matchExpressions": [ZONE], "matchFields": [PIN]},
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]},
                        PIN,
                    ]
                },
            ),
        ),
        (
            {
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERRED},
                "podAffinity": {"x": 1},
            },
            {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": PREFERRED,
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [PIN]}]
                    },
                },
                "podAffinity": {"x": 1},
            },
        ),
    ],
    ids=["none", "empty", "each-term-narrowed", "other-affinity-kept"],
)
def test_pin_and_unpin_round_trip(affinity: typing.Any, pinned: dict[str, typing.Any]) -> None:
    original = copy.deepcopy(affinity)
    assert pod_edits.pin_affinity(affinity, node="n1") == pinned
    assert affinity == original  # not mutated
    assert pod_edits.pin_affinity(pinned, node="n1") == pinned
    assert pod_edits.unpin_affinity(pinned, node="n1") == (affinity or None)


def test_recreated_pod_is_gated_and_unpinned() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "9",
            "labels": {keys.QUEUE_LABEL: "q"},
            "annotations": {
                keys.ADMITTED_NODE_ANNOTATION: "n1",
                keys.ADMITTED_AT_ANNOTATION: "2026-01-01T00:00:00Z",
                "team": "ml",
            },
        },
        "spec": {
            "nodeName": "n2",
            "affinity": _required({"matchExpressions": [ZONE], "matchFields": [PIN]}),
            "schedulingGates": [{"name": "other"}],
            "containers": [{"name": "c", "image": "i"}],
        },
        "status": {"phase": "Running"},
    }
    body = pod_edits.recreated_pod(obj, node="n1")
    assert body["metadata"] == {
        "name": "p",
        "namespace": "ns",
        "labels": {keys.QUEUE_LABEL: "q"},
        "annotations": {"team": "ml"},
    }
    assert body["spec"] == {
        "affinity": _required({"matchExpressions": [ZONE]}),
        "schedulingGates": [{"name": "other"}, {"name": keys.ADMISSION_GATE}],
        "containers": [{"name": "c", "image": "i"}],
    }
    assert "status" not in body
