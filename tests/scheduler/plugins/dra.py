"""Running DRA scenarios on the simulator: cycles of the default profile, and what they wrote.

The DynamicResources tables build a cluster of API dicts (:mod:`tests.scheduler.dra_builders`),
run cycles on the in-memory cluster (which plays the resourceclaim controller) and read back
where pods went, why others wait, and the claims as the decisions left them.
"""

from __future__ import annotations

import dataclasses
import typing

from berth.scheduler.framework import decisions, profiles, reasons
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]


@dataclasses.dataclass
class Run:
    """What the cycles did."""

    bindings: dict[str, str]  # pod key -> node, over every cycle
    why: dict[str, reasons.Reason]  # pods still waiting after the last cycle
    group_why: dict[str, reasons.Reason]
    claims: dict[str, Obj]  # claim name -> as stored after the last cycle
    decided: list[decisions.Decision]  # every decision of every cycle, in order
    cluster: typing.Any

    def claim_of(self, pod: str, entry: str = "gpu") -> Obj:
        """The claim made for ``pod``'s template entry ``entry``."""
        found = [
            c
            for c in self.claims.values()
            if (c["metadata"].get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name")
            == entry
            and any(r.get("name") == pod for r in c["metadata"].get("ownerReferences") or [])
        ]
        assert len(found) == 1, (pod, entry, sorted(self.claims))
        return found[0]

    def devices_of(self, claim: Obj) -> list[str]:
        """``pool/device`` of each device allocated to ``claim``, in result order."""
        allocation = (claim.get("status") or {}).get("allocation") or {}
        return [f"{r['pool']}/{r['device']}" for r in allocation["devices"]["results"]]

    def message(self, pod: str) -> str:
        return self.why[f"default/{pod}"].message

    def code(self, pod: str) -> str:
        return self.why[f"default/{pod}"].code.value


def run(
    *objs: Obj, cycles: int = 1, profile: profiles.Profile | None = None, between: typing.Any = None
) -> Run:
    """``cycles`` cycles of the default profile (``allocate`` only unless ``profile``) over
    ``objs``; ``between(cluster)`` is called before every cycle but the first."""
    clock = clocks.VirtualClock(b.EPOCH)
    sim = harness.in_memory(*objs, clock=clock)
    scheduler = harness.scheduler(profile or harness.profile_with(), clock=clock)
    bindings: dict[str, str] = {}
    decided: list[decisions.Decision] = []
    result = None
    for index in range(cycles):
        if index and between is not None:
            between(sim)
        clock.advance(1)
        result = scheduler.run_once(sim, sim)
        assert not result.errors, result.errors
        bindings.update(result.bindings())
        decided.extend(result.decisions)
    assert result is not None
    return Run(
        bindings=bindings,
        why=dict(result.pod_why),
        group_why=dict(result.group_why),
        claims={c["metadata"]["name"]: c for c in sim.objects("ResourceClaim")},
        decided=decided,
        cluster=sim,
    )
