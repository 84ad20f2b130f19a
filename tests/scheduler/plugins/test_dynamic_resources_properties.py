"""Properties of DRA allocation over random clusters, claims and pods (hypothesis).

We test these aspects, for every allocation a cycle writes:

- every device is one the node the pod was bound to reaches, and its class's and request's
  selectors hold for it (checked against plain Python predicates, not CEL);
- ``count`` requests get exactly that many devices; ``All`` gets every matching device the
  node reaches; ``matchAttribute`` / ``distinctAttribute`` constraints hold;
- no device is allocated whole to two claims, a device shared by capacity never has more
  consumed than its capacity, and no shared counter is overdrawn;
- every bound pod's claims are reserved for it and allocated; no claim is reserved for a pod
  that is not bound.
"""

from __future__ import annotations

import collections
import typing

import hypothesis
import hypothesis.strategies as st

from tests.scheduler import builders as b
from tests.scheduler import dra_builders as d
from tests.scheduler.plugins import dra

Obj = dict[str, typing.Any]

MODELS = ("a100", "h100")
GI = 2**30

# Selectors, each with the predicate it means (on the device dicts below).
SELECTORS: dict[str, typing.Callable[[Obj], bool]] = {
    'device.attributes["gpu.example.com"].model == "a100"': lambda dev: (
        _attr(dev, "model") == "a100"
    ),
    'device.attributes["gpu.example.com"].model == "h100"': lambda dev: (
        _attr(dev, "model") == "h100"
    ),
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0': lambda dev: (
        _memory(dev) >= 40 * GI
    ),
    'device.attributes["gpu.example.com"].numa == 0': lambda dev: _attr(dev, "numa") == 0,
}


def _attr(dev: Obj, name: str) -> typing.Any:
    value = dev.get("attributes", {}).get(name)
    return None if value is None else next(iter(value.values()))


def _memory(dev: Obj) -> int:
    return int(dev["capacity"]["memory"]["value"].removesuffix("Gi")) * GI


@st.composite
def devices(draw: st.DrawFn, *, node: str) -> list[Obj]:
    count = draw(st.integers(min_value=0, max_value=4))
    out = []
    for i in range(count):
        shared = draw(st.booleans()) and draw(st.booleans())  # a quarter shared by capacity
        out.append(
            d.device(
                f"{node}-gpu-{i}",
                attributes={
                    "model": draw(st.sampled_from(MODELS)),
                    "numa": draw(st.integers(min_value=0, max_value=1)),
                },
                capacity={"memory": f"{draw(st.sampled_from([20, 40, 80]))}Gi"},
                shared=shared,
            )
        )
    return out


@st.composite
def requests(draw: st.DrawFn, *, index: int) -> Obj:
    selectors = draw(st.lists(st.sampled_from(sorted(SELECTORS)), max_size=1))
    mode = draw(st.sampled_from(["count", "count", "all", "capacity"]))
    if mode == "all":
        return d.request(f"r{index}", all=True, selectors=selectors)
    if mode == "capacity":
        amount = draw(st.sampled_from([10, 20, 30]))
        return d.request(f"r{index}", selectors=selectors, capacity={"memory": f"{amount}Gi"})
    return d.request(f"r{index}", count=draw(st.integers(1, 2)), selectors=selectors)


@st.composite
def clusters(draw: st.DrawFn) -> list[Obj]:
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 3)))]
    objs: list[Obj] = [b.node(n, cpu="16") for n in nodes]
    objs.append(d.device_class("gpu"))
    for node in nodes:
        objs.append(d.node_slice(node, devices=draw(devices(node=node))))
    if draw(st.booleans()):
        objs.append(
            d.resource_slice(
                "fabric", pool="fabric", all_nodes=True, devices=draw(devices(node="f"))
            )
        )
    templates = draw(st.integers(1, 3))
    for t in range(templates):
        reqs = [draw(requests(index=i)) for i in range(draw(st.integers(1, 2)))]
        constraints = []
        if draw(st.booleans()):
            kind = draw(st.sampled_from(["matchAttribute", "distinctAttribute"]))
            constraints.append({kind: "gpu.example.com/numa"})
        objs.append(d.template(f"t{t}", *reqs, constraints=constraints))
    for p in range(draw(st.integers(1, 5))):
        template = f"t{draw(st.integers(0, templates - 1))}"
        objs.append(d.pod_with_claims(f"p{p}", templates={"gpu": template}, created=b.EPOCH + p))
    return objs


def _reaches(dev_slice: Obj, node: str) -> bool:
    spec = dev_slice["spec"]
    return spec.get("nodeName") == node or spec.get("allNodes") is True


@hypothesis.settings(
    max_examples=60, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
@hypothesis.given(clusters())
def test_allocations_satisfy_every_selector_and_constraint_and_capacity(objs: list[Obj]) -> None:
    outcome = dra.run(*objs, cycles=2)
    hypothesis.event(f"pods bound: {min(len(outcome.bindings), 3)}+")
    slices = [o for o in objs if o["kind"] == "ResourceSlice"]
    by_id = {
        (o["spec"]["driver"], o["spec"]["pool"]["name"], dev["name"]): (o, dev)
        for o in slices
        for dev in o["spec"]["devices"]
    }
    templates = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ResourceClaimTemplate"}
    whole: collections.Counter[tuple[str, str, str]] = collections.Counter()
    consumed: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for pod in outcome.cluster.objects("Pod"):
        name = pod["metadata"]["name"]
        node = outcome.bindings.get(f"default/{name}")
        claim = outcome.claim_of(name)
        status = claim.get("status") or {}
        reserved = [r["name"] for r in status.get("reservedFor") or []]
        if node is None:
            assert name not in reserved  # nothing held for a pod that is not bound
            continue
        assert reserved == [name]
        template = templates[pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]]
        spec = template["spec"]["spec"]["devices"]
        results = status["allocation"]["devices"]["results"]
        chosen: dict[str, list[Obj]] = collections.defaultdict(list)
        for result in results:
            key = (result["driver"], result["pool"], result["device"])
            dev_slice, dev = by_id[key]
            assert _reaches(dev_slice, node), (key, node)
            chosen[result["request"]].append(dev)
            if "consumedCapacity" in result:
                assert dev.get("allowMultipleAllocations") is True
                consumed[key] += int(result["consumedCapacity"]["memory"].removesuffix("Gi")) * GI
            else:
                whole[key] += 1
        for request in spec["requests"]:
            exactly = request["exactly"]
            selectors = [s["cel"]["expression"] for s in exactly.get("selectors", [])]
            got = chosen[request["name"]]
            for dev in got:
                assert all(SELECTORS[s](dev) for s in selectors), (dev, selectors)
            if exactly.get("allocationMode") == "All":
                reachable = [
                    dev
                    for (dev_slice, dev) in by_id.values()
                    if _reaches(dev_slice, node) and all(SELECTORS[s](dev) for s in selectors)
                ]
                assert sorted(x["name"] for x in got) == sorted(x["name"] for x in reachable)
            else:
                assert len(got) == exactly.get("count", 1)
        for constraint in spec.get("constraints", []):
            values = [_attr(dev, "numa") for devs in chosen.values() for dev in devs]
            if "matchAttribute" in constraint:
                assert len(set(values)) <= 1
            else:
                assert len(set(values)) == len(values)
    assert all(count == 1 for count in whole.values()), whole
    for key, amount in consumed.items():
        assert whole[key] == 0
        assert amount <= _memory(by_id[key][1])
