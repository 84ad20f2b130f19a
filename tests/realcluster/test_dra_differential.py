"""Berth against the real kube-scheduler on generated DRA claims, classes and slices.

Two identical sets of three KWOK nodes, one for each scheduler (a node selector keeps each
scheduler's pods on its set). For every generated case a fake driver of its own publishes the
same devices on both sets (attributes ``model`` and ``numa``, capacity ``memory``; shared by
capacity in the consumable-capacity cases), with a DeviceClass selecting them (sometimes
narrowed by a CEL selector of its own), and the same claims and pods go to both schedulers:

- ``exactly`` requests of 1 to 4 devices, with or without a CEL selector (an attribute, or a
  capacity compared as a quantity);
- ``allocationMode: All``;
- ``firstAvailable``: a prioritized list of two sub-requests;
- ``matchAttribute`` over the NUMA node of two or three devices;
- one claim shared by two pods (named, not from a template);
- consumable capacity: devices shared by several claims up to their memory, two or three pods
  each consuming part of one.

The kube-scheduler and Berth in v1.36 with every DRA feature this needs on by default (GA:
the prioritized list, admin access; beta and on: partitionable devices, consumable capacity,
device taints), so the control plane needs no feature gate.

We test these aspects:
- for every pod of every case, Berth and kube-scheduler agree on whether it fits;
- every claim Berth allocated is one the API server accepted (the claim's status as written;
  the ``real`` fixture fails on any request the API server refused Berth), and satisfies, as an
  independent check written from the API's rules (not from Berth's allocator): the devices are
  on the pod's node and exist there; each request got exactly its count (``All``: every matching
  device of the node), of devices matching the class's and the request's selectors; a
  prioritized list got its first alternative the node could meet; a ``matchAttribute`` holds;
  a device is allocated whole to one claim only, a device shared by capacity is never consumed
  past its capacity, each share consuming what its claim asked.
"""

from __future__ import annotations

import dataclasses
import random
import time
import typing
import uuid

import pytest

from berth.api import dra, keys
from berth.emulator import kubelets
from berth.realcluster import nodes, processes
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]
SETS = ("kube", "berth")
SCHEDULERS = {"kube": "default-scheduler", "berth": keys.DEFAULT_SCHEDULER_NAME}
NODES = 3
CASES = 30
SEED = 20261128
KINDS = ("exact", "all", "first-available", "match-attribute", "shared", "consumable")
GI = 2**30


@dataclasses.dataclass(frozen=True)
class Device:
    name: str
    model: str
    numa: int
    memory: int  # GiB
    shared: bool  # allowMultipleAllocations

    def api(self) -> Obj:
        out: Obj = {
            "name": self.name,
            "attributes": {"model": {"string": self.model}, "numa": {"int": self.numa}},
            "capacity": {"memory": {"value": f"{self.memory}Gi"}},
        }
        if self.shared:
            out["allowMultipleAllocations"] = True
        return out


@dataclasses.dataclass(frozen=True)
class Selector:
    """One CEL selector of the generated family, and what it means (the checker's side)."""

    field: str  # model, numa, memory (at least, GiB)
    value: str | int

    def cel(self, driver: str) -> str:
        if self.field == "memory":
            return f'device.capacity["{driver}"].memory.compareTo(quantity("{self.value}Gi")) >= 0'
        value = f'"{self.value}"' if isinstance(self.value, str) else str(self.value)
        return f'device.attributes["{driver}"].{self.field} == {value}'

    def holds(self, device: Device) -> bool:
        if self.field == "memory":
            return device.memory >= int(self.value)
        return bool(getattr(device, self.field) == self.value)


@dataclasses.dataclass(frozen=True)
class Ask:
    """A request (or a sub-request of a prioritized list)."""

    name: str
    count: int  # 0: allocationMode All
    selectors: tuple[Selector, ...] = ()
    memory: int | None = None  # consumable capacity asked (GiB)

    def api(self, driver: str) -> Obj:
        out: Obj = {"deviceClassName": driver}
        if self.count == 0:
            out["allocationMode"] = "All"
        else:
            out["count"] = self.count
        if self.selectors:
            out["selectors"] = [{"cel": {"expression": s.cel(driver)}} for s in self.selectors]
        if self.memory is not None:
            out["capacity"] = {"requests": {"memory": f"{self.memory}Gi"}}
        return out


