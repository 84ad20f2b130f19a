"""Bad input to the fair-share, ordering and timeout settings is refused, naming the field
(issue 16, "Bad input").

We test these aspects:
- the Queue and PodGroup models refuse a weight of 0 or above 65535, a negative or week-plus
  ``reclaimMinRuntimeSeconds``, an unknown ``jobOrder`` or ``onScheduleTimeout``, each
  problem at its path, and nothing else of the document is taken;
- the committed CRDs carry the same bounds and enums (the API server refuses them too);
- a profile giving Proportion or Gang out-of-range arguments is refused, naming each
  argument's path;
- thresholds that contradict each other are refused, naming both (a hold timeout or
  ``drainPreemptSeconds`` with the guard off, ``drainPreemptSeconds`` at or past
  ``drainTimeoutSeconds``); ``drainPreemptSeconds`` left at its default gives way to a shorter
  ``drainTimeoutSeconds`` instead.
"""

from __future__ import annotations

import pathlib
import typing

import pytest
import yaml

from berth.api import errors, manifests
from berth.scheduler.actions import registry as actions
from berth.scheduler.framework import errors as framework_errors
from berth.scheduler.framework import profiles
from berth.scheduler.plugins import proportion, registry

ROOT = pathlib.Path(__file__).resolve().parents[2]


def queue(**spec: typing.Any) -> dict[str, typing.Any]:
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "team"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("document", "path", "fragment"),
    [
        (queue(weight=0), "spec.weight", "greater than or equal to 1"),
        (queue(weight=70_000), "spec.weight", "less than or equal to 65535"),
        (queue(reclaimMinRuntimeSeconds=-1), "spec.reclaimMinRuntimeSeconds", "greater than"),
        (queue(reclaimMinRuntimeSeconds=10**7), "spec.reclaimMinRuntimeSeconds", "less than"),
        (queue(jobOrder="Random"), "spec.jobOrder", "'PriorityFIFO', 'FIFO' or 'NamespaceFair'"),
        (queue(preemptAcrossQueues="maybe"), "spec.preemptAcrossQueues", "valid boolean"),
        (
            {
                "apiVersion": "scheduling.berth.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "ns"},
                "spec": {"minMember": 2, "onScheduleTimeout": "Explode"},
            },
            "spec.onScheduleTimeout",
            "'Requeue' or 'Fail'",
        ),
    ],
    ids=[
        "weight-0",
        "weight-huge",
        "runtime-negative",
        "runtime-huge",
        "job-order",
        "preempt",
        "timeout-policy",
    ],
)
def test_the_models_refuse_bad_policy_fields(
    document: dict[str, typing.Any], path: str, fragment: str
) -> None:
    with pytest.raises(errors.ManifestError) as info:
        manifests.load_documents([document], source="test.yaml")
    assert [p for p, _ in info.value.problems] == [path]
    assert fragment in str(info.value)


def test_the_crds_carry_the_bounds_and_enums() -> None:
    def spec_of(name: str) -> dict[str, typing.Any]:
        crd = yaml.safe_load((ROOT / "crds" / name).read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        return typing.cast(dict[str, typing.Any], schema["properties"]["spec"]["properties"])

    queue_spec = spec_of("queues.yaml")
    runtime = queue_spec["reclaimMinRuntimeSeconds"]
    assert (runtime["minimum"], runtime["maximum"]) == (0, 604800)
    assert queue_spec["jobOrder"]["enum"] == ["PriorityFIFO", "FIFO", "NamespaceFair"]
    assert queue_spec["preemptAcrossQueues"]["type"] == "boolean"
    group_spec = spec_of("podgroups.yaml")
    assert group_spec["onScheduleTimeout"]["enum"] == ["Requeue", "Fail"]


def test_a_profile_with_out_of_range_arguments_is_refused() -> None:
    base = registry.default_profile()
    bad = {
        "Proportion": {
            "reclaimEvictionsPerCycle": 0,
            "reclaimMinRuntimeSeconds": -1,
            "usageHalfLifeSeconds": 0,
            "drainTimeoutSeconds": 0,
            "drainPreemptSeconds": -5,
        },
        "Gang": {"maxTimeoutBackoffSeconds": 0},
    }
    profile = profiles.parse(
        {
            "schedulerName": base.scheduler_name,
            "actions": list(base.actions),
            "plugins": [{"name": p.name, "args": bad.get(p.name, {})} for p in base.plugins],
        }
    )
    with pytest.raises(framework_errors.ProfileError) as info:
        profiles.resolve(
            profile,
            registry=registry.in_tree_registry(),
            actions={a.name for a in actions.default_actions()},
        )
    message = str(info.value)
    for argument in (
        "reclaimEvictionsPerCycle",
        "reclaimMinRuntimeSeconds",
        "usageHalfLifeSeconds",
        "drainTimeoutSeconds",
        "drainPreemptSeconds",
        "maxTimeoutBackoffSeconds",
    ):
        assert f"args.{argument}" in message, message


def _resolve_proportion(args: dict[str, typing.Any]) -> None:
    """Resolve the default profile with Proportion's ``args``."""
    base = registry.default_profile()
    profile = profiles.parse(
        {
            "schedulerName": base.scheduler_name,
            "actions": list(base.actions),
            "plugins": [
                {"name": p.name, "args": args if p.name == "Proportion" else {}}
                for p in base.plugins
            ],
        }
    )
    profiles.resolve(
        profile,
        registry=registry.in_tree_registry(),
        actions={a.name for a in actions.default_actions()},
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # The guard is off, so nothing would be held.
        (
            {"starvationThresholdSeconds": 0, "drainTimeoutSeconds": 3600},
            "drainTimeoutSeconds is set but starvationThresholdSeconds",
        ),
        (
            {"starvationThresholdSeconds": None, "drainPreemptSeconds": 3600},
            "drainPreemptSeconds is set but starvationThresholdSeconds",
        ),
        # The room would be given back before the gang took it.
        (
            {"drainTimeoutSeconds": 3600, "drainPreemptSeconds": 3600},
            "drainPreemptSeconds (3600) must be below drainTimeoutSeconds (3600)",
        ),
    ],
    ids=["timeout-without-guard", "preempt-without-guard", "preempt-past-timeout"],
)
def test_thresholds_that_contradict_each_other_are_refused(
    args: dict[str, typing.Any], said: str
) -> None:
    with pytest.raises(framework_errors.ProfileError) as info:
        _resolve_proportion(args)
    assert said in str(info.value)


def test_drain_preempt_left_at_its_default_gives_way_to_a_shorter_timeout() -> None:
    # A profile that bounds its holds by giving them back (before drainPreemptSeconds'
    # three hours) keeps that behaviour: preempting is off, nothing is refused.
    args = proportion.ProportionArgs.model_validate({"drainTimeoutSeconds": 3600})
    assert args.preempt_after is None
    _resolve_proportion({"drainTimeoutSeconds": 3600})
    assert proportion.ProportionArgs().preempt_after == 3 * 3600
    off = proportion.ProportionArgs.model_validate({"drainPreemptSeconds": None})
    assert off.preempt_after is None
    assert (
        proportion.ProportionArgs.model_validate({"starvationThresholdSeconds": 0}).preempt_after
        is None
    )
