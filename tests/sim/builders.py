"""Builders shared by the simulator tests: scenarios from short YAML, reports by job."""

from __future__ import annotations

import textwrap
import typing

from berth.sim import runner, scenarios

HEADER = """\
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
metadata: {name: test}
"""


def guard_profile(*, proportion: str, gpus: str = "MostAllocated", gpu_weight: int = 1) -> str:
    """A scenario's ``profile:`` block with the plugins the starvation guard's tests need:
    Proportion with the arguments ``proportion`` (a YAML flow mapping's body), GPUs scored
    ``gpus`` (cpu and memory spread) with ``gpu_weight``."""
    return f"""\
profile:
  actions: [allocate, backfill, reclaim, preempt]
  plugins:
    - {{name: Priority}}
    - {{name: Gang}}
    - {{name: Proportion, args: {{{proportion}}}}}
    - {{name: NodeName}}
    - {{name: NodeUnschedulable}}
    - {{name: NodeAffinity}}
    - {{name: TaintToleration}}
    - name: NodeResourcesFit
      args:
        scoringStrategy:
          type: LeastAllocated
          resources: [{{name: nvidia.com/gpu, weight: {gpu_weight}, type: {gpus}}}]
    - {{name: DefaultBinder}}
"""


def scenario(spec: str) -> scenarios.Scenario:
    """A scenario from the YAML of its ``spec`` (dedented)."""
    body = textwrap.indent(textwrap.dedent(spec), "  ")
    return scenarios.loads(HEADER + "spec:\n" + body)


def run(spec: str, **kwargs: typing.Any) -> dict[str, typing.Any]:
    """The report of the scenario whose ``spec`` is given."""
    return runner.run(scenario(spec), **kwargs)


def jobs(report: dict[str, typing.Any]) -> dict[str, dict[str, typing.Any]]:
    """The report's workloads by ``namespace/name``."""
    return {f"{w['namespace']}/{w['name']}": w for w in report["workloads"]}