@dataclasses.dataclass(frozen=True)
class Case:
    index: int
    kind: str
    driver: str
    layout: tuple[tuple[Device, ...], ...]  # per node index
    class_selectors: tuple[Selector, ...]
    asks: tuple[Ask, ...]  # one: exactly; several: firstAvailable, in priority order
    match_numa: bool
    pods: int

    @property
    def name(self) -> str:
        return f"c{self.index:02d}"

    def matches(self, device: Device, ask: Ask) -> bool:
        return all(s.holds(device) for s in (*self.class_selectors, *ask.selectors))

    def device_class(self) -> Obj:
        expressions = [f'device.driver == "{self.driver}"']
        expressions += [s.cel(self.driver) for s in self.class_selectors]
        return {
            "apiVersion": dra.API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": self.driver},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
        }

    def slices(self, node_names: list[str]) -> list[Obj]:
        return [
            {
                "apiVersion": dra.API_VERSION,
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-{self.driver}"},
                "spec": {
                    "driver": self.driver,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [d.api() for d in devices],
                },
            }
            for node, devices in zip(node_names, self.layout, strict=True)
        ]

    def claim_spec(self) -> Obj:
        if len(self.asks) == 1:
            request: Obj = {"name": "r", "exactly": self.asks[0].api(self.driver)}
        else:
            request = {
                "name": "r",
                "firstAvailable": [{"name": a.name, **a.api(self.driver)} for a in self.asks],
            }
        devices: Obj = {"requests": [request]}
        if self.match_numa:
            devices["constraints"] = [{"requests": ["r"], "matchAttribute": f"{self.driver}/numa"}]
        return {"devices": devices}

    def objects(self, *, label: str) -> list[Obj]:
        """The case's claim (shared) or template, and its pods, for one node set."""
        shared = self.kind == "shared"
        kind = "ResourceClaim" if shared else "ResourceClaimTemplate"
        spec = self.claim_spec() if shared else {"spec": self.claim_spec()}
        source = {"resourceClaimName" if shared else "resourceClaimTemplateName": self.name}
        out: list[Obj] = [
            {
                "apiVersion": dra.API_VERSION,
                "kind": kind,
                "metadata": {"name": self.name},
                "spec": spec,
            }
        ]
        for i in range(self.pods):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"{self.name}-p{i}", "labels": {"case": self.name}},
                    "spec": {
                        "schedulerName": SCHEDULERS[label],
                        "nodeSelector": {"dra-diff": label},
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                            }
                        ],
                        "resourceClaims": [{"name": "gpu", **source}],
                    },
                }
            )
        return out


def _selectors(rng: random.Random, *, most: int) -> tuple[Selector, ...]:
    choices = [
        Selector("model", rng.choice(["a100", "h100"])),
        Selector("numa", rng.choice([0, 1])),
        Selector("memory", rng.choice([40, 80])),
    ]
    return tuple(rng.sample(choices, rng.randint(0, most)))


def _case(index: int, kind: str, rng: random.Random, *, run: str) -> Case:
    shared = kind == "consumable"
    layout = tuple(
        tuple(
            Device(
                name=f"dev-{j}",
                model=rng.choice(["a100", "h100"]),
                numa=rng.choice([0, 1]),
                memory=rng.choice([40, 80]),
                shared=shared,
            )
            for j in range(rng.choice([0, 1, 2, 3, 4] if kind != "consumable" else [0, 1, 1, 2]))
        )
        for _ in range(NODES)
    )
    class_selectors = _selectors(rng, most=1) if rng.random() < 0.3 else ()
    pods, match = 1, False
    if kind == "exact":
        asks: tuple[Ask, ...] = (Ask("r", rng.randint(1, 4), _selectors(rng, most=2)),)
    elif kind == "all":
        asks = (Ask("r", 0, _selectors(rng, most=1)),)
    elif kind == "first-available":
        asks = (
            Ask("big", rng.randint(2, 4), _selectors(rng, most=1)),
            Ask("small", rng.randint(1, 2), _selectors(rng, most=1)),
        )
    elif kind == "match-attribute":
        asks, match = (Ask("r", rng.randint(2, 3), _selectors(rng, most=1)),), True
    elif kind == "shared":
        asks, pods = (Ask("r", rng.randint(1, 2), _selectors(rng, most=1)),), 2
    else:
        asks = (Ask("r", 1, (), memory=rng.choice([30, 50, 90])),)
        pods = rng.randint(2, 3)
    return Case(
        index=index,
        kind=kind,
        driver=f"c{index:02d}-{run}.example.com",
        layout=layout,
        class_selectors=class_selectors,
        asks=asks,
        match_numa=match,
        pods=pods,
    )


def _cases(seed: int, *, run: str) -> list[Case]:
    rng = random.Random(seed)
    return [_case(i, KINDS[i % len(KINDS)], rng, run=run) for i in range(CASES)]


# The independent check of Berth's allocations ---------------------------------------------------


def _quantity_gi(text: str) -> float:
    assert text.endswith("Gi"), text
    return float(text[:-2])


