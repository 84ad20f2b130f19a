"""KAI-Scheduler's GPU-sharing annotations, as the snapshot reads them (issue 28).

We test these aspects:
- ``gpu-fraction``, ``gpu-memory`` and ``gpu-fraction-num-devices`` parse into a share; every
  bad input the issue lists (0, 1.5, ``half``, both annotations, a share plus whole GPUs, a
  device count without a share) is a problem naming the annotation, never an exception;
- a pod's requests carry its share's charge in thousandths of ``nvidia.com/gpu`` (quota and
  fair share count it), its devices are read back from ``runai-gpu``, and the pod uses the
  GPU-sharing field (a profile without GpuSharing refuses it instead of ignoring it);
- the cache charges a ``gpu-memory`` pod by its node's device memory once placed, by the
  smallest device it fits while it waits, and again when nodes change;
- the cache indexes placed shared pods by node (recorded devices, or the tightest fit);
- an assumed binding carries its recorded devices at once; a failed one drops them.
"""

from __future__ import annotations

import pytest

from berth.api import resources
from berth.scheduler.snapshot import gpushare, podconstraints, pods
from tests.scheduler import builders as b

GPU = resources.GPU


@pytest.mark.parametrize(
    ("annotations", "whole", "expected"),
    [
        ({"gpu-fraction": "0.25"}, 0, gpushare.ShareRequest(milli=250)),
        ({"gpu-fraction": ".5"}, 0, gpushare.ShareRequest(milli=500)),
        ({"gpu-fraction": "1e-1"}, 0, gpushare.ShareRequest(milli=100)),
        ({"gpu-fraction": "0.0001"}, 0, gpushare.ShareRequest(milli=1)),  # rounded up
        ({"gpu-memory": "10000"}, 0, gpushare.ShareRequest(memory_mib=10000)),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"},
            0,
            gpushare.ShareRequest(milli=500, devices=2),
        ),
        ({}, 0, None),
        ({}, 2000, None),
    ],
    ids=["quarter", "leading-dot", "exponent", "tiny", "memory", "two-devices", "none", "whole"],
)
def test_shares_parse(
    annotations: dict[str, str], whole: int, expected: gpushare.ShareRequest | None
) -> None:
    assert gpushare.parse(annotations, whole_gpus=whole) == expected


@pytest.mark.parametrize(
    ("annotations", "whole", "annotation", "says"),
    [
        ({"gpu-fraction": "0"}, 0, "gpu-fraction", "must be more than 0 and less than 1"),
        ({"gpu-fraction": "1.5"}, 0, "gpu-fraction", "must be more than 0 and less than 1"),
        ({"gpu-fraction": "half"}, 0, "gpu-fraction", "'half' is not a number"),
        ({"gpu-fraction": "0.9999"}, 0, "gpu-fraction", "rounds to a whole GPU"),
        ({"gpu-fraction": "-0.5"}, 0, "gpu-fraction", "must be more than 0"),
        ({"gpu-memory": "10Gi"}, 0, "gpu-memory", "must be a whole number above 0"),
        ({"gpu-memory": "0"}, 0, "gpu-memory", "must be a whole number above 0"),
        (
            {"gpu-fraction": "0.5", "gpu-memory": "20000"},
            0,
            "gpu-memory",
            "ask for the same share twice",
        ),
        ({"gpu-fraction": "0.5"}, 1000, "gpu-fraction", "containers also request"),
        ({"gpu-fraction-num-devices": "2"}, 0, "gpu-fraction-num-devices", "needs gpu-fraction"),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "two"},
            0,
            "gpu-fraction-num-devices",
            "must be a whole number above 0",
        ),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "1000"},
            0,
            "gpu-fraction-num-devices",
            "more devices than any node has",
        ),
    ],
    ids=[
        "zero",
        "above-one",
        "half",
        "rounds-to-one",
        "negative",
        "memory-quantity",
        "memory-zero",
        "both",
        "plus-whole-gpus",
        "count-alone",
        "count-not-a-number",
        "count-too-large",
    ],
)
def test_bad_input_is_a_problem_naming_the_annotation(
    annotations: dict[str, str], whole: int, annotation: str, says: str
) -> None:
    share = gpushare.parse(annotations, whole_gpus=whole)
    assert share is not None and share.problem is not None
    assert share.problem.annotation == annotation
    assert says in share.problem.message


