"""``berth sim`` with shares of GPUs and GPU models (issue 28).

We test these aspects:
- a workload's ``annotations`` (KAI-Scheduler's ``gpu-fraction``) reach its pods, and its
  ``gpuModels`` become a required node affinity on ``nvidia.com/gpu.product``;
- a trace's ``gpu_milli`` column makes shares (``gpu-fraction``, with the multi-device form
  for several GPUs) and its ``gpu_spec`` column the models accepted; a bad value names the
  column and line;
- the shipped GPU-sharing example runs: shares pack onto devices, model-constrained pods
  land on their model, queue usage counts fractions;
- ``berth bench gpu-sharing`` on a small cluster: one JSON object, every policy on the same
  arrivals, fractions of GPUs counted, the same result for the same seed.
"""

from __future__ import annotations

import pathlib

import pytest

from berth.api import quantities
from berth.sim import errors, gpusharing, runner, scenarios, traces, workloads

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_workload_annotations_and_gpu_models_reach_the_pods() -> None:
    workload = scenarios.Workload.model_validate(
        {
            "name": "infer",
            "duration": "1h",
            "annotations": {"gpu-fraction": "0.25"},
            "gpuModels": ["A100", "H100"],
            "requests": {"cpu": "2"},
        }
    )
    (pod,) = workloads.make_job(workload, index=0).pods
    assert pod["metadata"]["annotations"]["gpu-fraction"] == "0.25"
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100", "H100"]}
            ]
        }
    ]


def rows(text: str) -> list[list[str]]:
    return [line.split(",") for line in text.strip().splitlines()]


def test_trace_shares_and_models(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "openb.csv"
    path.write_text(
        "name,cpu_num,num_gpu,gpu_milli,gpu_spec,submit_time,duration\n"
        "a,4,1,250,,0,60\n"
        "b,8,2,500,V100M16|V100M32,1,60\n"
        "c,8,1,1000,T4,2,60\n",
        encoding="utf-8",
    )
    trace = traces.load(path)
    quarter, two_halves, whole = trace.workloads
    assert quarter.annotations == {"gpu-fraction": "0.25"}
    assert "nvidia.com/gpu" not in quarter.requests
    assert two_halves.annotations == {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}
    assert two_halves.gpu_models == ["V100M16", "V100M32"]
    assert whole.requests["nvidia.com/gpu"] == 1000 and not whole.annotations
    assert whole.gpu_models == ["T4"]


def test_a_bad_gpu_milli_names_the_column_and_line() -> None:
    with pytest.raises(errors.TraceError, match=r"t:2: gpu_milli '1500' must be between"):
        traces.parse_rows(rows("submit_time,duration,gpu_milli\n0,60,1500"), source="t")


def test_the_gpu_sharing_example_runs() -> None:
    scenario = scenarios.load(ROOT / "examples/sim/gpu-sharing.yaml")
    report = runner.run(scenario)
    summary = report["summary"]
    assert summary["jobs"]["started"] == summary["jobs"]["submitted"] == 285
    assert summary["partialGangs"] == 0
    # Training accepts only the A100 machines; the rest shares GPUs of both models.
    nodes = {w["workload"]: set() for w in report["workloads"]}
    for job in report["workloads"]:
        nodes[job["workload"]].update(job["pods"].values())
    assert all(node.startswith("a100-") for node in nodes["train"])
    assert any(node.startswith("l4-") for node in nodes["notebook"] | nodes["inference"])
    # The research queue's 12 GPUs are counted in fractions, and never exceeded.
    held = [
        quantities.parse_milli(point["resources"].get("nvidia.com/gpu", "0"))
        for point in report["queues"]["research"]["allocated"]
    ]
    assert max(held) <= 12_000
    assert any(value % 1000 for value in held)  # quarters of a GPU counted
    assert summary["utilization"]["nvidia.com/gpu"] > 0.25


def test_the_bench_compares_policies_on_the_same_arrivals() -> None:
    first = gpusharing.measure(mixes=["paper"], policies=["berth-default", "random"], scale=0.1)
    again = gpusharing.measure(mixes=["paper"], policies=["berth-default", "random"], scale=0.1)
    for result in (first, again):
        for outcome in result["mixes"]["paper"]["policies"].values():
            outcome.pop("cpuSeconds")
    assert first == again
    paper = first["mixes"]["paper"]
    assert first["gpus"] == 54 and paper["tasks"] > 54  # 3+2+2+2+2 nodes of 8, 8, 4, 2, 1
    for outcome in paper["policies"].values():
        assert 0 < outcome["allocatedAt100"] <= outcome["allocatedAt130"] <= 1
