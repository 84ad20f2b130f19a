"""A PodGroup's ``Scheduled`` condition names the obstacle the scheduler met, as its code.

We test that, for the topology and sub-group cases of the scheduler's scenario table (a
required rack with no room, a rack the gang fits in none of, an unknown level, a domain
smaller than the gang, a role below its minimum, a selector matching no pod, overlapping
selectors), one cycle's reason becomes a ``Scheduled=False`` condition whose reason is the
specific code (never the catch-all ``Unschedulable``) and whose message is the scheduler's,
and that the reason's details name the PodGroup field at fault.
"""

from __future__ import annotations

import pytest

from berth.status import observations, podgroups
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness
from tests.scheduler.plugins import test_topology_scenarios as table

CODED = [s for s in table.SCENARIOS if s.codes]


@pytest.mark.parametrize("scenario", CODED, ids=[s.id for s in CODED])
def test_the_condition_reason_is_the_specific_code(scenario: table.Scenario) -> None:
    clock = clocks.VirtualClock(b.EPOCH)
    sim = harness.in_memory(*scenario.objects, clock=clock)
    result = harness.scheduler(harness.profile_with(), clock=clock).run_once(sim, sim)
    snapshot = sim.snapshot()
    for name, code in scenario.codes.items():
        group = sim.get("PodGroup", namespace="default", name=name)
        assert group is not None
        seen = observations.observe("PodGroup", body=group, parse_time=lambda _: b.EPOCH)
        assert seen is not None
        why = result.group_why[f"default/{name}"]
        status = podgroups.desired_status(seen, snapshot=snapshot, reason=why, now=b.EPOCH)
        assert status is not None
        (condition,) = [c for c in status["conditions"] if c["type"] == "Scheduled"]
        assert (condition["status"], condition["reason"]) == ("False", code)
        assert condition["message"] == why.message
        if name in scenario.groups:
            assert why.message == scenario.groups[name]
        field = why.details.get("field")
        assert isinstance(field, str) and field.split(".")[0] == "spec", why
