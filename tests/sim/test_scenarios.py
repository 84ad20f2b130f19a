"""Scenario files: the schema, defaults, cross-references and error reports.

We test these aspects:
- a complete scenario loads; manifests come back as the API stores them (defaults filled);
- every bad input of the issue (unknown keys, bad quantities, negative durations, undefined
  queues) and more is reported with the path in the file and its line;
- all problems of a file are reported at once, ordered by line;
- node names are zero-padded so that name order is index order.
"""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from berth.sim import errors, scenarios

GOOD = """\
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
metadata: {name: good}
spec:
  seed: 3
  until: 4h
  nodes:
    - {count: 16, namePrefix: gpu-, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"},
       labels: {pool: gpu}, taints: [{key: dedicated, value: gpu, effect: NoSchedule}]}
  objects:
    - apiVersion: scheduling.berth.io/v1alpha1
      kind: Queue
      metadata: {name: team-a}
      spec: {weight: 2}
    - apiVersion: scheduling.k8s.io/v1
      kind: PriorityClass
      metadata: {name: high}
      value: 1000
  workloads:
    - {name: train, namespace: team-a, queue: team-a, at: 0, every: 5m, count: 12,
       replicas: 8, minMember: 8, priorityClassName: high, duration: 30m,
       requests: {cpu: "8", nvidia.com/gpu: "1"}, nodeSelector: {pool: gpu},
       tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]}
  events:
    - {at: 1h, apply: {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue,
                       metadata: {name: team-a}, spec: {weight: 4}}}
    - {at: 2h, delete: {kind: Queue, name: team-a}}
"""


def test_a_complete_scenario_loads() -> None:
    scenario = scenarios.loads(GOOD)
    spec = scenario.spec
    assert scenario.name == "good"
    assert (spec.seed, spec.until and spec.until.ms) == (3, 4 * 3600 * 1000)
    workload = spec.workloads[0]
    assert (workload.at.ms, workload.every and workload.every.ms) == (0, 300_000)
    assert workload.requests == {"cpu": 8000, "nvidia.com/gpu": 1000}
    assert workload.is_group
    queue = spec.objects[0]
    assert queue["spec"]["weight"] == 2
    assert queue["spec"]["state"] == "Open"  # a default the API model fills in
    assert spec.events[0].apply is not None and spec.events[0].apply["spec"]["weight"] == 4
    assert spec.events[1].delete is not None and spec.events[1].delete.scoped_namespace is None


def test_load_reads_a_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD, encoding="utf-8")
    assert scenarios.load(path).name == "good"


def test_a_missing_file_is_a_scenario_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.ScenarioError, match="cannot read"):
        scenarios.load(tmp_path / "nope.yaml")


def _scenario(workloads: str = "", objects: str = "", extra: str = "") -> str:
    return textwrap.dedent(
        """\
        apiVersion: sim.berth.io/v1alpha1
        kind: Scenario
        spec:
          nodes:
            - {count: 2, allocatable: {cpu: "8"}}
        """
    ) + textwrap.indent(workloads + objects + extra, "  ")


def _workloads(*lines: str) -> str:
    return "workloads:\n" + "".join(f"  - {line}\n" for line in lines)


OK = '{name: ok, duration: 1m, requests: {cpu: "1"}}'


