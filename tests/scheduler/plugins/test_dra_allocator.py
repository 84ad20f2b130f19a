"""The structured-parameters allocator on one node, called directly (``allocator.allocate``).

We test these aspects:

- the search backtracks: a first choice that blocks a later request (or claim) is undone and
  another tried, so what kube-scheduler's exhaustive first-fit finds, this finds;
- devices are tried in pool, slice and device name order (first fit follows driver naming);
- the session's holds count (``InUse``): a device held is not given again, released it is;
  hold and release are exact inverses, shares and counters included;
- more than 32 devices for one claim cannot be allocated;
- outcomes are data: ``Unallocatable`` says whether taken devices were in the way and which
  pools are broken, ``Failure`` names the claim and field of a selector failing at run time.
"""

from __future__ import annotations

import typing

import hypothesis
import hypothesis.strategies as st

from berth.scheduler.plugins.dynamic_resources import allocator, inuse
from berth.scheduler.snapshot import devices, devicestore, resourceclaims
from tests.scheduler import dra_builders as d

Obj = dict[str, typing.Any]


def _store(*objs: Obj) -> devices.Devices:
    store = devicestore.DeviceStore(watched=True)
    for obj in objs:
        {
            "DeviceClass": store.add_device_class,
            "ResourceSlice": store.add_resource_slice,
            "ResourceClaim": store.add_resource_claim,
        }[obj["kind"]](obj)
    return store.view()


def _allocate(
    view: devices.Devices, *names: str, node: str = "n1", in_use: inuse.InUse | None = None
) -> allocator.Outcome:
    return allocator.allocate(
        [view.claims[f"default/{n}"] for n in names],
        node=node,
        pools=view.catalog.pools_for(node, labels={}),
        catalog=view.catalog,
        in_use=in_use or inuse.InUse(view.allocated),
    )


def _devices(outcome: allocator.Outcome) -> list[list[str]]:
    assert isinstance(outcome, allocator.Allocated), outcome
    return [[c.device.name for c in a.choices] for a in outcome.allocations]


A100 = 'device.attributes["gpu.example.com"].model == "a100"'


def test_the_search_backtracks_over_requests() -> None:
    # "any" first takes gpu-0 (an a100); "a100" then finds none: backtrack, "any" takes gpu-1.
    view = _store(
        d.device_class("gpu"),
        d.node_slice(
            "n1",
            devices=[
                d.device("gpu-0", attributes={"model": "a100"}),
                d.device("gpu-1", attributes={"model": "h100"}),
            ],
        ),
        d.claim("c", d.request("any"), d.request("a100", selectors=[A100])),
    )
    assert _devices(_allocate(view, "c")) == [["gpu-1", "gpu-0"]]


def test_the_search_backtracks_over_claims() -> None:
    view = _store(
        d.device_class("gpu"),
        d.node_slice(
            "n1",
            devices=[
                d.device("gpu-0", attributes={"model": "a100"}),
                d.device("gpu-1", attributes={"model": "h100"}),
            ],
        ),
        d.claim("first"),
        d.claim("second", d.request(selectors=[A100])),
    )
    assert _devices(_allocate(view, "first", "second")) == [["gpu-1"], ["gpu-0"]]


def test_first_fit_follows_pool_and_slice_names() -> None:
    view = _store(
        d.device_class("gpu"),
        d.resource_slice("z-slice", node="n1", pool="b-pool", devices=[d.device("x")]),
        d.resource_slice("b-slice", node="n1", pool="a-pool", count=2, devices=[d.device("y")]),
        d.resource_slice("a-slice", node="n1", pool="a-pool", count=2, devices=[d.device("z")]),
        d.claim("c", d.request(count=3)),
    )
    assert _devices(_allocate(view, "c")) == [["z", "y", "x"]]


def test_holds_are_seen_and_released() -> None:
    view = _store(d.device_class("gpu"), d.node_slice("n1", devices=d.gpus(1)), d.claim("c"))
    in_use = inuse.InUse(view.allocated)
    first = _allocate(view, "c", in_use=in_use)
    assert isinstance(first, allocator.Allocated)
    in_use.hold(first.allocations[0].choices)
    blocked = _allocate(view, "c", in_use=in_use)
    assert blocked == allocator.Unallocatable(contended=True)
    in_use.release(first.allocations[0].choices)
    assert _devices(_allocate(view, "c", in_use=in_use)) == [["gpu-0"]]


