"""The shapes of ``berth bench e2e --real`` (after scheduler_perf) and the CLI that picks them.

We test these aspects:
- every shape's counts at 5000 nodes are its scheduler_perf workload's, and scale with nodes;
  ``--pods`` overrides the measured count; gangs come whole; one init pod per node at most
  where the constraint needs it;
- the nodes are node-default.yaml's size, in the three zones TopologySpreading uses; with the
  ``dra`` shape each has 8 devices of a fake driver, and its pods claim one each from a
  template;
- init pods are bound at creation and keep every constraint (anti-affinity: one per node);
- the gang shape hands each scheduler its own form of gang (Kubernetes' PodGroup and
  ``spec.schedulingGroup`` for kube-scheduler, Berth's PodGroup and label for Berth, nothing
  for the null scheduler); the standing pods fit no node;
- the CLI knows the same shapes as the benchmark, and refuses bad input clearly: --shape
  without --real, an unknown shape, a bad --standing.
"""

from __future__ import annotations

import click.testing
import pytest

from berth.api import keys, quantities
from berth.cli import e2e, e2e_shapes, main


def test_the_cli_names_the_benchmark_shapes() -> None:
    assert tuple(e2e_shapes.SHAPES) == e2e._SHAPES


@pytest.mark.parametrize(
    ("name", "init", "measured"),
    [
        ("basic", 1000, 10_000),
        ("anti-affinity", 1000, 2000),
        ("spread", 5000, 5000),
        ("preferred-affinity", 5000, 5000),
        ("gang", 1000, 2000),
        ("unschedulable-backlog", 100, 10_000),
        ("dra", 0, 25_000),
    ],
)
def test_counts_are_scheduler_perfs_at_5000_nodes_and_scale(
    name: str, init: int, measured: int
) -> None:
    shape = e2e_shapes.SHAPES[name]
    assert shape.counts(5000, None) == (init, measured)
    small_init, small_measured = shape.counts(500, None)
    assert small_init == round(init / 10)
    assert small_measured == max(100, round(measured / 10))
    assert shape.counts(500, 333)[1] == (328 if shape.gang else 333)


def test_dra_pods_claim_one_device_of_nodes_that_have_eight() -> None:
    shape = e2e_shapes.SHAPES["dra"]
    assert shape.counts(500, None) == (0, 2500)  # SchedulingWithResourceClaimTemplate's
    assert shape.counts(6, None) == (0, 48)  # never more pods than devices, unless asked
    pools = e2e_shapes.pools(6, devices=True)
    assert all(p.devices == ((e2e_shapes.DRA_DRIVER, 8),) for p in pools)
    assert all(p.devices == () for p in e2e_shapes.pools(6))
    (template,) = e2e_shapes.claim_objects(shape)
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {"deviceClassName": e2e_shapes.DRA_DRIVER}
    (pod,) = e2e_shapes.measured_pods(shape, 1, contender="berth", scheduler="s")
    assert pod["spec"]["resourceClaims"] == [
        {"name": request["name"], "resourceClaimTemplateName": template["metadata"]["name"]}
    ]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": request["name"]}]
    assert e2e_shapes.claim_objects(e2e_shapes.SHAPES["basic"]) == []


def test_init_pods_never_outnumber_nodes_where_each_needs_its_own() -> None:
    assert e2e_shapes.SHAPES["preferred-affinity"].counts(10, None)[0] == 10
    assert e2e_shapes.SHAPES["anti-affinity"].counts(5000, None)[0] == 1000


def test_nodes_are_node_default_in_three_zones() -> None:
    pools = e2e_shapes.pools(10)
    assert [p.count for p in pools] == [4, 3, 3]
    assert {p.labels[e2e_shapes.ZONE_KEY] for p in pools} == set(e2e_shapes.ZONES)
    assert all(p.allocatable == {"cpu": "4", "memory": "32Gi", "pods": "110"} for p in pools)
    assert len({n for p in pools for n in p.names()}) == 10


def test_init_pods_are_bound_and_keep_their_constraints() -> None:
    nodes = [n for p in e2e_shapes.pools(9) for n in p.names()]
    shape = e2e_shapes.SHAPES["anti-affinity"]
    pods = e2e_shapes.init_pods(shape, 9, nodes=nodes)
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(nodes)
    assert all(p["metadata"]["labels"] == {"color": "green"} for p in pods)
    assert all("podAntiAffinity" in p["spec"]["affinity"] for p in pods)
    spread = e2e_shapes.init_pods(e2e_shapes.SHAPES["spread"], 4, nodes=nodes)
    assert all("labels" not in p["metadata"] for p in spread)  # pod-default.yaml, as there
    assert all("topologySpreadConstraints" not in p["spec"] for p in spread)


def test_each_scheduler_gets_its_own_form_of_gang() -> None:
    shape = e2e_shapes.SHAPES["gang"]
    kube = e2e_shapes.measured_pods(shape, 16, contender="kube_scheduler", scheduler="s")
    berth = e2e_shapes.measured_pods(shape, 16, contender="berth", scheduler="s")
    null = e2e_shapes.measured_pods(shape, 16, contender="null", scheduler="s")
    assert [p["spec"]["schedulingGroup"]["podGroupName"] for p in kube[7:9]] == [
        "gang-00000",
        "gang-00001",
    ]
    assert berth[8]["metadata"]["labels"] == {keys.POD_GROUP_LABEL: "gang-00001"}
    assert all("schedulingGroup" not in p["spec"] and "labels" not in p["metadata"] for p in null)
    kube_groups = e2e_shapes.gang_objects(shape, 16, contender="kube_scheduler")
    assert [g["spec"]["schedulingPolicy"]["gang"]["minCount"] for g in kube_groups] == [8, 8]
    assert kube_groups[0]["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    berth_groups = e2e_shapes.gang_objects(shape, 16, contender="berth")
    assert [g["spec"]["minMember"] for g in berth_groups] == [8, 8]
    assert e2e_shapes.gang_objects(shape, 16, contender="null") == []
    assert e2e_shapes.gang_objects(e2e_shapes.SHAPES["basic"], 16, contender="berth") == []


def test_standing_pods_fit_no_node() -> None:
    pods = e2e_shapes.standing_pods(5, 8, scheduler="x")
    assert [p["metadata"]["name"] for p in pods] == ["u-000005", "u-000006", "u-000007"]
    node_cpu = quantities.parse_milli(e2e_shapes.NODE_ALLOCATABLE.split(",")[0].split("=")[1])
    for pod in pods:
        asked = pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        assert quantities.parse_milli(asked) > node_cpu


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["e2e", "--shape", "basic"], "--shape needs --real"),
        (["e2e", "--real", "--shape", "bogus"], "'bogus' is not one of"),
        (["e2e", "--real", "--standing", "ten"], "write counts such as 0,10000,50000"),
        (["e2e", "--real", "--standing", "0,-5"], "none negative"),
    ],
)
def test_bad_input_is_refused_naming_the_option(args: list[str], message: str) -> None:
    outcome = click.testing.CliRunner().invoke(main.cli, ["bench", *args])
    assert outcome.exit_code == 2, outcome.output
    assert message in outcome.output