@pytest.mark.parametrize(
    ("text", "path", "line", "message"),
    [
        (
            _scenario(
                _workloads(
                    OK, OK.replace("ok", "b"), '{name: c, duration: 1m, requests: {cpu: "8x"}}'
                )
            ),
            "spec.workloads[2].requests.cpu",
            9,
            "'8x'",
        ),
        (
            _scenario(_workloads('{name: a, duration: 1m, requests: {nvidia.com/gpu: "-1"}}')),
            'spec.workloads[0].requests["nvidia.com/gpu"]',
            7,
            "must not be negative",
        ),
        (
            _scenario(_workloads("{name: a, duration: -5m}")),
            "spec.workloads[0].duration",
            7,
            "must not be negative",
        ),
        (
            _scenario(_workloads("{name: a, duration: 5 minutes}")),
            "spec.workloads[0].duration",
            7,
            "malformed",
        ),
        (
            _scenario(_workloads("{name: a, duration: 1m, minMembers: 2}")),
            "spec.workloads[0].minMembers",
            7,
            "unknown field",
        ),
        (
            _scenario(_workloads("{name: a, duration: 1m, queue: team-x}")),
            "spec.workloads[0].queue",
            7,
            "queue 'team-x' is not defined",
        ),
        (
            _scenario(_workloads("{name: a}")),
            "spec.workloads[0].duration",
            7,
            "required field is missing",
        ),
        (
            _scenario(_workloads("{name: a, duration: 1m, replicas: 2, minMember: 3}")),
            "spec.workloads[0]",
            7,
            "cannot exceed replicas",
        ),
        (
            _scenario(_workloads("{name: a, duration: 1m, count: 3}")),
            "spec.workloads[0]",
            7,
            "every is required",
        ),
        (
            _scenario(_workloads(OK, OK)),
            "spec.workloads[1].name",
            8,
            "is also spec.workloads[0]",
        ),
        (
            _scenario(_workloads("{name: a, duration: 1m, priorityClassName: gold}")),
            "spec.workloads[0].priorityClassName",
            7,
            "PriorityClass 'gold'",
        ),
        (
            _scenario(
                objects="objects:\n  - {apiVersion: scheduling.berth.io/v1alpha1, kind: PodGroup,"
                " metadata: {name: g}, spec: {queue: nowhere}}\n"
            ),
            "spec.objects[0].spec.queue",
            7,
            "queue 'nowhere' is not defined",
        ),
        (
            _scenario(
                objects="objects:\n  - apiVersion: scheduling.berth.io/v1alpha1\n    kind: Queue\n"
                "    metadata: {name: q}\n    spec: {weight: 0}\n"
            ),
            "spec.objects[0].spec.weight",
            10,
            "greater than or equal to 1",
        ),
        (
            _scenario(
                objects="objects:\n  - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n"
            ),
            "spec.objects[0].kind",
            7,
            "kind must be one of",
        ),
        (
            _scenario(extra="events:\n  - {at: 1h}\n"),
            "spec.events[0]",
            7,
            "exactly one of apply or delete",
        ),
        (
            _scenario(extra="events:\n  - {at: 1h, delete: {kind: Node, name: n}}\n"),
            "spec.events[0].delete.kind",
            7,
            "Input should be",
        ),
        (
            _scenario(extra="until: soon\n"),
            "spec.until",
            6,
            "malformed",
        ),
        (
            _scenario(extra="seeds: 1\n"),
            "spec.seeds",
            6,
            "unknown field",
        ),
        (
            _scenario().replace("kind: Scenario", "kind: Scenarios"),
            "kind",
            2,
            "Input should be 'Scenario'",
        ),
        (
            _scenario().replace('{cpu: "8"}', '{cpu: "8", memory: lots}'),
            "spec.nodes[0].allocatable.memory",
            5,
            "'lots'",
        ),
    ],
    ids=[
        "bad-quantity",
        "negative-quantity",
        "negative-duration",
        "malformed-duration",
        "unknown-key",
        "undefined-queue",
        "missing-duration",
        "min-member-above-replicas",
        "count-without-every",
        "duplicate-workload",
        "undefined-priority-class",
        "podgroup-undefined-queue",
        "manifest-invalid-field",
        "unsupported-kind",
        "event-without-action",
        "delete-unsupported-kind",
        "bad-until",
        "unknown-spec-key",
        "wrong-kind",
        "bad-node-quantity",
    ],
)
def test_bad_scenarios_name_the_path_and_line(
    text: str, path: str, line: int, message: str
) -> None:
    with pytest.raises(errors.ScenarioError) as info:
        scenarios.loads(text, source="s.yaml")
    found = [(i.path, i.line) for i in info.value.issues]
    assert (path, line) in found, info.value
    issue = info.value.issues[found.index((path, line))]
    assert message in issue.message
    assert f"s.yaml:{line}:" in str(info.value)


def test_every_problem_is_reported_at_once_in_line_order() -> None:
    text = _scenario(
        _workloads("{name: a, duration: -1s}", '{name: b, duration: 1m, requests: {cpu: "x"}}'),
        objects="objects:\n  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue,"
        " metadata: {name: q}, spec: {weight: 0}}\n",
    )
    with pytest.raises(errors.ScenarioError) as info:
        scenarios.loads(text)
    assert [i.path for i in info.value.issues] == [
        "spec.workloads[0].duration",
        "spec.workloads[1].requests.cpu",
        "spec.objects[0].spec.weight",
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [(None, "must be a mapping"), ([1, 2], "must be a mapping")],
    ids=["empty", "list"],
)
def test_a_document_that_is_not_a_mapping_is_refused(data: object, message: str) -> None:
    with pytest.raises(errors.ScenarioError, match=message):
        scenarios.from_data(data)


@pytest.mark.parametrize(
    ("count", "names"),
    [(1, ["n-0"]), (3, ["n-0", "n-1", "n-2"]), (11, ["n-00", "n-01", "n-10"])],
    ids=["one", "few", "padded"],
)
def test_node_names_sort_in_index_order(count: int, names: list[str]) -> None:
    pool = scenarios.NodePool.model_validate(
        {"count": count, "namePrefix": "n-", "allocatable": {"cpu": "1"}}
    )
    generated = scenarios.node_names(pool)
    assert generated == sorted(generated)
    assert all(name in generated for name in names)
