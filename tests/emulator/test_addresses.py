"""Pod subnets of simulated nodes and the pod IPs handed out in them.

We test these aspects:
- a node's subnet is a /24 unless its pod capacity needs a larger one (table);
- subnets are carved one after another, aligned, after the ones existing nodes hold, and
  subnets outside the cluster's pod network or malformed are ignored;
- a node hands its pods the lowest free address, never the same one twice at once, keeps a
  pod's address stable, and reuses it once the pod is released.
"""

from __future__ import annotations

import ipaddress

import pytest

from berth.emulator import addresses


@pytest.mark.parametrize(
    ("pods", "prefix"),
    [(0, 24), (110, 24), (254, 24), (255, 23), (510, 23), (511, 22)],
    ids=["none", "default-110", "fills-a-24", "one-more", "fills-a-23", "needs-a-22"],
)
def test_subnet_prefix_fits_the_pod_capacity(pods: int, prefix: int) -> None:
    assert addresses.subnet_prefix(pods) == prefix
    assert ipaddress.IPv4Network(("10.0.0.0", prefix)).num_addresses - 2 >= pods


def test_subnets_are_carved_in_order_and_aligned() -> None:
    carver = addresses.SubnetCarver(taken=[])
    carved = [carver.carve(pods=110), carver.carve(pods=300), carver.carve(pods=110)]
    assert [str(s) for s in carved] == ["10.128.0.0/24", "10.128.2.0/23", "10.128.4.0/24"]


@pytest.mark.parametrize(
    ("taken", "first"),
    [
        (["10.128.0.0/24", "10.128.7.0/24"], "10.128.8.0/24"),
        (["192.168.0.0/24", "", "not-a-cidr", "10.128.0.1/24"], "10.128.0.0/24"),
    ],
    ids=["after-the-last-taken", "foreign-and-malformed-ignored"],
)
def test_carving_starts_after_the_subnets_nodes_hold(taken: list[str], first: str) -> None:
    assert str(addresses.SubnetCarver(taken=taken).carve(pods=110)) == first


def test_pods_get_the_lowest_free_address_and_keep_it() -> None:
    ips = addresses.PodAddresses(ipaddress.IPv4Network("10.128.3.0/24"))
    assert [ips.assign(uid) for uid in ("a", "b", "c")] == [
        "10.128.3.1",
        "10.128.3.2",
        "10.128.3.3",
    ]
    assert ips.assign("b") == "10.128.3.2"
    ips.release("b")
    assert ips.assign("d") == "10.128.3.2"
    assert ips.assign("e") == "10.128.3.4"


def test_a_full_subnet_is_a_bug_not_a_shared_address() -> None:
    ips = addresses.PodAddresses(ipaddress.IPv4Network("10.128.3.0/30"))
    assert {ips.assign("a"), ips.assign("b")} == {"10.128.3.1", "10.128.3.2"}
    with pytest.raises(RuntimeError, match="no free pod address"):
        ips.assign("c")
