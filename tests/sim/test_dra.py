"""DRA in ``berth sim``: scenarios with devices, and the two DRA examples of ``examples/sim``.

We test these aspects:

- a node pool's ``devices`` publish one ResourceSlice per node (its pool named after the node);
  a workload's ``resourceClaims`` go into each pod; templates make each pod its own claim;
- DRA manifests are checked at load: a selector that does not compile, a malformed request, a
  workload naming a template or claim the scenario lacks — each an issue with its path;
- dra-gang (the README's "Today"): the gang of four 2-GPU pods waits, its reason naming a claim
  no node can meet, until the fourth node's slice is applied at 30m; then all four start at once
  and no gang is ever partly bound;
- dra-quota: a queue limited to 2 GPUs runs its one-GPU notebooks two at a time, the third
  waiting with a reason naming the class; two pods sharing one 2-GPU claim run in a queue
  limited to 2 GPUs (the claim counted once).
"""

from __future__ import annotations

import functools
import pathlib
import typing

import pytest

from berth.sim import errors, runner, scenarios

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sim"

Report = dict[str, typing.Any]


@functools.cache
def report(name: str, *, until: str | None = None) -> Report:
    text = (EXAMPLES / f"{name}.yaml").read_text()
    if until is not None:
        text = text.replace("  until: ", f"  until: {until} #", 1)
    return runner.run(scenarios.loads(text, source=f"{name}.yaml"))


def _workload(result: Report, name: str) -> Report:
    return next(w for w in result["workloads"] if w["name"] == name)


def test_the_gang_waits_naming_the_claim_until_a_slice_comes_then_starts_whole() -> None:
    waiting = _workload(report("dra-gang", until="20m"), "train-0")
    assert waiting["started"] is None
    assert "gang needs minMember 4, only 3 could be placed" in waiting["reason"]
    assert "too few free devices for resourceclaim training/train-0-" in waiting["reason"]
    group = next(g for g in report("dra-gang", until="20m")["podGroups"] if g["name"] == "train-0")
    assert group["reason"] == "NotEnoughResources"
    done = report("dra-gang")
    train = _workload(done, "train-0")
    assert train["started"] == 1800.0  # the minute the late node's GPUs appeared
    assert sorted(train["pods"].values()) == ["gpu-0", "gpu-1", "gpu-2", "late-0"]
    assert done["summary"]["partialGangs"] == 0
    assert done["queueStatuses"]["training"]["allocated"]["deviceclass/gpu"] == "8"


def test_the_notebook_queue_runs_two_gpus_at_a_time_and_a_shared_claim_counts_once() -> None:
    early = report("dra-quota", until="5m")
    third = _workload(early, "notebook-2")
    assert third["started"] is None
    assert "queue notebooks at limit for deviceclass/gpu (2/2)" in third["reason"]
    done = report("dra-quota")
    starts = {w["name"]: w["started"] for w in done["workloads"]}
    assert starts == {
        "notebook-0": 0.0,
        "notebook-1": 120.0,
        "notebook-2": 600.0,
        "notebook-3": 720.0,
        "notebook-4": 1200.0,
        "serve-0": 0.0,
    }
    serving = early["queueStatuses"]["serving"]
    assert serving["allocated"]["deviceclass/gpu"] == "2"
    assert serving["runningPods"] == 2


def test_node_pool_devices_become_one_slice_per_node() -> None:
    scenario = scenarios.loads(
        """
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
spec:
  until: 1m
  nodes:
    - count: 2
      namePrefix: n-
      allocatable: {cpu: "8"}
      devices:
        - {driver: gpu.example.com, count: 3, namePrefix: gpu-,
           attributes: {model: {string: a100}}, capacity: {memory: {value: 80Gi}}}
"""
    )
    simulation = runner.Simulation(scenario)
    slices = simulation.cluster.objects("ResourceSlice")
    assert [s["metadata"]["name"] for s in slices] == ["n-0-gpu.example.com", "n-1-gpu.example.com"]
    spec = slices[0]["spec"]
    assert (spec["nodeName"], spec["pool"]["name"]) == ("n-0", "n-0")
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert spec["devices"][2]["attributes"] == {"model": {"string": "a100"}, "index": {"int": 2}}


_BASE = """
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
spec:
  nodes: [{count: 1, allocatable: {cpu: "8"}}]
  objects:
{objects}
  workloads:
{workloads}
"""


@pytest.mark.parametrize(
    ("objects", "workloads", "expected"),
    [
        (
            "    - {apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {name: x},\n"
            "       spec: {selectors: [{cel: {expression: 'device.driver =='}}]}}",
            "    []",
            "spec.objects[0]: spec.selectors[0].cel.expression: compilation failed",
        ),
        (
            "    - {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate,\n"
            "       metadata: {name: t}, spec: {spec: {devices: {requests: [\n"
            "         {name: gpu, exactly: {deviceClassName: gpu, count: 0}}]}}}}",
            "    []",
            "spec.objects[0]: spec.spec.devices.requests[0].exactly.count: 0 is not a positive",
        ),
        (
            "    []",
            "    - {name: w, duration: 1m, resourceClaims: [\n"
            "        {name: gpu, resourceClaimTemplateName: missing}]}",
            "spec.workloads[0].resourceClaims[0].resourceClaimTemplateName: "
            "ResourceClaimTemplate default/missing is not in the scenario",
        ),
        (
            "    []",
            "    - {name: w, duration: 1m, resourceClaims: [{name: gpu}]}",
            "exactly one of resourceClaimName and resourceClaimTemplateName must be set",
        ),
    ],
    ids=["selector", "count-zero", "template-missing", "no-source"],
)
def test_bad_dra_input_in_a_scenario_is_an_issue_with_its_path(
    objects: str, workloads: str, expected: str
) -> None:
    with pytest.raises(errors.ScenarioError) as caught:
        scenarios.loads(_BASE.replace("{objects}", objects).replace("{workloads}", workloads))
    assert expected in str(caught.value)
