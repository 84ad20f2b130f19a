"""Pod addresses of the simulated cluster: each node's pod subnet, and the IPs of its pods.

A real cluster gives every node its own slice of the pod network (``spec.podCIDR``, handed out
by the node IPAM controller), and the node's network plugin gives each pod a free address of
that slice, so no two running pods share an IP. :class:`SubnetCarver` plays the IPAM
controller: it carves consecutive, non-overlapping slices of :data:`CLUSTER_CIDR`, each a /24
unless the node runs more pods than a /24 holds, after the slices existing nodes already hold.
:class:`PodAddresses` plays the network plugin of one node: each pod gets the lowest free
address of the node's slice, which is free again once the pod has ended. Used by
:mod:`berth.emulator.kubelets`.
"""

from __future__ import annotations

import collections.abc
import ipaddress

__all__ = ["CLUSTER_CIDR", "PodAddresses", "SubnetCarver", "subnet_prefix"]

CLUSTER_CIDR = ipaddress.IPv4Network("10.128.0.0/9")
"""The pod network: room for 32 768 nodes' /24 slices, clear of the nodes' own 10.0.x.y."""
_NODE_PREFIX = 24  # kube-controller-manager's default --node-cidr-mask-size


def subnet_prefix(pods: int) -> int:
    """The prefix length of a node slice with an address for each of ``pods`` pods (≤ /24)."""
    # A subnet of 2**bits addresses holds 2**bits - 2 pods (no network or broadcast address).
    host_bits = max(32 - _NODE_PREFIX, (pods + 1).bit_length())
    return 32 - host_bits


class SubnetCarver:
    """Hands out node pod subnets from :data:`CLUSTER_CIDR`, after those already ``taken``."""

    def __init__(self, *, taken: collections.abc.Iterable[str]) -> None:
        self._next = int(CLUSTER_CIDR.network_address)
        for text in taken:
            try:
                subnet = ipaddress.IPv4Network(text)
            except ValueError:
                continue  # not a subnet this carver hands out: it cannot overlap one
            if subnet.subnet_of(CLUSTER_CIDR):
                self._next = max(self._next, int(subnet.broadcast_address) + 1)

    def carve(self, *, pods: int) -> ipaddress.IPv4Network:
        """The next free subnet with room for ``pods`` pods (aligned, as CIDR blocks are)."""
        prefix = subnet_prefix(pods)
        size = 1 << (32 - prefix)
        start = -(-self._next // size) * size
        if start + size > int(CLUSTER_CIDR.broadcast_address) + 1:
            raise RuntimeError(f"the pod network {CLUSTER_CIDR} has no room for another node")
        self._next = start + size
        return ipaddress.IPv4Network((start, prefix))


class PodAddresses:
    """One node's pod subnet, and the address each of its pods holds (by pod uid)."""

    def __init__(self, subnet: ipaddress.IPv4Network) -> None:
        self.subnet = subnet
        self._held: dict[str, int] = {}  # pod uid -> offset of its address in the subnet

    def assign(self, uid: str) -> str:
        """The address of pod ``uid``: the one it holds, else the lowest free one."""
        if uid not in self._held:
            used = set(self._held.values())
            free = (o for o in range(1, self.subnet.num_addresses - 1) if o not in used)
            offset = next(free, None)
            if offset is None:
                # Kubelets admit no more pods than the node's pod capacity, which sized the subnet.
                raise RuntimeError(f"no free pod address left in {self.subnet}")
            self._held[uid] = offset
        return str(self.subnet[self._held[uid]])

    def release(self, uid: str) -> None:
        """Pod ``uid`` has ended: its address is free again."""
        self._held.pop(uid, None)