def test_at_most_32_devices_per_claim() -> None:
    view = _store(
        d.device_class("gpu"),
        d.node_slice("n1", devices=d.gpus(40)),
        d.claim("many", d.request(count=33)),
        d.claim("enough", d.request(count=32)),
    )
    assert isinstance(_allocate(view, "many"), allocator.Unallocatable)
    assert len(_devices(_allocate(view, "enough"))[0]) == 32


def test_outcomes_say_what_was_in_the_way() -> None:
    broken = _store(
        d.device_class("gpu"),
        d.resource_slice("a", node="n1", pool="n1", count=2, devices=d.gpus(1)),
        d.resource_slice("b", node="n1", pool="n1", count=2, devices=d.gpus(1)),
        d.claim("c"),
    )
    outcome = _allocate(broken, "c")
    assert outcome == allocator.Unallocatable(
        contended=False,
        broken=(
            "resource pool gpu.example.com/n1 is broken: pool gpu.example.com/n1: "
            "duplicate device name gpu-0",
        ),
    )
    failing = _store(
        d.device_class("gpu", selectors=['device.attributes["gpu.example.com"].model == "x"']),
        d.node_slice("n1", devices=d.gpus(1)),
        d.claim("c"),
    )
    assert _allocate(failing, "c") == allocator.Failure(
        "deviceclass gpu: spec.selectors[1].cel.expression: no such key: 'model' "
        "(on device gpu.example.com/n1/gpu-0)",
        "default/c",
    )


@st.composite
def _holds(draw: st.DrawFn) -> list[list[inuse.Choice]]:
    view = _store(
        d.node_slice(
            "n1",
            devices=[
                d.device("whole", consumes={"set": {"c": "1"}}),
                d.device(
                    "shared", shared=True, capacity={"memory": "80Gi"}, consumes={"set": {"c": "2"}}
                ),
            ],
        ),
        d.resource_slice("n1-c", node="n1", pool="n1", counters={"set": {"c": "8"}}),
    )
    found = {dev.name: dev for dev in view.catalog.devices.values()}
    batches = []
    for _ in range(draw(st.integers(1, 5))):
        name = draw(st.sampled_from(sorted(found)))
        consumed = {"memory": draw(st.integers(1, 10)) * 2**30 * 1000} if name == "shared" else None
        batches.append([inuse.Choice(request="r", device=found[name], consumed=consumed)])
    return batches


def _state(in_use: inuse.InUse) -> tuple[object, ...]:
    ids = [(d.GPU_DRIVER, "n1", "whole"), (d.GPU_DRIVER, "n1", "shared")]
    return (
        tuple(in_use.exclusive(i) for i in ids),
        tuple(in_use.shared(i) for i in ids),
        tuple(sorted((in_use.consumed(ids[1]) or {}).items())),
        tuple(sorted(in_use.counters(((d.GPU_DRIVER, "n1"), "set")).items())),
    )


@hypothesis.given(_holds())
def test_hold_and_release_are_exact_inverses(batches: list[list[inuse.Choice]]) -> None:
    in_use = inuse.InUse(devices.AllocatedState())
    states = [_state(in_use)]
    for batch in batches:
        in_use.hold(batch)
        states.append(_state(in_use))
    for batch in reversed(batches):
        states.pop()
        in_use.release(batch)
        assert _state(in_use) == states[-1]
    counters = in_use.counters(((d.GPU_DRIVER, "n1"), "set"))
    assert counters == {}


def test_a_shared_device_draws_its_counters_once() -> None:
    view = _store(
        d.node_slice(
            "n1",
            devices=[
                d.device(
                    "shared", shared=True, capacity={"memory": "80Gi"}, consumes={"set": {"c": "2"}}
                )
            ],
        ),
        d.resource_slice("n1-c", node="n1", pool="n1", counters={"set": {"c": "8"}}),
    )
    [device] = view.catalog.devices.values()
    in_use = inuse.InUse(view.allocated)
    share = {"memory": 10 * 2**30 * 1000}
    in_use.hold([inuse.Choice(request="r", device=device, consumed=share)])
    in_use.hold([inuse.Choice(request="r", device=device, consumed=share)])
    assert in_use.counters(((d.GPU_DRIVER, "n1"), "set")) == {"c": 2000}
    assert in_use.consumed(device.id) == {"memory": 20 * 2**30 * 1000}
    assert resourceclaims.allocation_info({}) is None
