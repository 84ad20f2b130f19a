"""Determinism: the same scenario and seed give byte-identical JSON reports.

We test these aspects:
- every example scenario, run twice, gives the same bytes;
- Poisson arrivals: the same seed gives the same report, another seed another one;
- the seed given to the run overrides the scenario's and is written in the report.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from berth.sim import runner, scenarios
from tests.sim import builders

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sim"

POISSON = """\
nodes:
  - {count: 3, allocatable: {cpu: "8", nvidia.com/gpu: "2"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: a}, spec: {weight: 2}}
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: b}}
workloads:
  - {name: x, namespace: a, queue: a, arrival: poisson, every: 3m, count: 40, replicas: 2,
     minMember: 2, duration: 10m, requests: {cpu: "2", nvidia.com/gpu: "1"}}
  - {name: y, namespace: b, queue: b, arrival: poisson, every: 2m, count: 40,
     duration: 7m, requests: {cpu: "3"}}
"""


def dumps(report: dict[str, object]) -> bytes:
    return json.dumps(report, indent=2).encode()


@pytest.mark.parametrize("name", ["fair-share", "reclaim", "starvation-guard", "reservation"])
def test_an_example_run_twice_gives_identical_bytes(name: str) -> None:
    scenario = scenarios.load(EXAMPLES / f"{name}.yaml")
    assert dumps(runner.run(scenario)) == dumps(runner.run(scenario))


def test_poisson_arrivals_are_the_same_for_the_same_seed_only() -> None:
    scenario = builders.scenario(POISSON)
    first = dumps(runner.run(scenario, seed=5))
    assert first == dumps(runner.run(scenario, seed=5))
    assert first != dumps(runner.run(scenario, seed=6))


def test_the_seed_of_the_run_is_in_the_report() -> None:
    scenario = builders.scenario("seed: 9\n" + POISSON)
    assert runner.run(scenario)["seed"] == 9
    assert runner.run(scenario, seed=3)["seed"] == 3