def _check_allocations(case: Case, pods: list[Obj], claims: dict[str, Obj]) -> list[str]:
    """What is wrong with Berth's allocations of ``case`` (see the module docstring)."""
    problems: list[str] = []
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        index = int(node.rsplit("-", 1)[1])
        here = {d.name: d for d in case.layout[index]}
        statuses = {s["name"]: s.get("resourceClaimName") for s in
                    (pod.get("status") or {}).get("resourceClaimStatuses") or ()}  # fmt: skip
        entry = pod["spec"]["resourceClaims"][0]
        name = entry.get("resourceClaimName") or statuses.get(entry["name"])
        claim = claims.get(str(name))
        where = f"{case.name} ({case.kind}) pod {pod['metadata']['name']} on {node}"
        if claim is None or not (claim.get("status") or {}).get("allocation"):
            problems.append(f"{where}: bound without an allocated claim")
            continue
        if pod["metadata"]["uid"] not in [c["uid"] for c in claim["status"].get("reservedFor", [])]:
            problems.append(f"{where}: its claim is not reserved for it")
        results = claim["status"]["allocation"]["devices"]["results"]
        for result in results:
            if result["pool"] != node or result["device"] not in here:
                problems.append(f"{where}: device {result['pool']}/{result['device']} not on it")
        chosen = {r["request"] for r in results}
        if len(case.asks) == 1:
            ask = case.asks[0]
            picked = [here[r["device"]] for r in results if r["device"] in here]
            if ask.count == 0:
                wanted = {d.name for d in here.values() if case.matches(d, ask)}
                if {d.name for d in picked} != wanted:
                    problems.append(f"{where}: All got {sorted(d.name for d in picked)}")
            elif len(picked) != ask.count or len({d.name for d in picked}) != ask.count:
                problems.append(f"{where}: asked {ask.count} devices, got {len(picked)}")
            if chosen != {"r"}:
                problems.append(f"{where}: results for requests {chosen}")
        else:
            if len(chosen) != 1:
                problems.append(f"{where}: results for several alternatives {chosen}")
                continue
            [sub] = chosen
            position = [f"r/{a.name}" for a in case.asks].index(sub)
            ask = case.asks[position]
            picked = [here[r["device"]] for r in results if r["device"] in here]
            if len({d.name for d in picked}) != ask.count:
                problems.append(f"{where}: {sub} asked {ask.count}, got {len(picked)}")
            for earlier in case.asks[:position]:
                if sum(case.matches(d, earlier) for d in here.values()) >= earlier.count:
                    problems.append(f"{where}: {sub} chosen though r/{earlier.name} fits there")
        for device in picked:
            if not case.matches(device, ask):
                problems.append(f"{where}: {device.name} fails the selectors of {ask.name}")
        if case.match_numa and len({d.numa for d in picked}) > 1:
            problems.append(f"{where}: matchAttribute numa broken: {[d.numa for d in picked]}")
        if ask.memory is not None:
            for result in results:
                consumed = (result.get("consumedCapacity") or {}).get("memory")
                if not result.get("shareID") or consumed is None:
                    problems.append(f"{where}: a share without shareID or consumedCapacity")
                elif _quantity_gi(consumed) != ask.memory:
                    problems.append(f"{where}: consumed {consumed}, asked {ask.memory}Gi")
    # Across the case's claims: whole devices once, shares within capacity.
    whole: dict[tuple[str, str], int] = {}
    used: dict[tuple[str, str], float] = {}
    for claim in claims.values():
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or ():
            at = (str(result["pool"]), str(result["device"]))
            if result.get("shareID"):
                used[at] = used.get(at, 0.0) + _quantity_gi(result["consumedCapacity"]["memory"])
            else:
                whole[at] = whole.get(at, 0) + 1
    problems += [f"{case.name}: {d} allocated whole {n} times" for d, n in whole.items() if n > 1]
    for (pool, name), gib in used.items():
        device = {d.name: d for d in case.layout[int(pool.rsplit("-", 1)[1])]}[name]
        if gib > device.memory:
            problems.append(f"{case.name}: {pool}/{name} consumed {gib}Gi of {device.memory}Gi")
    return problems


# The run -------------------------------------------------------------------------------------


def _node_sets() -> dict[str, list[kubelets.NodePool]]:
    return {
        label: [
            kubelets.parse_pool(
                f"{NODES}x cpu=4,memory=16Gi,pods=110 label=dra-diff={label} name=dd-{label}"
            )
        ]
        for label in SETS
    }


@pytest.fixture
def node_sets(real: cluster.RealCluster) -> typing.Iterator[dict[str, list[str]]]:
    pools = _node_sets()
    made = {label: nodes.node_manifests(pools[label]) for label in SETS}
    real.create(*[n for group in made.values() for n in group])
    real.kubectl("wait", "--for=condition=Ready", "nodes", "-l", "dra-diff",
                 f"--timeout={cluster.WAIT}")  # fmt: skip
    yield {label: [n["metadata"]["name"] for n in made[label]] for label in SETS}
    real.kubectl("delete", "nodes", "-l", "dra-diff", "--wait=false")


