"""Property: one PersistentVolume never goes to two claims, whatever arrives in what order.

Hypothesis generates a few nodes, local volumes of mixed sizes and access modes (on one node,
or reachable from every node), ``WaitForFirstConsumer`` claims of mixed sizes and modes
(``ReadWriteOnce``, ``ReadWriteOncePod``), and pods using them — some sharing a claim, some in
gangs with a claim per member — that arrive over several cycles in a random order. The
in-memory cluster plays the API server (it refuses a volume reservation decided on a version of
the volume that is not the current one, as the conditional write is refused) and
kube-controller-manager's PV binder. After every cycle:

- no volume was ever reserved for one claim and then for another (a claim's volume, once
  chosen, is its own), and the scheduler never sent a reservation the API server would
  refuse (it never chose a volume another claim had);
- every running pod's claims are bound, and no two claims are bound to one volume;
- a pod that runs no gang and waits does so only when no volume left fits its claim (the
  scheduler does not hold volumes back), after the last arrivals are through.
"""

from __future__ import annotations

import dataclasses
import typing

import hypothesis
import hypothesis.strategies as st

from berth.scheduler.snapshot import volumes
from berth.sim import cluster
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.constraints import specs as s
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]
SIZES = ("1Gi", "2Gi", "5Gi")
RWO, RWOP = "ReadWriteOnce", volumes.READ_WRITE_ONCE_POD
GIB = 1024**3


@dataclasses.dataclass(frozen=True)
class Case:
    nodes: int
    volumes: list[Obj]
    claims: list[Obj]
    arrivals: list[list[Obj]]  # the pods (and PodGroups) of each cycle, in order


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes = draw(st.integers(min_value=1, max_value=3))
    made_volumes = []
    for i in range(draw(st.integers(min_value=1, max_value=6))):
        on = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=nodes - 1)))
        # ReadWriteOncePod goes with no other mode (the API server refuses the mix).
        modes = draw(st.sampled_from([(RWO,), (RWOP,), (RWO, "ReadOnlyMany")]))
        made_volumes.append(
            s.volume(
                f"pv{i}",
                size=draw(st.sampled_from(SIZES)),
                nodes=None if on is None else [f"n{on}"],
                modes=modes,
            )
        )
    claim_count = draw(st.integers(min_value=1, max_value=8))
    claims = [
        s.claim(
            f"c{i}",
            size=draw(st.sampled_from(SIZES)),
            modes=(draw(st.sampled_from([RWO, RWOP])),),
        )
        for i in range(claim_count)
    ]
    units: list[list[Obj]] = []
    free = list(range(claim_count))
    serial = 0
    while free:
        serial += 1
        if len(free) >= 2 and draw(st.integers(0, 3)) == 0:  # a gang, a claim per member
            size = draw(st.integers(min_value=2, max_value=min(3, len(free))))
            mine, free = free[:size], free[size:]
            group = f"g{serial}"
            units.append(
                [
                    b.pod_group(group, min_member=size),
                    *(
                        b.pod(f"{group}-{i}", group=group, spec=s.claims(f"c{c}"))
                        for i, c in enumerate(mine)
                    ),
                ]
            )
            continue
        claim, free = free[0], free[1:]
        users = draw(st.integers(min_value=1, max_value=2))  # two pods may share one claim
        units.extend([[b.pod(f"p{serial}-{u}", spec=s.claims(f"c{claim}"))] for u in range(users)])
    order = draw(st.permutations(units))
    cycles = draw(st.integers(min_value=1, max_value=4))
    arrivals: list[list[Obj]] = [[] for _ in range(cycles)]
    for unit in order:
        arrivals[draw(st.integers(min_value=0, max_value=cycles - 1))].extend(unit)
    return Case(nodes, made_volumes, claims, arrivals)


def _ref(volume: Obj) -> str | None:
    ref = (volume.get("spec") or {}).get("claimRef") or {}
    return f"{ref.get('namespace') or 'default'}/{ref['name']}" if ref.get("name") else None


def _bytes(text: str) -> int:
    return int(text.removesuffix("Gi")) * GIB


def _fits(volume: Obj, claim: Obj) -> bool:
    want = claim["spec"]
    have = volume["spec"]
    return _bytes(have["capacity"]["storage"]) >= _bytes(
        want["resources"]["requests"]["storage"]
    ) and set(want["accessModes"]) <= set(have["accessModes"])


def _check(sim: cluster.InMemoryCluster, reserved: dict[str, str]) -> None:
    assert sim.refused_volumes == [], "a volume was chosen for a claim while another had it"
    bound_to: dict[str, str] = {}
    for claim in sim.objects("PersistentVolumeClaim"):
        name = claim["spec"].get("volumeName")
        if name:
            key = f"default/{claim['metadata']['name']}"
            assert name not in bound_to, f"{name} bound to {bound_to.get(name)} and {key}"
            bound_to[name] = key
    for volume in sim.objects("PersistentVolume"):
        holder = _ref(volume)
        if holder is None:
            continue
        first = reserved.setdefault(volume["metadata"]["name"], holder)
        assert first == holder, f"{volume['metadata']['name']} went to {first}, then {holder}"
    for pod in sim.objects("Pod"):
        if not pod["spec"].get("nodeName"):
            continue
        for use in pod["spec"].get("volumes") or ():
            claim = sim.get("PersistentVolumeClaim", name=use["persistentVolumeClaim"]["claimName"])
            assert claim is not None and claim["status"].get("phase") == "Bound"


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(cases())
def test_no_volume_is_given_to_two_claims(case: Case) -> None:
    clock = clocks.VirtualClock(b.EPOCH)
    big = [b.node(f"n{i}", cpu="64", memory="256Gi") for i in range(case.nodes)]
    sim = harness.in_memory(
        *big, s.storage_class("local"), *case.volumes, *case.claims, clock=clock
    )
    scheduler = harness.scheduler(harness.profile_with(), clock=clock)
    reserved: dict[str, str] = {}
    for arriving in case.arrivals:
        for obj in arriving:
            sim.put(obj)
        clock.advance(1.0)
        scheduler.run_once(sim, sim)
        _check(sim, reserved)
    for _ in range(2):  # the last arrivals settle
        clock.advance(1.0)
        scheduler.run_once(sim, sim)
        _check(sim, reserved)
    taken = {v["metadata"]["name"] for v in sim.objects("PersistentVolume") if _ref(v)}
    left = [v for v in sim.objects("PersistentVolume") if v["metadata"]["name"] not in taken]
    for pod in sim.objects("Pod"):
        if pod["spec"].get("nodeName") or (pod["metadata"].get("labels") or {}).get(
            "scheduling.berth.io/pod-group"
        ):
            continue
        claim = sim.get(
            "PersistentVolumeClaim",
            name=pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        )
        assert claim is not None
        if claim["spec"].get("volumeName"):
            continue  # its claim has a volume: it waits for something else (RWOP, a user)
        fitting = [v["metadata"]["name"] for v in left if _fits(v, claim)]
        assert not fitting, f"{pod['metadata']['name']} waits while {fitting} fit its claim"
