"""A topology-aware gang with roles through ``berth up`` and real kubectl (issue 17).

Two racks of two 4-GPU nodes (node label ``topology.berth.io/rack``) and a cpu node; a 2-GPU
pod already on r1-0, then examples/gpu-topology: a launcher and four 2-GPU workers requiring
one rack.

We test these aspects:
- the four workers land in one rack (r2, the only one with 8 GPUs free; packing alone would
  start them on r1) and the launcher on the cpu node;
- the PodGroup's status shows each role's scheduled pods.
"""

from __future__ import annotations

import pathlib

import pytest

from tests.workloads import cluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gpu-topology"
GPU_POOL = "2x cpu=16,memory=64Gi,nvidia.com/gpu=4 label=topology.berth.io/rack={rack} name={rack}"


@pytest.mark.slow
def test_workers_share_a_rack_through_kubectl(tmp_path: pathlib.Path) -> None:
    more_nodes = ("--nodes", GPU_POOL.format(rack="r2"), "--nodes", "1x cpu=8,memory=32Gi name=cpu")
    with cluster.berth_up(tmp_path, nodes=GPU_POOL.format(rack="r1"), extra=more_nodes) as kubectl:

        def placed(count: int) -> dict[str, str] | None:
            pods = kubectl.items("pods")
            found = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
            bound = {name: node for name, node in found.items() if node}
            return bound if len(bound) >= count else None

        kubectl("apply", "-f", str(EXAMPLE / "busy.yaml"))
        assert cluster.eventually(lambda: placed(1), what="busy bound", timeout=60) == {
            "busy": "r1-0"
        }
        kubectl("apply", "-f", str(EXAMPLE / "podgroup.yaml"), "-f", str(EXAMPLE / "pods.yaml"))
        bound = cluster.eventually(lambda: placed(6), what="the gang bound", timeout=60)
        assert (bound.pop("busy"), bound.pop("train-launcher")) == ("r1-0", "cpu-0")
        # Two 2-GPU workers on each node of r2 (which worker goes where is the task order's).
        assert sorted(bound.values()) == ["r2-0", "r2-0", "r2-1", "r2-1"]

        def roles() -> list[tuple[str, int, int]] | None:
            listed = kubectl.get("bpg", "train").get("status", {}).get("subGroups") or []
            seen = [(r["name"], r["minMember"], r["scheduled"]) for r in listed]
            return seen if seen and all(r[1] == r[2] for r in seen) else None

        assert cluster.eventually(roles, what="each role's scheduled pods", timeout=30) == [
            ("launcher", 1, 1),
            ("workers", 4, 4),
        ]