def _condition(pod: Obj) -> str | None:
    """The message of the pod's PodScheduled=False condition (not a wait for its claim)."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            message = str(condition.get("message") or "")
            if "waiting for the resourceclaim controller" not in message:
                return message
    return None


def _decided(pod: Obj) -> bool:
    return bool(pod["spec"].get("nodeName")) or _condition(pod) is not None


@pytest.mark.timeout(900)
def test_berth_agrees_with_kube_scheduler_and_allocates_validly(
    real: cluster.RealCluster, node_sets: dict[str, list[str]]
) -> None:
    real.berth()
    run = uuid.uuid4().hex[:5]
    cases = _cases(SEED, run=run)
    spaces = {label: real.namespace() for label in SETS}
    canary = Case(
        index=99,
        kind="exact",
        driver=f"canary-{run}.example.com",
        layout=((Device("dev-0", "a100", 0, 40, False),),) + ((),) * (NODES - 1),
        class_selectors=(),
        asks=(Ask("r", 1),),
        match_numa=False,
        pods=1,
    )
    everything = [*cases, canary]
    try:
        # Classes, then slices, the canary's last of each: once a scheduler bound the canary
        # pod, its informers have seen every class and slice before it (one stream per kind).
        real.create(*(c.device_class() for c in everything))
        real.create(*(s for c in everything for label in SETS for s in c.slices(node_sets[label])))
        for label in SETS:
            real.create(*canary.objects(label=label), namespace=spaces[label])
        for label in SETS:
            real.wait(f"pod/{canary.name}-p0", jsonpath="{.spec.nodeName}",
                      value=node_sets[label][0], namespace=spaces[label])  # fmt: skip
        for case in cases:
            made = {label: case.objects(label=label) for label in SETS}
            for label in SETS:
                real.create(made[label][0], namespace=spaces[label])  # the claim or template
            for i in range(case.pods):
                # One pod at a time to both: which of a case's pods gets a device that only
                # one of them can have is the arrival order's, the same for both schedulers.
                for label in SETS:
                    real.create(made[label][1 + i], namespace=spaces[label])
                name = f"{case.name}-p{i}"

                def decided(name: str = name) -> bool:
                    return all(
                        _decided(real.json("get", "pod", name, "-n", spaces[label]))
                        for label in SETS
                    )

                processes.wait_until(
                    f"both schedulers decided {name}", decided, timeout=60, interval=0.2
                )
        # A pod a scheduler retries (a claim it saw late) may still be placed: wait for quiet.
        last, quiet_since = None, time.monotonic()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 8:
            now = {label: sorted(p["metadata"]["name"] for p in real.pods(spaces[label])
                                 if p["spec"].get("nodeName")) for label in SETS}  # fmt: skip
            if now != last:
                last, quiet_since = now, time.monotonic()
            time.sleep(1)
        placed = {label: {p["metadata"]["name"]: p for p in real.pods(spaces[label])}
                  for label in SETS}  # fmt: skip
        claims = {label: {c["metadata"]["name"]: c for c in real.json(
            "get", "resourceclaims", "-n", spaces[label])["items"]} for label in SETS}  # fmt: skip
        disagreements = []
        problems: list[str] = []
        fits = {"both": 0, "neither": 0}
        for case in cases:
            names = [f"{case.name}-p{i}" for i in range(case.pods)]
            for name in names:
                bound = {label: bool(placed[label][name]["spec"].get("nodeName")) for label in SETS}
                if bound["kube"] != bound["berth"]:
                    why = {label: _condition(placed[label][name]) for label in SETS}
                    disagreements.append(f"{name} ({case.kind}): {bound} {why}")
                else:
                    fits["both" if bound["berth"] else "neither"] += 1
            pods = [placed["berth"][name] for name in names]
            claimed = {
                n: c
                for n, c in claims["berth"].items()
                if n == case.name or n.startswith(f"{case.name}-p")
            }
            problems += _check_allocations(case, pods, claimed)
        assert disagreements == [], "\n".join(disagreements)
        assert problems == [], "\n".join(problems)
        # The generated cases are worth their name: both outcomes occur, often.
        assert fits["both"] >= 10 and fits["neither"] >= 5, fits
    finally:
        for case in everything:
            real.kubectl("delete", "resourceslices", "--field-selector",
                         f"spec.driver={case.driver}", "--wait=false")  # fmt: skip
        real.kubectl("delete", "deviceclasses", *(c.driver for c in everything), "--wait=false")