def test_a_pods_requests_carry_its_share_and_it_uses_the_field() -> None:
    info = pods.pod_info(
        b.pod("p", cpu="1", annotations={"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"})
    )
    assert info.gpu_share == gpushare.ShareRequest(milli=250, devices=2)
    assert info.requests[GPU] == 500
    assert podconstraints.Field.GPU_SHARING in info.uses
    assert info.gpu_devices is None
    placed = pods.pod_info(
        b.pod("q", node="n", annotations={"gpu-fraction": "0.5", "runai-gpu": "1,3"})
    )
    assert placed.gpu_devices == (1, 3)


def test_a_bad_share_charges_no_gpu_and_keeps_its_problem() -> None:
    info = pods.pod_info(b.pod("p", cpu="1", annotations={"gpu-fraction": "half"}))
    assert GPU not in info.requests
    assert info.gpu_share is not None and info.gpu_share.problem is not None
    assert info.invalid is None  # GpuSharing says why, with the annotation's name


@pytest.mark.parametrize(
    ("text", "devices"),
    [("3", (3,)), ("1,4", (1, 4)), ("", None), ("x", None), ("1,1", None), ("-1", None)],
)
def test_recorded_devices(text: str, devices: tuple[int, ...] | None) -> None:
    assert gpushare.devices_of({gpushare.INDEX_ANNOTATION: text}) == devices


def gpu_node(name: str, *, gpus: int = 4, memory: str | None = "40960") -> dict[str, object]:
    labels = {gpushare.MEMORY_LABEL: memory} if memory is not None else {}
    return b.node(name, cpu="32", memory="256Gi", gpu=gpus, labels=labels)


def test_a_memory_share_is_charged_by_its_nodes_devices() -> None:
    cache = b.cache_of(
        gpu_node("small", memory="16384"),
        gpu_node("large", memory="81920"),
        b.pod("waiting", cpu="1", annotations={"gpu-memory": "8192"}),
        b.pod("on-large", cpu="1", node="large", annotations={"gpu-memory": "8192"}),
        b.pod("too-big", cpu="1", annotations={"gpu-memory": "100000"}),
    )
    snap = cache.snapshot(b.EPOCH)
    # Waiting: what it takes of the smallest device it fits (the most it may take).
    assert snap.pods["default/waiting"].requests[GPU] == 500
    assert snap.pods["default/on-large"].requests[GPU] == 100
    assert snap.pods["default/too-big"].requests[GPU] == 1000  # fits none: a whole device
    # A node with smaller devices arrives: the waiting pod may take more now.
    cache.add_node(gpu_node("tiny", memory="10240"))
    snap = cache.snapshot(b.EPOCH)
    assert snap.pods["default/waiting"].requests[GPU] == 800


def test_the_cache_places_shared_pods_on_their_devices() -> None:
    cache = b.cache_of(
        gpu_node("n"),
        b.pod("a", node="n", annotations={"gpu-fraction": "0.5", "runai-gpu": "2"}),
        b.pod("b", node="n", annotations={"gpu-fraction": "0.25", "runai-gpu": "2"}),
        b.pod("c", node="n", annotations={"gpu-fraction": "0.25"}),  # not recorded
        b.pod("whole", node="n", gpu=2),
    )
    shares = cache.snapshot(b.EPOCH).shared_gpus["n"]
    assert shares.placements["default/a"] == ((2,), 500, 500)
    # The unrecorded share fills the open device with room left.
    assert shares.placements["default/c"] == ((2,), 250, 250)
    assert shares.used == (0, 0, 1000, 0)
    assert shares.charged == 1000


def test_an_assumed_binding_carries_its_devices() -> None:
    cache = b.cache_of(gpu_node("n"), b.pod("p", annotations={"gpu-fraction": "0.5"}))
    cache.assume_pod("default/p", node="n", annotations={gpushare.INDEX_ANNOTATION: "3"})
    assert cache.snapshot(b.EPOCH).shared_gpus["n"].placements["default/p"][0] == (3,)
    cache.forget_pod("default/p")
    snap = cache.snapshot(b.EPOCH)
    assert "n" not in snap.shared_gpus
    assert snap.pods["default/p"].gpu_devices is None
